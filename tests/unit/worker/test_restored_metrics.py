"""A partition restored from its stored state shows its restored totals from its first scrape: its
counters never start at 0 and jump, which Prometheus' ``increase()`` would read as new drifts,
mistakes and examples (and the drift alert would fire at every restart)."""

from __future__ import annotations

from stream_perceptron.kafka.edge import Batch
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from tests.integration.worker.test_drift_worker import flipped
from tests.unit.worker.test_batch import MemoryEdge
from tests.unit.worker.test_observe import P0, scrape, value
from tests.unit.worker.test_served_model import _records


def test_a_restored_partitions_counters_start_at_its_restored_totals(tmp_path):
    X, y = flipped()
    first = Worker(Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)}),
                   edge=MemoryEdge())
    first.process(Batch.of(_records(X, y.tolist())))
    assert first.checkpoint("test")
    stored = first.stats_record()
    assert stored["drifts"] >= 1  # the flip raised an alarm, kept in the stored state
    again = Worker(Settings(observe={"host": "127.0.0.1", "port": 0},
                            checkpoint={"dir": str(tmp_path)}), edge=MemoryEdge())
    assert again.observer is not None
    again.observer.start()
    try:
        again.partitions.open("in", 0)  # the assignment of the partition: its stored state is restored
        samples = scrape(again.observer)  # before any batch and any statistics interval
    finally:
        again.observer.stop()
    assert value(samples, "drifts_total", **{**P0, "topic": "in"}) == stored["drifts"]
    assert value(samples, "mistakes_total", **{**P0, "topic": "in"}) == stored["mistakes"]
    assert value(samples, "examples_total", **{**P0, "topic": "in"}) == stored["seen"]
