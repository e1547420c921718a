"""The topic reader on a real broker: a read to the end returns every record up to the end as it
stands and the next read what was appended since (as the worker's model-topic reader asks), read
committed or not; a reader from the end returns only what comes after it started."""

from __future__ import annotations

import time

import pytest

from stream_perceptron.kafka.reader import Record, TopicReader
from tests.integration.helpers import send_all


@pytest.mark.parametrize("committed", [False, True], ids=["uncommitted", "committed"])
def test_each_read_to_the_end_returns_what_was_appended_since_the_last(kafka_settings, new_topic, committed):
    kafka = kafka_settings()
    topic = new_topic(partitions=2)
    send_all(kafka, topic, [b"a%d" % i for i in range(30)], partition=0)
    send_all(kafka, topic, [b"b%d" % i for i in range(5)], partition=1)
    with TopicReader(kafka, topic, committed=committed) as reader:
        first = list(reader.read_to_end(timeout_s=30, stall_s=30))
        assert sorted((r.partition, r.offset) for r in first) == (
            [(0, o) for o in range(30)] + [(1, o) for o in range(5)])
        assert [r.value for r in first if r.partition == 1] == [b"b%d" % i for i in range(5)]
        assert all(r.timestamp > 0 and r.key is not None for r in first)
        assert list(reader.read_to_end(timeout_s=30, stall_s=30)) == []  # nothing new
        send_all(kafka, topic, [b"b5", b"b6"], partition=1)
        again = list(reader.read_to_end(timeout_s=30, stall_s=30))
        assert [(r.partition, r.offset, r.value) for r in again] == [(1, 5, b"b5"), (1, 6, b"b6")]


def test_a_reader_from_the_end_returns_only_what_is_appended_after_it_started(kafka_settings, new_topic):
    kafka = kafka_settings()
    topic = new_topic()
    send_all(kafka, topic, [b"old%d" % i for i in range(4)], partition=0)
    with TopicReader(kafka, topic, start="end") as reader:
        assert [reader.poll(0.2) for _ in range(3)] == [[], [], []]  # the end is known once a fetch answered
        send_all(kafka, topic, [b"new"], partition=0)
        got: list[Record] = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got = reader.poll(0.2)
        assert [(r.offset, r.value) for r in got] == [(4, b"new")]
