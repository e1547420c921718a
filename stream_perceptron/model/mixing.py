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

The entry points: :func:`mix` and :func:`adopt`, what a worker does at one partition's mixing
point.

>>> import numpy as np
>>> a = Published(partition=1, weights=np.array([1.0, 0.0]), intercept=1.0, mistakes=3, version=4, offset=90)
>>> b = Published(partition=0, weights=np.array([0.0, 2.0]), intercept=-1.0, mistakes=1, version=4, offset=80)
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


def weights_record(w: FloatArray) -> list[float] | dict[str, Any]:
    """Weights as a model-topic record holds them: a list, or, when at most a quarter of them
    are not +0.0 (a wide hashed model), ``{"size", "at", "values"}`` of those alone. JSON floats
    round-trip, and -0.0 is kept where it is, so :func:`weights_from` gives them back bit for bit.

    >>> w = np.zeros(16); w[[2, 5]] = [1.5, -0.0]
    >>> weights_record(w)
    {'size': 16, 'at': [2, 5], 'values': [1.5, -0.0]}
    >>> weights_from(weights_record(w)).tobytes() == w.tobytes()
    True
    """
    at = np.flatnonzero(np.ascontiguousarray(w, dtype=np.float64).view(np.uint64))  # -0.0 counts
    if len(w) < 16 or 4 * len(at) > len(w):
        return [float(v) for v in w]
    return {"size": len(w), "at": at.tolist(), "values": w[at].tolist()}


def weights_from(record: list[float] | dict[str, Any]) -> FloatArray:
    """What :func:`weights_record` wrote (a list, or the sparse form)."""
    if isinstance(record, dict):
        w = np.zeros(int(record["size"]), dtype=np.float64)
        w[np.array(record["at"], dtype=np.intp)] = np.array(record["values"], dtype=np.float64)
        return w
    return np.array(record, dtype=np.float64)


@dataclass(frozen=True)
class Published:
    """One partition's state as it publishes it at the end of its round (at a mixing point).

    ``mistakes`` is k, the mistakes made in this round (since it last adopted a mix);
    ``version`` counts its mixing points (its mix version; the record's field ``epoch``);
    ``offset`` is the input offset the state reflects.
    """

    partition: int
    weights: FloatArray
    intercept: Any
    """θ0, or a K-class model's intercepts (one per class)."""
    mistakes: int
    version: int
    offset: int
    classes: tuple[Any, ...] | None = None
    """A K-class model's classes, naming the rows of ``weights`` (None: binary)."""

    def record(self) -> dict[str, Any]:
        """JSON-ready (floats round-trip exactly through JSON); a K-class state's ``weights``
        are its rows, ``intercept`` a list, and ``classes`` names them."""
        record: dict[str, Any] = {
            "partition": self.partition, "weights": _weights_record(self.weights, self.classes),
            "intercept": _intercept_record(self.intercept, self.classes), "mistakes": self.mistakes,
            "epoch": self.version, "offset": self.offset}
        if self.classes is not None:
            record["classes"] = list(self.classes)
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Published:
        """What :meth:`record` wrote."""
        classes = _classes_from(record)
        weights, intercept = _weights_from(record, classes)
        return cls(int(record["partition"]), weights, intercept, int(record["mistakes"]),
                   int(record["epoch"]), int(record["offset"]), classes)


