"""The topic reader without a broker: where a read to the end stops (the high-water mark of a
fetch, the asked end of committed records and past it, an exact stop), that a second read goes on
from the first, reading from the end, following a topic that appears late, and the bounds
(against a stand-in consumer whose log is a list per partition; the broker-backed reads are in
tests/integration/kafka/test_reader.py)."""

from __future__ import annotations

import time
from collections import namedtuple
from typing import Any

import pytest

import stream_perceptron.kafka.reader as reader
from stream_perceptron.kafka.reader import ReadShort, Record, TopicReader
from stream_perceptron.settings import KafkaSettings

KAFKA = KafkaSettings(bootstrap_servers="127.0.0.1:1")
_Consumed = namedtuple("_Consumed", "offset key value timestamp")


class FakeLog:
    """A consumer of a topic whose partitions are lists of values. A fetch (a poll) returns up
    to ``per_poll`` records of each assigned partition below its visible end (``visible``: the
    end of committed records, where a transaction holds some back; else the whole log) and
    tells the high-water mark (the whole log); ``asked`` is what ``end_offsets`` answers (by
    default the visible end: set it short to be a broker that answers short)."""

    def __init__(self, logs: dict[int, list[bytes]] | None, **config: Any) -> None:
        self.logs = logs
        self.config = config
        self.visible: dict[int, int] = {}
        self.asked: dict[int, int] | None = None
        self.per_poll = 3
        self.pos: dict[Any, int] = {}
        self.hw: dict[Any, int] = {}
        self.polls = 0

    def partitions_for_topic(self, topic):
        return None if self.logs is None else set(self.logs)

    def assign(self, tps):
        self.pos = {tp: 0 for tp in tps}
        self.hw = {}

    def unsubscribe(self):
        self.pos, self.hw = {}, {}

    def seek_to_beginning(self, *tps):
        for tp in tps:
            self.pos[tp] = 0

    def seek(self, tp, offset):
        self.pos[tp] = offset

    def _end(self, p: int) -> int:
        assert self.logs is not None
        return self.visible.get(p, len(self.logs[p]))

    def end_offsets(self, tps):
        return {tp: (self.asked or {}).get(tp.partition, self._end(tp.partition)) for tp in tps}

    def poll(self, timeout_ms, max_records):
        assert self.logs is not None
        self.polls += 1
        got = {}
        for tp, at in self.pos.items():
            self.hw[tp] = len(self.logs[tp.partition])
            end = min(self._end(tp.partition), at + self.per_poll)
            if at < end:
                log = self.logs[tp.partition]
                got[tp] = [_Consumed(o, b"k%d" % o, log[o], 1000 + o) for o in range(at, end)]
                self.pos[tp] = end
        if not got:
            time.sleep(min(timeout_ms, 20) / 1000)
        return got

    def highwater(self, tp):
        return self.hw.get(tp)

    def position(self, tp):
        assert tp in self.hw or self.config.get("isolation_level") == "read_committed", (
            "a position is asked only where an end is known")
        return self.pos[tp]

    def close(self):
        pass


@pytest.fixture
def fake(monkeypatch):
    """``fake(logs, **config)``: a TopicReader of ``logs`` and its stand-in consumer."""

    def make(logs: dict[int, list[bytes]] | None, **kwargs: Any) -> tuple[TopicReader, FakeLog]:
        made: list[FakeLog] = []

        def consumer(**config: Any) -> FakeLog:
            made.append(FakeLog(logs, **config))
            return made[-1]

        monkeypatch.setattr(reader, "KafkaConsumer", consumer)
        return TopicReader(KAFKA, "t", **kwargs), made[0]

    return make


def values(n: int, start: int = 0) -> list[bytes]:
    return [b"v%d" % i for i in range(start, start + n)]


def test_read_to_end_stops_at_each_partitions_end_and_the_next_read_goes_on(fake):
    topic, log = fake({0: values(7), 1: values(2)})
    got = list(topic.read_to_end(timeout_s=5))
    assert sorted((r.partition, r.offset) for r in got) == [(0, o) for o in range(7)] + [(1, 0), (1, 1)]
    assert [r.offset for r in got if r.partition == 0] == list(range(7))  # in order per partition
    assert got[0] == Record(0, 0, b"k0", b"v0", 1000) and got[0].key_text() == "k0"
    assert log.config["group_id"] is None and log.config["enable_auto_commit"] is False
    assert log.config["allow_auto_create_topics"] is False
    assert log.logs is not None
    log.logs[0] += values(2, start=7)  # appended since: the next read returns them, and only them
    assert [(r.partition, r.offset) for r in topic.read_to_end(timeout_s=5)] == [(0, 7), (0, 8)]
    assert list(topic.read_to_end(timeout_s=5)) == []


