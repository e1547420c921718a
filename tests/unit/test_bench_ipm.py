"""bench/ipm.py: synchronous IPM keeps McDonald, Hall and Mann's bound Σμk ≤ (R/γ)², and the
stream simulator makes the decisions of the stream learned example by example."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import ipm as ipm_module
from bench.ipm import ipm, simulate_stream
from stream_perceptron import Perceptron
from stream_perceptron.model.mixing import WEIGHTINGS, Published, mix


def test_the_module_doctests_pass():
    result = doctest.testmod(ipm_module)
    assert result.attempted >= 1 and result.failed == 0


def separable(seed: int, n: int, d: int, gap: float, offset: float):
    """Rows x ~ N(0, I_d) with |u·x + b| ≥ gap kept, y = sign(u·x + b); returns X, y and the
    known R = max‖[x, 1]‖ and γ = min y[u, b]·[x, 1] / ‖[u, b]‖ (a separator's margin, so a
    lower bound of the best one's: (R/γ)² is a valid bound)."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    X = rng.normal(size=(4 * n, d))
    s = X @ u + offset
    keep = np.abs(s) >= gap
    X, s = X[keep][:n], s[keep][:n]
    y = np.where(s > 0, 1, -1).astype(np.int8)
    gamma = float(np.min(y * s)) / math.sqrt(1.0 + offset**2)
    radius = float(np.sqrt(np.einsum("ij,ij->i", X, X) + 1.0).max())
    return X, y, radius, gamma


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(20, 240), d=st.integers(1, 5),
       shards=st.integers(1, 6), gap=st.floats(0.1, 1.0), offset=st.floats(-1.5, 1.5))
def test_synchronous_ipm_keeps_the_mistake_bound_for_both_weightings(seed, n, d, shards, gap, offset):
    X, y, radius, gamma = separable(seed, n, d, gap, offset)
    bound = (radius / gamma) ** 2
    for weights in WEIGHTINGS:
        run = ipm([(X[i::shards], y[i::shards]) for i in range(shards)], weights, max_epochs=10_000)
        assert run.converged
        assert run.epochs[-1].running <= bound
        # the running sum is the sum of the epochs' Σ μ k, each with μ on the simplex
        assert run.epochs[-1].running == pytest.approx(sum(e.weighted for e in run.epochs))
        for e in run.epochs:
            assert min(e.mu) >= 0 and math.fsum(e.mu) == pytest.approx(1.0)
        # the mix after a clean epoch separates every row
        assert np.all(y * (X @ run.weights + run.intercept) > 0)


def test_ipm_on_one_shard_is_the_perceptron_pass_by_pass():
    X, y, _, _ = separable(4, 300, 3, 0.05, 0.4)
    run = ipm([(X, y)], "mistakes")
    model = Perceptron()
    assert [e.mistakes[0] for e in run.epochs] == model.fit(X, y, epochs=1000)
    assert run.weights.tobytes() == model.weights.tobytes() and run.intercept == model.intercept


@pytest.mark.parametrize("bad, message", [
    (lambda: simulate_stream(np.zeros((3, 1)), np.ones(3), partitions=2, assign=np.array([0, 1, 2])),
     "assign must give"),
    (lambda: simulate_stream(np.zeros((3, 1)), np.ones(3), every=0), "every must be"),
])
def test_bad_arguments_are_refused_with_a_reason(bad, message):
    with pytest.raises(ValueError, match=message):
        bad()


def reference_stream(X, y, partitions, every, weights, passes):
    """The stream example by example with learn_one: the simulator's definition, written plainly."""
    models = [Perceptron() for _ in range(partitions)]
    seen, since, epoch, newest, per_pass = [0] * partitions, [0] * partitions, [0] * partitions, {}, []
    for _ in range(passes):
        before = sum(m.mistakes for m in models)
        for t in range(len(X)):
            q = t % partitions
            m = models[q]
            m.learn_one(X[t], int(y[t]))
            since[q] += m.last_mistake
            seen[q] += 1
            if weights is not None and seen[q] % every == 0:
                newest[q] = Published(q, m.weights.copy(), m.intercept, since[q], epoch[q], seen[q])
                mixed = mix(newest.values(), weights)
                m.set_state({"weights": mixed.weights, "intercept": mixed.intercept, "mistakes": m.mistakes})
                since[q], epoch[q] = 0, epoch[q] + 1
        per_pass.append(sum(m.mistakes for m in models) - before)
        if per_pass[-1] == 0:
            break
    return per_pass, models


@pytest.mark.parametrize("weights, every", [(None, 5), ("uniform", 7), ("mistakes", 3)])
def test_the_simulator_makes_the_decisions_of_the_example_by_example_stream(weights, every):
    X, y, _, _ = separable(11, 180, 3, 0.05, 0.3)
    run = simulate_stream(X, y, partitions=4, every=every, weights=weights, passes=30)
    per_pass, models = reference_stream(X, y, 4, every, weights, 30)
    assert run.pass_mistakes == per_pass
    for ours, theirs in zip(run.models, models, strict=True):
        assert ours.weights.tobytes() == theirs.weights.tobytes() and ours.intercept == theirs.intercept


def test_one_unmixed_partition_is_the_perceptron_pass_by_pass():
    X, y, _, _ = separable(12, 400, 4, 0.05, -0.2)
    run = simulate_stream(X, y, partitions=1, weights=None, passes=1000)
    assert run.pass_mistakes == Perceptron().fit(X, y, epochs=1000) and not run.mixes


@pytest.mark.parametrize("weights", WEIGHTINGS)
def test_streaming_mixing_reaches_a_clean_pass_on_separable_data_with_bounded_staleness(weights):
    partitions, every = 8, 10
    X, y, radius, gamma = separable(13, 1600, 5, 0.1, 0.5)
    run = simulate_stream(X, y, partitions=partitions, every=every, weights=weights, passes=50)
    assert run.clean_pass is not None and run.pass_mistakes[-1] == 0
    assert np.all(y * (X @ run.models[0].weights + run.models[0].intercept) > 0)
    # round-robin: each partition republishes every P·every examples of the stream
    assert 0 < max(run.age_examples) < partitions * every and max(run.age_versions) <= 1
    # one adoption per `every` examples of a partition
    assert len(run.mixes) == len(X) * len(run.pass_mistakes) // every
    sync = ipm([(X[i::partitions], y[i::partitions]) for i in range(partitions)], weights)
    # beside the synchronous figure (the theorem is for that one; printed with -s)
    print(f"{weights}: streaming Σμk/P = {run.sum_mu_k:.1f}, synchronous Σμk = "
          f"{sync.epochs[-1].running:.1f}, (R/γ)² = {(radius / gamma) ** 2:.1f}")
    assert sync.epochs[-1].running <= (radius / gamma) ** 2


def test_an_idle_partition_stalls_no_one_and_its_state_grows_stale():
    X, y, _, _ = separable(14, 800, 3, 0.1, 0.0)
    assign = np.arange(800) % 4
    assign[40:] = np.where(assign[40:] == 3, 0, assign[40:])  # partition 3 goes idle after t = 40
    run = simulate_stream(X, y, partitions=4, every=10, weights="uniform", assign=assign)
    counts = np.bincount(assign, minlength=4)
    assert len(run.mixes) == int((counts // 10).sum())
    assert all(m.partitions == (0, 1, 2, 3) for m in run.mixes[-5:])  # its last state still mixed
    assert max(run.age_examples) > 700  # ... however old
    assert max(run.age_versions) >= 30
