r"""Rosenblatt's perceptron, exactly as the textbooks state it (docs/glossary.md cites them).

The model is a hyperplane :math:`\theta \cdot x + \theta_0 = 0`. For a labeled example
:math:`(x, y)` with :math:`y \in \{-1, +1\}`:

* it is a **mistake** when :math:`y(\theta \cdot x + \theta_0) \le 0`; a point on the boundary
  counts as a mistake (as the training error of MIT 6.036's notes, "Perceptron", counts it), so
  the first example seen from zero weights always updates;
* on a mistake, and only then, :math:`\theta \leftarrow \theta + y x` and
  :math:`\theta_0 \leftarrow \theta_0 + y` (Rosenblatt 1958).

With ``fit_intercept=False`` this is the perceptron through the origin (Tao, "Perceptron",
lecture notes, CUHK): :math:`\theta_0` stays 0. The offset form equals the through-origin form
on augmented vectors :math:`[x, 1]` with weights :math:`[\theta, \theta_0]` (Tao's reduction;
Duda, Hart & Stork, *Pattern Classification*, §5.5), which is why the statistics measure
:math:`R` and :math:`\gamma` on the augmented vectors.

Scores are computed row by row with one fixed summation order, the same in
:meth:`Perceptron.learn_one` and :meth:`Perceptron.learn_many` whatever the block size, so a
stream replayed in different batches makes bit-identical decisions and weights. A dense row is
summed as ``(x * w).sum()`` over all its columns. A row of named features is held sparse
(:class:`~stream_perceptron.model.sparse.SparseRows`) and summed over its own features only, in the
order of its keys, so its cost is its number of features, not the model's width.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from river import base

from stream_perceptron.errors import DimensionError
from stream_perceptron.model import dense_pass
from stream_perceptron.model.hashing import FeatureHasher
from stream_perceptron.model.labels import LabelSpace, Signs
from stream_perceptron.model.sparse import SparseRows, dot_rows, segment_sums

FloatArray = npt.NDArray[np.float64]
Features = Mapping[str, float] | Sequence[float] | FloatArray
Rows = FloatArray | SparseRows
"""What :meth:`Perceptron.vectorize_many` returns: a dense matrix, or sparse rows of named features."""

# learn_many's general loop (sparse rows, or averaging): its first block, and the fewest rows of a
# block after a mistake. Every row of a block is scored in full, and those past its first mistake
# again in the next block, so after a mistake a block is about twice the stretch before it (unlike
# the dense pass's margins, dense_pass._MIN_MARGIN_BLOCK, which cost little a row)
_MIN_SCORED_BLOCK = 16
_MAX_BLOCK = 4096
_BLOCK_BYTES = 8 << 20  # the scoring temporary of one block stays under 8 MiB, however wide x is
_FIXED_BY_DENSE = "x has named features but the model was fixed by dense vectors"


class Refusal(str):
    """Why a row does not fit the model (the text itself), with its ``kind``: ``"names"`` when
    its new feature names would take the model past its bound on names, ``"width"`` when it
    does not fit the model's width (or dense vectors fixed the model and it is named)."""

    kind: str

    def __new__(cls, reason: str, kind: str) -> Refusal:
        refusal = super().__new__(cls, reason)
        refusal.kind = kind
        return refusal


class BatchResult(NamedTuple):
    """What :meth:`Perceptron.learn_many` reports for each row, all taken *before* that row's update.

    ``labels`` are the labels' signs, −1/+1, or 0 for an unlabeled row (scored, never learned).
    ``scores`` are θ·x+θ0 of the learning weights and ``mistakes`` their mistakes (y·score ≤ 0), which
    drive the update. ``served_scores`` are the scores of the model served (the averaged weights
    with ``average=True``, else ``scores`` itself); ``predictions`` are their signs, −1/+1, and
    ``served_mistakes`` the served model's own errors (``y·served ≤ 0`` on labeled rows).
    ``theta_norm`` is ‖θ‖ and ``theta_norm_aug`` is ‖[θ, θ0]‖ of the learning weights.
    """

    scores: FloatArray
    predictions: npt.NDArray[np.int8]
    mistakes: npt.NDArray[np.bool_]
    labels: Signs
    theta_norm: FloatArray
    theta_norm_aug: FloatArray
    served_scores: FloatArray
    served_mistakes: npt.NDArray[np.bool_]


