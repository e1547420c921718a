r"""Rosenblatt's perceptron, exactly as the seed texts state it.

The model is a hyperplane :math:`\theta \cdot x + \theta_0 = 0`. For a labeled example
:math:`(x, y)` with :math:`y \in \{-1, +1\}`:

* it is a **mistake** when :math:`y(\theta \cdot x + \theta_0) \le 0`; a point on the boundary
  counts as a mistake (``004_4cd744fb4b17611c.txt``), so the first example seen from zero
  weights always updates;
* on a mistake, and only then, :math:`\theta \leftarrow \theta + y x` and
  :math:`\theta_0 \leftarrow \theta_0 + y` (``000_94d1bb8421093806.txt``).

With ``fit_intercept=False`` this is perceptron-through-origin (``001_31591b1a87099423.txt``):
:math:`\theta_0` stays 0. The offset form equals the through-origin form on augmented vectors
:math:`[x, 1]` with weights :math:`[\theta, \theta_0]` (seed 001's reduction, seed 003), which
is why the statistics measure :math:`R` and :math:`\gamma` on the augmented vectors.

Scores are computed row by row with one fixed summation order, the same in
:meth:`Perceptron.learn_one` and :meth:`Perceptron.learn_many` whatever the block size, so a
stream replayed in different batches makes bit-identical decisions and weights. A dense row is
summed as ``(x * w).sum()`` over all its columns. A row of named features is held sparse
(:class:`~stream_perceptron.model.sparse.SparseRows`) and summed over its own features only, in the
order of its keys, so its cost is its number of features, not the model's width.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from river import base

from stream_perceptron.errors import DimensionError
from stream_perceptron.model.sparse import SparseRows, dot_rows, segment_sums

FloatArray = npt.NDArray[np.float64]
Features = Mapping[str, float] | Sequence[float] | FloatArray
Rows = FloatArray | SparseRows
"""What :meth:`Perceptron.vectorize_many` returns: a dense matrix, or sparse rows of named features."""

_MIN_BLOCK = 16
_MAX_BLOCK = 4096
_BLOCK_BYTES = 8 << 20  # the scoring temporary of one block stays under 8 MiB, however wide x is
_FIXED_BY_DENSE = "x has named features but the model was fixed by dense vectors"


class BatchResult(NamedTuple):
    """What :meth:`Perceptron.learn_many` reports for each row, all taken *before* that row's update.

    ``labels`` are −1/+1, or 0 for an unlabeled row (scored, never learned). ``theta_norm`` is
    ‖θ‖ and ``theta_norm_aug`` is ‖[θ, θ0]‖ of the model that scored the row.
    """

    scores: FloatArray
    predictions: npt.NDArray[np.int8]
    mistakes: npt.NDArray[np.bool_]
    labels: npt.NDArray[np.int8]
    theta_norm: FloatArray
    theta_norm_aug: FloatArray


class Perceptron(base.Classifier):
    r"""Mistake-driven linear classifier: the seeds' perceptron, online.

    Parameters
    ----------
    n_features
        The dimension of θ. ``None`` fixes it from the first dense example; named (dict) features
        are mapped to indices in the order their names first appear, up to ``n_features`` when set.
    max_names
        With ``n_features`` unset, the most feature names indexed (``None``: no bound). A row
        bringing new names past either bound is refused, and no name of it is indexed. It bounds
        memory, not the model, so a checkpoint does not record it.
    fit_intercept
        Learn the offset θ0. ``False`` gives perceptron-through-origin.
    initial_weights
        A starting θ (θ0 starts at 0). By default θ = 0.

    Notes
    -----
    Labels are −1/+1 (``True``/``False`` are accepted). :meth:`predict_one` returns +1 when
    θ·x+θ0 > 0 and −1 otherwise; a point on the boundary (score 0) is still counted a mistake for
    either label, as the seeds do.

    Examples
    --------
    The worked example of ``001_31591b1a87099423.txt``: four points, through the origin.

    >>> from stream_perceptron import Perceptron
    >>> model = Perceptron(fit_intercept=False)
    >>> points = [([1, 0], 1), ([0, -1], -1), ([0, 1], 1), ([-1, 0], -1)]
    >>> model.fit([p for p, _ in points], [y for _, y in points], epochs=10)
    [2, 0]
    >>> model.weights.tolist(), model.mistakes
    ([1.0, 1.0], 2)

    Named features map to stable indices:

    >>> model = Perceptron()
    >>> model.learn_one({"a": 2.0, "b": -1.0}, 1)
    True
    >>> model.predict_one({"a": 1.0}), model.score_one({"a": 1.0})
    (1, 3.0)
    """

    def __init__(
        self,
        n_features: int | None = None,
        fit_intercept: bool = True,
        initial_weights: Sequence[float] | None = None,
        max_names: int | None = None,
    ) -> None:
        self.n_features = n_features
        self.max_names = max_names
        self.fit_intercept = fit_intercept
        self.initial_weights = initial_weights
        self._w: FloatArray | None = None
        self._b = 0.0
        self._mistakes = 0
        self._index: dict[str, int] = {}
        self._names_refused = 0
        if initial_weights is not None:
            w = np.array(initial_weights, dtype=np.float64).ravel()
            if n_features is not None and len(w) != n_features:
                raise ValueError(
                    f"initial_weights has {len(w)} entries but n_features is {n_features}"
                )
            self._w = w.copy()
        elif n_features is not None:
            self._w = np.zeros(n_features, dtype=np.float64)

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
    def mistakes(self) -> int:
        """Updates made so far: the number of labeled examples with y(θ·x+θ0) ≤ 0."""
        return self._mistakes

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
        """The most names this model indexes: ``n_features`` when set, else ``max_names``."""
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
        if self._w is None:
            self._w = np.zeros(d, dtype=np.float64)
        elif d > len(self._w):
            self._w = np.concatenate([self._w, np.zeros(d - len(self._w))])
        return self._w

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

        Returns the accepted rows (in order) and ``{row: reason}`` for the others. A block of
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
                rejected[i] = exc.reason
        d = self.dim or 0
        out = np.zeros((len(rows), d), dtype=np.float64)
        for r, v in enumerate(rows):
            out[r, : len(v)] = v  # named rows built before a later name grew the model
        return out, rejected

    def _vectorize_named_many(self, xs: Sequence[Mapping[str, float]]) -> tuple[SparseRows, dict[int, str]]:
        """Named rows as sparse rows: names are indexed first (new names get new indices, a zero
        weight until learned), then each row's indices and values listed in its keys' order."""
        if self._fixed_by_dense():
            reason = _FIXED_BY_DENSE
            return SparseRows.build([], [], self.dim or 0), dict.fromkeys(range(len(xs)), reason)
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
        """θ·x + θ0."""
        if isinstance(x, Mapping):
            if self._fixed_by_dense():
                raise DimensionError(_FIXED_BY_DENSE)
            w, index = self._w, self._index
            # an unknown name weighs 0, as it would once indexed: the same products, the same sum
            weights = [w[index[k]] if w is not None and k in index else 0.0 for k in x]
            products = np.array(weights, dtype=np.float64) * np.fromiter(
                x.values(), dtype=np.float64, count=len(x)
            )
            return float(segment_sums(products, np.array([0, len(x)], dtype=np.intp))[0] + self._b)
        v = self.vectorize(x, grow=False)
        if self._w is None or not len(v):
            return self._b  # nothing learned yet
        return float((v * self._w).sum() + self._b)

    def predict_one(self, x: Features) -> int:  # type: ignore[override]  # also dense x
        """+1 when θ·x + θ0 > 0, else −1."""
        return 1 if self.score_one(x) > 0 else -1

    def score_many(self, X: Sequence[Features] | Rows) -> FloatArray:
        """:meth:`score_one` of each row (same summation order, so the same floats)."""
        m = self._matrix(X)
        if isinstance(m, SparseRows):
            w = self._ensure_dim(m.n_cols)
            return dot_rows(w, m, 0, len(m)) + self._b
        w = self._ensure_dim(m.shape[1])
        scores: FloatArray = (m * w).sum(axis=1) + self._b
        return scores

    def predict_many(self, X: Sequence[Features] | Rows) -> npt.NDArray[np.int8]:
        """:meth:`predict_one` of each row."""
        return np.where(self.score_many(X) > 0, 1, -1).astype(np.int8)

    def norms(self) -> tuple[float, float]:
        """‖θ‖ and ‖[θ, θ0]‖ (the augmented weights of seed 001's reduction)."""
        w = self._w
        sq = float((w * w).sum()) if w is not None else 0.0
        return float(np.sqrt(sq)), float(np.sqrt(sq + self._b * self._b))

    # ------------------------------------------------------------------ learning
    def learn_one(self, x: Features, y: Any) -> bool:  # type: ignore[override]  # returns the flag
        """One step of the seeds' update; True when (x, y) was a mistake and θ, θ0 moved."""
        label = _label(y)
        if isinstance(x, Mapping):  # the sparse path of learn_many, so the same floats
            rows, rejected = self._vectorize_named_many([x])
            if rejected:
                raise DimensionError(rejected[0])
            return bool(self.learn_many(rows, [label]).mistakes[0])
        v = self.vectorize(x)
        w = self._ensure_dim(len(v))
        if label * ((v * w).sum() + self._b) <= 0:
            w += label * v
            if self.fit_intercept:
                self._b += label
            self._mistakes += 1
            return True
        return False

    def learn_many(self, X: Sequence[Features] | Rows, y: Iterable[Any]) -> BatchResult:
        """:meth:`learn_one` over the rows in order, with the same flags and weights, but fast.

        The scores of a whole block come from one vectorised product; the block is cut at its
        first mistake, the update applied, and scoring resumes from the next row. Block sizes
        adapt (grow while the model is right, shrink after mistakes), so a model that is mostly
        right costs about one pass of array arithmetic.

        ``y`` holds −1/+1 (or booleans); a 0 marks an unlabeled row, scored and never learned.

        >>> import numpy as np
        >>> model = Perceptron()
        >>> out = model.learn_many(np.array([[1.0, 1.0], [2.0, 2.0], [-1.0, -1.0]]), [1, 1, 0])
        >>> out.mistakes.tolist(), out.scores.tolist(), out.predictions.tolist()
        ([True, False, False], [0.0, 5.0, -1.0], [-1, 1, -1])
        """
        m = self._matrix(X)
        labels = _labels(y, len(m))
        n = len(m)
        scores = np.empty(n, dtype=np.float64)
        flags = np.zeros(n, dtype=np.bool_)
        norm = np.empty(n, dtype=np.float64)
        norm_aug = np.empty(n, dtype=np.float64)
        if isinstance(m, SparseRows):
            w, width = self._ensure_dim(m.n_cols), len(m.values) // max(1, n)  # width: features a row
        else:
            w, width = self._ensure_dim(m.shape[1]), m.shape[1]
        # NaN for unlabeled rows: NaN * score <= 0 is False, so they are never mistakes
        lab_f = np.where(labels != 0, labels, np.nan)
        cur_norm, cur_norm_aug = self.norms()
        max_block = max(_MIN_BLOCK, min(_MAX_BLOCK, _BLOCK_BYTES // (8 * max(1, width))))
        i, block = 0, _MIN_BLOCK
        while i < n:
            end = min(n, i + block)
            if isinstance(m, SparseRows):
                s = dot_rows(w, m, i, end) + self._b
            else:
                s = (m[i:end] * w).sum(axis=1) + self._b
            wrong = lab_f[i:end] * s <= 0
            k = int(wrong.argmax())
            if not wrong[k]:
                k = -1
            stop = end if k < 0 else i + k + 1
            scores[i:stop] = s[: stop - i]
            norm[i:stop] = cur_norm
            norm_aug[i:stop] = cur_norm_aug
            if k < 0:
                block = min(block * 2, max_block)
            else:
                r = i + k
                if isinstance(m, SparseRows):
                    columns, values = m.row(r)
                    w[columns] += lab_f[r] * values  # distinct columns: one add each
                else:
                    w += lab_f[r] * m[r]
                if self.fit_intercept:
                    self._b += lab_f[r]
                self._mistakes += 1
                flags[r] = True
                cur_norm, cur_norm_aug = self.norms()
                block = max(_MIN_BLOCK, min(2 * (k + 1), max_block))
            i = stop
        predictions = np.where(scores > 0, 1, -1).astype(np.int8)
        return BatchResult(scores, predictions, flags, labels, norm, norm_aug)

    def fit(
        self, X: Sequence[Features] | Rows, y: Iterable[Any], epochs: int = 1
    ) -> list[int]:
        """Up to ``epochs`` passes over (X, y) in order (seeds 000/004, T = ``epochs``).

        Stops after the first pass with no mistake, as seed 002's Batch Perceptron does (such a
        pass separates the data, and further passes would change nothing). Returns the mistakes
        of each pass made.
        """
        m = self._matrix(X)
        labels = _labels(y, len(m))
        if (labels == 0).any():
            raise ValueError("fit needs a label (-1/+1) for every row")
        per_pass: list[int] = []
        for _ in range(epochs):
            per_pass.append(int(self.learn_many(m, labels).mistakes.sum()))
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

    def _refuse_names(self, new: int) -> str:
        """Count a row refused for bringing ``new`` names past the bound; returns the reason."""
        self._names_refused += 1
        bound = "SP_MODEL__N_FEATURES" if self.n_features is not None else "SP_LIMITS__MAX_NAMES"
        return f"x brings {new} new feature names; the model allows {self.name_limit} in all ({bound})"

    def _fixed_by_dense(self) -> bool:
        """Whether dense vectors fixed the dimension (named features are then refused). A model
        that has seen only empty named rows has no dimension yet."""
        return self._w is not None and len(self._w) > 0 and not self._index and self.n_features is None

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Learned state as plain data: weights, intercept, mistakes, feature names in index order."""
        return {
            "weights": self.weights.tolist(),
            "intercept": self._b,
            "mistakes": self._mistakes,
            "features": self.feature_names,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (exact: JSON floats round-trip bit for bit)."""
        w = np.array(state["weights"], dtype=np.float64)
        if self.n_features is not None and len(w) not in (0, self.n_features):
            raise DimensionError(f"state has {len(w)} weights, the model has {self.n_features}")
        if len(w):
            self._w = w
        else:
            self._w = None if self.n_features is None else np.zeros(self.n_features)
        self._b = float(state["intercept"])
        self._mistakes = int(state["mistakes"])
        self._index = {name: i for i, name in enumerate(state.get("features") or [])}

    def config(self) -> dict[str, Any]:
        """The configuration a checkpoint must match: ``n_features`` and ``fit_intercept``."""
        return {"n_features": self.n_features, "fit_intercept": self.fit_intercept}


def _label(y: Any) -> int:
    if y is True or y is False:
        return 1 if y else -1
    if isinstance(y, int | float | np.integer | np.floating) and y in (-1, 1):
        return int(y)
    raise ValueError(f"labels are -1/+1 (or True/False), got {y!r}")


def _labels(y: Iterable[Any], n: int) -> npt.NDArray[np.int8]:
    arr = np.asarray(y if isinstance(y, np.ndarray) else list(y))
    if arr.dtype == np.bool_:
        arr = np.where(arr, 1, -1)
    if arr.shape != (n,):
        raise ValueError(f"y has shape {arr.shape}, expected ({n},)")
    if not ((arr == 1) | (arr == -1) | (arr == 0)).all():
        raise ValueError("labels are -1/+1 (0 marks an unlabeled row)")
    return arr.astype(np.int8)
