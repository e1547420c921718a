"""``kafka_confluent.batches_of``: a poll's messages as the worker's batches (no broker needed;
the edge itself is tested against one in tests/integration/test_kafka_confluent.py)."""

from __future__ import annotations

from confluent_kafka import KafkaError, Message

from bench.bench_columns import message_by_message
from stream_perceptron.edge import Batch
from stream_perceptron.kafka_confluent import batches_of


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