class Perceptron(base.Classifier):
    r"""Mistake-driven linear classifier: Rosenblatt's perceptron, online.

    Parameters
    ----------
    n_features
        The dimension of θ. ``None`` fixes it from the first dense example; named (dict) features
        are mapped to indices in the order their names first appear, up to ``n_features`` when set.
    fit_intercept
        Learn the offset θ0. ``False`` gives perceptron-through-origin.
    initial_weights
        A starting θ (θ0 starts at 0). By default θ = 0.
    max_names
        With ``n_features`` unset, the most feature names indexed (``None``: no bound). A row
        bringing new names past either bound is refused, and no name of it is indexed. It bounds
        memory, not the model, so a checkpoint does not record it.
    average
        Serve the averaged weights (Freund & Schapire 1999; Collins 2002). The model still learns
        with Rosenblatt's update on θ; :meth:`predict_one`, :meth:`score_one` and
        :meth:`predict_proba_one` answer with :math:`\bar\theta = \frac1T\sum_{t=1}^{T}\theta_t`,
        the mean of the weights after each of the T labeled examples learned (θ before the first).
    hash_bits
        Map feature names to :math:`2^b` columns with a stable hash
        (:mod:`~stream_perceptron.model.hashing`) instead of indexing each name: the model's width,
        memory and checkpoints stay the same however many names arrive; colliding names share a
        weight. ``n_features`` is then :math:`2^b`.
    hash_sign
        With ``hash_bits``, also give each name a hashed sign (colliding names then cancel on
        average instead of adding).
    classes
        Two class names, ``(negative, positive)``, accepted as labels and predicted.

    Notes
    -----
    **Labels.** The update works on signs; labels are mapped to them by
    :class:`~stream_perceptron.model.labels.LabelSpace`: ``True``, ``1`` and the positive class
    are +1; ``False``, ``0``, ``-1`` and the negative class are −1 (0 is the negative class
    everywhere). :meth:`predict_one` answers in the label space taught: bools give bools, ±1 gives
    ±1, 0/1 gives 0/1, class names give those names. It predicts the positive label when the
    score is > 0, else the negative one; a point on the boundary (score 0) is still counted a
    mistake for either label, as the perceptron's texts do.

    **Probabilities.** :meth:`predict_proba_one` gives the positive class
    :math:`\sigma(s) = 1/(1 + e^{-s})` of the served score :math:`s`, as river's Perceptron does.
    It is a monotone squashing of the score, so rank-based metrics such as ROC AUC work, but it
    is **not a calibrated probability**: the perceptron fits no likelihood and the score's scale
    grows with ‖θ‖.

    **Averaging is lazy.** With :math:`n_s` the number of labeled examples learned before a
    mistake :math:`s` whose update is :math:`\Delta_s = y_s x_s`, the model keeps
    :math:`u = \sum_s n_s \Delta_s` beside θ (and :math:`u_0` beside θ0); after T examples
    :math:`\bar\theta = \theta - u / T`. A mistake costs the row's features, not the model's
    width, and an example without a mistake costs nothing. The served score of a row is
    :math:`(\theta \cdot x + \theta_0) - (u \cdot x + u_0)/T`, summed in the fixed order of
    the learning score, so learn_one and learn_many serve the same floats. ``u`` grows as
    :math:`T^2`: past about :math:`10^8` examples the served weights lose digits to rounding
    (still deterministic, so replay stays exact).

    Examples
    --------
    The worked example of Tao's "Perceptron" (lecture notes, CUHK): four points, through the origin.

    >>> from stream_perceptron import Perceptron
    >>> model = Perceptron(fit_intercept=False)
    >>> points = [([1, 0], 1), ([0, -1], -1), ([0, 1], 1), ([-1, 0], -1)]
    >>> model.fit([p for p, _ in points], [y for _, y in points], passes=10)
    [2, 0]
    >>> model.weights.tolist(), model.updates
    ([1.0, 1.0], 2)

    Named features map to stable indices, and labels come back as taught:

    >>> model = Perceptron()
    >>> model.learn_one({"a": 2.0, "b": -1.0}, True)
    True
    >>> model.predict_one({"a": 1.0}), model.score_one({"a": 1.0})
    (True, 3.0)
    >>> round(model.predict_proba_one({"a": 1.0})[True], 4)  # σ(3): a squashed score
    0.9526

    0 is the negative class; taught 0/1, the model answers 0/1:

    >>> model = Perceptron()
    >>> model.learn_many([[1.0], [-1.0]], [1, 0]).mistakes.tolist()
    [True, True]
    >>> model.predict_one([3.0]), model.predict_one([-3.0])
    (1, 0)
    """

    def __init__(
        self,
        n_features: int | None = None,
        fit_intercept: bool = True,
        initial_weights: Sequence[float] | None = None,
        max_names: int | None = None,
        average: bool = False,
        hash_bits: int | None = None,
        hash_sign: bool = False,
        classes: tuple[Any, Any] | None = None,
    ) -> None:
        self.n_features = n_features
        self.max_names = max_names
        self.fit_intercept = fit_intercept
        self.initial_weights = initial_weights
        self.average = average
        self.hash_bits = hash_bits
        self.hash_sign = hash_sign
        self.classes = classes
        self._w: FloatArray | None = None
        self._b = 0.0
        self._updates = 0
        # ‖θ‖², kept up to date by sparse updates (a mistake then costs the row's features, not
        # the model's width); None: the full sum over θ, as after a dense update
        self._sq: float | None = None
        self._index: dict[str, int] = {}
        self._names_refused = 0
        self._labels = LabelSpace(None if classes is None else (classes[0], classes[1]))
        # averaging (lazy): u = Σ n_s Δ_s beside θ, u0 beside θ0, T labeled examples learned
        self._u: FloatArray | None = None
        self._ub = 0.0
        self._steps = 0
        self._hasher: FeatureHasher | None = None
        width = n_features
        if hash_bits is not None:
            self._hasher = FeatureHasher(hash_bits, hash_sign)
            if n_features is not None and n_features != 1 << hash_bits:
                raise ValueError(
                    f"n_features is {n_features} but hash_bits={hash_bits} makes {1 << hash_bits}"
                )
            width = 1 << hash_bits
        if initial_weights is not None:
            w = np.array(initial_weights, dtype=np.float64).ravel()
            if width is not None and len(w) != width:
                raise ValueError(f"initial_weights has {len(w)} entries but n_features is {width}")
            self._w = w.copy()
        elif width is not None:
            self._w = np.zeros(width, dtype=np.float64)

    @classmethod
    def _unit_test_params(cls) -> Any:
        yield {}
        yield {"average": True}
        yield {"hash_bits": 8, "hash_sign": True}

    # ------------------------------------------------------------------ learned state
    @property
    def weights(self) -> FloatArray:
        """θ (a read-only view; empty before the dimension is known)."""
        if self._w is None:
            return np.zeros(0, dtype=np.float64)
        view = self._w.view()
        view.flags.writeable = False
        return view

    @property
    def intercept(self) -> float:
        """θ0 (always 0 without an intercept)."""
        return self._b

    @property
    def updates(self) -> int:
        """Updates of θ so far: one per labeled example learned with y(θ·x+θ0) ≤ 0, counted from
        the state this model began at (an initial model's updates included)."""
        return self._updates

    @property
    def mistakes(self) -> int:
        """The old name of :attr:`updates`, kept."""
        return self._updates

    @property
    def averaged_weights(self) -> FloatArray:
        """θ̄, the weights served with ``average=True`` (θ itself otherwise, or before any label)."""
        w = self.weights
        if not self.average or self._u is None or not self._steps:
            return w
        return w - self._u / self._steps

    @property
    def averaged_intercept(self) -> float:
        """θ̄0, the intercept served with ``average=True`` (θ0 otherwise)."""
        if not self.average or not self._steps:
            return self._b
        return self._b - self._ub / self._steps

    @property
    def dim(self) -> int | None:
        """The current dimension of θ, or None before the first example."""
        return None if self._w is None else len(self._w)

    @property
    def feature_names(self) -> list[str]:
        """Named features in index order (empty when only dense vectors were seen)."""
        return sorted(self._index, key=self._index.__getitem__)

    @property
    def n_names(self) -> int:
        """How many feature names are indexed (``len(feature_names)``, without listing them)."""
        return len(self._index)

    @property
    def name_limit(self) -> int | None:
        """The most names this model indexes: ``n_features`` when set, else ``max_names``; None
        with hashing (names are not indexed)."""
        if self._hasher is not None:
            return None
        return self.n_features if self.n_features is not None else self.max_names

    @property
    def names_refused(self) -> int:
        """Rows refused so far because their new names would take the model past
        :attr:`name_limit` (counted by this object; not part of the state)."""
        return self._names_refused

    @property
    def _supervised(self) -> bool:
        return True

    # ------------------------------------------------------------------ inputs
    def _ensure_dim(self, d: int) -> FloatArray:
        self._w = _grown(self._w, d)
        return self._w

    def _ensure_u(self, d: int) -> FloatArray:
        """The averaging sums u, as wide as θ."""
        self._u = _grown(self._u, d)
        return self._u

    def vectorize(self, x: Features, *, grow: bool = True) -> FloatArray:
        """``x`` as a float vector in the model's coordinates.

        Dense input must match the dimension (the first one fixes it). Dict input maps each name
        to its index; new names get new indices when ``grow`` (zero weight until learned), and are
        ignored otherwise. Raises :class:`DimensionError` when ``x`` cannot fit.
        """
        if isinstance(x, Mapping):
            return self._vectorize_named(x, grow)
        v = np.asarray(x, dtype=np.float64)
        if v.ndim != 1:
            raise DimensionError(f"x must be a vector, got an array of shape {v.shape}")
        d = self.dim
        if d is None:
            self._ensure_dim(len(v))
        elif len(v) != d:
            raise DimensionError(f"x has {len(v)} features, the model has {d}")
        return v

    def _vectorize_named(self, x: Mapping[str, float], grow: bool) -> FloatArray:
        if self._hasher is not None:
            cols, values = self._hashed(list(x), np.fromiter(x.values(), dtype=np.float64, count=len(x)))
            v = np.zeros(len(self.weights), dtype=np.float64)
            np.add.at(v, cols, values)
            return v
        index = self._index
        if self._fixed_by_dense():
            raise DimensionError(_FIXED_BY_DENSE)
        if grow:
            new = [k for k in x if k not in index]
            if new:
                limit = self.name_limit
                if limit is not None and len(index) + len(new) > limit:
                    raise DimensionError(self._refuse_names(len(new)))
                for name in new:
                    index[name] = len(index)
                self._ensure_dim(max(len(index), self.n_features or 0))
        v = np.zeros(len(index) if self._w is None else len(self._w), dtype=np.float64)
        for name, value in x.items():
            i = index.get(name)
            if i is not None:
                v[i] = value
        return v

    def vectorize_many(self, xs: Sequence[Features] | FloatArray) -> tuple[Rows, dict[int, str]]:
        """Rows of ``xs`` in the model's coordinates; rows that do not fit are left out and reported.

        Returns the accepted rows (in order) and ``{row: reason}`` for the others, each reason a
        :class:`Refusal` that names its kind. A block of
        dense rows becomes one matrix (converted in one call); a block of named rows becomes
        :class:`~stream_perceptron.model.sparse.SparseRows`, new names getting new indices. A block
        that mixes the two becomes a dense matrix, its named rows then summed over every column
        as dense rows are; the worker never mixes them in one block, so that each record is
        always summed the same way.
        """
        if not len(xs):
            return np.zeros((0, self.dim or 0)), {}
        if not isinstance(xs[0], Mapping):
            try:
                m = np.array(xs, dtype=np.float64)
            except (ValueError, TypeError):
                m = None
            if m is not None and m.ndim == 2 and (self.dim is None or m.shape[1] == self.dim):
                self._ensure_dim(m.shape[1])
                return m, {}
        if all(isinstance(x, dict) for x in xs) or all(isinstance(x, Mapping) for x in xs):  # dict: fast
            return self._vectorize_named_many(xs)  # type: ignore[arg-type]
        rows: list[FloatArray] = []
        rejected: dict[int, str] = {}
        for i, x in enumerate(xs):
            try:
                rows.append(self.vectorize(x))
            except DimensionError as exc:
                reason = exc.reason
                rejected[i] = reason if isinstance(reason, Refusal) else Refusal(reason, "width")
        d = self.dim or 0
        out = np.zeros((len(rows), d), dtype=np.float64)
        for r, v in enumerate(rows):
            out[r, : len(v)] = v  # named rows built before a later name grew the model
        return out, rejected

    def _vectorize_named_many(self, xs: Sequence[Mapping[str, float]]) -> tuple[SparseRows, dict[int, str]]:
        """Named rows as sparse rows: names are indexed first (new names get new indices, a zero
        weight until learned), then each row's indices and values listed in its keys' order."""
        if self._fixed_by_dense():
            reason = Refusal(_FIXED_BY_DENSE, "width")
            return SparseRows.build([], [], self.dim or 0), dict.fromkeys(range(len(xs)), reason)
        if self._hasher is not None:
            return self._hashed_rows(xs), {}
        try:  # the common case: every name is indexed already, so the rows are built in one pass
            return self._named_rows(xs), {}
        except KeyError:  # some names are new
            pass
        rejected = self._index_new_names(xs)
        kept = [x for i, x in enumerate(xs) if i not in rejected] if rejected else xs
        return self._named_rows(kept), rejected

    def _index_new_names(self, xs: Sequence[Mapping[str, float]]) -> dict[int, str]:
        """Give the new names of each row, in order, the next indices; returns ``{row: reason}``
        for the rows whose new names would take the model past its bound on names (none indexed)."""
        index, limit = self._index, self.name_limit
        rejected: dict[int, str] = {}
        for i, x in enumerate(xs):
            new = [k for k in x if k not in index]
            if limit is not None and len(index) + len(new) > limit:
                rejected[i] = self._refuse_names(len(new))
                continue
            for name in new:
                index[name] = len(index)
        return rejected

    def _hashed(self, names: list[str], values: FloatArray) -> tuple[npt.NDArray[np.intp], FloatArray]:
        """The hashed columns of ``names`` and ``values`` times their hashed signs."""
        assert self._hasher is not None
        cols, signs = self._hasher.columns(names)
        return cols, values * signs if self.hash_sign else values

    def _hashed_rows(self, xs: Sequence[Mapping[str, float]]) -> SparseRows:
        """``xs`` as sparse rows of hashed columns (a row may name a column twice: a collision)."""
        lengths = np.fromiter(map(len, xs), dtype=np.intp, count=len(xs))
        indptr = np.zeros(len(xs) + 1, dtype=np.intp)
        np.cumsum(lengths, out=indptr[1:])
        nnz = int(indptr[-1])
        names = list(chain.from_iterable(xs))
        values = np.fromiter(chain.from_iterable(x.values() for x in xs), dtype=np.float64, count=nnz)
        cols, values = self._hashed(names, values)
        return SparseRows(indptr, cols, values, len(self.weights))

    def _named_rows(self, xs: Sequence[Mapping[str, float]]) -> SparseRows:
        """``xs`` as sparse rows in the model's coordinates (grown to fit); KeyError when a name is
        not indexed."""
        index = self._index
        width = max(len(index), self.n_features or 0, self.dim or 0)
        rows = SparseRows.concat(
            map(len, xs),
            map(index.__getitem__, chain.from_iterable(xs)),  # each row's names in its keys' order
            chain.from_iterable(x.values() for x in xs),
            n_rows=len(xs),
            n_cols=width,
        )
        self._ensure_dim(width)
        return rows

    # ------------------------------------------------------------------ prediction
    def score_one(self, x: Features) -> float:
        """The served score: θ·x + θ0, or θ̄·x + θ̄0 with ``average=True``."""
        if isinstance(x, Mapping):
            if self._fixed_by_dense():
                raise DimensionError(_FIXED_BY_DENSE)
            values = np.fromiter(x.values(), dtype=np.float64, count=len(x))
            bounds = np.array([0, len(x)], dtype=np.intp)
            w, u = self._w, self._u
            if self._hasher is not None:
                assert w is not None
                cols, values = self._hashed(list(x), values)
                a = float(segment_sums(w[cols] * values, bounds)[0] + self._b)
                if not self._averaging():
                    return a
                assert u is not None
                return self._served(a, float(segment_sums(u[cols] * values, bounds)[0] + self._ub))
            # an unknown name weighs 0, as it would once indexed: the same products, the same sum
            index = self._index
            known = [index.get(k) for k in x]
            weights = [w[i] if w is not None and i is not None else 0.0 for i in known]
            a = float(segment_sums(np.array(weights, dtype=np.float64) * values, bounds)[0] + self._b)
            if not self._averaging():
                return a
            sums = [u[i] if u is not None and i is not None else 0.0 for i in known]
            weighted = segment_sums(np.array(sums, dtype=np.float64) * values, bounds)[0] + self._ub
            return self._served(a, float(weighted))
        v = self.vectorize(x, grow=False)
        if self._w is None or not len(v):
            return self._b  # nothing learned yet
        a = float((v * self._w).sum() + self._b)
        if not self._averaging():
            return a
        assert self._u is not None
        return self._served(a, float((v * self._u).sum() + self._ub))

    def _averaging(self) -> bool:
        """Whether the served model differs from θ: averaging, once a label was learned."""
        return self.average and self._steps > 0 and self._u is not None

    def _served(self, score: float, weighted: float) -> float:
        """θ̄·x + θ̄0 from θ·x + θ0 and u·x + u0 (the same operation as learn_many's)."""
        return score - weighted / self._steps

    def predict_one(self, x: Features) -> Any:  # type: ignore[override]  # also dense x
        """The positive label when the served score is > 0, else the negative one, in the label
        space taught (see Notes)."""
        return self._labels.label(1 if self.score_one(x) > 0 else -1)

    def predict_proba_one(self, x: Features) -> dict[Any, float]:  # type: ignore[override]
        """``{negative: 1 − σ(s), positive: σ(s)}`` with σ the logistic function of the served
        score s: a squashing for ranking, **not a calibrated probability** (see Notes)."""
        s = self.score_one(x)
        p = 1.0 / (1.0 + math.exp(-s)) if s >= 0 else math.exp(s) / (1.0 + math.exp(s))
        return {self._labels.label(-1): 1.0 - p, self._labels.label(1): p}

    def score_many(self, X: Sequence[Features] | Rows, *, served: bool = True) -> FloatArray:
        """:meth:`score_one` of each row (same summation order, so the same floats); with
        ``served=False``, θ·x+θ0 of the learning weights even when averaging (the
        quantities: margins, training error)."""
        m = self._matrix(X)
        width = m.n_cols if isinstance(m, SparseRows) else m.shape[1]
        w = self._ensure_dim(width)
        scores = _block(m, w, self._b, 0, len(m))
        if not served or not self._averaging():
            return scores
        u = self._ensure_u(width)
        averaged: FloatArray = scores - _block(m, u, self._ub, 0, len(m)) / self._steps
        return averaged

    def predict_many(self, X: Sequence[Features] | Rows) -> npt.NDArray[Any]:
        """:meth:`predict_one` of each row, as an array of the labels taught."""
        positive = self.score_many(X) > 0
        labels: npt.NDArray[Any] = np.where(positive, self._labels.label(1), self._labels.label(-1))
        return labels

    def norms(self) -> tuple[float, float]:
        """‖θ‖ and ‖[θ, θ0]‖ (the augmented weights of the reduction through the origin)."""
        sq = self._sq if self._sq is not None else self._full_sq()
        return math.sqrt(sq), math.sqrt(sq + self._b * self._b)

    def _full_sq(self) -> float:
        """‖θ‖² summed over all of θ."""
        w = self._w
        return float((w * w).sum()) if w is not None else 0.0

    # ------------------------------------------------------------------ learning
    def learn_one(self, x: Features, y: Any) -> bool:  # type: ignore[override]  # returns the flag
        """One step of Rosenblatt's update; True when (x, y) was a mistake and θ, θ0 moved."""
        label = self._labels.sign(y)
        if isinstance(x, Mapping):  # the sparse path of learn_many, so the same floats
            rows, rejected = self._vectorize_named_many([x])
            if rejected:
                raise DimensionError(rejected[0])
            return bool(self.learn_many(rows, np.array([label], dtype=np.int8)).mistakes[0])
        v = self.vectorize(x)
        if self.average:  # the served model moves with every example: learn_many keeps it
            return bool(self.learn_many(v[None, :], np.array([label], dtype=np.int8)).mistakes[0])
        w = self._ensure_dim(len(v))
        if label * ((v * w).sum() + self._b) <= 0:
            w += label * v
            self._sq = None
            if self.fit_intercept:
                self._b += label
            self._updates += 1
            return True
        return False

    def learn_many(
        self, X: Sequence[Features] | Rows, y: Iterable[Any], labeled: Iterable[bool] | None = None
    ) -> BatchResult:
        """:meth:`learn_one` over the rows in order, with the same flags and weights, but fast.

        The scores of a whole block come from one vectorised product; the block is cut at its
        first mistake, the update applied, and scoring resumes from the next row. Block sizes
        adapt (grow while the model is right, shrink after mistakes), so a model that is mostly
        right costs about one pass of array arithmetic. Dense rows without averaging take
        :mod:`~stream_perceptron.model.dense_pass`: its loop only decides the mistakes, from
        margins with a bounded rounding error, and every row is scored after it.

        ``y`` holds labels as :meth:`learn_one` takes them (0 is the negative class). A row is
        unlabeled (scored, never learned) where the mask ``labeled`` is False, or where ``y``
        holds None or NaN.

        >>> import numpy as np
        >>> model = Perceptron()
        >>> X = np.array([[1.0, 1.0], [2.0, 2.0], [-1.0, -1.0], [3.0, 3.0]])
        >>> out = model.learn_many(X, [1, 1, 0, 0], labeled=[True, True, True, False])
        >>> out.mistakes.tolist(), out.scores.tolist(), out.predictions.tolist()
        ([True, False, False, False], [0.0, 5.0, -1.0, 7.0], [-1, 1, -1, 1])
        """
        m = self._matrix(X)
        n = len(m)
        signs = self._labels.signs(y, n, labeled)
        if isinstance(m, SparseRows):
            w, width = self._ensure_dim(m.n_cols), len(m.values) // max(1, n)  # width: features a row
        else:
            w, width = self._ensure_dim(m.shape[1]), m.shape[1]
        max_block = max(_MIN_SCORED_BLOCK, min(_MAX_BLOCK, _BLOCK_BYTES // (8 * max(1, width))))
        average = self.average
        if not average and not isinstance(m, SparseRows):
            return self._learn_dense(m, signs, w, max_block)
        scores = np.empty(n, dtype=np.float64)
        flags = np.zeros(n, dtype=np.bool_)
        if average:
            self._ensure_u(len(w))  # u as wide as θ
            served = np.empty(n, dtype=np.float64)
            steps = self._steps + np.cumsum(signs != 0) - (signs != 0)  # labeled rows before each
        else:
            served = scores
        # NaN for unlabeled rows: NaN * score <= 0 is False, so they are never mistakes
        lab_f = np.where(signs != 0, signs, np.nan)
        score = _Scorer(m, max_block)
        # ‖θ‖ of the rows from each start on: filled in once at the end, not per block
        starts, norms = [0], [self.norms()]
        i, block = 0, _MIN_SCORED_BLOCK
        while i < n:
            end = min(n, i + block)
            s = score(w, self._b, i, end)
            wrong = lab_f[i:end] * s <= 0
            k = int(wrong.argmax())
            if not wrong[k]:  # no mistake in the block
                scores[i:end] = s
                if average:
                    self._serve(m, served, scores, steps, i, end)
                block = min(block * 2, max_block)
                i = end
                continue
            stop = i + k + 1
            scores[i:stop] = s[: k + 1]
            if average:
                self._serve(m, served, scores, steps, i, stop)
            r = i + k
            self._update(m, r, lab_f[r], steps[r] if average else 0)
            flags[r] = True
            starts.append(stop)
            norms.append(self.norms())
            block = max(_MIN_SCORED_BLOCK, min(2 * (k + 1), max_block))
            i = stop
        edges = np.array([*starts, n], dtype=np.intp)
        lengths: npt.NDArray[np.intp] = edges[1:] - edges[:-1]
        norm = np.repeat(np.array([v for v, _ in norms], dtype=np.float64), lengths)
        norm_aug = np.repeat(np.array([v for _, v in norms], dtype=np.float64), lengths)
        if average:
            self._steps += int((signs != 0).sum())
        predictions: npt.NDArray[np.int8] = np.where(served > 0, 1, -1).astype(np.int8)
        served_mistakes = (signs != 0) & (signs * served <= 0)
        return BatchResult(scores, predictions, flags, signs, norm, norm_aug, served, served_mistakes)

    def _learn_dense(self, m: FloatArray, signs: Signs, w: FloatArray, max_block: int) -> BatchResult:
        """learn_many over a dense matrix without averaging (:mod:`.dense_pass`)."""
        out = dense_pass.learn_dense(m, signs, w, self._b, self.norms(), self.fit_intercept, max_block)
        if out.n_mistakes:
            self._b = out.intercept
            self._sq = None  # dense updates: the full sum, when asked
            self._updates += out.n_mistakes
        predictions: npt.NDArray[np.int8] = np.where(out.scores > 0, 1, -1).astype(np.int8)
        # the served model is θ: its errors are the mistakes (y·score ≤ 0 on labeled rows)
        return BatchResult(out.scores, predictions, out.mistakes, signs, out.theta_norm,
                           out.theta_norm_aug, out.scores, out.mistakes.copy())

    def _serve(self, m: Rows, served: FloatArray, scores: FloatArray, steps: npt.NDArray[np.int64],
               i: int, stop: int) -> None:
        """The averaged model's scores of rows ``i`` to ``stop``: θ·x+θ0 − (u·x+u0)/T, or θ·x+θ0
        while T = 0 (the same operations as :meth:`score_one`'s)."""
        assert self._u is not None
        t = steps[i:stop]
        c = _block(m, self._u, self._ub, i, stop)
        served[i:stop] = np.where(t > 0, scores[i:stop] - c / np.maximum(t, 1), scores[i:stop])

    def _update(self, m: Rows, r: int, y: float, step: int) -> None:
        """Rosenblatt's update for row ``r`` of ``m`` with sign ``y``: θ += y·x, θ0 += y; averaging,
        u += (step·y)·x and u0 += step·y, ``step`` being the labeled examples before the row."""
        w, add = self._w, self._add
        assert w is not None
        y, step = float(y), int(step)  # θ0 and u0 stay Python floats (JSON encoders refuse numpy scalars)
        x: FloatArray
        if isinstance(m, SparseRows):
            columns, x = m.row(r)
            touched = np.unique(columns) if self._hasher is not None else columns  # each column once
            before = w[touched]
            sq = self._sq if self._sq is not None else self._full_sq()
            add(w, columns, y * x)
            after = w[touched]
            self._sq = max(0.0, sq + float(np.add.reduce(after * after) - np.add.reduce(before * before)))
            if self.average:
                assert self._u is not None
                add(self._u, columns, (step * y) * x)
        else:
            w += y * m[r]
            self._sq = None  # a dense row costs the width anyway: the full sum, when asked
            if self.average:
                assert self._u is not None
                self._u += (step * y) * m[r]
        if self.fit_intercept:
            self._b += y
            if self.average:
                self._ub += step * y
        self._updates += 1

    def _add(self, a: FloatArray, columns: npt.NDArray[np.intp], values: FloatArray) -> None:
        """a[columns] += values; hashed columns may repeat within a row, and each then adds."""
        if self._hasher is not None:
            np.add.at(a, columns, values)
        else:
            a[columns] += values  # distinct columns: one add each

    def fit(
        self, X: Sequence[Features] | Rows, y: Iterable[Any], passes: int = 1, *,
        epochs: int | None = None,
    ) -> list[int]:
        """Up to ``passes`` passes over (X, y) in order (the perceptron with offset over T
        passes, T = ``passes``; ``epochs`` is its old name, kept).

        Stops after the first pass with no mistake, as the Batch Perceptron of Shalev-Shwartz &
        Ben-David (*Understanding Machine Learning*, §9.1.2) does (such a pass separates the
        data, and further passes would change nothing). Returns the mistakes
        of each pass made. Every row needs a label (0 is the negative class).
        """
        m = self._matrix(X)
        signs = self._labels.signs(y, len(m))
        if (signs == 0).any():
            raise ValueError(f"fit needs a label for every row; row {int((signs == 0).argmax())} has none")
        per_pass: list[int] = []
        for _ in range(passes if epochs is None else epochs):
            per_pass.append(int(self.learn_many(m, signs).mistakes.sum()))
            if per_pass[-1] == 0:
                break
        return per_pass

    # ------------------------------------------------------------------ helpers
    def _matrix(self, X: Sequence[Features] | Rows) -> Rows:
        """``X`` in the model's coordinates (the model's width grown to fit), or DimensionError."""
        if isinstance(X, SparseRows):
            if self.n_features is not None and X.n_cols > self.n_features:
                raise DimensionError(f"X has {X.n_cols} columns, the model allows {self.n_features}")
            self._ensure_dim(X.n_cols)
            return X
        if isinstance(X, np.ndarray):
            m = np.ascontiguousarray(X, dtype=np.float64)
            if m.ndim != 2:
                raise DimensionError(f"X must be a 2-d array, got shape {m.shape}")
            if self.dim is not None and m.shape[1] != self.dim:
                raise DimensionError(f"X has {m.shape[1]} features, the model has {self.dim}")
            self._ensure_dim(m.shape[1])
            return m
        rows, rejected = self.vectorize_many(list(X))
        if rejected:
            row, reason = next(iter(rejected.items()))
            raise DimensionError(f"row {row}: {reason}")
        return rows

    def _refuse_names(self, new: int) -> Refusal:
        """Count a row refused for bringing ``new`` names past the bound; returns the reason."""
        self._names_refused += 1
        bound = "SP_MODEL__N_FEATURES" if self.n_features is not None else "SP_LIMITS__MAX_NAMES"
        return Refusal(f"x brings {new} new feature names; the model allows {self.name_limit} in all"
                       f" ({bound})", "names")

    def _fixed_by_dense(self) -> bool:
        """Whether dense vectors fixed the dimension (named features are then refused). A model
        that has seen only empty named rows has no dimension yet."""
        return (
            self._w is not None and len(self._w) > 0 and not self._index and self.n_features is None
            and self._hasher is None
        )

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Learned state as plain data: weights, intercept, mistakes, feature names in index order;
        ‖θ‖² as sparse updates kept it (``theta_sq``, when it is not simply the sum over θ);
        the labels taught (``classes``, once one is); with ``average=True`` the averaging sums
        (``average``: the labeled examples learned, u and u0)."""
        state: dict[str, Any] = {
            "weights": self.weights.tolist(),
            "intercept": self._b,
            "mistakes": self._updates,
            "features": self.feature_names,
        }
        if self._sq is not None:
            state["theta_sq"] = self._sq
        classes = self._labels.get_state()
        if classes is not None:
            state["classes"] = classes
        if self.average:
            u = self._u if self._u is not None else np.zeros(0)
            state["average"] = {"steps": self._steps, "weighted_updates": u.tolist(),
                                "weighted_intercept": self._ub}
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (exact: JSON floats round-trip bit for bit).

        A state without ``classes`` or ``average`` (as checkpoints written before them are)
        restores with no label taught and, when averaging, the averaging starting afresh from the
        restored θ."""
        w = np.array(state["weights"], dtype=np.float64)
        width = self.n_features if self._hasher is None else 1 << (self.hash_bits or 0)
        if width is not None and len(w) not in (0, width):
            raise DimensionError(f"state has {len(w)} weights, the model has {width}")
        if len(w):
            self._w = w
        else:
            self._w = None if width is None else np.zeros(width)
        self._b = float(state["intercept"])
        sq = state.get("theta_sq")  # absent: the full sum (as in files written before it)
        self._sq = None if sq is None else float(sq)
        self._updates = int(state["mistakes"])
        self._index = {name: i for i, name in enumerate(state.get("features") or [])}
        self._labels.set_state(state.get("classes"))
        avg = state.get("average")
        self._steps = int(avg["steps"]) if avg else 0
        self._ub = float(avg["weighted_intercept"]) if avg else 0.0
        u = np.array(avg["weighted_updates"], dtype=np.float64) if avg else np.zeros(0)
        self._u = u if len(u) else None

    def config(self) -> dict[str, Any]:
        """The configuration a checkpoint must match: ``n_features`` and ``fit_intercept``, and
        ``average``, ``hash_bits`` and ``hash_sign`` when they are not the defaults (so a
        checkpoint of a default model has the fields it always had)."""
        config: dict[str, Any] = {"n_features": self.n_features, "fit_intercept": self.fit_intercept}
        if self.average:
            config["average"] = True
        if self.hash_bits is not None:
            config["hash_bits"] = self.hash_bits
            config["hash_sign"] = self.hash_sign
        return config


def _grown(a: FloatArray | None, d: int) -> FloatArray:
    """``a`` with zeros appended up to ``d`` entries (zeros when None)."""
    if a is None:
        return np.zeros(d, dtype=np.float64)
    if d > len(a):
        return np.concatenate([a, np.zeros(d - len(a))])
    return a


class _Scorer:
    """:func:`_block` for learn_many's loop: a dense block's products go to one buffer, reused
    (the same operations, so the same floats, without a new temporary per block)."""

    def __init__(self, m: Rows, max_block: int) -> None:
        self.sparse = m if isinstance(m, SparseRows) else None
        self.dense = m if not isinstance(m, SparseRows) else np.zeros((0, 0))
        self.products = np.empty((min(max_block, len(self.dense)), self.dense.shape[1]), dtype=np.float64)

    def __call__(self, w: FloatArray, b: float, start: int, end: int) -> FloatArray:
        if self.sparse is not None:
            return _block(self.sparse, w, b, start, end)
        products = np.multiply(self.dense[start:end], w, out=self.products[: end - start])
        out: FloatArray = np.add.reduce(products, axis=1)
        out += b
        return out


def _block(m: Rows, w: FloatArray, b: float, start: int, end: int) -> FloatArray:
    """w·x + b of the rows ``start`` to ``end`` of ``m``, in the one fixed summation order."""
    if isinstance(m, SparseRows):
        return dot_rows(w, m, start, end) + b
    out: FloatArray = (m[start:end] * w).sum(axis=1) + b
    return out
