"""The K-class statistics: per-class counts and the confusion matrix counted for any cut of a
stream, the bound's factor 2, and their state; the state check of a K-class checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

from stream_perceptron.errors import CheckpointMismatchError
from stream_perceptron.model.class_learner import MulticlassLearner
from stream_perceptron.model.class_stats import MulticlassStats
from stream_perceptron.model.multiclass import MulticlassPerceptron
from stream_perceptron.model.stats import RunningStats
from stream_perceptron.state.stored import StoredState


def _stream(n=400, k=4, d=3, seed=2):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(k, d)) * 4
    ys = rng.integers(k, size=n)
    X = centers[ys] + rng.normal(size=(n, d))
    labels = [None if i % 5 == 0 else f"c{y}" for i, y in enumerate(ys)]
    return X, labels


def _learned(cuts):
    X, labels = _stream()
    learner = MulticlassLearner(MulticlassPerceptron(), MulticlassStats(window=50))
    results = []
    start = 0
    for end in [*cuts, len(X)]:
        results.append(learner.step(X[start:end], labels[start:end]).result)
        start = end
    return learner, results, labels


def test_per_class_counts_and_the_confusion_matrix_count_what_the_rows_were():
    learner, results, labels = _learned([])
    result = results[0]
    classes = learner.model.classes
    snap = learner.stats.snapshot(classes)
    preds = [None if p < 0 else classes[p] for p in result.predictions.tolist()]
    for row, name in enumerate(classes):
        part = snap["per_class"][row]
        assert part["class"] == name
        assert part["labeled"] == labels.count(name)
        flags = zip(result.mistakes, labels, strict=True)
        assert part["mistakes"] == sum(bool(m) for m, y in flags if y == name)
        assert part["predicted"] == preds.count(name)
        for col, other in enumerate(classes):
            assert snap["confusion"][row][col] == sum(
                1 for p, y in zip(preds, labels, strict=True) if y == name and p == other)
    assert snap["mistakes"] == sum(p["mistakes"] for p in snap["per_class"])


def test_the_statistics_do_not_depend_on_the_cuts_and_restore_exactly():
    whole, _, _ = _learned([])
    cut, _, _ = _learned([1, 2, 77, 78, 300])
    names = whole.model.classes
    assert whole.stats.snapshot(names) == cut.stats.snapshot(names)
    again = MulticlassStats(window=50)
    again.set_state(cut.stats.get_state())
    assert again.snapshot(names) == whole.stats.snapshot(names)


def test_the_bound_is_twice_the_binary_one():
    flags = np.array([False, False])
    margins = np.array([0.5, 0.25])
    norms = np.array([1.0, 2.0])
    binary = RunningStats(window=4)
    binary.update_many(labels=np.array([1, -1], dtype=np.int8), mistakes=flags, geometric=margins,
                       augmented=margins, x_norms=norms, theta_norm=1.0)
    k = MulticlassStats(window=4)
    k.update_many(labels=np.array([0, 1], dtype=np.int32), predictions=np.array([0, 1], dtype=np.int32),
                  mistakes=flags, geometric=margins, augmented=margins, x_norms=norms, theta_norm=1.0,
                  classes=2)
    assert binary.snapshot()["bound"] == 64.0
    assert k.snapshot()["bound"] == 128.0


def test_a_binary_statistics_state_starts_the_class_counts_at_zero():
    binary = RunningStats(window=4)
    stats = MulticlassStats(window=4)
    stats.set_state(binary.get_state())
    assert stats.snapshot(["a", "b"])["confusion"] == [[0, 0], [0, 0]]


def _stored(model: dict, multiclass: bool) -> StoredState:
    config = {"n_features": None, "fit_intercept": True}
    if multiclass:
        config["multiclass"] = True
    return StoredState(model, config, {}, {})


K_CONFIG = {"n_features": None, "fit_intercept": True, "multiclass": True}
B_CONFIG = {"n_features": None, "fit_intercept": True}


def test_the_state_check_for_k_classes():
    k_state = _stored({"weights": [[1.0, 2.0], [0.0, 0.0], [3.0, 1.0]], "intercept": [0.0, 0.0, 0.0],
                       "classes": ["a", 3, "c"], "mistakes": 1}, True)
    with pytest.raises(CheckpointMismatchError, match=r"3 classes there \(a K-class model\), a binary"):
        k_state.check_config(B_CONFIG)
    k_state.check_config(K_CONFIG, ["a", 3])  # the configured classes begin the state's
    k_state.check_config(K_CONFIG, ["a", 3, "c", "d"])  # or the state's begin them
    with pytest.raises(CheckpointMismatchError, match=r"classes \['a', 3, 'c'\] there, \['a', '3'\] here"):
        k_state.check_config(K_CONFIG, ["a", "3"])
    with pytest.raises(CheckpointMismatchError, match="n_features=2 there, 5 here"):
        k_state.check_config({**K_CONFIG, "n_features": 5})
    binary = _stored({"weights": [1.0], "intercept": 0.5, "classes": [-1, 1], "mistakes": 1}, False)
    binary.check_config(K_CONFIG)  # converted on restore
    bools = _stored({"weights": [1.0], "intercept": 0.5, "classes": [False, True], "mistakes": 1}, False)
    with pytest.raises(CheckpointMismatchError, match="booleans"):
        bools.check_config(K_CONFIG)
