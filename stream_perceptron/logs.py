"""Logging set-up, called by the CLI only (library modules just use ``logging.getLogger``)."""

from __future__ import annotations

import logging
import sys
import time

import orjson

from stream_perceptron.throttle import Throttle, kind, suppressed

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


class RepeatedClientLines(logging.Filter):
    """Holds back kafka-python's repeated warnings and errors: one of a kind a minute.

    With a broker away, kafka-python says the same thing at every reconnect (each node's
    refused connection, the failed metadata refresh, ...), for as long as the broker is away.
    The first line of a kind goes through; the rest are counted for
    :data:`stream_perceptron.throttle.EVERY_S` seconds, and the next one let through ends with
    "(N similar suppressed)" (and carries ``suppressed=N``, a field of its own in JSON lines), as
    librdkafka's lines do on the confluent-kafka backend. A kind is the logger, level and text
    with its numbers blanked. Never held back: the worker's own lines, lines below WARNING
    (kafka-python's are shown only if the ``kafka`` logger is lowered by hand), and lines with a
    traceback. A line that cannot be formatted is passed on, for the handler to report.
    """

    def __init__(self, throttle: Throttle | None = None) -> None:
        super().__init__()
        self._throttle = throttle or Throttle()

    def filter(self, record: logging.LogRecord) -> bool:
        client = record.name == "kafka" or record.name.startswith("kafka.")
        if record.levelno < logging.WARNING or not client or record.exc_info:
            return True
        try:  # never raise into the client's thread: the handler reports a bad record itself
            text = record.getMessage()
        except Exception:
            return True
        held = self._throttle.allow((record.name, record.levelno, kind(text)))
        if held is None:
            return False
        if held:
            record.msg, record.args = text + suppressed(held), ()
            record.suppressed = held
        return True


def setup_logging(level: str | int = "INFO", fmt: str = "text") -> None:
    """Send logs to stderr, as text lines or JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(SlowTaskNotices())
    handler.addFilter(RepeatedClientLines())
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
