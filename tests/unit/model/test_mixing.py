"""Iterative parameter mixing as the worker mixes: exact mixes, μ on the simplex, adoption."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from stream_perceptron import Perceptron
from stream_perceptron.model.mixing import (
    WEIGHTINGS,
    Mix,
    Published,
    adopt,
    mix,
    mixing_weights,
)


def states(seed: int, parts: list[int], d: int = 5) -> list[Published]:
    rng = np.random.default_rng(seed)
    return [Published(p, rng.normal(size=d), float(rng.normal()), int(rng.integers(0, 9)),
                      int(rng.integers(0, 50)), int(rng.integers(0, 10**6))) for p in parts]


def bits(m: Mix) -> tuple[bytes, float]:
    return m.weights.tobytes(), m.intercept


def test_a_mix_is_bit_identical_when_recomputed_in_any_input_order_and_from_its_records():
    given_states = states(7, [3, 0, 5, 1, 2])
    for weights in WEIGHTINGS:
        first = mix(given_states, weights)
        again = mix(list(reversed(given_states)), weights)
        via_json = mix([Published.from_record(json.loads(json.dumps(s.record()))) for s in given_states],
                       weights)
        assert bits(first) == bits(again) == bits(via_json)
        assert first.partitions == (0, 1, 2, 3, 5)
        assert json.loads(json.dumps(first.record())) == first.record()


def test_the_mix_is_the_mu_weighted_sum():
    given_states = states(8, [0, 1, 2, 3])
    for weights in WEIGHTINGS:
        m = mix(given_states, weights)
        ks = [s.mistakes for s in given_states]
        expected = [k / sum(ks) for k in ks] if weights == "mistakes" and sum(ks) else [0.25] * 4
        assert m.mu == pytest.approx(expected)
        pairs = list(zip(m.mu, given_states, strict=True))
        np.testing.assert_allclose(m.weights, sum(mu * s.weights for mu, s in pairs))
        assert m.intercept == pytest.approx(sum(mu * s.intercept for mu, s in pairs))
        assert m.weighted_mistakes == pytest.approx(sum(mu * k for mu, k in zip(m.mu, ks, strict=True)))


def test_mixing_a_single_partition_is_a_no_op():
    (one,) = states(9, [4])
    for weights in WEIGHTINGS:
        m = mix([one], weights)
        assert m.weights.tobytes() == one.weights.tobytes() and m.intercept == one.intercept
        assert m.mu == (1.0,) and m.partitions == (4,)


@pytest.mark.parametrize("count", [1, 2, 3, 7, 8, 10, 64])
def test_uniform_mu_sums_to_one(count):
    mu, rule = mixing_weights([3] * count, "uniform")
    assert rule == "uniform" and len(set(mu)) == 1 and math.fsum(mu) == 1.0


def test_mistakes_weighting_falls_back_to_uniform_when_no_partition_made_a_mistake():
    assert mixing_weights([0, 0, 0], "mistakes") == ((1 / 3,) * 3, "uniform")
    zero = [Published(p, np.ones(2) * p, 0.0, 0, 1, 0) for p in (0, 1)]
    assert mix(zero, "mistakes").rule == "uniform" and mix(zero, "mistakes").mu == (0.5, 0.5)
    assert mixing_weights([0, 4, 1], "mistakes") == ((0.0, 0.8, 0.2), "mistakes")


def test_states_of_different_widths_mix_as_if_padded_with_zeros():
    a = Published(0, np.array([1.0, 2.0]), 0.0, 1, 0, 0)
    b = Published(1, np.array([3.0, 4.0, 6.0]), 2.0, 1, 0, 0)
    m = mix([a, b])
    assert m.weights.tolist() == [2.0, 3.0, 3.0] and m.intercept == 1.0


def test_adopting_a_mix_replaces_theta_and_keeps_the_names_labels_and_mistake_count():
    model = Perceptron(average=True)
    model.learn_many([{"a": 1.0, "b": 2.0}, {"b": -3.0, "c": 1.0}, {"a": -1.0}], [True, False, True])
    before = model.get_state()
    mixed = mix([Published(0, np.array([1.0, -2.0, 0.5]), 0.25, 1, 0, 0),
                 Published(1, np.array([3.0, 0.0, 0.5]), -0.25, 1, 0, 0)])
    adopt(model, mixed)
    assert model.weights.tolist() == [2.0, -1.0, 0.5] and model.intercept == 0.0
    assert model.mistakes == before["mistakes"] and model.feature_names == ["a", "b", "c"]
    assert model.norms()[0] == pytest.approx(np.sqrt(5.25))  # not the ‖θ‖ kept before the mix
    # the averaged model restarts from the mix: served = θ until the next labeled example
    assert model.averaged_weights.tolist() == [2.0, -1.0, 0.5]
    assert model.predict_one({"a": 1.0}) is True and model.score_one({"b": 1.0}) == -1.0


@pytest.mark.parametrize("bad, message", [
    (lambda: mix([]), "nothing to mix"),
    (lambda: mix(states(1, [0, 0])), "one state per partition"),
    (lambda: mix(states(1, [0]), "average"), "weights must be one of"),  # type: ignore[arg-type]
    (lambda: mixing_weights([1, -1], "mistakes"), "mistakes must be >= 0"),
])
def test_bad_arguments_are_refused_with_a_reason(bad, message):
    with pytest.raises(ValueError, match=message):
        bad()
