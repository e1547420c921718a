"""Shared pieces for the integration tests: input streams, a worker in a thread or a process,
reads; and for the edge tests, either backend's edge with recording callbacks and bounded polls."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from kafka import KafkaProducer
from pydantic import SecretStr

from stream_perceptron import Perceptron
from stream_perceptron.codec.inputs import input_record
from stream_perceptron.commands.read import read_topic
from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka.admin import client_config
from stream_perceptron.kafka.edge import Edge, InRecord, Partition, Retry
from stream_perceptron.kafka.python_edge import KafkaEdge
from stream_perceptron.settings import KafkaSettings, Settings
from stream_perceptron.sources import open_source
from stream_perceptron.worker.loop import Worker


def noisy_stream(n: int, d: int = 6, noise: float = 0.1, seed: int = 7) -> list[tuple[list[float], int]]:
    """A separable stream with a fraction of flipped labels: mistakes all along."""
    return list(open_source(f"separable:d={d},gamma=0.05,n={n},seed={seed},noise={noise}"))


def send_all(kafka: KafkaSettings, topic: str, values: list[bytes], partition: int | None = None,
             keys: list[bytes] | None = None) -> None:
    producer = KafkaProducer(**client_config(kafka), acks="all", linger_ms=5)
    try:
        for i, v in enumerate(values):
            producer.send(topic, value=v, key=keys[i] if keys else str(i).encode(), partition=partition)
        producer.flush()
    finally:
        producer.close()


def encode_stream(stream: list[tuple[Any, int]], unlabeled_every: int = 0) -> list[bytes]:
    return [
        input_record(x, None if unlabeled_every and i % unlabeled_every == 0 else y, i)
        for i, (x, y) in enumerate(stream)
    ]


def worker_settings(
    kafka: KafkaSettings, topics: dict[str, str], ckpt_dir: Path, **sections: Any
) -> Settings:
    base: dict[str, Any] = {
        "kafka": kafka.model_dump(),
        "topics": topics,
        "checkpoint": {"dir": str(ckpt_dir), "every_examples": 1000, "every_seconds": 60},
        "stats": {"every_examples": 500, "every_seconds": 60},
        "observe": {"port": 0},  # several workers per test process
        "log_every_seconds": 0,  # every progress line at INFO: tests follow the worker by them
    }
    for section, values in sections.items():
        base.setdefault(section, {}).update(values)
    return Settings(**base)


def topics_for(new_topic: Callable[..., str], partitions: int = 1) -> dict[str, str]:
    return {"input": new_topic(partitions), "predictions": new_topic(), "stats": new_topic(),
            "dead_letter": new_topic()}


def run_until_caught_up(settings: Settings, expected_records: int, timeout_s: float = 60) -> Worker:
    """Run a worker in this thread until it has processed ``expected_records`` and caught up."""
    worker = Worker(settings)
    deadline = time.monotonic() + timeout_s

    def until(w: Worker) -> bool:
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker processed {w.counters.records} of {expected_records}")
        return w.counters.records >= expected_records and w.caught_up()

    assert worker.run(until=until) == 0
    return worker


class ThreadedWorker:
    """A worker running in a background thread until ``stop()``."""

    def __init__(self, settings: Settings) -> None:
        self.worker = Worker(settings)
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.code = self.worker.run()

    def start(self) -> ThreadedWorker:
        self.thread.start()
        return self

    def assignment(self) -> list[tuple[str, int]]:
        """The worker's partitions; none until its consumer has started."""
        try:
            return self.worker.edge.assignment()
        except KafkaEdgeError:
            return []

    def stop(self, timeout_s: float = 30) -> int | None:
        self.worker.stop()
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "worker did not stop"
        return self.code


def worker_env(settings: Settings) -> dict[str, str]:
    """The environment that configures ``stream-perceptron run`` like ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SP_")}
    data = settings.model_dump(mode="json")  # a SecretStr is masked here: revealed below
    for section, values in data.items():
        if isinstance(values, dict):
            for name, value in values.items():
                secret = getattr(getattr(settings, section), name)
                if isinstance(secret, SecretStr):
                    value = secret.get_secret_value()
                if value is not None:
                    env[f"SP_{section.upper()}__{name.upper()}"] = (
                        str(value).lower() if isinstance(value, bool) else str(value)
                    )
        elif values is not None:  # the top-level settings: SP_LOG_LEVEL and the like
            env[f"SP_{section.upper()}"] = str(values)
    return env


def start_process(settings: Settings, *args: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as fh:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "stream_perceptron.cli", "run", *args],
            env=worker_env(settings), stdout=fh, stderr=subprocess.STDOUT,
        )


def predictions_by_offset(kafka: KafkaSettings, topic: str) -> dict[tuple[int, int], list[dict[str, Any]]]:
    out: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for _, _, _, rec in read_topic(kafka, topic):
        out.setdefault((rec["partition"], rec["offset"]), []).append(rec)
    return out


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, every_s: float = 0.1) -> float:
    """Wait for ``condition``; returns the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(every_s)
    return time.monotonic() - started


