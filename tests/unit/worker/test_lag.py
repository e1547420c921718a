"""The consumer_lag gauge follows each poll, not only the statistics records. An in-memory edge
stands in for Kafka (the broker-backed version is in tests/integration/worker)."""

from __future__ import annotations

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from tests.unit.worker.test_batch import MemoryEdge


class BurstEdge(MemoryEdge):
    """Partition 0 of ``in`` holding ``end`` records, handed out ``per_poll`` at a time."""

    def __init__(self, end: int, per_poll: int) -> None:
        super().__init__()
        self.end, self.per_poll, self.next = end, per_poll, 0

    def assignment(self):
        return [("in", 0)]

    def highwater(self, topic, partition):
        return self.end  # as of the last fetch

    def poll(self, timeout_ms, max_records):
        first, self.next = self.next, min(self.end, self.next + self.per_poll)
        return [Batch.of([InRecord("in", 0, i, None, input_record([1.0, float(i % 5)], 1, i), 0)
                          for i in range(first, self.next)])] if self.next > first else []


def _lag(worker: Worker) -> float | None:
    return worker.observer.registry.get_sample_value(
        "stream_perceptron_consumer_lag", {"topic": "in", "partition": "0"})


def test_after_a_burst_the_lag_gauge_follows_each_poll_before_a_statistics_record(tmp_path):
    settings = Settings(checkpoint={"dir": str(tmp_path), "every_seconds": 3600},
                        stats={"every_examples": 10**9, "every_seconds": 3600})
    edge = BurstEdge(end=1000, per_poll=300)
    worker = Worker(settings, edge=edge)  # its observer is made, not started: read its registry
    polls = []
    worker._loop(until=lambda w: polls.append(_lag(w)) or len(polls) == 5)
    assert polls == [700, 400, 100, 0, 0]
    assert not [v for t, _, v in edge.sent if t == settings.topics.stats]  # no statistics record yet
