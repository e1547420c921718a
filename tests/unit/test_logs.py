"""Logging set-up: JSON lines on request, secrets never in the logged settings, client repeats held back."""

from __future__ import annotations

import io
import json
import logging
import sys

from stream_perceptron.logs import JsonFormatter, RepeatedClientLines, report_suppressed, setup_logging
from stream_perceptron.settings import load_settings, redacted
from stream_perceptron.throttle import Throttle


def test_json_lines(capsys):
    setup_logging("INFO", "json")
    logging.getLogger("stream_perceptron.worker").info("seen %d", 5, extra={"examples_per_s": 12.5})
    line = capsys.readouterr().err.strip()
    rec = json.loads(line)
    assert rec["msg"] == "seen 5" and rec["level"] == "INFO" and rec["examples_per_s"] == 12.5
    assert rec["logger"] == "stream_perceptron.worker"


def test_effective_settings_log_line_masks_secrets(capsys, monkeypatch):
    monkeypatch.setenv("SP_KAFKA__SASL_PASSWORD", "pa55-w0rd")
    setup_logging("INFO", "text")
    logging.getLogger("stream_perceptron.worker").info(
        "effective settings: %s", redacted(load_settings())
    )
    err = capsys.readouterr().err
    assert "effective settings" in err and "pa55-w0rd" not in err and "**********" in err


def test_kafka_python_slow_task_notices_are_debug_only(capsys):
    notice = "Task <t> ran for 0.126s (>0.100s threshold). It is blocking the event loop -- ..."
    setup_logging("INFO", "text")
    logging.getLogger("kafka.net.selector").warning(notice)
    logging.getLogger("kafka.net.selector").warning("connection to broker lost")
    err = capsys.readouterr().err
    assert "blocking the event loop" not in err and "connection to broker lost" in err
    logging.getLogger("kafka").setLevel(logging.DEBUG)  # kafka-python's own debugging asked for
    try:
        logging.getLogger("kafka.net.selector").warning(notice)
    finally:
        logging.getLogger("kafka").setLevel(logging.WARNING)
    assert "DEBUG   kafka.net.selector: Task <t> ran for" in capsys.readouterr().err


def test_kafka_python_repeats_are_held_back_and_the_worker_s_own_lines_never(capsys):
    setup_logging("INFO", "text")
    conn = logging.getLogger("kafka.net.connection")
    for node in range(1, 6):  # one kind: only the numbers differ
        conn.warning("<BrokerConnection node_id=%d host=127.0.0.1:%d>: connection refused", node, 9090 + node)
    conn.error("<BrokerConnection node_id=1>: SaslHandshake failed")  # another kind
    for _ in range(3):
        logging.getLogger("stream_perceptron.worker").warning("flush: not acknowledged yet")
    err = capsys.readouterr().err.splitlines()
    refused = [line for line in err if "connection refused" in line]
    assert len(refused) == 1 and "node_id=1 host=127.0.0.1:9091" in refused[0]
    assert sum("SaslHandshake failed" in line for line in err) == 1
    assert sum("flush: not acknowledged yet" in line for line in err) == 3


def test_the_next_line_of_a_kind_counts_what_was_held_back():
    now = [0.0]
    keep = RepeatedClientLines(Throttle(60.0, clock=lambda: now[0]))

    def passes(name: str, level: int, msg: str) -> tuple[bool, str]:
        record = logging.makeLogRecord({"name": name, "levelno": level, "msg": msg})
        return keep.filter(record), record.getMessage()

    first = passes("kafka.client_async", logging.WARNING, "Node 1 connection failed")
    assert first == (True, "Node 1 connection failed")
    for t in (1.0, 30.0, 59.0):
        now[0] = t
        assert passes("kafka.client_async", logging.WARNING, "Node 2 connection failed")[0] is False
    now[0] = 60.5
    assert passes("kafka.client_async", logging.WARNING, "Node 1 connection failed") == (
        True, "Node 1 connection failed (3 similar suppressed)"
    )
    # the same text at another level, from another logger, or below WARNING is another matter
    assert passes("kafka.client_async", logging.ERROR, "Node 1 connection failed")[0] is True
    assert passes("kafka.conn", logging.WARNING, "Node 1 connection failed")[0] is True
    for _ in range(3):
        assert passes("kafka.client_async", logging.DEBUG, "Node 1 connection failed")[0] is True
        assert passes("kafkaesque", logging.WARNING, "Node 1 connection failed")[0] is True


def test_a_traceback_or_a_line_that_cannot_be_formatted_is_never_held_back():
    keep = RepeatedClientLines(Throttle(60.0, clock=lambda: 0.0))
    try:
        raise ValueError("in a callback")
    except ValueError:
        info = sys.exc_info()
    for _ in range(3):
        traced = logging.makeLogRecord({"name": "kafka.future", "levelno": logging.ERROR,
                                        "msg": "Error processing callback", "exc_info": info})
        assert keep.filter(traced) is True
        broken = logging.makeLogRecord({"name": "kafka.conn", "levelno": logging.WARNING,
                                        "msg": "node %s %s", "args": (1,)})
        assert keep.filter(broken) is True  # passed on (the handler reports it), never raised