@dataclass(frozen=True)
class Mix:
    """A mixed model and what it came from: the partitions (increasing), each one's mix version
    (the record's field ``epochs``), offset and mistakes, the μ given to each, and the rule that
    made μ."""

    weights: FloatArray
    intercept: Any
    partitions: tuple[int, ...]
    versions: tuple[int, ...]
    offsets: tuple[int, ...]
    mistakes: tuple[int, ...]
    mu: tuple[float, ...]
    rule: Weighting
    classes: tuple[Any, ...] | None = None
    """A K-class mix's classes (the union, in row order), naming the rows (None: binary)."""

    @property
    def weighted_mistakes(self) -> float:
        """Σᵢ μᵢ kᵢ of this mix: its term of the bound's sum."""
        return float(sum(m * k for m, k in zip(self.mu, self.mistakes, strict=True)))

    def record(self) -> dict[str, Any]:
        """JSON-ready: the mixed θ and θ0 (W, b and the classes) with their sources."""
        record: dict[str, Any] = {
            "weights": _weights_record(self.weights, self.classes),
            "intercept": _intercept_record(self.intercept, self.classes),
            "partitions": list(self.partitions), "epochs": list(self.versions),
            "offsets": list(self.offsets), "mistakes": list(self.mistakes),
            "mu": list(self.mu), "rule": self.rule}
        if self.classes is not None:
            record["classes"] = list(self.classes)
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Mix:
        """What :meth:`record` wrote, bit for bit (JSON floats round-trip exactly)."""
        rule = record["rule"]
        if rule not in WEIGHTINGS:
            raise ValueError(f"a mix's rule is one of {', '.join(WEIGHTINGS)}, got {rule!r}")
        classes = _classes_from(record)
        weights, intercept = _weights_from(record, classes)
        return cls(weights, intercept,
                   tuple(int(p) for p in record["partitions"]), tuple(int(e) for e in record["epochs"]),
                   tuple(int(o) for o in record["offsets"]), tuple(int(k) for k in record["mistakes"]),
                   tuple(float(m) for m in record["mu"]), rule, classes)


@dataclass
class MixLog:
    """One partition's mixing, as its stored state keeps it (``stats["mix"]``).

    ``labeled``: labeled examples learned since the last mixing point (a mixing point comes when
    it reaches E); ``version``: mixing points so far (the mix version; ``epoch`` in the stored
    state and the adoption log, the field's old name); ``mistakes_at``: the
    model's mistake count at the last mixing point, so k = mistakes − mistakes_at;
    ``sum_mu_k``: the running Σₙ Σᵢ μᵢ,ₙ kᵢ,ₙ of this partition's adoptions; ``last``: the latest
    adoption ``{"offset", "epoch", "mix"}`` (``offset``: the input offset of the first record
    after it; with ``"stale"`` and ``"waited_s"`` when it waited for, or went on without,
    partitions behind: see docs/mixing.md, "Bounded staleness"); ``paused_s``: seconds the
    partition spent waiting at its mixing points for others; ``overdue``: mixing points whose
    wait ran out (``SP_MIX__MAX_WAIT_S``) with partitions still behind; ``replay``: adoptions
    logged on the model topic past the stored state's offset, by offset, which a replay adopts
    instead of mixing anew (docs/mixing.md, "Exact on replay").
    """

    labeled: int = 0
    version: int = 0
    mistakes_at: int = 0
    sum_mu_k: float = 0.0
    last: dict[str, Any] | None = None
    paused_s: float = 0.0
    overdue: int = 0
    replay: dict[int, dict[str, Any]] = field(default_factory=dict)

    def get_state(self) -> dict[str, Any]:
        return {"labeled": self.labeled, "epoch": self.version, "mistakes_at": self.mistakes_at,
                "sum_mu_k": self.sum_mu_k, "last": self.last, "paused_s": self.paused_s,
                "overdue": self.overdue}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> MixLog:
        return cls(int(state["labeled"]), int(state["epoch"]), int(state["mistakes_at"]),
                   float(state["sum_mu_k"]), state.get("last"), float(state.get("paused_s", 0.0)),
                   int(state.get("overdue", 0)))

    def remaining(self, every: int) -> int:
        """Labeled examples still to learn before the next mixing point."""
        return every - self.labeled

    def adopted(self, offset: int, mixed: Mix, mistakes: int, extra: dict[str, Any] | None = None
                ) -> dict[str, Any]:
        """Account for an adoption at ``offset`` (the model held ``mistakes`` then); returns its
        log entry, with the fields of ``extra`` (what the wait before it found)."""
        self.version += 1
        self.labeled, self.mistakes_at = 0, mistakes
        self.sum_mu_k += mixed.weighted_mistakes
        self.last = {"offset": offset, "epoch": self.version, "mix": mixed.record(), **(extra or {})}
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


