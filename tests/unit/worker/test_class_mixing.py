"""Mixing with K classes: the rows of W averaged with the same μ, aligned by class name (the
adopting partition's classes first, then the others' new ones in partition order, at most
SP_LIMITS__MAX_CLASSES), the same bit for bit when run again, and a logged mix read back as
written."""

from __future__ import annotations

import numpy as np
import pytest

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.model.mixing import Mix, Published, mix
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from tests.unit.worker.fakes import MemoryModelTopic
from tests.unit.worker.test_batch import MemoryEdge

EVERY = 15


def _stream(n=240, seed=5):
    """Two partitions; partition 0 meets "a", "b", 3 and partition 1 meets 3, "c", "a" (and "d"
    late), so the mixes' classes are unions in different orders."""
    rng = np.random.default_rng(seed)
    centers = {"a": [3.0, 0.0], "b": [0.0, 3.0], 3: [-3.0, 0.0], "c": [0.0, -3.0], "d": [2.0, 2.0]}
    names = {0: ["a", "b", 3], 1: [3, "c", "a"]}
    out = {}
    for p in (0, 1):
        rows = []
        for i in range(n):
            y = names[p][int(rng.integers(3))] if not (p == 1 and i > n // 2 and i % 5 == 0) else "d"
            x = (np.array(centers[y]) + rng.normal(size=2)).round(3).tolist()
            rows.append((x, None if i % 9 == 4 else y))
        out[p] = rows
    return out


def _worker(tmp_path, **limits):
    edge, topic = MemoryEdge(), MemoryModelTopic(None)
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        model={"multiclass": True}, mix={"every_examples": EVERY}, limits=limits)
    return Worker(settings, edge=edge, model_topic=topic), edge


def _run(w, data, step):
    n = len(data[0])
    for a in range(0, n, step):
        for p in (0, 1):
            w.process(Batch.of([InRecord("in", p, i, None, input_record(*data[p][i], i), 0)
                                for i in range(a, min(n, a + step))]))


def _first_seen(rows):
    seen = []
    for _, y in rows:
        if y is not None and y not in seen:
            seen.append(y)
    return seen


def test_k_class_mixes_align_rows_by_name_and_replay_bit_for_bit(tmp_path):
    data = _stream()
    one, edge1 = _worker(tmp_path / "a")
    _run(one, data, 7)
    two, edge2 = _worker(tmp_path / "b")
    _run(two, data, 7)  # the same rounds: the same mixes, the same predictions, bit for bit
    for p in (0, 1):
        a = one.partitions.assigned[("in", p)]
        b = two.partitions.assigned[("in", p)]
        assert a.mix.version > 3
        assert a.learner.model.weights.tobytes() == b.learner.model.weights.tobytes()
        assert a.learner.model.classes == b.learner.model.classes
    own0 = one.partitions.assigned[("in", 0)].learner.model.classes
    own1 = one.partitions.assigned[("in", 1)].learner.model.classes
    assert set(own0) == set(own1) == {"a", "b", 3, "c", "d"}
    # each partition's own classes keep their rows, the other's come after them
    assert list(own0[:3]) == _first_seen(data[0])[:3] and list(own1[:3]) == _first_seen(data[1])[:3]
    last = one.partitions.assigned[("in", 0)].mix.last["mix"]
    again = Mix.from_record(last)
    assert again.record() == last and again.classes == tuple(last["classes"])
    preds1 = [v for t, _, v in edge1.sent if t == "predictions"]
    preds2 = [v for t, _, v in edge2.sent if t == "predictions"]
    assert preds1 == preds2


def test_a_mix_is_the_weighted_sum_of_rows_aligned_by_class():
    p0 = Published(0, np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, -1.0]), 2, 1, 10, ("a", 3))
    p1 = Published(1, np.array([[5.0, 6.0, 7.0], [8.0, 9.0, 1.0]]), np.array([2.0, -2.0]), 6, 1, 10,
                   ("3", "a"))
    m = mix([p1, p0], "mistakes", first=(3, "a"))
    assert m.classes == (3, "a", "3")
    mu0, mu1 = 0.25, 0.75
    assert m.weights.tolist() == [[mu0 * 3.0 + mu1 * 0.0, mu0 * 4.0 + mu1 * 0.0, 0.0],
                                  [mu0 * 1.0 + mu1 * 8.0, mu0 * 2.0 + mu1 * 9.0, mu0 * 0.0 + mu1 * 1.0],
                                  [mu0 * 0.0 + mu1 * 5.0, mu0 * 0.0 + mu1 * 6.0, mu0 * 0.0 + mu1 * 7.0]]
    assert m.intercept.tolist() == [mu0 * -1.0 + mu1 * 0.0, mu0 * 1.0 + mu1 * -2.0, mu0 * 0.0 + mu1 * 2.0]
    assert mix([p1, p0], first=(3,), limit=2).classes == (3, "a")  # bounded: the first kept
    assert Published.from_record(p1.record()).record() == p1.record()
    with pytest.raises(ValueError, match="binary and K-class states cannot be mixed"):
        mix([p0, Published(1, np.array([1.0, 2.0]), 0.5, 1, 1, 10)])


def test_a_class_refused_past_the_bound_moves_no_mixing_point_whatever_the_cuts(tmp_path):
    rng = np.random.default_rng(8)
    rows = [(rng.normal(size=2).round(3).tolist(), ["a", "b", "c"][int(rng.integers(3))]) for _ in range(150)]
    outs = []
    for step in (150, 7, 13):
        w, edge = _worker(tmp_path / str(step), max_classes=2)
        for a in range(0, len(rows), step):
            w.process(Batch.of([InRecord("in", 0, i, None, input_record(*rows[i], i), 0)
                                for i in range(a, min(len(rows), a + step))]))
        st = w.partitions.assigned[("in", 0)]
        dead = [v["offset"] for t, _, v in edge.sent if t == "dead-letters"]
        outs.append((st.learner.model.weights.tobytes(), st.mix.version, st.mix.labeled, dead,
                     [v for t, _, v in edge.sent if t == "predictions"]))
    assert outs[0] == outs[1] == outs[2]
    assert outs[0][3] and outs[0][1] > 3  # classes refused, mixing points passed