def test_a_line_after_held_ones_carries_their_count_as_a_json_field(capsys):
    now = [0.0]
    handler = logging.StreamHandler()
    handler.addFilter(RepeatedClientLines(Throttle(60.0, clock=lambda: now[0])))
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("kafka.cluster")
    logger.addHandler(handler)
    logger.propagate = False  # this handler alone, not the root's of another test
    try:
        for at in (0.0, 1.0, 2.0, 61.0):
            now[0] = at
            logger.warning("No node available for metadata refresh")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [rec.get("suppressed") for rec in lines] == [None, 2]
    assert lines[1]["msg"] == "No node available for metadata refresh (2 similar suppressed)"


def _held_lines_to(stream: io.StringIO, now: list[float]) -> logging.Handler:
    handler = logging.StreamHandler(stream)
    handler.addFilter(RepeatedClientLines(Throttle(60.0, clock=lambda: now[0]), handler=handler))
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    return handler


def test_a_count_left_when_its_kind_stops_recurring_comes_with_the_next_line_of_any_kind():
    # the broker is back: kafka-python stops repeating itself, and the count of the last minute
    # would otherwise wait for good for a line of its kind
    now, out = [0.0], io.StringIO()
    handler = _held_lines_to(out, now)
    for at in (0.0, 1.0, 2.0):
        now[0] = at
        handler.handle(logging.makeLogRecord({
            "name": "kafka.conn", "levelno": logging.WARNING, "levelname": "WARNING",
            "msg": f"node 1 refused (try {at:.0f})"}))
    own = {"name": "stream_perceptron.worker", "levelno": logging.INFO, "levelname": "INFO",
           "msg": "seen 5000"}
    now[0] = 30.0
    handler.handle(logging.makeLogRecord(own))  # within the minute: nothing to write yet
    now[0] = 61.0
    handler.handle(logging.makeLogRecord(own))
    handler.handle(logging.makeLogRecord(own))
    assert out.getvalue().splitlines() == [
        "kafka.conn WARNING node 1 refused (try 0)",
        "stream_perceptron.worker INFO seen 5000",
        "kafka.conn WARNING node 1 refused (try 2) (1 similar suppressed)",  # the last held, late
        "stream_perceptron.worker INFO seen 5000",
        "stream_perceptron.worker INFO seen 5000",
    ]


def test_at_the_end_of_run_every_count_still_held_is_written(capsys):
    setup_logging("INFO", "json")
    conn = logging.getLogger("kafka.conn")
    for node in range(1, 4):
        conn.warning("node %d refused", node)
    report_suppressed()
    report_suppressed()  # written once
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(rec["msg"], rec.get("suppressed"), rec.get("held_back")) for rec in lines] == [
        ("node 1 refused", None, None),
        ("node 3 refused (1 similar suppressed)", 1, True),  # the last held, and one besides
    ]


def test_a_line_of_a_kind_past_its_minute_carries_the_count_itself():
    # the count goes with the next line of its own kind when there is one: not the older line
    # written late, with the new one held in its place
    now, out = [0.0], io.StringIO()
    handler = _held_lines_to(out, now)
    for at in (0.0, 1.0, 2.0, 61.0):
        now[0] = at
        handler.handle(logging.makeLogRecord({
            "name": "kafka.conn", "levelno": logging.WARNING, "levelname": "WARNING",
            "msg": f"node 1 refused (try {at:.0f})"}))
    assert out.getvalue().splitlines() == [
        "kafka.conn WARNING node 1 refused (try 0)",
        "kafka.conn WARNING node 1 refused (try 61) (2 similar suppressed)",
    ]


def test_a_client_traceback_from_inside_the_client_is_one_line_and_ours_stay_whole(capsys):
    """kafka-python's own fault at shutdown, a socket it closed under a read, is one line; an
    exception of a callback of this package keeps its traceback; at DEBUG the client's does too."""
    import kafka.net.transport as transport  # a module of the client, where its I/O faults arise

    inside = {}
    exec(compile("def recv(sock):\n    return sock.recv(4096)\n", transport.__file__, "exec"), inside)
    try:
        inside["recv"](None)
    except AttributeError:
        theirs = sys.exc_info()
    try:
        raise ValueError("in a callback of ours")
    except ValueError:
        ours = sys.exc_info()
    setup_logging("INFO", "text")
    client = logging.getLogger("kafka.net.transport")
    client.error("<Transport>: Error receiving network data closing socket", exc_info=theirs)
    logging.getLogger("kafka.future").error("Error processing callback", exc_info=ours)
    err = capsys.readouterr().err
    assert ("ERROR   kafka.net.transport: <Transport>: Error receiving network data closing socket:"
            " AttributeError: 'NoneType' object has no attribute 'recv'\n") in err
    assert err.count("Traceback") == 1 and 'raise ValueError("in a callback of ours")' in err
    logging.getLogger("kafka").setLevel(logging.DEBUG)  # kafka-python's own debugging asked for
    try:
        client.error("<Transport>: Error receiving network data closing socket", exc_info=theirs)
    finally:
        logging.getLogger("kafka").setLevel(logging.WARNING)
    assert "Traceback" in capsys.readouterr().err
