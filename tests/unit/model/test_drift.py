"""Drift alarms: this module's ADWIN equals river's bit for bit; every detector raises alarms on
rises of the mistake rate and none on falls; a state restored from JSON goes on exactly as the
uninterrupted detector; the learner's reactions do not depend on where batches were cut."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from river import drift as river_drift

from stream_perceptron.model.drift import DETECTORS, Adwin, DriftWatch, RiseDetector
from stream_perceptron.model.learner import Learner
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.model.stats import RunningStats

NAMES = [d for d in DETECTORS if d != "none"]


def bernoulli(rates: list[tuple[float, int]], seed: int) -> list[int]:
    """Flags with error rate ``p`` for ``n`` flags, for each (p, n) in turn."""
    rng = random.Random(seed)
    return [int(rng.random() < p) for p, n in rates for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_adwin_signals_at_the_same_flags_with_the_same_window_as_rivers(seed):
    rng = random.Random(seed)
    ours, theirs = Adwin(), river_drift.ADWIN()
    p, signals = rng.random(), 0
    for i in range(6000):
        if rng.random() < 0.002:
            p = rng.random()
        x = int(rng.random() < p)
        theirs.update(x)
        assert ours.update(x) == theirs.drift_detected, i
        assert (ours.width, ours.total, ours.variance) == (theirs.width, theirs.total, theirs.variance), i
        signals += ours.drift_detected
    assert signals >= 1  # the comparison covered changes, not only a quiet window


@pytest.mark.parametrize("name", NAMES)
def test_a_rise_of_the_error_rate_raises_an_alarm_soon_after_it(name):
    for seed in range(3):
        det = RiseDetector(name)
        flags = bernoulli([(0.05, 3000), (0.45, 3000)], seed)
        alarms = [(i, r) for i, z in enumerate(flags) if (r := det.update(z)) is not None]
        late = [(i, r) for i, r in alarms if i >= 3000]
        assert late, (name, seed)
        i, (before, after) = late[0]
        assert i - 3000 < 600, (name, seed, i)
        assert before < 0.1 and after > before, (name, seed, before, after)
        if name == "adwin":  # its change point is sharp; the others lag or lead it by hundreds
            assert after > 0.25, (name, seed, after)


@pytest.mark.parametrize("name", NAMES)
def test_a_fall_of_the_error_rate_raises_no_alarm(name):
    for seed in range(3):
        det = RiseDetector(name)
        flags = bernoulli([(0.45, 2000), (0.03, 4000)], seed)
        assert not [i for i, z in enumerate(flags) if det.update(z) is not None and i >= 2000]


def test_adwin_does_see_the_fall_that_the_rule_does_not_report():
    flags = bernoulli([(0.45, 2000), (0.03, 4000)], 0)
    river_adwin, seen = river_drift.ADWIN(), []
    for i, z in enumerate(flags):
        river_adwin.update(z)
        if river_adwin.drift_detected:
            seen.append(i)
    assert [i for i in seen if i >= 2000]


def run(watch: DriftWatch, flags: np.ndarray, served: np.ndarray, cuts: list[int]) -> list[tuple]:
    """Feed ``flags`` in pieces cut at ``cuts``, the state passed through JSON at each cut."""
    alarms, start = [], 0
    labels = np.where(np.arange(len(flags)) % 7 == 3, 0, 1).astype(np.int8)  # some rows unlabeled
    for end in [*cuts, len(flags)]:
        got = watch.update_many(labels[start:end], flags[start:end], served[start:end])
        alarms += [(a.row + start, a.stream, a.rate_before, a.rate_after) for a in got]
        text = json.dumps(watch.get_state(), allow_nan=False)
        watch = DriftWatch(watch.detector, served=len(watch.streams) == 2)
        watch.set_state(json.loads(text))
        start = end
    return alarms


@pytest.mark.parametrize("name", NAMES)
def test_a_state_restored_from_json_raises_the_same_alarms_as_the_uninterrupted_detector(name):
    rng = np.random.default_rng(5)
    p = np.repeat(rng.uniform(0.02, 0.6, 10), 1000)
    flags = rng.random(len(p)) < p
    served = rng.random(len(p)) < p * 0.8
    whole = run(DriftWatch(name, served=True), flags, served, [])
    assert len(whole) >= 2, whole
    for cuts in ([1, 2, 3, 500], sorted(rng.choice(len(p), 40, replace=False).tolist())):
        assert run(DriftWatch(name, served=True), flags, served, cuts) == whole


def test_a_state_of_another_detector_keeps_the_count_and_starts_afresh():
    watch = DriftWatch("ddm")
    flags = np.array(bernoulli([(0.05, 2000), (0.5, 2000)], 1), dtype=bool)
    watch.update_many(np.ones(len(flags), dtype=np.int8), flags)
    watch.last_offset = 1234
    other = DriftWatch("adwin")
    other.set_state(json.loads(json.dumps(watch.get_state())))
    assert (other.drifts, other.last_offset) == (watch.drifts, 1234) and watch.drifts >= 1
    assert other.get_state()["streams"] == DriftWatch("adwin").get_state()["streams"]


def test_an_unknown_detector_is_refused():
    with pytest.raises(ValueError, match="page-hinkley"):
        RiseDetector("kswin")


# ---------------------------------------------------------------------------- the learner's reactions
def flipped_stream(n: int = 6000, d: int = 4, flip: int = 3000, seed: int = 0
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Separable rows whose true hyperplane turns to its opposite at row ``flip``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    y = np.where(X @ w > 0, 1, -1)
    y[flip:] = -y[flip:]
    return X, y.astype(np.int8)


def learn(on_drift: str, batch: int, average: bool = False, detector: str = "adwin"):
    X, y = flipped_stream()
    learner = Learner(Perceptron(average=average), RunningStats(window=200),
                      DriftWatch(detector, served=average), on_drift)
    alarms = []
    for s in range(0, len(y), batch):
        step = learner.step(X[s:s + batch], y[s:s + batch])
        alarms += [(a.row + s, a.stream, a.labeled) for a in step.alarms]
    return learner, alarms


@pytest.mark.parametrize("on_drift", ["none", "reset-window", "reset-model"])
def test_reactions_happen_at_the_alarms_row_whatever_the_batch_cuts(on_drift):
    whole, alarms = learn(on_drift, 6000, average=True)
    assert any(3000 <= row < 3600 for row, _, _ in alarms), alarms
    assert all(labeled == row + 1 for row, _, labeled in alarms)  # every row labeled here
    for batch in (7, 500):
        cut, cut_alarms = learn(on_drift, batch, average=True)
        assert cut_alarms == alarms, batch
        assert cut.model.get_state() == whole.model.get_state(), batch
        cut_stats, whole_stats = cut.state()[1], whole.state()[1]
        # the EWMA's vectorized sum rounds by batch (RunningStats): equal to 1e-12
        assert cut_stats.pop("ewma") == pytest.approx(whole_stats.pop("ewma"), abs=1e-12)
        assert cut_stats == whole_stats, batch


def test_reset_window_empties_the_window_at_the_alarm_and_keeps_e_n():
    plain, _ = learn("none", 500)
    reset, alarms = learn("reset-window", 500)
    last = alarms[-1][0]
    s, p = reset.stats.snapshot(), plain.stats.snapshot()
    assert s["window_labeled"] == min(200, 6000 - last - 1) < p["window_labeled"] or last < 5800
    assert (s["mistakes"], s["labeled"]) == (p["mistakes"], p["labeled"])


def test_reset_model_relearns_the_new_concept_from_zero():
    reset, alarms = learn("reset-model", 500)
    plain, plain_alarms = learn("none", 500)
    assert alarms[0][0] == plain_alarms[0][0]  # the same until the first reset
    # after the flip a fresh model makes fewer mistakes than one unlearning the old concept
    assert reset.stats.mistakes < plain.stats.mistakes
    X, y = flipped_stream()
    assert (reset.model.predict_many(X[5000:]) == y[5000:]).mean() > 0.9


def test_a_learner_restored_from_its_state_goes_on_as_the_uninterrupted_one():
    X, y = flipped_stream()
    whole, alarms = learn("none", 6000, average=True)
    first = Learner(Perceptron(average=True), RunningStats(window=200), DriftWatch("adwin", served=True))
    first.step(X[:3020], y[:3020])
    model_state, stats_state = json.loads(json.dumps(first.state(), allow_nan=False))
    second = Learner(Perceptron(average=True), RunningStats(window=200), DriftWatch("adwin", served=True))
    second.restore(model_state, stats_state)
    step = second.step(X[3020:], y[3020:])
    rows = [(a.row + 3020, a.stream, a.labeled) for a in step.alarms]
    assert alarms == rows
    assert second.state()[0] == whole.state()[0]
    assert second.state()[1]["drift"] == whole.state()[1]["drift"]


def test_reset_model_on_named_features_does_not_depend_on_the_batch_cuts():
    X, y = flipped_stream(n=3000, flip=1500)
    rows = [{f"f{j}": float(v) for j, v in enumerate(x)} for x in X]  # held as SparseRows

    def learn_named(batch: int) -> tuple[dict, list[int]]:
        learner = Learner(Perceptron(), RunningStats(window=100), DriftWatch("adwin"), "reset-model")
        raised = []
        for s in range(0, len(rows), batch):
            step = learner.step(rows[s:s + batch], y[s:s + batch])
            raised += [a.row + s for a in step.alarms]
        return learner.model.get_state(), raised

    whole, raised = learn_named(3000)
    assert raised and 1500 <= raised[0] < 1800
    assert learn_named(45) == (whole, raised)