def test_a_committed_read_goes_past_a_short_asked_end_to_the_high_water_mark(fake):
    topic, log = fake({0: values(8)}, committed=True)
    log.asked = {0: 4}  # a broker that answers the asked end short of it (tansu)
    assert [r.offset for r in topic.read_to_end(stall_s=5)] == list(range(8))
    assert log.config["isolation_level"] == "read_committed"


def test_a_committed_read_stops_where_an_open_transaction_holds_records_back(fake):
    topic, log = fake({0: values(9)}, committed=True)
    log.visible = {0: 5}  # offsets 5 to 8: an open transaction's
    started = time.monotonic()
    assert [r.offset for r in topic.read_to_end(stall_s=30)] == list(range(5))
    assert time.monotonic() - started < 5  # one settling poll, not the stall bound
    log.visible = {}  # committed
    assert [r.offset for r in topic.read_to_end(stall_s=30)] == [5, 6, 7, 8]


def test_a_committed_read_at_its_end_fetches_nothing(fake):
    topic, log = fake({0: values(3)}, committed=True)
    assert len(list(topic.read_to_end(stall_s=5))) == 3
    polls = log.polls
    assert list(topic.read_to_end(stall_s=5)) == [] and log.polls == polls


def test_an_exact_stop_ends_a_partition_there(fake):
    topic, _ = fake({0: values(10)}, committed=True)
    topic.assign({0: 2})
    assert [r.offset for r in topic.read_to_end(stall_s=5, stop={0: 6})] == [2, 3, 4, 5]


def test_assign_reads_the_partitions_asked_from_their_offsets(fake):
    topic, _ = fake({0: values(5), 1: values(5)})
    assert topic.assign({1: 3}, [1]) == [1] and topic.assigned == [1]
    assert [(r.partition, r.offset) for r in topic.read_to_end(timeout_s=5)] == [(1, 3), (1, 4)]
    topic.unassign()
    assert topic.assigned == []


def test_a_reader_from_the_end_returns_only_what_is_appended_after(fake):
    topic, log = fake({0: values(4)}, start="end")
    assert topic.poll(0.01) == []  # the first fetch tells the end
    assert log.logs is not None
    log.logs[0] += values(2, start=4)
    got: list[Record] = []
    deadline = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < deadline:
        got += topic.poll(0.01)
    assert [r.offset for r in got] == [4, 5]


def test_following_a_missing_topic_waits_and_reads_it_once_it_appears(fake):
    topic, log = fake(None)
    assert [topic.poll(0.01) for _ in range(2)] == [[], []] and topic.assigned == []
    assert list(topic.read_to_end(timeout_s=1)) == []  # nothing to read: no wait either
    log.logs = {0: values(2)}
    got = topic.poll(0.01)
    assert topic.assigned == [0] and [r.value for r in got] == [b"v0", b"v1"]


class _Stuck(FakeLog):
    """Partition 0 is known to hold 5 records and never gives any; partition 1 never answers."""

    def poll(self, timeout_ms, max_records):
        for tp in self.pos:
            if tp.partition == 0:
                self.hw[tp] = 5
        time.sleep(timeout_ms / 1000)
        return {}


def test_a_read_that_makes_no_progress_ends_short_saying_where(fake, monkeypatch):
    topic, log = fake({0: values(5), 1: values(1)})
    monkeypatch.setattr(log, "poll", _Stuck.poll.__get__(log))
    said = r"reading t made no progress for 0.5 s: partition 0 at offset 0 \(of 5\)"
    with pytest.raises(ReadShort, match=said) as short:
        list(topic.read_to_end(stall_s=0.5))
    assert short.value.why == "stalled" and short.value.short == {0: (0, 5), 1: (None, None)}


def test_a_read_ends_short_at_its_whole_bound(fake, monkeypatch):
    topic, log = fake({0: values(5)})
    monkeypatch.setattr(log, "poll", _Stuck.poll.__get__(log))
    said = r"^read 0 records of t in 0.5 s and stopped short of its end$"
    with pytest.raises(ReadShort, match=said) as short:
        list(topic.read_to_end(timeout_s=0.5))
    assert short.value.why == "timeout" and short.value.records == 0
