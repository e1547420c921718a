r"""Iterative parameter mixing: one perceptron learned across partitions (pure: no I/O).

McDonald, Hall and Mann (2010), *Distributed Training Strategies for the Structured Perceptron*.
Each of :math:`S` shards (here: input partitions) runs Rosenblatt's update from the current mixed
weights: on a labeled :math:`(x, y)`, if :math:`y(\theta\cdot x + \theta_0) \le 0` (a point on
the boundary is a mistake) then :math:`\theta \mathrel{+}= y x`, :math:`\theta_0 \mathrel{+}= y`.
After its epoch :math:`n`, shard :math:`i` has made :math:`k_{i,n}` mistakes and holds
:math:`w_{i,n} = [\theta, \theta_0]`; the next mixed model is

.. math:: w_n = \sum_i \mu_{i,n} w_{i,n}, \qquad \mu_{i,n} \ge 0, \quad \sum_i \mu_{i,n} = 1,

with :math:`\mu_{i,n} = 1/S` (``weights="uniform"``) or :math:`\mu_{i,n} = k_{i,n}/\sum_j k_{j,n}`
(``weights="mistakes"``). **When every k is 0**, ``"mistakes"`` falls back to uniform (there is
nothing to weigh the states by, and uniform treats them alike); the mix's record then says
``"rule": "uniform"``.

**The bound** (their Theorem 3, for any μ on the simplex, so for both weightings): on data
separable with margin γ by a unit :math:`u` in the augmented space (:math:`y\,u\cdot[x, 1] \ge
\gamma`), with :math:`R = \max\lVert[x, 1]\rVert` (as :mod:`~stream_perceptron.model.stats`
measures it with an intercept; :math:`\lVert x\rVert` without one),

.. math:: \sum_n \sum_i \mu_{i,n} k_{i,n} \le (R/\gamma)^2 .

Proof sketch: a mistake adds at least γ to :math:`u\cdot w` and at most :math:`R^2` to
:math:`\lVert w\rVert^2`; mixing is a convex combination, which keeps the first sum linear and,
by convexity of the squared norm, does not increase the second; so with :math:`M = \sum\mu k`,
:math:`M\gamma \le u\cdot w_N \le \lVert w_N\rVert \le R\sqrt{M}`. An epoch with any mistake has
:math:`\sum_i\mu_{i,n}k_{i,n} \ge 1/S` under either weighting, so synchronous IPM reaches a clean
epoch (no shard makes a mistake; the mix then separates all the data) within
:math:`S(R/\gamma)^2` epochs.

**Fixed order.** :func:`mix` sums the states in increasing partition number, starting from the
first state's weighted term, so a mix is bit-for-bit a function of its inputs (what exact replay
relies on), and a single partition mixes to itself exactly (μ = 1.0 and 1.0·θ = θ).

**Widths.** States of different widths are mixed as if the shorter were padded with zeros (a
weight not yet learned is 0). That is right only when index *j* means the same feature in every
partition: dense rows, hashed names (``hash_bits``), or an index of names agreed across
partitions (append-only, in the order the mix first saw them); per-partition name indices are not.

Three entry points: :func:`mix` and :func:`adopt` (what a worker does at one partition's
mixing point),
:func:`ipm` (synchronous IPM, the theorem's setting) and :func:`simulate_stream` (mixing on a
stream without a barrier, as the worker would).

>>> import numpy as np
>>> a = Published(partition=1, weights=np.array([1.0, 0.0]), intercept=1.0, mistakes=3, epoch=4, offset=90)
>>> b = Published(partition=0, weights=np.array([0.0, 2.0]), intercept=-1.0, mistakes=1, epoch=4, offset=80)
>>> m = mix([a, b], "mistakes")
>>> m.weights.tolist(), m.intercept, m.partitions, m.mu
([0.75, 0.5], 0.5, (0, 1), (0.25, 0.75))
>>> mix([a, b]).mu, mix([a]).weights.tolist() == a.weights.tolist()
((0.5, 0.5), True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from stream_perceptron.model.perceptron import Perceptron

FloatArray = npt.NDArray[np.float64]
Weighting = Literal["uniform", "mistakes"]
WEIGHTINGS: tuple[Weighting, ...] = ("uniform", "mistakes")


@dataclass(frozen=True)
class Published:
    """One partition's state as it publishes it at the end of its epoch.

    ``mistakes`` is k, the mistakes made in this epoch (since it last adopted a mix);
    ``epoch`` counts its mixing points; ``offset`` is the input offset the state reflects.
    """

    partition: int
    weights: FloatArray
    intercept: float
    mistakes: int
    epoch: int
    offset: int

    def record(self) -> dict[str, Any]:
        """JSON-ready (floats round-trip exactly through JSON)."""
        return {"partition": self.partition, "weights": self.weights.tolist(),
                "intercept": self.intercept, "mistakes": self.mistakes, "epoch": self.epoch,
                "offset": self.offset}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Published:
        """What :meth:`record` wrote."""
        return cls(int(record["partition"]), np.array(record["weights"], dtype=np.float64),
                   float(record["intercept"]), int(record["mistakes"]), int(record["epoch"]),
                   int(record["offset"]))


@dataclass(frozen=True)
class Mix:
    """A mixed model and what it came from: the partitions (increasing), each one's epoch,
    offset and mistakes, the μ given to each, and the rule that made μ."""

    weights: FloatArray
    intercept: float
    partitions: tuple[int, ...]
    epochs: tuple[int, ...]
    offsets: tuple[int, ...]
    mistakes: tuple[int, ...]
    mu: tuple[float, ...]
    rule: Weighting

    @property
    def weighted_mistakes(self) -> float:
        """Σᵢ μᵢ kᵢ of this mix: its term of the bound's sum."""
        return float(sum(m * k for m, k in zip(self.mu, self.mistakes, strict=True)))

    def record(self) -> dict[str, Any]:
        """JSON-ready: the mixed θ and θ0 with their sources."""
        return {"weights": self.weights.tolist(), "intercept": self.intercept,
                "partitions": list(self.partitions), "epochs": list(self.epochs),
                "offsets": list(self.offsets), "mistakes": list(self.mistakes),
                "mu": list(self.mu), "rule": self.rule}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Mix:
        """What :meth:`record` wrote, bit for bit (JSON floats round-trip exactly)."""
        rule = record["rule"]
        if rule not in WEIGHTINGS:
            raise ValueError(f"a mix's rule is one of {', '.join(WEIGHTINGS)}, got {rule!r}")
        return cls(np.array(record["weights"], dtype=np.float64), float(record["intercept"]),
                   tuple(int(p) for p in record["partitions"]), tuple(int(e) for e in record["epochs"]),
                   tuple(int(o) for o in record["offsets"]), tuple(int(k) for k in record["mistakes"]),
                   tuple(float(m) for m in record["mu"]), rule)