def mix(states: Iterable[Published], weights: Weighting = "uniform", *, first: Sequence[Any] = (),
        limit: int | None = None) -> Mix:
    """The mix Σ μᵢ [θᵢ, θ0ᵢ] of the states (one per partition), summed in partition order.

    K-class states are mixed row by row, aligned by class name: the mix's classes are ``first``
    (the adopting partition's own), then each state's other classes in increasing partition
    order, at most ``limit`` of them (never fewer than ``first``); a state contributes zero
    rows for the classes it does not hold, as a class is a zero row until it first appears.
    """
    ordered = sorted(states, key=lambda s: s.partition)
    parts = [s.partition for s in ordered]
    if len(set(parts)) != len(parts):
        raise ValueError(f"one state per partition, got partitions {parts}")
    mu, rule = mixing_weights([s.mistakes for s in ordered], weights)
    if len({s.classes is None for s in ordered}) > 1:
        raise ValueError(f"binary and K-class states cannot be mixed (partitions {parts}): one"
                         " SP_MODEL__CLASSES / SP_MODEL__MULTICLASS for every worker of the input")
    if ordered[0].classes is not None:
        return _mix_classes(ordered, mu, rule, first, limit)
    width = max(len(s.weights) for s in ordered)
    theta = mu[0] * _padded(ordered[0].weights, width)
    theta0 = mu[0] * ordered[0].intercept
    for m, s in zip(mu[1:], ordered[1:], strict=True):
        theta = theta + m * _padded(s.weights, width)
        theta0 = theta0 + m * s.intercept
    return Mix(theta, theta0, tuple(parts), tuple(s.version for s in ordered),
               tuple(s.offset for s in ordered), tuple(s.mistakes for s in ordered), mu, rule)


def _mix_classes(ordered: list[Published], mu: tuple[float, ...], rule: Weighting, first: Sequence[Any],
                 limit: int | None) -> Mix:
    """:func:`mix` of K-class states: rows aligned by class name (see there)."""
    names: dict[Any, int] = {}
    for c in [*first, *(c for s in ordered for c in s.classes or ())]:
        names.setdefault(c, len(names))
    if limit is not None:
        names = {c: i for c, i in names.items() if i < max(limit, len(first))}
    k = len(names)
    width = max(s.weights.shape[1] for s in ordered)
    total_w: Any = None
    total_b: Any = None
    for m, s in zip(mu, ordered, strict=True):
        w, b = np.zeros((k, width)), np.zeros(k)
        for j, c in enumerate(s.classes or ()):
            i = names.get(c)
            if i is not None:
                w[i, : s.weights.shape[1]] = s.weights[j]
                b[i] = s.intercept[j]
        if total_w is None:
            total_w, total_b = m * w, m * b
        else:
            total_w, total_b = total_w + m * w, total_b + m * b
    assert total_w is not None
    return Mix(total_w, total_b, tuple(s.partition for s in ordered), tuple(s.version for s in ordered),
               tuple(s.offset for s in ordered), tuple(s.mistakes for s in ordered), mu, rule, tuple(names))


def _weights_record(w: FloatArray, classes: tuple[Any, ...] | None) -> Any:
    return weights_record(w) if classes is None else [weights_record(row) for row in w]


def _intercept_record(b: Any, classes: tuple[Any, ...] | None) -> Any:
    return b if classes is None else [float(v) for v in b]


def _classes_from(record: dict[str, Any]) -> tuple[Any, ...] | None:
    classes = record.get("classes")
    return None if classes is None else tuple(classes)


def _weights_from(record: dict[str, Any], classes: tuple[Any, ...] | None) -> tuple[FloatArray, Any]:
    if classes is None:
        return weights_from(record["weights"]), float(record["intercept"])
    rows = [weights_from(r) for r in record["weights"]]
    width = max((len(r) for r in rows), default=0)
    w = np.zeros((len(rows), width))
    for i, r in enumerate(rows):
        w[i, : len(r)] = r
    return w, np.array(record["intercept"], dtype=np.float64)


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
    >>> adopt(model, mix([Published(0, np.array([0.5, 0.0]), -1.0, 0, 0, 0)]))
    >>> model.weights.tolist(), model.intercept, model.mistakes
    ([0.5, 0.0], -1.0, 1)
    """
    state = model.get_state()
    state.pop("theta_sq", None)
    state.pop("average", None)
    state["weights"], state["intercept"] = mixed.weights, mixed.intercept
    if mixed.classes is not None:  # a K-class mix: its classes begin with the model's own
        state["classes"] = list(mixed.classes)
    model.set_state(state)


def _padded(w: FloatArray, width: int) -> FloatArray:
    w = np.asarray(w, dtype=np.float64)
    return w if len(w) == width else np.concatenate([w, np.zeros(width - len(w))])
