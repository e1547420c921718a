r"""Iterative parameter mixing offline: synchronous IPM (the setting of McDonald, Hall and Mann's
Theorem 3) and a simulator of mixing on a stream without a barrier, as the worker mixes.

Research code for ``bench.bench_mix`` (docs/mixing.md, "The evaluation", which has the bound and
what the streaming mode's stale states mean for it); both use the worker's
:func:`~stream_perceptron.model.mixing.mix` and :func:`~stream_perceptron.model.mixing.adopt`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from stream_perceptron.model.mixing import Mix, Published, Weighting, adopt, mix
from stream_perceptron.model.perceptron import Perceptron

FloatArray = npt.NDArray[np.float64]


def _model(weights: FloatArray, intercept: float, fit_intercept: bool) -> Perceptron:
    """A perceptron holding exactly [θ, θ0] (set_state copies the array, bit for bit)."""
    model = Perceptron(fit_intercept=fit_intercept)
    model.set_state({"weights": weights, "intercept": intercept, "mistakes": 0})
    return model


@dataclass(frozen=True)
class Epoch:
    """One synchronous epoch: each shard's k and μ, Σᵢ μᵢ kᵢ, and the running Σₙ Σᵢ μᵢ,ₙ kᵢ,ₙ."""

    mistakes: tuple[int, ...]
    mu: tuple[float, ...]
    weighted: float
    running: float


@dataclass(frozen=True)
class IPMRun:
    """A synchronous IPM run: its epochs, the final mixed weights, and whether the last epoch
    was clean (no shard made a mistake, so the final weights separate every shard)."""

    epochs: list[Epoch]
    weights: FloatArray
    intercept: float
    converged: bool


def ipm(shards: Sequence[tuple[FloatArray, npt.NDArray[Any]]], weights: Weighting = "uniform", *,
        max_epochs: int = 1000, fit_intercept: bool = True) -> IPMRun:
    """Synchronous iterative parameter mixing over dense shards ``(X_i, y_i)``: each epoch every
    shard runs one pass from the mixed weights (zero at first), making kᵢ mistakes, and the shards'
    weights are mixed (shard i is partition i); it stops after the first clean epoch or after
    ``max_epochs``. On data separable with margin γ and radius R, ``epochs[-1].running`` ≤ (R/γ)².

    >>> import numpy as np
    >>> X = np.array([[2.0, 1.0], [-1.0, -2.0], [1.0, 2.0], [-2.0, -1.0]])
    >>> run = ipm([(X[:2], np.array([1, -1])), (X[2:], np.array([1, -1]))], "mistakes")
    >>> [e.mistakes for e in run.epochs], run.converged
    ([(1, 1), (0, 0)], True)
    """
    width = shards[0][0].shape[1]
    theta, theta0 = np.zeros(width), 0.0
    epochs: list[Epoch] = []
    running = 0.0
    for n in range(max_epochs):
        states = []
        for i, (X, y) in enumerate(shards):
            model = _model(theta, theta0, fit_intercept)
            k = int(model.learn_many(X, y).mistakes.sum())
            states.append(Published(i, model.weights.copy(), model.intercept, k, n, len(X)))
        mixed = mix(states, weights)
        running += mixed.weighted_mistakes
        epochs.append(Epoch(mixed.mistakes, mixed.mu, mixed.weighted_mistakes, running))
        if not any(mixed.mistakes):
            return IPMRun(epochs, theta, theta0, True)
        theta, theta0 = mixed.weights, mixed.intercept
    return IPMRun(epochs, theta, theta0, False)


# ---------------------------------------------------------------------------- on a stream
@dataclass
class _Partition:
    model: Perceptron
    seen: int = 0  # labeled examples learned, over all passes
    since: int = 0  # mistakes since the last adoption: k of the current epoch
    version: int = 0


@dataclass
class StreamRun:
    """What :func:`simulate_stream` measured: the mistakes of each pass; every adoption; Σ over
    adoptions of Σᵢ μᵢ kᵢ over P (a synchronous round is P adoptions of one mix, so this is
    :func:`ipm`'s running sum there); for each state mixed from another partition, the examples of
    the stream and the epochs since it was published; and ``final``, the run's mix of every
    partition's last state (unmixed: their uniform average), what a reader of the model topic
    would score with."""

    pass_mistakes: list[int] = field(default_factory=list)
    mixes: list[Mix] = field(default_factory=list)
    sum_mu_k: float = 0.0
    age_examples: list[int] = field(default_factory=list)
    age_versions: list[int] = field(default_factory=list)
    models: list[Perceptron] = field(default_factory=list)
    final: Mix | None = None

    @property
    def clean_pass(self) -> int | None:
        """The first pass (1-based) with no mistake, or None."""
        return next((p + 1 for p, k in enumerate(self.pass_mistakes) if k == 0), None)