@dataclass
class MixLog:
    """One partition's mixing, as its stored state keeps it (``stats["mix"]``).

    ``labeled``: labeled examples learned since the last mixing point (a mixing point comes when
    it reaches E); ``epoch``: mixing points so far (the mix version); ``mistakes_at``: the
    model's mistake count at the last mixing point, so k = mistakes − mistakes_at;
    ``sum_mu_k``: the running Σₙ Σᵢ μᵢ,ₙ kᵢ,ₙ of this partition's adoptions; ``last``: the latest
    adoption ``{"offset", "epoch", "mix"}`` (``offset``: the input offset of the first record
    after it); ``replay``: adoptions logged on the model topic past the stored state's offset,
    by offset, which a replay adopts instead of mixing anew (docs/mixing.md, "Exact on replay").
    """

    labeled: int = 0
    epoch: int = 0
    mistakes_at: int = 0
    sum_mu_k: float = 0.0
    last: dict[str, Any] | None = None
    replay: dict[int, dict[str, Any]] = field(default_factory=dict)

    def get_state(self) -> dict[str, Any]:
        return {"labeled": self.labeled, "epoch": self.epoch, "mistakes_at": self.mistakes_at,
                "sum_mu_k": self.sum_mu_k, "last": self.last}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> MixLog:
        return cls(int(state["labeled"]), int(state["epoch"]), int(state["mistakes_at"]),
                   float(state["sum_mu_k"]), state.get("last"))

    def remaining(self, every: int) -> int:
        """Labeled examples still to learn before the next mixing point."""
        return every - self.labeled

    def adopted(self, offset: int, mixed: Mix, mistakes: int) -> dict[str, Any]:
        """Account for an adoption at ``offset`` (the model held ``mistakes`` then); returns its
        log entry."""
        self.epoch += 1
        self.labeled, self.mistakes_at = 0, mistakes
        self.sum_mu_k += mixed.weighted_mistakes
        self.last = {"offset": offset, "epoch": self.epoch, "mix": mixed.record()}
        return self.last


