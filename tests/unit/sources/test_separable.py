"""Tests for stream_perceptron.sources.separable: the generated separable stream."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stream_perceptron.errors import SourceError
from stream_perceptron.sources import dense_matrix, open_source, separable_params


def test_separable_margin_and_radius() -> None:
    spec = "separable:d=8,gamma=0.15,n=5000,seed=7,radius=2.5"
    src = open_source(spec)
    assert src.n_features == 8 and src.length == 5000
    X, y = dense_matrix(src)
    assert X.shape == (5000, 8) and y.dtype == np.int8
    p = separable_params(spec)
    u = p["u"]
    assert math.isclose(float(np.linalg.norm(u)), 1.0)
    dots = X @ u
    assert np.all(np.abs(dots) >= 0.15 - 1e-12)
    assert np.all(np.sign(dots) == y)  # separable through the origin by u
    norms = np.linalg.norm(X, axis=1)
    assert np.all(norms <= 2.5 + 1e-12)
    assert p["R"] == pytest.approx(norms.max()) and p["R"] <= 2.5 + 1e-12
    assert p["margin"] == pytest.approx(np.abs(dots).min()) and p["margin"] >= 0.15 - 1e-12
    assert p["gamma"] == 0.15 and p["radius"] == 2.5 and p["n_flipped"] == 0
    assert p["mistake_bound"] == pytest.approx((p["R"] / 0.15) ** 2)
    # both labels occur and the points fill the ball rather than hugging the margin
    assert 0.4 < (y == 1).mean() < 0.6
    assert norms.max() > 2.3 and np.abs(dots).max() > 1.0


def test_separable_perceptron_obeys_novikoff_bound() -> None:
    spec = "separable:d=5,gamma=0.2,n=1000,seed=3"
    X, y = dense_matrix(open_source(spec))
    bound = separable_params(spec)["mistake_bound"]
    w = np.zeros(X.shape[1])
    mistakes = 0
    for _ in range(100):  # cycle until a clean pass
        clean = True
        for xi, yi in zip(X, y, strict=True):
            if yi * (w @ xi) <= 0:
                w += yi * xi
                mistakes += 1
                clean = False
        if clean:
            break
    assert clean
    assert 0 < mistakes <= bound


def test_separable_deterministic_by_seed() -> None:
    a = dense_matrix(open_source("separable:d=4,n=500,seed=11"))
    b = dense_matrix(open_source("separable:d=4,n=500,seed=11"))
    c = dense_matrix(open_source("separable:d=4,n=500,seed=12"))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    src = open_source("separable:d=4,n=500,seed=11")
    assert list(src) == list(src)  # re-iterable
    assert np.array_equal(np.array([x for x, _ in src]), a[0])  # iteration == dense_matrix


def test_separable_noise_flips_exact_fraction() -> None:
    X0, y0 = dense_matrix(open_source("separable:d=6,n=2000,seed=5"))
    X1, y1 = dense_matrix(open_source("separable:d=6,n=2000,seed=5,noise=0.1"))
    assert np.array_equal(X0, X1)  # noise changes labels only
    assert int((y0 != y1).sum()) == 200
    assert separable_params("separable:d=6,n=2000,seed=5,noise=0.1")["n_flipped"] == 200
    u = separable_params("separable:d=6,seed=5", limit=0)["u"]  # u depends on d and seed only
    assert np.array_equal(np.where(X1 @ u >= 0, 1, -1) != y1, y0 != y1)


def test_separable_limit_is_prefix() -> None:
    full = list(open_source("separable:d=3,n=20000,seed=1,noise=0.2"))
    limited = open_source("separable:d=3,n=20000,seed=1,noise=0.2", limit=9000)
    assert limited.length == 9000
    assert list(limited) == full[:9000]
    assert list(open_source("separable:n=10", limit=0)) == []
    assert open_source("separable:n=10", limit=50).length == 10
    assert separable_params("separable:d=3,n=20000,seed=1", limit=100)["n"] == 100


def test_separable_defaults_and_high_dimension() -> None:
    src = open_source("separable", limit=100)
    assert src.n_features == 20 and src.length == 100
    X, _ = dense_matrix(open_source("separable:d=2000,gamma=0.02,n=300,seed=2"))
    assert X.shape == (300, 2000)
    with pytest.raises(SourceError, match="too large"):
        open_source("separable:d=500,gamma=0.9")


def test_a_noiseless_separable_stream_too_long_to_draw_says_n_is_the_problem() -> None:
    # most of the ball qualifies at gamma=0.05, d=20: the draws, not gamma, are past the bound
    with pytest.raises(SourceError, match=r"^separable: n=1000000000 would take about 1\.2\d*e\+09 draws"
                                          r" .* over the 500,000,000 allowed: lower n"):
        open_source("separable:d=20,gamma=0.05,n=1000000000")
    assert open_source("separable:d=20,gamma=0.05,n=1000000000", limit=5).length == 5  # 5 drawn
