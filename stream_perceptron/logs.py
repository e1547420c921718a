"""Logging set-up, called by the CLI only (library modules just use ``logging.getLogger``)."""

from __future__ import annotations

import logging
import sys
import time

import orjson

_STD = set(vars(logging.makeLogRecord({})))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and any ``extra=`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in vars(record).items() if k not in _STD and k != "message"})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class SlowTaskNotices(logging.Filter):
    """Shows kafka-python's "Task ... is blocking the event loop" warnings at DEBUG only.

    kafka-python 3.x warns whenever a step of its I/O thread took over 100 ms. In this
    process the main thread decodes and learns whole batches, and the I/O thread waits for the
    GIL meanwhile: the warning is expected under load and names nothing an operator can act on.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "kafka.net.selector" and "blocking the event loop" in record.getMessage():
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger("kafka").isEnabledFor(logging.DEBUG)
        return True


def setup_logging(level: str | int = "INFO", fmt: str = "text") -> None:
    """Send logs to stderr, as text lines or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(SlowTaskNotices())
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        formatter = logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s")
        formatter.converter = time.gmtime
        handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("kafka").setLevel(max(logging.WARNING, root.level))