def mixing_weights(
    mistakes: Sequence[int], weights: Weighting = "uniform"
) -> tuple[tuple[float, ...], Weighting]:
    """μ for states with these k (in partition order), and the rule applied.

    >>> mixing_weights([1, 3], "mistakes"), mixing_weights([0, 0], "mistakes")
    (((0.25, 0.75), 'mistakes'), ((0.5, 0.5), 'uniform'))
    """
    if weights not in WEIGHTINGS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTINGS)}, got {weights!r}")
    if not mistakes:
        raise ValueError("nothing to mix")
    if any(k < 0 for k in mistakes):
        raise ValueError(f"mistakes must be >= 0, got {list(mistakes)}")
    total = sum(mistakes)  # integers: exact
    if weights == "mistakes" and total > 0:
        return tuple(k / total for k in mistakes), "mistakes"
    return tuple(1.0 / len(mistakes) for _ in mistakes), "uniform"


def mix(states: Iterable[Published], weights: Weighting = "uniform") -> Mix:
    """The mix Σ μᵢ [θᵢ, θ0ᵢ] of the states (one per partition), summed in partition order."""
    ordered = sorted(states, key=lambda s: s.partition)
    parts = [s.partition for s in ordered]
    if len(set(parts)) != len(parts):
        raise ValueError(f"one state per partition, got partitions {parts}")
    mu, rule = mixing_weights([s.mistakes for s in ordered], weights)
    width = max(len(s.weights) for s in ordered)
    theta = mu[0] * _padded(ordered[0].weights, width)
    theta0 = mu[0] * ordered[0].intercept
    for m, s in zip(mu[1:], ordered[1:], strict=True):
        theta = theta + m * _padded(s.weights, width)
        theta0 = theta0 + m * s.intercept
    return Mix(theta, theta0, tuple(parts), tuple(s.epoch for s in ordered),
               tuple(s.offset for s in ordered), tuple(s.mistakes for s in ordered), mu, rule)


def adopt(model: Perceptron, mixed: Mix) -> None:
    """Replace the model's [θ, θ0] by the mix, keeping the rest of its state.

    Kept: its mistake count, feature names and labels taught. Dropped: the kept ‖θ‖² (recomputed
    from the new θ) and, with ``average=True``, the averaging sums, so the average restarts from
    the mixed θ (averages of weights before a mix are not averages of the mixed model). A mix
    wider than the model (names the partition has not indexed yet) is refused by
    :meth:`Perceptron.set_state` only when the model's width is fixed.

    >>> import numpy as np
    >>> model = Perceptron()
    >>> model.learn_one([1.0, 2.0], 1)
    True
    >>> adopt(model, mix([Published(0, np.array([0.5, 0.0]), -1.0, 0, 0, 0)]))
    >>> model.weights.tolist(), model.intercept, model.mistakes
    ([0.5, 0.0], -1.0, 1)
    """
    state = model.get_state()
    state.pop("theta_sq", None)
    state.pop("average", None)
    state["weights"], state["intercept"] = mixed.weights, mixed.intercept
    model.set_state(state)


def _padded(w: FloatArray, width: int) -> FloatArray:
    w = np.asarray(w, dtype=np.float64)
    return w if len(w) == width else np.concatenate([w, np.zeros(width - len(w))])


def _model(weights: FloatArray, intercept: float, fit_intercept: bool) -> Perceptron:
    """A perceptron holding exactly [θ, θ0] (set_state copies the array, bit for bit)."""
    model = Perceptron(fit_intercept=fit_intercept)
    model.set_state({"weights": weights, "intercept": intercept, "mistakes": 0})
    return model


