"""Running statistics: the seeds' quantities over a stream, in constant memory."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron import Perceptron, RunningStats
from stream_perceptron.model.learner import Learner
from tests.unit.model.exactness import learned


def _run(X, y, window, alpha=0.1, cuts=1):
    learner = Learner(Perceptron(), RunningStats(window=window, ewma_alpha=alpha))
    for part in np.array_split(np.arange(len(X)), cuts):
        learner.step(X[part], y[part], labeled=y[part] != 0)
    return learner


def test_statistics_equal_a_direct_recomputation():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 4))
    y = np.where(X @ [1.0, -2.0, 0.5, 0.0] + 0.3 > 0, 1, -1).astype(np.int8)
    y[rng.random(500) < 0.05] *= -1
    y[::7] = 0  # unlabeled rows: seen, never learned
    learner = _run(X, y, window=50, cuts=9)
    s = learner.stats.snapshot()

    # recompute every quantity from a plain learn_one loop
    model = Perceptron()
    flags, geo, aug, norms = [], [], [], []
    for xi, yi in zip(X, y, strict=False):
        if yi == 0:
            continue
        w_norm = np.linalg.norm(model.weights) if model.dim else 0.0
        w_aug = np.sqrt(w_norm**2 + model.intercept**2)
        f = yi * model.score_one(xi)
        geo.append(f / w_norm if w_norm else np.nan)
        aug.append(f / w_aug if w_aug else np.nan)
        norms.append(np.sqrt(xi @ xi + 1.0))
        flags.append(learned(model, xi, int(yi)))
    labeled = int((y != 0).sum())
    assert s["seen"] == 500 and s["labeled"] == labeled
    assert s["mistakes"] == sum(flags) == learner.model.mistakes
    assert s["mistake_rate"] == sum(flags) / labeled
    assert s["window_mistakes"] == sum(flags[-50:])
    assert s["window_mistake_rate"] == np.mean(flags[-50:])
    np.testing.assert_allclose(s["margin_min"], np.nanmin(geo[-50:]))
    np.testing.assert_allclose(s["margin_mean"], np.nanmean(geo[-50:]))
    np.testing.assert_allclose(s["R"], max(norms[-50:]))
    np.testing.assert_allclose(s["R_all"], max(norms))
    e = float(flags[0])
    for f in flags[1:]:
        e = 0.9 * e + 0.1 * f
    np.testing.assert_allclose(s["ewma_mistake_rate"], e, rtol=1e-9)
    if min(aug[-50:]) > 0:
        np.testing.assert_allclose(s["bound"], (max(norms[-50:]) / min(aug[-50:])) ** 2)
    else:
        assert s["gamma"] is None and s["bound"] is None


def test_bound_appears_on_a_separated_window():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(4000, 2))
    X = X[np.abs(X @ [0.6, 0.8]) > 0.2]
    y = np.where(X @ [0.6, 0.8] > 0, 1, -1).astype(np.int8)
    learner = Learner(Perceptron(fit_intercept=False), RunningStats(window=200))
    learner.model.fit(X, y, passes=50)  # converge first
    learner.step(X, y)  # then a clean pass, measured
    s = learner.stats.snapshot()
    assert s["window_mistakes"] == 0
    assert s["gamma"] > 0
    assert s["bound"] == (s["R"] / s["gamma"]) ** 2
    assert s["bound"] >= learner.model.mistakes  # the convergence theorem, live


def test_gamma_and_bound_on_a_separated_window_with_an_intercept_equal_the_seeds_formulas():
    # an offset separator, so the augmented margin (seed 001's reduction) differs from the plain one
    rng = np.random.default_rng(4)
    X = rng.uniform(-1, 1, size=(3000, 3))
    score = X @ [0.6, -0.8, 0.3] - 0.25
    X, score = X[np.abs(score) > 0.15], score[np.abs(score) > 0.15]
    y = np.where(score > 0, 1, -1).astype(np.int8)
    learner = Learner(Perceptron(), RunningStats(window=300))
    assert learner.model.fit(X, y, passes=200)[-1] == 0  # converged: the last pass was clean
    learner.step(X, y)  # a clean pass, measured: the model does not move during it
    s = learner.stats.snapshot()
    assert s["window_mistakes"] == 0  # the premise, not a branch

    w, b = learner.model.weights, learner.model.intercept
    last = slice(len(X) - 300, None)
    functional = y[last] * (X[last] @ w + b)
    gamma = functional.min() / np.sqrt(w @ w + b * b)  # margin of the window, on [x, 1] and [θ, θ0]
    R = np.sqrt((X[last] ** 2).sum(axis=1) + 1.0).max()  # R of the augmented vectors
    assert b != 0 and functional.min() / np.sqrt(w @ w) != gamma  # the two margins differ here
    np.testing.assert_allclose(s["gamma"], gamma, rtol=1e-12)
    np.testing.assert_allclose(s["R"], R, rtol=1e-12)
    np.testing.assert_allclose(s["bound"], (R / gamma) ** 2, rtol=1e-12)
    np.testing.assert_allclose(s["margin_min"], functional.min() / np.sqrt(w @ w), rtol=1e-12)


def test_first_window_with_theta_zero_has_no_gamma():
    learner = _run(np.array([[1.0, 1.0], [2.0, 2.0]]), np.array([1, 1], dtype=np.int8), window=5)
    s = learner.stats.snapshot()
    assert s["gamma"] is None and s["bound"] is None  # the first row sat on the boundary
    assert s["margin_min"] is not None  # the second row was scored with θ != 0


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(1, 6), st.integers(0, 10_000))
def test_state_round_trip_and_batching_do_not_change_the_statistics(window, cuts, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(120, 3))
    y = rng.choice(np.array([-1, 0, 1], dtype=np.int8), size=120)
    whole = _run(X, y, window)
    parts = _run(X, y, window, cuts=cuts)
    a, b = whole.stats.snapshot(), parts.stats.snapshot()
    for key in a:
        if key == "ewma_mistake_rate" and a[key] is not None:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-9)
        else:
            assert a[key] == b[key], key
    restored = RunningStats(window, 0.1)
    restored.set_state(parts.stats.get_state())
    assert restored.snapshot() == b


def test_memory_is_constant_in_stream_length():
    stats = RunningStats(window=100)
    learner = Learner(Perceptron(), stats)
    rng = np.random.default_rng(1)
    for _ in range(20):
        X = rng.normal(size=(1000, 3))
        learner.step(X, np.where(X[:, 0] > 0, 1, -1))
    state = stats.get_state()
    assert stats.seen == 20_000
    assert len(state["window_mistakes"]) == len(state["window_margins"]) == 100


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=300), st.lists(st.integers(1, 299), max_size=6),
       st.sampled_from([0.01, 0.1, 0.3]))
def test_the_ewma_is_the_sequential_loop_bit_for_bit_however_the_flags_are_cut(flags, cuts, alpha):
    expected = float(flags[0])
    for f in flags[1:]:
        expected = (1.0 - alpha) * expected + alpha * f
    stats = RunningStats(ewma_alpha=alpha)
    bounds = sorted({0, len(flags), *(c for c in cuts if c < len(flags))})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        stats._update_ewma(np.array(flags[lo:hi]))
    assert stats.ewma == expected
