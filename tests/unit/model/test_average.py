"""The averaged perceptron: the seeds' learning, the mean of θ served, lazily and exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron import Perceptron
from tests.unit.model.exactness import assert_learn_many_is_learn_one, learned


def _noisy(d=6, n=400, seed=0, noise=0.15):
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, d)), 1)
    y = np.where(X @ rng.normal(size=d) + 0.2 > 0, 1, -1).astype(np.int8)
    y[rng.random(n) < noise] *= -1
    return X, y


def test_it_learns_exactly_as_the_plain_perceptron_and_serves_the_mean_of_theta():
    X, y = _noisy()
    plain, averaged = Perceptron(), Perceptron(average=True)
    thetas, intercepts = [], []
    for x, label in zip(X, y, strict=True):
        assert learned(plain, x, int(label)) == learned(averaged, x, int(label))
        thetas.append(plain.weights.copy())
        intercepts.append(plain.intercept)
    assert np.array_equal(plain.weights, averaged.weights) and plain.mistakes == averaged.mistakes
    # θ̄ = (1/T) Σ_{t=1..T} θ_t, computed the long way
    np.testing.assert_allclose(averaged.averaged_weights, np.mean(thetas, axis=0), rtol=1e-12, atol=1e-12)
    assert averaged.averaged_intercept == pytest.approx(np.mean(intercepts), abs=1e-12)
    x = X[0]
    assert averaged.score_one(x) == pytest.approx(x @ averaged.averaged_weights + averaged.averaged_intercept)
    assert averaged.score_one(x) != plain.score_one(x)


def test_before_any_label_the_served_model_is_theta():
    model = Perceptron(average=True, initial_weights=[1.0, -1.0])
    assert model.score_one([2.0, 1.0]) == 1.0
    out = model.learn_many(np.array([[2.0, 1.0], [0.0, 3.0]]), [1, 1], labeled=[False, True])
    assert out.served_scores.tolist() == out.scores.tolist() == [1.0, -3.0]  # T = 0 for both rows
    assert model.get_state()["average"]["steps"] == 1  # the unlabeled row is not an example learned


def test_the_served_model_reports_its_own_errors():
    X, y = _noisy(seed=2)
    out = Perceptron(average=True).learn_many(X, y)
    served = np.where(y * out.served_scores <= 0, True, False)
    assert out.served_mistakes.tolist() == served.tolist()
    assert out.predictions.tolist() == np.where(out.served_scores > 0, 1, -1).tolist()
    assert out.served_mistakes.sum() < out.mistakes.sum()  # noisy data: the average errs less


@st.composite
def streams(draw):
    d = draw(st.integers(1, 8))
    n = draw(st.integers(1, 200))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.normal(size=(n, d)) * draw(st.sampled_from([1e-3, 1.0, 1e3]))
    if draw(st.booleans()):
        X = np.round(X)
    y = rng.choice(np.array([-1, 1], dtype=np.int8), size=n)
    named = draw(st.booleans())
    rows = [{f"f{j}": float(v) for j, v in enumerate(row) if v} for row in X] if named else X
    return rows, y


@settings(max_examples=50, deadline=None)
@given(streams(), st.booleans(), st.integers(1, 6))
def test_learn_many_serves_and_learns_bit_for_bit_as_learn_one(stream, fit_intercept, cuts):
    rows, y = stream
    assert_learn_many_is_learn_one(lambda: Perceptron(average=True, fit_intercept=fit_intercept),
                                   rows, y, cuts)


def test_the_state_round_trips_through_json_and_replays_bit_for_bit():
    X, y = _noisy(n=600, seed=4)
    a = Perceptron(average=True)
    a.learn_many(X[:300], y[:300])
    b = Perceptron(average=True)
    b.set_state(json.loads(json.dumps(a.get_state())))
    out_a, out_b = a.learn_many(X[300:], y[300:]), b.learn_many(X[300:], y[300:])
    assert out_a.served_scores.tobytes() == out_b.served_scores.tobytes()
    assert a.averaged_weights.tobytes() == b.averaged_weights.tobytes()
    assert a.get_state() == b.get_state()


def test_a_state_written_before_averaging_restores():
    old = {"weights": [1.0, 2.0], "intercept": 1.0, "mistakes": 3, "features": []}  # today's format
    model = Perceptron(average=True)
    model.set_state(old)
    assert model.weights.tolist() == [1.0, 2.0] and model.score_one([1.0, 1.0]) == 4.0
    plain = Perceptron()
    plain.set_state(old)
    assert plain.get_state() == old  # a default model writes exactly the old fields
    assert plain.config() == {"n_features": None, "fit_intercept": True}


def test_averaging_serves_better_on_noisy_streams():
    """The issue's offline figure in small: one pass over d=20, a clean test set, label noise."""
    rng = np.random.default_rng(5)
    u = rng.normal(size=20)
    u /= np.linalg.norm(u)

    def draw(n):
        X = rng.normal(size=(4 * n, 20))
        X = X[np.abs(X @ u) > 0.1][:n]  # a margin, so the clean concept is separable
        return X, np.where(X @ u > 0, 1, -1)

    X_test, y_test = draw(2000)
    for noise in (0.0, 0.2):
        X, y = draw(3000)
        y = np.where(rng.random(len(y)) < noise, -y, y)
        accuracy = {}
        for average in (False, True):
            model = Perceptron(average=average)
            model.learn_many(X, y)
            accuracy[average] = float((model.predict_many(X_test) == y_test).mean())
        assert accuracy[True] > accuracy[False], (noise, accuracy)


def test_score_many_serves_the_average_unless_asked_for_theta():
    X, y = _noisy(seed=9)
    model = Perceptron(average=True)
    model.learn_many(X, y)
    served = model.score_many(X)
    assert served.tolist() == [model.score_one(x) for x in X]
    theta = model.score_many(X, served=False)
    np.testing.assert_allclose(theta, X @ model.weights + model.intercept, rtol=1e-12, atol=1e-9)
    assert not np.array_equal(served, theta)
