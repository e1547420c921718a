"""``read_topic``'s end: where it stops reading, against a stand-in consumer whose fetches are
timed (the broker-backed reads are in tests/integration/commands/test_watch.py)."""

from __future__ import annotations

import logging
import time
from collections import namedtuple

import pytest

import stream_perceptron.commands.read as reader
import stream_perceptron.kafka.reader as topic_reader
from stream_perceptron.settings import KafkaSettings

_Record = namedtuple("_Record", "offset key value timestamp", defaults=(-1,))


class _SlowFetch:
    """One partition of 10 records: its end (high-water 10) is known at once, its records come
    ``after_s`` after the first poll; record 4 is not JSON."""

    after_s = 0.0

    def __init__(self, **config) -> None:
        self.position_, self.started = 0, None

    def partitions_for_topic(self, topic):
        return {0}

    def assign(self, tps):
        self.tps = tps

    def seek_to_beginning(self, *tps):
        pass

    def poll(self, timeout_ms, max_records):
        self.started = self.started or time.monotonic()
        time.sleep(timeout_ms / 1000)
        if time.monotonic() - self.started < self.after_s or self.position_:
            return {}
        self.position_ = 10
        return {self.tps[0]: [_Record(i, None, b"oops" if i == 4 else b'{"i": %d}' % i)
                              for i in range(10)]}

    def highwater(self, tp):
        return 10

    def position(self, tp):
        return self.position_

    def close(self):
        pass


def test_a_partition_known_to_hold_more_is_read_past_the_idle_time(monkeypatch, caplog):
    monkeypatch.setattr(topic_reader, "KafkaConsumer", type("Slow", (_SlowFetch,), {"after_s": 1.0}))
    caplog.set_level(logging.WARNING)
    got = reader.read_topic(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "t", idle_s=0.3)
    assert [offset for _, offset, _, _ in got] == list(range(10))
    assert [value for *_, value in got][3:6] == [{"i": 3}, None, {"i": 5}]
    assert caplog.messages == ["1 records of t are not JSON: given as None"]


def test_a_read_that_runs_out_of_time_says_so(monkeypatch, caplog):
    monkeypatch.setattr(topic_reader, "KafkaConsumer", type("Slower", (_SlowFetch,), {"after_s": 60.0}))
    caplog.set_level(logging.WARNING)
    got = reader.read_topic(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "t", timeout_s=1.0,
                            idle_s=0.3)
    assert got == []
    assert caplog.messages == ["read 0 records of t in 1 s and stopped short of its end"]



class _OneSilentPartition(_SlowFetch):
    """Partition 0 as above, read at once; partition 1 never answers a fetch."""

    def partitions_for_topic(self, topic):
        return {0, 1}

    def highwater(self, tp):
        return 10 if tp.partition == 0 else None

    def position(self, tp):
        assert tp.partition == 0, "a position is asked only where a fetch has answered"
        return self.position_


def test_a_partition_whose_end_stays_unknown_ends_the_read_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(topic_reader, "KafkaConsumer", _OneSilentPartition)
    caplog.set_level(logging.WARNING)
    got = reader.read_topic(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "t", idle_s=0.3)
    assert len(got) == 10
    assert "partitions [1] sent nothing in 0.3 s, their end unknown" in caplog.messages[0]


def test_a_port_that_does_not_answer_as_kafka_is_one_error_naming_it(monkeypatch):
    from kafka.errors import KafkaTimeoutError

    from stream_perceptron.errors import KafkaEdgeError

    def no_kafka(**config):
        raise KafkaTimeoutError("Unable to bootstrap from ['127.0.0.1:8080']")

    monkeypatch.setattr(topic_reader, "KafkaConsumer", no_kafka)
    with pytest.raises(KafkaEdgeError, match=r"^cannot reach Kafka at 127\.0\.0\.1:8080: KafkaTimeoutError"):
        reader.read_topic(KafkaSettings(bootstrap_servers="127.0.0.1:8080"), "t")


@pytest.mark.parametrize("command", ["plot", "watch"])
def test_plot_and_watch_name_a_port_that_accepts_and_says_nothing_within_their_connect_bound(
        monkeypatch, tmp_path, command):
    # at the default request timeout (30 s) the client's bootstrap alone took 30 s
    import time

    from stream_perceptron.commands import follow, watch
    from stream_perceptron.errors import KafkaEdgeError
    from tests.unit.kafka.listeners import listener

    monkeypatch.setattr(follow, "_CONNECT_TIMEOUT_S", 1.0)
    with listener(None) as port:
        kafka = KafkaSettings(bootstrap_servers=f"127.0.0.1:{port}")
        assert kafka.request_timeout_ms == 30_000
        started = time.monotonic()
        said = rf"^cannot reach Kafka at 127\.0\.0\.1:{port}: KafkaTimeoutError"
        with pytest.raises(KafkaEdgeError, match=said):
            if command == "plot":
                watch.run_plot(kafka, "stats", tmp_path / "p.png")
            else:
                next(watch.follow_stats(kafka, "stats"))
        assert time.monotonic() - started < 10
