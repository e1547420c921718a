"""The worker with SP_MODEL__AVERAGE and SP_MODEL__HASH_BITS: what it serves, learns and keeps."""

from __future__ import annotations

import numpy as np
import pytest

from stream_perceptron import Perceptron
from stream_perceptron.codec.inputs import input_record
from stream_perceptron.errors import CheckpointMismatchError
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from tests.unit.model.exactness import learned
from tests.unit.worker.test_batch import MemoryEdge


def _stream(n=900, seed=7):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, 4)), 2)
    y = np.where(X @ [1.0, -2.0, 0.5, 1.0] > 0, 1, 0)  # 0/1: 0 is the negative class
    y = np.where(rng.random(n) < 0.15, 1 - y, y)
    labels = [int(v) for v in y]
    for i in range(0, n, 10):
        labels[i] = None  # unlabeled: predicted, never learned
    return X, labels


def _records(X, labels, start=0):
    return [InRecord("in", 0, start + i, None, input_record(x.tolist(), y, start + i), 0)
            for i, (x, y) in enumerate(zip(X, labels, strict=True))]


def _settings(tmp_path, **model):
    return Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)}, model=model)


def test_the_averaged_worker_serves_the_average_and_learns_as_the_seeds(tmp_path):
    X, labels = _stream()
    edge = MemoryEdge()
    w = Worker(_settings(tmp_path, average=True), edge=edge)
    for start in range(0, len(X), 200):
        w.process(Batch.of(_records(X[start:start + 200], labels[start:start + 200], start)))
    ref = Perceptron(average=True)
    served, flags = [], []
    for x, y in zip(X, labels, strict=True):
        served.append(ref.score_one(x))
        flags.append(None if y is None else learned(ref, x, y))
    preds = [v for t, _, v in edge.sent if t == "predictions"]
    assert [p["score"] for p in preds] == served  # the served model's score, bit for bit
    assert [p["prediction"] for p in preds] == [1 if s > 0 else -1 for s in served]
    assert [p["mistake"] for p in preds] == flags  # the learning θ's mistakes
    assert np.array_equal(w.learner.model.weights, ref.weights)
    record = w.stats_record()
    served_labeled = [(s, y) for s, y in zip(served, labels, strict=True) if y is not None]
    served_errors = sum((1 if y == 1 else -1) * s <= 0 for s, y in served_labeled)
    assert record["mistake_rate"] == sum(f for f in flags if f is not None) / len(served_labeled)
    assert record["served_mistake_rate"] == served_errors / len(served_labeled)
    assert record["served_mistake_rate"] < record["mistake_rate"]  # noisy: the average errs less


def test_an_averaged_worker_restored_from_its_checkpoint_replays_bit_for_bit(tmp_path):
    X, labels = _stream(seed=8)
    whole = Worker(_settings(tmp_path / "whole", average=True), edge=MemoryEdge())
    whole.process(Batch.of(_records(X, labels)))
    first = Worker(_settings(tmp_path / "cut", average=True), edge=MemoryEdge())
    first.process(Batch.of(_records(X[:500], labels[:500])))
    assert first.checkpoint("test")
    edge = MemoryEdge()
    again = Worker(_settings(tmp_path / "cut", average=True), edge=edge)
    again.restore()
    again.process(Batch.of(_records(X[500:], labels[500:], 500)))
    assert again.learner.state() == whole.learner.state()
    a, b = again.learner.model, whole.learner.model
    assert a.averaged_weights.tobytes() == b.averaged_weights.tobytes()
    plain = Worker(_settings(tmp_path / "cut"), edge=MemoryEdge())
    with pytest.raises(CheckpointMismatchError, match="SP_MODEL__AVERAGE"):
        plain.restore()  # at the start, before the worker connects


def test_the_hashed_worker_takes_every_new_name_and_keeps_its_width(tmp_path):
    edge = MemoryEdge()
    w = Worker(Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        model={"hash_bits": 8}, limits={"max_names": 10}), edge=edge)
    records = [InRecord("in", 0, i, None, input_record({f"user:{i}": 1.0, "bias": 1.0}, i % 2, i), 0)
               for i in range(500)]
    w.process(Batch.of(records))
    assert not [v for t, _, v in edge.sent if t == "dead-letters"]  # no names limit with hashing
    assert w.learner.model.dim == 256 and w.learner.model.n_names == 0
    assert w.checkpoint("test")
    again = Worker(Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                            model={"hash_bits": 8}), edge=MemoryEdge())
    again.restore()
    again.partitions.state("in", 0)
    assert again.learner.state() == w.learner.state()
