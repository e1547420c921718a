"""A generated linearly separable stream with a known margin, and its geometry."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from stream_perceptron.errors import SourceError
from stream_perceptron.sources.base import Chunk, Example, FloatArray, Source
from stream_perceptron.sources.spec_args import MAX_D, check, parse_args

__all__ = ["separable_params", "separable_source"]

# the longest noisy stream: its flipped positions are drawn from all n (up to 8 bytes per example)
_MAX_NOISY_N = 10_000_000


def separable_params(spec: str, *, limit: int | None = None) -> dict[str, Any]:
    """Generate a ``separable:`` stream once and report its geometry.

    Returns ``d, n, seed, noise, radius, gamma`` (the parsed spec; ``n`` after ``limit``),
    ``u`` (the hidden unit normal, float64 array), ``R`` (the largest ``||x||``, <= radius),
    ``margin`` (the smallest ``|u.x|``, >= gamma), ``n_flipped`` (labels that disagree with
    ``sign(u.x)``) and ``mistake_bound`` = ``(R / gamma) ** 2`` (Novikoff's bound on perceptron
    mistakes, valid when ``noise == 0``; ``inf`` when gamma is 0).
    """
    text = spec.strip()
    head, _, rest = text.partition(":")
    if head.strip().lower() != "separable":
        raise SourceError(f"separable_params needs a 'separable:' spec, got {spec!r}")
    params = _separable_args(rest.strip(), limit)
    total = params.n if limit is None else min(params.n, limit)
    u = _hidden_normal(params)
    big_r = 0.0
    margin = math.inf
    flipped = 0
    count = 0
    for X, y in _separable_chunks(params, total):
        dots = X @ u
        if X.shape[0]:
            big_r = max(big_r, float(np.sqrt(np.max(np.einsum("ij,ij->i", X, X)))))
            margin = min(margin, float(np.min(np.abs(dots))))
        flipped += int(np.count_nonzero(np.where(dots >= 0, 1, -1) != y))
        count += X.shape[0]
    return {
        "d": params.d,
        "n": count,
        "seed": params.seed,
        "noise": params.noise,
        "radius": params.radius,
        "gamma": params.gamma,
        "u": u,
        "R": big_r,
        "margin": margin,
        "n_flipped": flipped,
        "mistake_bound": (big_r / params.gamma) ** 2 if params.gamma > 0 else math.inf,
    }


@dataclass(frozen=True)
class _SeparableParams:
    d: int
    gamma: float
    n: int
    seed: int
    noise: float
    radius: float
    accept: float  # probability that a uniform point of the ball has |u.x| >= gamma


_SEPARABLE_DEFAULTS: dict[str, int | float] = {
    "d": 20,
    "gamma": 0.1,
    "n": 100_000,
    "seed": 0,
    "noise": 0.0,
    "radius": 1.0,
}
_MAX_CANDIDATES = 500_000_000  # refuse specs whose rejection sampling would need more draws


def _separable_args(rest: str, limit: int | None = None) -> _SeparableParams:
    """The parameters of a ``separable:`` spec, checked; ``limit`` caps the examples drawn."""
    args = parse_args("separable", rest, _SEPARABLE_DEFAULTS)
    d, n, seed = args["d"], args["n"], args["seed"]
    gamma, noise, radius = float(args["gamma"]), float(args["noise"]), float(args["radius"])
    check(1 <= d <= MAX_D, f"separable: d must be in [1, {MAX_D}], got {d}")
    check(n >= 0, f"separable: n must be >= 0, got {n}")
    check(seed >= 0, f"separable: seed must be >= 0, got {seed}")
    check(radius > 0, f"separable: radius must be > 0, got {radius}")
    check(0 <= gamma < radius, f"separable: gamma must be in [0, radius={radius}), got {gamma}")
    check(0.0 <= noise <= 1.0, f"separable: noise must be in [0, 1], got {noise}")
    check(
        noise == 0 or n <= _MAX_NOISY_N,
        f"separable: with noise, n must be at most {_MAX_NOISY_N}, got {n}"
        " (the flipped positions are drawn from all n)",
    )
    accept = _acceptance(d, gamma / radius)
    drawn = n if limit is None else min(n, limit)
    if drawn > 0 and (accept <= 0 or 1 / accept > _MAX_CANDIDATES):
        typical = radius / math.sqrt(d + 2)
        raise SourceError(
            f"separable: gamma={gamma} is too large for d={d}, radius={radius}: only a fraction "
            f"{accept:.3g} of the ball has |u.x| >= gamma (typical |u.x| ~ {typical:.3g})"
        )
    if drawn > 0 and drawn / accept > _MAX_CANDIDATES:
        raise SourceError(
            f"separable: n={drawn} would take about {drawn / accept:.3g} draws (a fraction {accept:.3g}"
            f" of the ball has |u.x| >= gamma={gamma}), over the {_MAX_CANDIDATES:,} allowed:"
            " lower n (or gamma)"
        )
    return _SeparableParams(d, gamma, n, seed, noise, radius, accept)


def _acceptance(d: int, ratio: float) -> float:
    """P(|u.x| >= ratio) for x uniform in the unit ball of R^d (density ~ (1 - t^2)^((d-1)/2))."""
    if d == 1:
        return 1.0 - ratio
    t = np.linspace(0.0, 1.0, 200_001)
    with np.errstate(divide="ignore"):
        log_density = 0.5 * (d - 1) * np.log1p(-(t * t))
    density = np.exp(log_density)
    total = float(density.sum())
    return float(density[t >= ratio].sum()) / total


def separable_source(spec: str, rest: str, limit: int | None) -> Source:
    """Linearly separable through the origin, with margin ``gamma`` w.r.t. a hidden unit ``u``.

    Keys: ``d`` (dimension, default 20), ``gamma`` (0.1), ``n`` (100000), ``seed`` (0),
    ``noise`` (0.0), ``radius`` (1.0). ``u`` is a seeded uniformly random unit vector; the points
    are uniform in the ball ``||x|| <= radius`` of R^d conditioned on ``|u.x| >= gamma``
    (exact rejection sampling of the 1-D component ``u.x`` from its marginal, then a uniform
    point of the orthogonal slice; every point is re-checked in floating point); ``y =
    sign(u.x)``. Then exactly ``round(noise * n)`` labels, at seeded positions, are flipped.
    u, points and flips use independent seeded streams, so ``noise`` changes only the labels
    and ``limit`` yields a prefix. Deterministic for a given seed (and numpy version).
    Without noise the perceptron makes at most ``(R / gamma)^2`` mistakes; see
    :func:`separable_params` for u, R and the observed margin.
    """
    params = _separable_args(rest, limit)
    total = params.n if limit is None else min(params.n, limit)

    def chunks() -> Iterator[Chunk]:
        return _separable_chunks(params, total)

    def examples() -> Iterator[Example]:
        for X, y in _separable_chunks(params, total):
            yield from zip(X.tolist(), y.tolist(), strict=True)

    names = [f"x{i}" for i in range(params.d)]
    return Source(spec, params.d, names, total, examples, chunks)


def _seed_streams(params: _SeparableParams) -> list[np.random.SeedSequence]:
    return np.random.SeedSequence(params.seed).spawn(3)  # u, points, label flips


def _hidden_normal(params: _SeparableParams) -> FloatArray:
    rng = np.random.default_rng(_seed_streams(params)[0])
    while True:
        v = rng.standard_normal(params.d)
        norm = float(np.linalg.norm(v))
        if norm > 0:
            return v / norm


def _chunk_rows(d: int) -> int:
    return max(1, min(8192, (1 << 21) // d))


def _separable_chunks(params: _SeparableParams, total: int) -> Iterator[Chunk]:
    """The first ``total`` examples, in blocks whose boundaries depend only on n and d."""
    if total <= 0:
        return
    u = _hidden_normal(params)
    _, point_seq, flip_seq = _seed_streams(params)
    n_flip = math.floor(params.noise * params.n + 0.5)
    flips = np.sort(np.random.default_rng(flip_seq).choice(params.n, size=n_flip, replace=False))
    rng = np.random.default_rng(point_seq)
    rows = _chunk_rows(params.d)
    start = 0
    while start < total:
        m = min(rows, params.n - start)
        X, dots = _draw_points(rng, u, m, params)
        y = np.where(dots >= 0, 1, -1).astype(np.int8)
        lo, hi = np.searchsorted(flips, [start, start + m])
        y[flips[lo:hi] - start] *= -1
        take = min(m, total - start)
        yield X[:take], y[:take]
        start += m


def _draw_points(
    rng: np.random.Generator, u: FloatArray, m: int, params: _SeparableParams
) -> tuple[FloatArray, FloatArray]:
    """Exactly m points uniform in the ball with |u.x| >= gamma, and their u.x."""
    d, gamma, radius = params.d, params.gamma, params.radius
    xs: list[FloatArray] = []
    dots: list[FloatArray] = []
    have = 0
    while have < m:
        need = m - have
        batch = min(int(need / params.accept * 1.1) + 64, 1 << 24)
        # (u.x / radius)^2 ~ Beta(1/2, (d+1)/2) for x uniform in the ball
        t = radius * np.sqrt(rng.beta(0.5, (d + 1) / 2, size=batch))
        t = t[t >= gamma][:need]
        if t.size == 0:
            continue
        t = np.where(rng.random(t.size) < 0.5, -t, t)
        x = t[:, None] * u[None, :]
        if d > 1:
            g = rng.standard_normal((t.size, d))
            g -= np.outer(g @ u, u)
            norms = np.linalg.norm(g, axis=1)
            g /= np.where(norms > 0, norms, 1.0)[:, None]
            slice_radius = np.sqrt(np.maximum(radius * radius - t * t, 0.0))
            s = slice_radius * rng.random(t.size) ** (1.0 / (d - 1))
            x += s[:, None] * g
        proj = x @ u
        ok = (np.abs(proj) >= gamma) & (np.einsum("ij,ij->i", x, x) <= radius * radius)
        xs.append(x[ok])
        dots.append(proj[ok])
        have += int(np.count_nonzero(ok))
    return np.concatenate(xs)[:m], np.concatenate(dots)[:m]