def core_reference(stream: list[tuple[Any, int]], labels: list[int], **params: Any) -> tuple[Perceptron, Any]:
    """The core's result on the same rows (label 0 here = unlabeled, as the decoder gives an
    absent ``y``), with the model built from ``params``."""
    model = Perceptron(**params)
    X = np.array([x for x, _ in stream], dtype=np.float64)
    y = np.array(labels, dtype=np.int8)
    return model, model.learn_many(X, y, labeled=y != 0)


# -- either backend's edge (SP_KAFKA__BACKEND), driven directly --------------------------------

JOIN_TIMEOUT_S = 30.0

EDGE_STARTED = {
    "kafka-python": "kafka edge started",
    "confluent-kafka": "kafka edge (confluent-kafka) started",
    "kafka-python+process": "producer process",
}
"""The log line each backend's edge writes once it has connected."""


def edge_class(backend: str) -> type[Edge]:
    """The edge class of ``backend`` (confluent-kafka is imported only when asked for)."""
    if backend == "confluent-kafka":
        from stream_perceptron.kafka.confluent_edge import ConfluentEdge

        return ConfluentEdge
    if backend == "kafka-python+process":
        from stream_perceptron.kafka.producer_process import SplitKafkaEdge

        return SplitKafkaEdge
    return KafkaEdge


class Recorder:
    """Rebalance callbacks that record what they saw and when (and can act inside the callback)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, list[Partition]]] = []
        self.times: list[float] = []
        self.on_assigned_action: Callable[[list[Partition]], None] | None = None
        self.on_revoked_action: Callable[[list[Partition]], None] | None = None

    def on_assigned(self, partitions: list[Partition]) -> None:
        self.events.append(("assigned", partitions))
        self.times.append(time.monotonic())
        if self.on_assigned_action is not None:
            self.on_assigned_action(partitions)

    def on_revoked(self, partitions: list[Partition]) -> None:
        self.events.append(("revoked", partitions))
        self.times.append(time.monotonic())
        if self.on_revoked_action is not None:
            self.on_revoked_action(partitions)


def new_edge(kafka: KafkaSettings, topic: str, recorder: Recorder | None = None,
             retry: Retry | None = None) -> Edge:
    """An edge of ``kafka.backend`` consuming ``topic``, not started."""
    rec = recorder or Recorder()
    # all take (kafka, topic, on_assigned, on_revoked, *, retry)
    cls: Any = edge_class("kafka-python+process" if kafka.producer_process else kafka.backend)
    edge: Edge = cls(kafka, topic, rec.on_assigned, rec.on_revoked, retry=retry)
    return edge


@contextmanager
def started(kafka: KafkaSettings, topic: str, recorder: Recorder | None = None,
            retry: Retry | None = None) -> Iterator[Edge]:
    """A started edge of ``kafka.backend``, closed on the way out."""
    edge = new_edge(kafka, topic, recorder, retry)
    edge.start()
    try:
        yield edge
    finally:
        edge.close()


def poll_until(edges: list[Edge], done: Callable[[list[InRecord]], bool],
               timeout_s: float = JOIN_TIMEOUT_S) -> list[InRecord]:
    """Poll every edge in turn until ``done(records so far)`` or the deadline."""
    records: list[InRecord] = []
    deadline = time.monotonic() + timeout_s
    while not done(records):
        assert time.monotonic() < deadline, f"timed out; got {len(records)} records"
        for edge in edges:
            for batch in edge.poll(timeout_ms=200, max_records=500):
                records.extend(batch)
    return records


@contextmanager
def polling(edge: Edge) -> Iterator[None]:
    """Poll ``edge`` on a background thread for the duration of the block."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def loop() -> None:
        try:
            while not stop.is_set():
                edge.poll(timeout_ms=100, max_records=500)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=loop, name="test-poller", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=JOIN_TIMEOUT_S)
    assert not thread.is_alive() and not errors, errors


def produce(edge: Edge, topic: str, n: int, start: int = 0) -> None:
    """Send ``k{i}``/``v{i}`` for i in [start, start + n) through ``edge`` and flush."""
    for i in range(start, start + n):
        edge.send(topic, f"k{i}".encode(), f"v{i}".encode())
    edge.flush()


def fill_partitions(kafka: KafkaSettings, topic: str, counts: dict[int, int]) -> None:
    """Write ``p{partition}-{i}`` records straight to each partition (kafka-python producer)."""
    for partition, n in counts.items():
        send_all(kafka, topic, [f"p{partition}-{i}".encode() for i in range(n)], partition=partition)


def mixing_records(kafka: KafkaSettings, topic: str) -> list[dict[str, Any]]:
    """Every mixing record written to the model topic ``topic``, in order, whatever was
    tombstoned since (compaction has not run in a test's minutes)."""
    from stream_perceptron.kafka.reader import TopicReader
    from stream_perceptron.state.model_topic import written

    reader = TopicReader(kafka, topic)
    try:
        return written((r.key_text(), r.value) for r in reader.read_to_end(timeout_s=30, idle_s=2))
    finally:
        reader.close()