# ---------------------------------------------------------------------------- synchronous IPM
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

    @property
    def total_mistakes(self) -> int:
        return sum(sum(e.mistakes) for e in self.epochs)


def ipm(
    shards: Sequence[tuple[FloatArray, npt.NDArray[Any]]],
    weights: Weighting = "uniform",
    *,
    max_epochs: int = 1000,
    fit_intercept: bool = True,
) -> IPMRun:
    """Synchronous iterative parameter mixing over dense shards ``(X_i, y_i)`` (y in ±1 or 0/1).

    Each epoch every shard i runs one pass over its rows with :class:`Perceptron` from the mixed
    weights (zero at first), making kᵢ mistakes; the shards' weights are then mixed by
    :func:`mix` (shard i is partition i). Stops after the first clean epoch (every k = 0: the
    mix is kept as it is, since every shard still holds it) or after ``max_epochs``. On data
    separable with margin γ and radius R, ``epochs[-1].running`` ≤ (R/γ)² (module docstring).

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
    epoch: int = 0


@dataclass
class StreamRun:
    """What :func:`simulate_stream` measured.

    ``pass_mistakes[p]``: mistakes of all partitions in pass p; ``mixes``: every adoption, in
    order; ``sum_mu_k``: Σ over adoptions of Σᵢ μᵢ kᵢ, divided by the number of partitions (a
    synchronous round is P adoptions of one mix, so this equals :func:`ipm`'s running sum there);
    ``age_examples``/``age_epochs``: for every state mixed from another partition, how many
    examples of the whole stream had passed since it was published, and how many epochs the
    adopting partition was ahead of it. ``final``: the mix, with the run's weighting, of every
    partition's last state (what a reader of the model topic would score with); unmixed, their
    uniform average (one-shot averaging, which the bound does not cover); None if no example
    was learned.
    """

    pass_mistakes: list[int] = field(default_factory=list)
    mixes: list[Mix] = field(default_factory=list)
    sum_mu_k: float = 0.0
    age_examples: list[int] = field(default_factory=list)
    age_epochs: list[int] = field(default_factory=list)
    models: list[Perceptron] = field(default_factory=list)
    final: Mix | None = None

    @property
    def clean_pass(self) -> int | None:
        """The first pass (1-based) with no mistake, or None."""
        return next((p + 1 for p, k in enumerate(self.pass_mistakes) if k == 0), None)


def simulate_stream(
    X: FloatArray,
    y: npt.NDArray[Any],
    *,
    partitions: int = 8,
    every: int = 200,
    weights: Weighting | None = "uniform",
    assign: npt.NDArray[np.intp] | None = None,
    passes: int = 1,
    fit_intercept: bool = True,
) -> StreamRun:
    """Mixing on a stream, without a barrier: the worker's behaviour, partition by partition.

    Example t (every one labeled) goes to partition ``assign[t]`` (round-robin, t mod P, when
    None; pass the key's partition for keyed routing) and is learned by that partition's
    perceptron with Rosenblatt's update. Each time a partition has learned ``every`` examples it
    publishes :class:`Published` (θ, θ0, its k since its last adoption, its epoch, its count)
    and adopts the :func:`mix` of the newest published state of every partition that has
    published (itself included); a partition that is idle keeps its last published state in
    the mix, however old, and never holds the others back. ``weights=None`` never mixes (P
    independent models). The stream is replayed up to ``passes`` times, stopping after a pass
    with no mistake; at the end every partition publishes once more and ``final`` is their mix.

    Partitions do not interact between mixing points, so the rows between two consecutive
    mixing points are learned in one ``learn_many`` per partition: the same decisions as
    example by example in stream order.
    """
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
    return Published(q, p.model.weights.copy(), p.model.intercept, p.since, p.epoch, p.seen)


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
            run.age_epochs.append(p.epoch - s.epoch)
    run.mixes.append(mixed)
    run.sum_mu_k += mixed.weighted_mistakes / len(ps)
    adopt(p.model, mixed)
    p.since = 0
    p.epoch += 1