def simulate_stream(X: FloatArray, y: npt.NDArray[Any], *, partitions: int = 8, every: int = 200,
                    weights: Weighting | None = "uniform", assign: npt.NDArray[np.intp] | None = None,
                    passes: int = 1, fit_intercept: bool = True) -> StreamRun:
    """Mixing on a stream without a barrier, as the worker mixes. Example t (every one labeled)
    goes to partition ``assign[t]`` (t mod P when None) and is learned by its perceptron. Each
    time a partition has learned ``every`` examples it publishes its state and adopts the
    :func:`mix` of the newest state of every partition that has published (an idle partition's
    last state stays in the mix, however old). ``weights=None`` never mixes. The stream is
    replayed up to ``passes`` times, stopping after a pass with no mistake. The rows between two
    mixing points are learned in one ``learn_many`` per partition: partitions do not interact
    between them, so the decisions are those of the stream example by example."""
    n = len(X)
    part = np.arange(n) % partitions if assign is None else np.asarray(assign, dtype=np.intp)
    if part.shape != (n,) or (n and (part.min() < 0 or part.max() >= partitions)):
        raise ValueError(f"assign must give each of the {n} examples a partition in 0..{partitions - 1}")
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    ps = [_Partition(_model(np.zeros(X.shape[1]), 0.0, fit_intercept)) for _ in range(partitions)]
    newest: dict[int, tuple[Published, int]] = {}  # partition -> (its newest state, clock then)
    run = StreamRun()
    clock = 0  # examples of the whole stream learned so far
    for _ in range(passes):
        before = sum(p.model.mistakes for p in ps)
        counts = np.empty(n, dtype=np.int64)  # each example's count in its partition, once learned
        for q in range(partitions):
            rows = np.flatnonzero(part == q)
            counts[rows] = ps[q].seen + np.arange(1, len(rows) + 1)
        events = np.flatnonzero(counts % every == 0).tolist() if weights is not None else []
        start = 0
        for e in events:  # example e ends its partition's epoch
            _learn(ps, X, y, part, start, e + 1)
            clock += e + 1 - start
            start = e + 1
            assert weights is not None
            _adopt(run, ps, newest, int(part[e]), clock, weights)
        _learn(ps, X, y, part, start, n)
        clock += n - start
        run.pass_mistakes.append(sum(p.model.mistakes for p in ps) - before)
        if run.pass_mistakes[-1] == 0:
            break
    run.models = [p.model for p in ps]
    last = [_publish(q, p) for q, p in enumerate(ps) if p.seen]
    run.final = mix(last, weights or "uniform") if last else None
    return run


def _publish(q: int, p: _Partition) -> Published:
    return Published(q, p.model.weights.copy(), p.model.intercept, p.since, p.version, p.seen)


def _learn(ps: list[_Partition], X: FloatArray, y: npt.NDArray[Any], part: npt.NDArray[np.intp],
           start: int, end: int) -> None:
    """Rows ``start`` to ``end`` of the stream, each partition's in order, in one batch each."""
    if end <= start:
        return
    segment = part[start:end]
    for q, p in enumerate(ps):
        rows = np.flatnonzero(segment == q) + start
        if len(rows):
            p.since += int(p.model.learn_many(X[rows], y[rows]).mistakes.sum())
            p.seen += len(rows)


def _adopt(run: StreamRun, ps: list[_Partition], newest: dict[int, tuple[Published, int]],
           q: int, clock: int, weights: Weighting) -> None:
    """Partition ``q`` publishes its state and adopts the mix of the newest published states."""
    p = ps[q]
    newest[q] = (_publish(q, p), clock)
    mixed = mix([s for s, _ in newest.values()], weights)
    for j, (s, t) in newest.items():
        if j != q:
            run.age_examples.append(clock - t)
            run.age_versions.append(p.version - s.version)
    run.mixes.append(mixed)
    run.sum_mu_k += mixed.weighted_mistakes / len(ps)
    adopt(p.model, mixed)
    p.since = 0
    p.version += 1
