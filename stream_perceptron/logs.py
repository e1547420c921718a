"""Logging set-up, called by the CLI only (library modules just use ``logging.getLogger``)."""

from __future__ import annotations

import logging
import os
import sys
import time
from types import TracebackType

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


class ClientTracebacks(logging.Filter):
    """Writes a client line's exception raised inside the client as one line, its type and text.

    kafka-python logs some faults of its own I/O thread with a traceback (a socket it closed
    itself while a read was under way, at shutdown: ``Error receiving network data closing
    socket``). That traceback ends inside the client and names nothing an operator can act on; it
    is kept when the ``kafka`` logger is lowered to DEBUG by hand. An exception raised in this
    package's code (a callback the client ran) keeps its traceback. A line made one line is
    counted and suppressed like the client's other repeated lines (:class:`RepeatedClientLines`).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        client = record.name == "kafka" or record.name.startswith("kafka.")
        if client and record.exc_info and _raised_in_client(record.exc_info[2]) \
                and not logging.getLogger("kafka").isEnabledFor(logging.DEBUG):
            exc = record.exc_info[1]
            try:
                text = record.getMessage()
            except Exception:  # the handler reports a record it cannot format
                return True
            record.msg, record.args = f"{text}: {type(exc).__name__}: {exc}", ()
            record.exc_info, record.exc_text = None, None
        return True


def _raised_in_client(tb: TracebackType | None) -> bool:
    """Whether the innermost frame of ``tb`` is kafka-python's."""
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"{os.sep}kafka{os.sep}" in tb.tb_frame.f_code.co_filename


class RepeatedClientLines(logging.Filter):
    """Holds back kafka-python's repeated warnings and errors: one of a kind a minute.

    With a broker away, kafka-python says the same thing at every reconnect (each node's
    refused connection, the failed metadata refresh, ...), for as long as the broker is away.
    The first line of a kind goes through; the rest are counted for
    :data:`stream_perceptron.throttle.EVERY_S` seconds, and the next one let through ends with
    "(N similar suppressed)" (and carries ``suppressed=N``, a field of its own in JSON lines), as
    librdkafka's lines do on the confluent-kafka backend. A kind is the logger, level and text
    with its numbers blanked. Never suppressed: the worker's own lines, lines below WARNING
    (kafka-python's are shown only if the ``kafka`` logger is lowered by hand), and lines with a
    traceback. A line that cannot be formatted is passed on, for the handler to report.

    A kind that stops recurring (the broker is back) leaves suppressed lines with no later line to
    count them. Given its ``handler``, the filter writes the last one suppressed there itself,
    late, with ``held_back`` set (a JSON field of that name) and the count of the others: at the
    next line of any kind that reaches the handler once the minute is up (at INFO the worker
    reports its progress every ``SP_STATS__EVERY_SECONDS``), and at the end of ``run``
    (:func:`report_suppressed`). Such lines go straight to the handler, not through a logger
    (pytest's ``caplog`` does not see them).
    """

    def __init__(self, throttle: Throttle | None = None, handler: logging.Handler | None = None) -> None:
        super().__init__()
        self._throttle = throttle or Throttle()
        self._handler = handler

    def report_overdue(self, *, every: bool = False) -> None:
        """Write the last line suppressed of each kind past its minute (of every kind holding one, with
        ``every``) to the handler, with the count of the others suppressed."""
        if self._handler is None:
            return
        for _, sample, others in self._throttle.overdue(every=every):
            name, level, pathname, lineno, text = sample
            line = logging.LogRecord(name, level, pathname, lineno, text + suppressed(others), None, None)
            line.held_back = True  # the JSON field keeps its name
            if others:
                line.suppressed = others
            self._handler.handle(line)

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "held_back", False):  # written late by report_overdue: through
            return True
        try:
            return self._let_through(record)
        finally:  # after: a line of a kind past its minute carries that kind's count itself
            self.report_overdue()

    def _let_through(self, record: logging.LogRecord) -> bool:
        client = record.name == "kafka" or record.name.startswith("kafka.")
        if record.levelno < logging.WARNING or not client or record.exc_info:
            return True
        try:  # never raise into the client's thread: the handler reports a bad record itself
            text = record.getMessage()
        except Exception:
            return True
        held = self._throttle.allow(
            (record.name, record.levelno, kind(text)),
            (record.name, record.levelno, record.pathname, record.lineno, text),
        )
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
    handler.addFilter(ClientTracebacks())
    handler.addFilter(RepeatedClientLines(handler=handler))
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


def report_suppressed() -> None:
    """Write every count of client lines still suppressed (at the end of ``run``): the lines of
    the last minute of an outage would otherwise go uncounted."""
    for handler in logging.getLogger().handlers:
        for f in handler.filters:
            if isinstance(f, RepeatedClientLines):
                f.report_overdue(every=True)
