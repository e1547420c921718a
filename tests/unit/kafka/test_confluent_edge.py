"""``kafka_confluent.batches_of``: a poll's messages as the worker's batches; and the bound on
the consumer's close (no broker needed; the edge itself is tested against one in
tests/integration/kafka/test_confluent_edge.py, and closing in a freeze in tests/faults/)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message

from stream_perceptron.kafka.confluent_edge import ConfluentEdge, batches_of
from stream_perceptron.kafka.edge import Batch, Partition
from stream_perceptron.settings import KafkaSettings


def message_by_message(messages: list[Any]) -> tuple[list[Batch], list[Any]]:
    """The loop ``batches_of`` replaced, the reference it is held to: a batch per partition,
    built message by message."""
    batches: dict[Partition, Batch] = {}
    errors = []
    for m in messages:
        err = m.error()
        if err is not None:
            errors.append(err)
            continue
        topic, partition = m.topic(), m.partition()
        batch = batches.get((topic, partition))
        if batch is None:
            batch = batches[(topic, partition)] = Batch(topic, partition, [], [], [], [])
        batch.offsets.append(m.offset())
        batch.keys.append(m.key())
        batch.values.append(m.value())
        batch.timestamps_ms.append(m.timestamp()[1])
    return [batches[tp] for tp in sorted(batches)], errors


def message(topic: str, partition: int, offset: int, key: bytes | None = None) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, key=key,
                   value=b"v%d" % offset, timestamp=(1, 1000 + offset))


def test_one_partition_becomes_one_batch_with_every_column_in_order():
    ms = [message("in", 3, o, key=None if o % 2 else b"k%d" % o) for o in range(10, 15)]
    batches, errors = batches_of(ms)
    assert errors == []
    assert batches == [Batch("in", 3, [10, 11, 12, 13, 14], [b"k10", None, b"k12", None, b"k14"],
                             [b"v10", b"v11", b"v12", b"v13", b"v14"], [1010, 1011, 1012, 1013, 1014])]


def test_interleaved_partitions_and_topics_are_split_sorted_and_keep_their_order():
    ms = [message("b", 0, 5), message("a", 1, 7), message("a", 0, 1), message("a", 1, 8),
          message("b", 0, 6), message("a", 0, 2)]
    batches, errors = batches_of(ms)
    assert errors == []
    assert [(b.topic, b.partition, b.offsets) for b in batches] == [
        ("a", 0, [1, 2]), ("a", 1, [7, 8]), ("b", 0, [5, 6])]
    assert batches[1].values == [b"v7", b"v8"] and batches[1].timestamps_ms == [1007, 1008]


def test_same_topic_other_partition_is_not_taken_for_one_partition():
    # every topic equal and the partitions' first value repeated elsewhere: still two batches
    ms = [message("in", 0, 1), message("in", 1, 1), message("in", 0, 2)]
    assert [(b.partition, b.offsets) for b in batches_of(ms)[0]] == [(0, [1, 2]), (1, [1])]


def test_an_error_among_the_messages_is_returned_and_the_rest_are_batched():
    eof = Message(topic="in", partition=0, offset=3, timestamp=(0, 0),
                  error=KafkaError(KafkaError._PARTITION_EOF))
    ms = [message("in", 0, 1), eof, message("in", 1, 5), message("in", 0, 2)]
    batches, errors = batches_of(ms)
    assert [e.code() for e in errors] == [KafkaError._PARTITION_EOF]
    assert [(b.partition, b.offsets) for b in batches] == [(0, [1, 2]), (1, [5])]
    loop_batches, loop_errors = message_by_message(ms)
    assert (batches, [e.code() for e in errors]) == (loop_batches, [e.code() for e in loop_errors])


def test_nothing_polled_is_no_batch():
    assert batches_of([]) == ([], [])


def test_the_columns_are_those_of_the_message_by_message_loop():
    ms = [message(t, p, o) for o in range(40) for t, p in [("x", o % 3), ("y", 0)]]
    assert batches_of(ms) == message_by_message(ms)


class _Closing:
    """A consumer whose close() runs ``body`` (given the edge)."""

    def __init__(self, edge: ConfluentEdge, body: Any) -> None:
        self.edge, self.body = edge, body

    def close(self) -> None:
        self.body(self.edge)


def _edge() -> ConfluentEdge:
    """An edge never started, with a 2 × 0.1 s bound on closing the consumer."""
    edge = ConfluentEdge(KafkaSettings(backend="confluent-kafka"), "in", lambda _: None,
                         lambda _: None)
    edge._timeout_ms = 100
    return edge


def test_a_close_that_never_returns_is_left_behind_after_its_bound(caplog):
    never = threading.Event()
    edge = _edge()
    started = time.monotonic()
    try:
        edge._close_consumer(_Closing(edge, lambda _: never.wait()))  # type: ignore[arg-type]
        took = time.monotonic() - started
    finally:
        never.set()
    assert 0.2 <= took < 2.0
    assert any(r.levelno == logging.ERROR and "left behind" in r.getMessage() for r in caplog.records)


def test_a_close_is_waited_for_while_its_callback_runs(caplog):
    def revoking(edge: ConfluentEdge) -> None:  # a revocation that outlasts the bound
        edge._callback_thread = threading.get_ident()
        time.sleep(0.6)
        edge._callback_thread = None
        time.sleep(0.05)

    edge = _edge()
    started = time.monotonic()
    edge._close_consumer(_Closing(edge, revoking))  # type: ignore[arg-type]
    assert time.monotonic() - started >= 0.65
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_client_error_in_close_is_a_warning_and_any_other_is_raised(caplog):
    def client_error(_: ConfluentEdge) -> None:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    def bug(_: ConfluentEdge) -> None:
        raise ValueError("a bug")

    edge = _edge()
    edge._close_consumer(_Closing(edge, client_error))  # type: ignore[arg-type]
    assert any(r.levelno == logging.WARNING and "closing the Kafka consumer" in r.getMessage()
               for r in caplog.records)
    with pytest.raises(ValueError, match="a bug"):
        edge._close_consumer(_Closing(edge, bug))  # type: ignore[arg-type]


class _IdleConsumer:
    """A consumer with nothing to fetch and no partition."""

    def poll(self, timeout: float) -> None:
        return None

    def close(self) -> None:
        pass


def test_librdkafka_lines_held_back_are_counted_once_their_kind_stops_and_at_close(caplog):
    # the broker is back: librdkafka stops repeating itself, and the last minute's count is
    # written by the next poll past the minute, or at close, with the last line held
    from stream_perceptron.kafka.confluent_edge import _LogBridge
    from stream_perceptron.throttle import Throttle

    now = [0.0]
    edge = ConfluentEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print)
    edge._throttle = Throttle(60.0, clock=lambda: now[0])
    edge._consumer = _IdleConsumer()  # type: ignore[assignment]
    bridge = _LogBridge(edge._throttle)
    caplog.set_level(logging.INFO, logger="stream_perceptron.kafka.confluent_edge")
    for at in (0.0, 1.0, 2.0):
        now[0] = at
        bridge.log(logging.WARNING, "%s [%s] %s", "FAIL", "rdkafka#consumer-1",
                   f"127.0.0.1:9092/bootstrap: Connect failed (after {at:.0f}ms in state CONNECT)")
    assert edge.poll(0, 10) == []  # within the minute: nothing to write yet
    now[0] = 61.0
    assert edge.poll(0, 10) == []
    for at in (62.0, 63.0):
        now[0] = at
        edge._log_throttled(logging.WARNING, ("consume", 1), "consumer: %s", f"error {at:.0f}")
    edge.close()
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    failed = "librdkafka rdkafka#consumer-1 FAIL: 127.0.0.1:9092/bootstrap: Connect failed"
    assert lines == [
        f"{failed} (after 0ms in state CONNECT)",
        f"{failed} (after 2ms in state CONNECT) (1 similar suppressed)",  # the last held, late
        "consumer: error 62",
        "consumer: error 63",  # held, then written at close: none besides it
    ]
