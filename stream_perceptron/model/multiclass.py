r"""The K-class perceptron: one row of weights per class, exactly as the multiclass texts state it.

W holds one row :math:`W_j` and one intercept :math:`b_j` per class :math:`j`; the score of class
:math:`j` is :math:`s_j = W_j \cdot x + b_j`. For a labeled :math:`(x, y)`:

* it is a **mistake** when :math:`s_y` is not strictly greater than every other :math:`s_j`: a
  tie is a mistake, as the boundary is in the binary rule (with one class known there is no
  rival: never a mistake);
* on a mistake, with :math:`r = \arg\max_{j \ne y} s_j` the **runner-up** (the lowest row among
  ties), :math:`W_y \mathrel{+}= w x`, :math:`b_y \mathrel{+}= w`, :math:`W_r \mathrel{-}= w x`,
  :math:`b_r \mathrel{-}= w` (:math:`w` the sample weight, 1 by default; the intercepts only with
  ``fit_intercept``). The other rows do not move. This is the multiclass perceptron of Crammer
  and Singer (2003), "Ultraconservative online algorithms for multiclass problems", in the form
  Collins (2002), "Discriminative training methods for hidden Markov models", trains.

The prediction is the class of the highest served score (the averaged W with ``average=True``),
the lowest row among ties.

**Kesler's construction.** Put :math:`w = (W_1, \dots, W_K)` end to end and, for a record and a
rival :math:`r`, :math:`\phi_{y,r}(x)` = :math:`x` in block :math:`y`, :math:`-x` in block
:math:`r`, 0 elsewhere. Then :math:`w \cdot \phi_{y,r}(x) = s_y - s_r`, the update above is the
binary perceptron's :math:`w \mathrel{+}= \phi_{y,r}(x)` on the pair that was wrong, and
:math:`\lVert\phi\rVert = \sqrt2 \lVert x \rVert`. Novikoff's theorem then bounds the mistakes on
data that some :math:`U` (:math:`\lVert U\rVert_F = 1`) separates with **multiclass margin**
:math:`\gamma = \min (U_y \cdot x - \max_{r \ne y} U_r \cdot x)` by :math:`2(R/\gamma)^2`, with
:math:`R = \max \lVert x \rVert` (of :math:`[x, 1]` and :math:`[W, b]` with intercepts)
(Crammer & Singer 2003, Collins 2002). :mod:`~stream_perceptron.model.stats` measures it live.

**Exactness.** Each score is summed as the binary model sums one (a dense row over all its
columns, ``(x * W_j).sum()``; a named row over its own features in the order of its keys, the
order :mod:`~stream_perceptron.model.rowwise` states), so :meth:`MulticlassPerceptron.learn_one`
and :meth:`MulticlassPerceptron.learn_many`, cut anywhere, make the same decisions and the same
weights, bit for bit, and the score of class :math:`j` is the binary score of :math:`W_j`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from stream_perceptron.errors import DimensionError
from stream_perceptron.model import dense_pass, frames
from stream_perceptron.model.classes import UNLABELED, ClassSpace, RowArray, class_label, missing
from stream_perceptron.model.labels import LabelSpace
from stream_perceptron.model.perceptron import (
    _BLOCK_BYTES,
    _FIXED_BY_DENSE,
    _MAX_BLOCK,
    _MIN_SCORED_BLOCK,
    Features,
    FloatArray,
    Perceptron,
    Refusal,
    Rows,
    Widened,
    _checked_list,
    _moved,
    _weight,
    hashing,
)
from stream_perceptron.model.rowwise import checked, row_sum
from stream_perceptron.model.sparse import SparseRows, segment_sums, take_rows

BoolArray = npt.NDArray[np.bool_]
_INF = math.inf
_exp = math.exp
# learn_many holds the served scores of this many rows × classes at a time (a long call is
# learned in chunks of rows: the same floats, in bounded memory)
_CHUNK_SCORES = 1 << 21
# dense rows, in calls of at least this many rows, are decided by the compiled loop
# (class_kernel) when numba is installed; shorter calls do not pay numba's load, as the binary
# dense pass does not
COMPILED_MIN_ROWS = dense_pass.COMPILED_MIN_ROWS

__all__ = ["ClassResult", "MulticlassPerceptron", "classes_state", "functional_margins"]


class ClassResult(NamedTuple):
    """What :meth:`MulticlassPerceptron.learn_many` reports for each row, all taken *before*
    that row's update.

    ``labels``: the row of W of the true class, −1 when unlabeled. ``predictions``: the served
    model's class (its argmax, the lowest row among ties; −1 while no class is known),
    ``served_scores`` its score (NaN without a class); ``runner_up``: the best other class of the
    served scores (−1 with fewer than two classes), ``runner_up_scores`` its score (NaN without).
    ``mistakes``: the learning W's mistakes (which drive the update); ``margins``: the
    functional multiclass margin :math:`s_y - \\max_{r \\ne y} s_r` of the learning W (NaN
    unlabeled, or with fewer than two classes); ``served_mistakes``: labeled rows whose
    prediction is not the label (a tie won by the true class is a mistake but no served one).
    ``theta_norm``: ‖W‖_F, ``theta_norm_aug``: ‖[W, b]‖_F. ``all_scores`` (with
    ``scores=True``): every class's served score, n × K in row order, NaN for a class not yet
    known at that row. :attr:`MulticlassPerceptron.classes` names the rows.
    """

    labels: RowArray
    predictions: RowArray
    served_scores: FloatArray
    runner_up: RowArray
    runner_up_scores: FloatArray
    mistakes: BoolArray
    margins: FloatArray
    served_mistakes: BoolArray
    theta_norm: FloatArray
    theta_norm_aug: FloatArray
    all_scores: FloatArray | None = None


def functional_margins(scores: FloatArray, labels: RowArray) -> tuple[FloatArray, RowArray]:
    r"""The functional multiclass margin :math:`s_y - \max_{r \ne y} s_r` of each row of the
    score matrix ``scores`` (n × K; −inf for a class not active at a row) and its runner-up
    :math:`r` (the lowest row among ties); NaN and −1 where a row is unlabeled (``labels`` −1)
    or has no rival. A margin ≤ 0 is a mistake.

    >>> s = np.array([[1.0, 3.0, 2.0], [2.0, 2.0, 0.0], [0.0, 1.0, -_INF]])
    >>> m, r = functional_margins(s, np.array([1, 0, -1], dtype=np.int32))
    >>> m.tolist(), r.tolist()
    ([1.0, 0.0, nan], [2, 1, -1])
    """
    n, k = scores.shape
    margin = np.full(n, np.nan)
    rival = np.full(n, UNLABELED, dtype=np.int32)
    rows = np.flatnonzero(labels >= 0)
    if not len(rows) or k < 2:
        return margin, rival
    at = np.arange(len(rows))
    others = scores[rows]  # a copy: the true class set aside
    ys = labels[rows]
    own = others[at, ys]
    others[at, ys] = -_INF
    best = others.argmax(axis=1)
    top = others[at, best]
    has = top > -_INF  # a rival is active at the row
    margin[rows] = np.where(has, own - top, np.nan)
    rival[rows] = np.where(has, best, UNLABELED)
    return margin, rival


def _argmax(scores: Sequence[float], skip: int = -1) -> int:
    """``np.argmax``'s choice among ``scores`` (``skip`` set aside): the first NaN, else the first
    of the largest; −1 when there is none."""
    at, best = -1, -_INF
    for j, s in enumerate(scores):
        if j == skip:
            continue
        if s != s:
            return j
        if at < 0 or s > best:
            at, best = j, s
    return at


def _softmax(scores: Sequence[float]) -> list[float]:
    """exp(s_j − max s) / Σ exp(s_i − max s); a score that is not finite takes it all at its
    :func:`_argmax`."""
    if not scores:
        return []
    top = max(scores)
    if not math.isfinite(top) or any(s != s for s in scores):
        hit = _argmax(scores)
        return [1.0 if j == hit else 0.0 for j in range(len(scores))]
    e = [_exp(s - top) for s in scores]
    z = sum(e)
    return [v / z for v in e]


def _dense_scores(m: FloatArray, w: FloatArray, b: FloatArray, start: int, end: int,
                  buf: FloatArray | None = None) -> FloatArray:
    """s_j of the dense rows ``start`` to ``end``: ``(x * W_j).sum() + b_j`` (the binary model's
    order, each class's sum over all columns), n × K."""
    x = m[start:end, None, :]
    products = np.multiply(x, w[None, :, :], out=None if buf is None else buf[: end - start])
    out: FloatArray = np.add.reduce(products, axis=2)
    out += b
    return out


def _sparse_scores(m: SparseRows, w: FloatArray, b: FloatArray, start: int, end: int) -> FloatArray:
    """s_j of the sparse rows ``start`` to ``end``, each summed over its own features in its
    order (:func:`~stream_perceptron.model.sparse.segment_sums`, as the binary model's), n × K."""
    a, z = m.indptr[start], m.indptr[end]
    products = w[:, m.indices[a:z]] * m.values[a:z]
    indptr = m.indptr[start:end + 1]
    out = np.empty((end - start, len(w)), dtype=np.float64)
    for j in range(len(w)):
        out[:, j] = segment_sums(products[j], indptr)
    out += b
    return out


def _scores(m: Rows, w: FloatArray, b: FloatArray, start: int, end: int) -> FloatArray:
    if isinstance(m, SparseRows):
        return _sparse_scores(m, w, b, start, end)
    return _dense_scores(m, w, b, start, end)


def _regrown(buf: FloatArray, k: int, d: int) -> FloatArray:
    """``buf`` when it has at least ``k`` rows and ``d`` columns, else a larger buffer holding its
    entries (the new ones 0): rows grow by half, columns double, so that classes and names
    arriving one at a time cost a copy now and then, not each."""
    rk, rd = buf.shape
    if k <= rk and d <= rd:
        return buf
    out = np.zeros((max(k, rk + rk // 2) if k > rk else rk, max(d, 2 * rd) if d > rd else rd))
    out[:rk, :rd] = buf
    return out


class MulticlassPerceptron(Perceptron):
    r"""The perceptron of K classes (the module's doc states the rule and its bound).

    ``Perceptron(classes=[a, b, c, ...])`` (three or more names) returns one, and a
    ``Perceptron()`` that meets a label which is no binary value becomes one. Built directly it
    takes any number of classes given, and learns classes as they appear when none are given.

    Parameters
    ----------
    n_features, fit_intercept, max_names, average, hash_bits, hash_sign
        As :class:`~stream_perceptron.model.perceptron.Perceptron` takes them; each row of W is
        as wide as the binary model's θ, and averaging keeps its sums per row.
    initial_weights
        Not taken (None): W starts at 0.
    classes
        The classes given, in row order (any hashable labels). The property :attr:`classes`
        lists every class the model holds, in row order.
    learn_classes
        Whether a label outside the classes held becomes a new class, at the next row (the
        default: only when no ``classes`` are given). Otherwise it is refused with a ValueError
        naming ``classes=``.
    max_classes
        The most classes held: a label that would be one more is refused. It bounds memory, not
        the model, so a state does not record it.

    Notes
    -----
    **Classes** (:mod:`~stream_perceptron.model.classes`): labels equal as dict keys are one class
    (``True`` and ``1``); a class given is active from the start; a class learned takes the next
    row at the record where it first appears as a label, and competes from that record on.
    Among tied scores the lowest row wins, so the row order is part of the model, and the state
    keeps it.

    **Probabilities.** :meth:`predict_proba_one` is the softmax of the served scores,
    :math:`e^{s_j} / \sum_i e^{s_i}`: it ranks the classes as the scores do, but it is **not
    a calibrated probability** (the perceptron fits no likelihood, and the scores' scale grows
    with ‖W‖).

    **Sample weights**, **bad values** and **mini-batches** as the binary model has them:
    ``learn_one(x, y, w)`` scales the update by w (a mistake is still decided by the scores);
    learn_many takes no weights. A row of ``learn_many`` with None or NaN for a label, or False
    in ``labeled``, is scored and not learned; it never adds a class.

    **Averaging** per row, as the binary model averages θ: :math:`U_j = \sum_s n_s \Delta_{s,j}`
    beside W, :math:`\bar W = W - U/T` with T the labeled examples learned.

    Examples
    --------
    >>> from stream_perceptron import Perceptron
    >>> model = Perceptron(classes=["cat", "dog", "owl"])
    >>> type(model).__name__, model.classes
    ('MulticlassPerceptron', ('cat', 'dog', 'owl'))
    >>> model.learn_one({"whiskers": 1.0}, "cat")
    >>> model.last_mistake, model.weights.tolist()  # a tie of three zeros: cat up, dog down
    (True, [[1.0], [-1.0], [0.0]])
    >>> model.predict_one({"whiskers": 2.0})
    'cat'
    >>> model.learn_one({"feathers": 1.0}, "parrot")
    Traceback (most recent call last):
    ...
    ValueError: label 'parrot' is not one of the classes ('cat', 'dog', 'owl') given by classes=

    Without classes given, the classes come as they appear; learn_many reports each row:

    >>> model = Perceptron()
    >>> out = model.learn_many([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], ["a", "b", "c"])
    >>> model.classes, out.mistakes.tolist(), out.labels.tolist()
    (('a', 'b', 'c'), [False, True, True], [0, 1, 2])
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
        classes: Sequence[Any] | None = None,
        learn_classes: bool | None = None,
        max_classes: int | None = None,
    ) -> None:
        if initial_weights is not None:
            raise ValueError("initial_weights is the binary model's: the K-class perceptron starts at W = 0")
        self.n_features = n_features
        self.max_names = max_names
        self.fit_intercept = fit_intercept
        self.initial_weights = initial_weights
        self.average = average
        self.hash_bits = hash_bits
        self.hash_sign = hash_sign
        self.classes = classes  # the classes given (the property lists every class held)
        self.learn_classes = learn_classes
        self.max_classes = max_classes
        self._space = ClassSpace(classes, learn_classes, max_classes)
        # dense calls of at least this many rows decide in the compiled loop (where numba is
        # installed; both loops decide the same rows); a long-running caller that pays for loading
        # numba once, as the worker does, sets 1
        self.compiled_min_rows = COMPILED_MIN_ROWS
        # W and U are the first K rows and d columns of buffers that grow (classes and names
        # arriving one at a time); b and u0 likewise; _wrows[j] is a memoryview of row j of W's
        # buffer (Python floats one at a time), _bv of b's
        self._d: int | None = None
        self._wbuf2 = np.zeros((0, 0))
        self._ubuf2 = np.zeros((0, 0))
        self._bbuf = np.zeros(0)
        self._ubbuf = np.zeros(0)
        self._wrows: list[Any] = []  # memoryviews: Python floats in and out
        self._urows: list[Any] = []
        self._bv: Any = self._bbuf.data
        self._ubv: Any = self._ubbuf.data
        # ‖W‖²_F, kept up to date by sparse updates; None: the full sum, as after a dense update
        self._sq: float | None = 0.0
        self._updates = 0
        self._steps = 0
        self._mistake = False
        self._y_name: Hashable = None
        # the vectorizing half of the binary model (names, hashing), shared as it stands
        self._index: dict[Hashable, int] = {}
        self._names_refused = 0
        self._wd = self._ud = None
        self._wv = None
        self._keys_at = {}
        self._hasher, width = hashing(n_features, hash_bits, hash_sign)
        self._resize(len(self._space), width)

    @classmethod
    def _unit_test_params(cls) -> Any:
        yield {}
        yield {"average": True}
        yield {"hash_bits": 8, "hash_sign": True}
        # river's checks teach Phishing's bools and ImageSegments' seven names
        yield {"classes": [False, True, "brickface", "cement", "foliage", "grass", "path", "sky", "window"]}

    def _get_params(self) -> dict[str, Any]:
        params = super()._get_params()
        params["classes"] = self._given
        return params

    @property
    def classes(self) -> tuple[Hashable, ...]:
        """The classes held, in row order (the classes given, then those learned as they came)."""
        return self._space.names

    @classes.setter
    def classes(self, given: Sequence[Any] | None) -> None:
        self._given = given

    @property
    def _multiclass(self) -> bool:
        return True

    # The binary model's own attributes. A method of the binary class still bound to a model that
    # became K-class (river's evaluation keeps ``model.learn_one``) meets one of them first, and
    # answers as the K-class method (perceptron.Widened).
    @property
    def _binary(self) -> Any:
        raise Widened

    _labels = _signs = _w = _b = _binary

    def _score_dict(self, x: dict[Hashable, Any]) -> float:
        raise Widened

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_wrows", "_urows", "_bv", "_ubv"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._views()

    @staticmethod
    def widen(model: Perceptron) -> None:
        """Turn a binary ``model`` into the K-class perceptron in place, exactly (rows
        ``[negative, positive]`` = ``[0 − θ, θ]``, :func:`classes_state`), or with no class when
        it was taught no label and θ, θ0 are 0."""
        state = model.get_state()
        dim, kept = model.dim, {k: model.__dict__[k] for k in ("_names_refused", "_y_name")}
        params = model._get_params()
        params["initial_weights"] = None
        model.__class__ = MulticlassPerceptron
        model.__dict__.clear()
        model.__init__(**params)  # type: ignore[misc]
        assert isinstance(model, MulticlassPerceptron)
        model.set_state(state)  # a binary state: converted (classes_state)
        if dim is not None:
            model._ensure_dim(dim)
        model.__dict__.update(kept)

    # ------------------------------------------------------------------ the arrays
    def _resize(self, k: int, d: int | None) -> None:
        """W, U, b and u0 of at least ``k`` rows and ``d`` columns (new entries 0)."""
        if d is not None and (self._d is None or d > self._d):
            self._d = d
        width = self._d or 0
        grown = _regrown(self._wbuf2, k, width)
        if grown is self._wbuf2 and len(self._bbuf) >= k:
            return
        self._wbuf2 = grown
        if self.average:
            self._ubuf2 = _regrown(self._ubuf2, *grown.shape)
        rows = grown.shape[0]
        if len(self._bbuf) < rows:
            self._bbuf = np.concatenate([self._bbuf, np.zeros(rows - len(self._bbuf))])
            self._ubbuf = np.concatenate([self._ubbuf, np.zeros(rows - len(self._ubbuf))])
        self._views()

    def _views(self) -> None:
        self._wrows = [row.data for row in self._wbuf2]
        self._urows = [row.data for row in self._ubuf2]
        self._bv, self._ubv = self._bbuf.data, self._ubbuf.data

    def _wmat(self) -> FloatArray:
        """W: a view of its buffer, K × d."""
        return self._wbuf2[: len(self._space), : self._d or 0]

    def _umat(self) -> FloatArray:
        """U, the averaging sums beside W."""
        return self._ubuf2[: len(self._space), : self._d or 0]

    def _bvec(self) -> FloatArray:
        """b, one intercept per class."""
        return self._bbuf[: len(self._space)]

    def _ubvec(self) -> FloatArray:
        """u0, the averaging sums beside b."""
        return self._ubbuf[: len(self._space)]

    @property
    def dim(self) -> int | None:
        """The width of each row of W, or None before the first example."""
        return self._d

    def _ensure_dim(self, d: int) -> FloatArray:
        """W at least ``d`` wide (new columns 0)."""
        if self._d is None or d > self._d:
            self._resize(len(self._space), d)
        return self._wmat()

    def _ensure_u(self, d: int) -> FloatArray:
        return self._umat()

    def _add_classes(self, names: Iterable[Hashable]) -> None:
        self._space.extend(names)
        self._resize(len(self._space), None)

    # ------------------------------------------------------------------ learned state
    @property
    def weights(self) -> FloatArray:
        """W, one row per class in row order (a read-only view)."""
        view = self._wmat().view()
        view.flags.writeable = False
        return view

    @property
    def intercept(self) -> FloatArray:  # type: ignore[override]
        """b, one intercept per class (0 without an intercept)."""
        return self._bvec().copy()

    @property
    def averaged_weights(self) -> FloatArray:
        """W̄ = W − U/T, the rows served with ``average=True`` (W otherwise)."""
        if not self.average or not self._steps:
            return self.weights
        return self._wmat() - self._umat() / self._steps

    @property
    def averaged_intercept(self) -> FloatArray:  # type: ignore[override]
        """b̄ = b − u0/T, the intercepts served with ``average=True`` (b otherwise)."""
        if not self.average or not self._steps:
            return self.intercept
        return self._bvec() - self._ubvec() / self._steps

    @property
    def class_labels(self) -> tuple[Hashable, ...]:  # type: ignore[override]
        """The classes held, in row order (as :attr:`classes`)."""
        return self._space.names

    def norms(self) -> tuple[float, float]:
        """‖W‖_F and ‖[W, b]‖_F (the augmented rows of the reduction through the origin). The
        sums over classes are exact (``math.fsum``), so that a class added with a zero row
        changes neither, whenever it is added."""
        sq = self._sq if self._sq is not None else self._full_sq()
        b = self._bvec()
        return math.sqrt(sq), math.sqrt(sq + math.fsum((b * b).tolist()))

    def _full_sq(self) -> float:
        """‖W‖²_F: each row's squares summed as numpy sums a row, the rows' sums exactly."""
        w = self._wmat()
        return math.fsum(np.add.reduce(w * w, axis=1).tolist())

    def refusals(self, y: Sequence[Any] | npt.NDArray[Any],
                 labeled: Sequence[bool] | npt.NDArray[np.bool_] | None = None) -> dict[int, str]:
        """``{row: reason}`` for the rows of a batch whose labels :meth:`learn_many` would refuse
        (outside the classes given, or past ``max_classes``), each a
        :class:`~stream_perceptron.model.perceptron.Refusal` of kind ``"classes"``, changing
        nothing: a caller sets them aside first."""
        return {i: Refusal(why, "classes") for i, why in self._space.refusals(y, labeled).items()}

    # ------------------------------------------------------------------ scoring
    def _dict_row(self, x: Mapping[Hashable, Any], grow: bool) -> tuple[list[int], list[float]]:
        """A dict row's columns and values (checked floats; hashed: times their signs), in its
        keys' order. ``grow``: new names are indexed (DimensionError past the bound, none
        indexed then); otherwise a name not indexed has the column −1, weighing 0."""
        xf = checked(x)
        if self._hasher is not None:
            known, column = self._hasher.known, self._hasher.column
            pairs = [known.get(k) or column(k) for k in xf]
            cols = [c for c, _ in pairs]
            if self.hash_sign:
                return cols, [v * s for (_, s), v in zip(pairs, xf.values(), strict=True)]
            return cols, list(xf.values())
        if self._fixed_by_dense():
            raise DimensionError(_FIXED_BY_DENSE)
        index = self._index
        if not grow:
            return [index.get(k, -1) for k in xf], list(xf.values())
        self._take_names([k for k in xf if k not in index])
        return [index[k] for k in xf], list(xf.values())

    def _dict_scores(self, rows: list[Any], bv: Any, cols: list[int],
                     values: list[float]) -> list[float]:
        """s_j of a dict row for each class, in plain Python: the row's products in its order
        (:func:`~.rowwise.row_sum`, the sparse rows' order); a column −1 weighs 0."""
        out = []
        if all(c >= 0 for c in cols):
            for j in range(len(self._space)):
                w = rows[j]
                out.append(row_sum([w[c] * v for c, v in zip(cols, values, strict=True)]) + bv[j])
            return out
        for j in range(len(self._space)):
            w = rows[j]
            out.append(row_sum([(w[c] if c >= 0 else 0.0) * v for c, v in zip(cols, values, strict=True)])
                       + bv[j])
        return out

    def _served_one(self, x: Features) -> list[float]:
        """The served score of each class for one row (learn_many's floats)."""
        if isinstance(x, Mapping):
            cols, values = self._dict_row(x, grow=False)
            s = self._dict_scores(self._wrows, self._bv, cols, values)
            if not (self.average and self._steps):
                return s
            c = self._dict_scores(self._urows, self._ubv, cols, values)
            t = self._steps
            return [a - u / t for a, u in zip(s, c, strict=True)]
        v = self.vectorize(x if isinstance(x, np.ndarray) else _checked_list(x), grow=False)
        m = v[None, :]
        s = _dense_scores(m, self._wmat(), self._bvec(), 0, 1)[0]
        if self.average and self._steps:
            s = s - _dense_scores(m, self._umat(), self._ubvec(), 0, 1)[0] / self._steps
        out: list[float] = s.tolist()
        return out

    def scores_one(self, x: Features) -> dict[Hashable, float]:
        """The served score of each class, ``{class: s_j}`` in row order."""
        return dict(zip(self._space.names, self._served_one(x), strict=True))

    def score_one(self, x: Features) -> float:
        """The served score of the class predicted (NaN while no class is known)."""
        s = self._served_one(x)
        j = _argmax(s)
        return s[j] if j >= 0 else math.nan

    def predict_one(self, x: Features) -> Any:  # type: ignore[override]
        """The class of the highest served score, the lowest row among ties (None while no
        class is known)."""
        j = _argmax(self._served_one(x))
        return self._space.names[j] if j >= 0 else None

    def predict_proba_one(self, x: Features) -> dict[Any, float]:  # type: ignore[override]
        """The softmax of the served scores, ``{class: p}`` in row order: a squashing for ranking,
        **not a calibrated probability** (see Notes); ``{}`` while no class is known."""
        return dict(zip(self._space.names, _softmax(self._served_one(x)), strict=True))

    def score_many(self, X: Any, *, served: bool = True) -> FloatArray:
        """The scores of each row (n × K, classes in row order; the floats of
        :meth:`scores_one`); with ``served=False`` the learning W's even when averaging."""
        m = self._matrix(X)
        s = _scores(m, self._wmat(), self._bvec(), 0, len(m))
        if served and self.average and self._steps:
            s = s - _scores(m, self._umat(), self._ubvec(), 0, len(m)) / self._steps
        return s

    def predict_many(self, X: Any) -> Any:
        """:meth:`predict_one` of each row: a pandas Series on X's index for a DataFrame, else an
        array of the classes (None while no class is known)."""
        names = np.array([*self._space.names, None], dtype=object)
        s = self.score_many(X)
        at = np.array([_argmax(row) for row in s.tolist()], dtype=np.intp) if s.shape[1] else np.full(
            len(s), -1, dtype=np.intp)
        labels = names[at]
        if frames.is_pandas(X):
            return frames.series(labels, X, self._y_name)
        return labels

    def predict_proba_many(self, X: Any) -> Any:
        """:meth:`predict_proba_one` of each row (the same floats): a pandas DataFrame on X's
        index, a column per class in row order, for a DataFrame; else an n × K array."""
        proba = np.array([_softmax(row) for row in self.score_many(X).tolist()], dtype=np.float64)
        proba = proba.reshape(-1, len(self._space))
        if frames.is_pandas(X):
            return frames.frame(proba, X, self._space.names)
        return proba

    # ------------------------------------------------------------------ learning
    def _row_of(self, y: Any) -> tuple[int, Hashable | None]:
        """The row of the class ``y`` and None; or, for a class not held yet that may be one,
        the row it would take and the class. A ValueError when refused."""
        space = self._space
        try:
            return space.index[y], None
        except (KeyError, TypeError):
            pass
        label = class_label(y)
        row = space.index.get(label)
        if row is not None:
            return row, None
        why = space.refusal(label, len(space))
        if why is not None:
            raise ValueError(why)
        return len(space), label

    def learn_one(self, x: Features, y: Any, w: float = 1.0) -> None:
        """One step of the K-class rule (see the module's doc), scaled by the sample weight
        ``w``; :attr:`last_mistake` then says whether (x, y) was a mistake and W moved."""
        row, new = self._row_of(y)
        g = 1.0 if w == 1.0 else _weight(w)
        if not g:  # weight 0: nothing is learned, nor counted, and no class added
            self._mistake = False
            return
        if isinstance(x, Mapping):
            cols, values = self._dict_row(x, grow=True)
            v = None
        else:
            v = self.vectorize(x if isinstance(x, np.ndarray) else _checked_list(x))
            self._ensure_dim(len(v))
        if new is not None:
            self._add_classes([new])
        if v is None:
            s = self._dict_scores(self._wrows, self._bv, cols, values)
        else:
            s = _dense_scores(v[None, :], self._wmat(), self._bvec(), 0, 1)[0].tolist()
        rival = _argmax(s, skip=row)
        step = self._steps
        if self.average:
            self._steps = step + 1
        self._mistake = rival >= 0 and s[row] <= s[rival]
        if not self._mistake:
            return
        if v is None:
            self._update_dict(cols, values, row, rival, step, g)
        else:
            self._update(v[None, :], 0, row, rival, step, g)

    def _update_dict(self, cols: list[int], values: list[float], y: int, rival: int, step: int,
                     g: float) -> None:
        """The update of a dict row, in plain Python on W's buffer (learn_many's floats)."""
        wy, wr = self._wrows[y], self._wrows[rival]
        touched = sorted(set(cols)) if self._hasher is not None else cols  # each column once
        sq = self._sq if self._sq is not None else self._full_sq()
        before = [wy[c] for c in touched] + [wr[c] for c in touched]
        for c, v in zip(cols, values, strict=True):
            gv = g * v
            wy[c] += gv
            wr[c] -= gv
        self._sq = _moved(sq, before, [wy[c] for c in touched] + [wr[c] for c in touched])
        if self.average:
            uy, ur = self._urows[y], self._urows[rival]
            gs = step * g
            for c, v in zip(cols, values, strict=True):
                gv = gs * v
                uy[c] += gv
                ur[c] -= gv
        self._intercepts(y, rival, step, g)

    def _intercepts(self, y: int, rival: int, step: int, g: float) -> None:
        if self.fit_intercept:
            bv = self._bv
            bv[y] += g
            bv[rival] -= g
            if self.average:
                ubv, gs = self._ubv, step * g
                ubv[y] += gs
                ubv[rival] -= gs
        self._updates += 1

    def _update(self, m: Rows, r: int, y: int, rival: int, step: int,  # type: ignore[override]
                g: float = 1.0) -> None:
        """The update of row ``r`` of ``m``, labeled ``y`` with runner-up ``rival``: W_y += g·x,
        W_r −= g·x, b_y += g, b_r −= g; averaging, U and u0 by (step·g)·x and step·g."""
        w = self._wmat()
        wy, wr = w[y], w[rival]
        if isinstance(m, SparseRows):
            columns, x = m.row(r)
            gx = g * x
            hashed = self._hasher is not None
            touched = np.unique(columns) if hashed else columns  # each column once
            before = np.concatenate([wy[touched], wr[touched]])
            sq = self._sq if self._sq is not None else self._full_sq()
            _add(wy, columns, gx, hashed)
            _add(wr, columns, -gx, hashed)
            after = np.concatenate([wy[touched], wr[touched]])
            self._sq = max(0.0, sq + float(np.add.reduce(after * after) - np.add.reduce(before * before)))
            if self.average:
                u, gs = self._umat(), step * g
                _add(u[y], columns, gs * x, hashed)
                _add(u[rival], columns, -(gs * x), hashed)
        else:
            x = m[r]
            gx = x if g == 1.0 else g * x
            wy += gx
            wr -= gx
            self._sq = None  # a dense row costs the width anyway: the full sum, when asked
            if self.average:
                u, gs = self._umat(), step * g
                u[y] += gs * x
                u[rival] -= gs * x
        self._intercepts(y, rival, step, g)

    def learn_many(  # type: ignore[override]
        self, X: Any, y: Iterable[Any], labeled: Iterable[bool] | None = None, *, scores: bool = False
    ) -> ClassResult:
        """:meth:`learn_one` over the rows in order, with the same flags and weights, but fast:
        a block of rows is scored at once, cut at its first mistake, and scoring resumes after
        the update (as the binary model's general loop does).

        ``X`` as the binary model takes it (a matrix, rows, sparse rows, a DataFrame); ``y`` the
        labels, None or NaN for an unlabeled row (or False in ``labeled``). A new class takes
        the next row at its first labeled row. A refused label raises a ValueError before
        anything is learned (:meth:`refusals` finds them first). ``scores``: also report every
        class's served score (:attr:`ClassResult.all_scores`).

        A row is predicted before its label is known (a class is no prediction at its first
        row), and its class competes from that row on (with one class there is no rival):

        >>> model = MulticlassPerceptron()
        >>> out = model.learn_many([[1.0], [2.0], [-1.0]], ["up", "up", "down"], scores=True)
        >>> out.mistakes.tolist(), out.predictions.tolist(), out.all_scores.tolist()
        ([False, False, True], [-1, 0, 0], [[nan, nan], [0.0, nan], [0.0, nan]])
        """
        m = self._matrix(X)
        if frames.is_pandas(y):
            self._y_name = frames.name_of(y)
            y = frames.values_of(y)
        ys = y if isinstance(y, np.ndarray | list | tuple) else list(y)
        if len(ys) != len(m):
            raise ValueError(f"y has {len(ys)} labels for {len(m)} rows")
        mask = None if labeled is None else np.asarray(
            labeled if isinstance(labeled, np.ndarray) else list(labeled), dtype=np.bool_)
        before = len(self._space)
        rows, firsts = self._space.rows(ys, mask)
        self._resize(len(self._space), None)
        return self._learn_class_rows(m, rows, before, firsts, scores)

    def _learn_class_rows(self, m: Rows, rows: RowArray, before: int, firsts: list[int],
                    scores: bool) -> ClassResult:
        """learn_many of rows in the model's coordinates and their classes' rows; ``before``
        classes were active before the first row, and the class of row ``before + i`` from
        row ``firsts[i]`` on: a rival from that row on, a prediction from the next (a row is
        predicted before its label is known). Long calls go in chunks of rows (the same floats)."""
        n, k = len(m), len(self._space)
        self._ensure_dim(m.n_cols if isinstance(m, SparseRows) else m.shape[1])
        counts = None
        if firsts:
            at, opened = np.arange(n), np.array(firsts)
            counts = np.stack([before + np.searchsorted(opened, at, side="right"),
                               before + np.searchsorted(opened, at, side="left")])
        chunk = max(_MAX_BLOCK, _CHUNK_SCORES // max(1, k))
        if n <= chunk:
            return self._learn_chunk(m, rows, counts, scores)
        parts = []
        for a in range(0, n, chunk):
            z = min(n, a + chunk)
            part = take_rows(m, a, z)
            parts.append(self._learn_chunk(part, rows[a:z], None if counts is None else counts[:, a:z],
                                           scores))
        return _concat(parts)

    def _learn_chunk(self, m: Rows, rows: RowArray, counts: npt.NDArray[np.intp] | None,
                     scores: bool) -> ClassResult:
        """A chunk of :meth:`_learn_class_rows`; ``counts``: the classes active at each row, as
        rivals and as predictions (None: all of them)."""
        n, k = len(m), len(self._space)
        if not isinstance(m, SparseRows) and n >= self.compiled_min_rows and dense_pass.numba_installed():
            return self._learn_compiled(m, rows, counts, scores)
        active = None if counts is None else counts[0]
        sparse = isinstance(m, SparseRows)
        width = len(m.values) // max(1, n) if isinstance(m, SparseRows) else m.shape[1]
        max_block = max(_MIN_SCORED_BLOCK, min(_MAX_BLOCK, _BLOCK_BYTES // (8 * max(1, width) * max(1, k))))
        w, b = self._wmat(), self._bvec()
        labeled = rows >= 0
        average = self.average
        if average:
            steps = self._steps + np.cumsum(labeled) - labeled  # labeled rows before each
            u, ub = self._umat(), self._ubvec()
        served = np.empty((n, k), dtype=np.float64)
        margins = np.full(n, np.nan)
        flags = np.zeros(n, dtype=np.bool_)
        late = -1 if active is None else int(np.flatnonzero(active < k)[-1]) if (active < k).any() else -1
        columns = np.arange(k)
        buf = None if sparse else np.empty((min(max_block, n), k, width), dtype=np.float64)
        starts, norms = [0], [self.norms()]
        i, block = 0, _MIN_SCORED_BLOCK
        while i < n:
            end = min(n, i + block)
            s = _sparse_scores(m, w, b, i, end) if isinstance(m, SparseRows) else _dense_scores(
                m, w, b, i, end, buf)
            inactive = None
            if i <= late:  # a class appears later in the call: not yet a rival before its row
                assert active is not None
                inactive = columns[None, :] >= active[i:end, None]
                s[inactive] = -_INF
            margin, rival = functional_margins(s, rows[i:end])
            wrong = margin <= 0
            j = int(wrong.argmax())
            stop = i + j + 1 if wrong[j] else end
            margins[i:stop] = margin[: stop - i]
            if average:
                t = steps[i:stop]
                c = _scores(m, u, ub, i, stop)
                # -inf for a class not active yet stays -inf: its U row and u0 are 0
                served[i:stop] = np.where(t[:, None] > 0, s[: stop - i] - c / np.maximum(t, 1)[:, None],
                                          s[: stop - i])
            else:
                served[i:stop] = s[: stop - i]
            if not wrong[j]:
                block = min(block * 2, max_block)
                i = end
                continue
            r = i + j
            self._update(m, r, int(rows[r]), int(rival[j]), int(steps[r]) if average else 0)
            flags[r] = True
            starts.append(stop)
            norms.append(self.norms())
            block = max(_MIN_SCORED_BLOCK, min(2 * (j + 1), max_block))
            i = stop
        if average:
            self._steps += int(labeled.sum())
        return self._result(served, rows, flags, margins, starts, norms, counts, scores)

    @staticmethod
    def _result(served: FloatArray, rows: RowArray, flags: BoolArray, margins: FloatArray,
                starts: list[int], norms: list[tuple[float, float]], counts: npt.NDArray[np.intp] | None,
                scores: bool) -> ClassResult:
        """The result of a chunk: the norms in effect from each start on, and every row's
        prediction of the classes known before it (a class is no prediction at its own first
        row)."""
        n, k = served.shape
        edges = np.array([*starts, n], dtype=np.intp)
        lengths = edges[1:] - edges[:-1]
        norm = np.repeat(np.array([v for v, _ in norms], dtype=np.float64), lengths)
        norm_aug = np.repeat(np.array([v for _, v in norms], dtype=np.float64), lengths)
        known = None
        if counts is not None:
            known = counts[1]
            served[np.arange(k)[None, :] >= known[:, None]] = -_INF
        return _served_result(served, rows, flags, margins, norm, norm_aug, known, scores)

    def _learn_compiled(self, m: FloatArray, rows: RowArray, counts: npt.NDArray[np.intp] | None,
                        scores: bool) -> ClassResult:
        """:meth:`_learn_chunk` of dense rows: the mistakes and their runners-up decided first
        (:func:`_decide`, the compiled loop; the averaging sums play no part in a decision), then
        every row scored in the fixed order with the weights (and sums) in effect at it, and the
        updates made, in order, as the general loop makes them: the same floats."""
        n, k = len(m), len(self._space)
        d = m.shape[1]
        active = np.full(n, k, dtype=np.intp) if counts is None else counts[0]
        w, b = self._wmat(), self._bvec()
        w_aug = np.empty((k, d + 1))
        w_aug[:, :d], w_aug[:, d] = w, b
        mistakes, rivals = _decide(m, rows, active, w_aug, self.fit_intercept)
        block = max(_MIN_SCORED_BLOCK, min(_MAX_BLOCK, _BLOCK_BYTES // (8 * max(1, d) * max(1, k))))
        buf = np.empty((min(block, n), k, d), dtype=np.float64)
        learning = np.empty((n, k), dtype=np.float64)
        average = self.average
        if average:
            labeled = rows >= 0
            steps = self._steps + np.cumsum(labeled) - labeled  # labeled rows before each
            u, ub, ubv = self._umat(), self._ubvec(), self._ubv
            sums = np.empty((n, k), dtype=np.float64)
        flags = np.zeros(n, dtype=np.bool_)
        flags[mistakes] = True
        starts, norms = [0, *(mistakes + 1).tolist()], [self.norms()]
        a, bv, fsum = 0, self._bv, math.fsum
        for r, y, rival in zip(mistakes.tolist(), rows[mistakes].tolist(), rivals.tolist(), strict=True):
            _fill(m, w, b, a, r + 1, learning, buf)
            x = m[r]  # the update, as _update makes it
            w[y] += x
            w[rival] -= x
            if average:
                _fill(m, u, ub, a, r + 1, sums, buf)
                gs = int(steps[r]) * 1.0
                u[y] += gs * x
                u[rival] -= gs * x
            if self.fit_intercept:
                bv[y] += 1.0
                bv[rival] -= 1.0
                if average:
                    ubv[y] += gs
                    ubv[rival] -= gs
            sq = fsum(np.add.reduce(w * w, axis=1).tolist())  # norms(), as after a dense update
            norms.append((math.sqrt(sq), math.sqrt(sq + fsum((b * b).tolist()))))
            a = r + 1
        _fill(m, w, b, a, n, learning, buf)
        if len(mistakes):
            self._sq = None
            self._updates += len(mistakes)
        if counts is not None:
            learning[np.arange(k)[None, :] >= active[:, None]] = -_INF
        margins, _ = functional_margins(learning, rows)
        served = learning
        if average:
            _fill(m, u, ub, a, n, sums, buf)
            served = np.where(steps[:, None] > 0, learning - sums / np.maximum(steps, 1)[:, None], learning)
            self._steps += int(labeled.sum())
        return self._result(served, rows, flags, margins, starts, norms, counts, scores)

    def fit(self, X: Any, y: Iterable[Any], passes: int = 1, *, epochs: int | None = None) -> list[int]:
        """Up to ``passes`` passes over (X, y) in order, stopping after a pass with no mistake (as
        the binary model's ``fit``); the mistakes of each pass made. Every row needs a label."""
        m = self._matrix(X)
        ys = frames.values_of(y) if frames.is_pandas(y) else y if isinstance(y, np.ndarray) else list(y)
        if len(ys) and any(missing(v) for v in (ys.tolist() if isinstance(ys, np.ndarray) else ys)):
            raise ValueError("fit needs a label for every row")
        per_pass: list[int] = []
        for _ in range(passes if epochs is None else epochs):
            per_pass.append(int(self.learn_many(m, ys).mistakes.sum()))
            if per_pass[-1] == 0:
                break
        return per_pass

    def name_classes(self, negative: Any, positive: Any) -> None:
        """The binary model's: the K-class perceptron's classes are named by its labels."""
        raise TypeError("the K-class perceptron names its classes by the labels it learns")

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Learned state as plain data: ``weights`` (K rows), ``intercept`` (K), ``mistakes``,
        ``features``, ``theta_sq`` (‖W‖²_F as sparse updates kept it), ``classes`` (in row
        order) and, with ``average=True``, ``average`` (``steps``, ``weighted_updates`` of K
        rows, ``weighted_intercept`` of K)."""
        state: dict[str, Any] = {
            "weights": self._wmat().tolist(),
            "intercept": self._bvec().tolist(),
            "mistakes": self._updates,
            "features": self.feature_names,
        }
        if self._sq is not None:
            state["theta_sq"] = self._sq
        state["classes"] = self._space.get_state()
        if self.average:
            state["average"] = {"steps": self._steps, "weighted_updates": self._umat().tolist(),
                                "weighted_intercept": self._ubvec().tolist()}
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (exact); a binary model's state is taken as
        :func:`classes_state` converts it. The classes given must begin the state's classes (or
        the state's begin them: the rest are added, zero rows); ValueError else."""
        if not isinstance(state["intercept"], list | tuple | np.ndarray):
            state = classes_state(state)
        names = list(state["classes"])
        self._space.set_state(names)
        k, held = len(self._space), len(names)
        w = _matrix(state["weights"], held)
        width = self.n_features if self._hasher is None else 1 << (self.hash_bits or 0)
        if width is not None and w.shape[1] not in (0, width):
            raise DimensionError(f"state has rows of {w.shape[1]} weights, the model has {width}")
        self._d = None
        self._wbuf2, self._ubuf2 = np.zeros((0, 0)), np.zeros((0, 0))
        self._bbuf, self._ubbuf = np.zeros(0), np.zeros(0)
        self._resize(k, width if width is not None else w.shape[1] or None)
        self._wmat()[:held, : w.shape[1]] = w
        self._bvec()[:held] = np.asarray(state["intercept"], dtype=np.float64)
        sq = state.get("theta_sq")
        self._sq = None if sq is None else float(sq)
        self._updates = int(state["mistakes"])
        self._index = {_feature(name): i for i, name in enumerate(state.get("features") or [])}
        avg = state.get("average") if self.average else None
        self._steps = int(avg["steps"]) if avg else 0
        if avg:
            u = _matrix(avg["weighted_updates"], held) if len(avg["weighted_updates"]) else np.zeros((0, 0))
            self._umat()[: len(u), : u.shape[1]] = u
            self._ubvec()[:held] = np.asarray(avg["weighted_intercept"] or [0.0] * held, dtype=np.float64)
        self._mistake = False

    def config(self) -> dict[str, Any]:
        """The binary model's configuration, and ``"multiclass": true``."""
        return {**super().config(), "multiclass": True}


def classes_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A binary model's state as the K-class perceptron's, exactly: rows ``[negative,
    positive]``, weights ``[0 − θ, θ]``, intercepts ``[0 − θ0, θ0]`` and the averaging sums
    likewise (the same steps). The names are the labels the binary model predicts (those taught,
    or inferred from the other: :class:`~stream_perceptron.model.labels.LabelSpace`); a model
    taught no label, with no update and θ, θ0 still 0, gives no class at all. The K-class
    perceptron that learns from the start with those two classes given makes the same updates:
    its W_negative stays 0 − W_positive, bit for bit.

    >>> classes_state({"weights": [1.5, 0.0], "intercept": -1.0, "mistakes": 2, "features": [],
    ...                "classes": ["ham", "spam"]})["weights"]
    [[-1.5, 0.0], [1.5, 0.0]]
    """
    labels = LabelSpace()
    labels.set_state(state.get("classes"))
    w = np.asarray(state["weights"], dtype=np.float64)
    b = float(state["intercept"])
    out: dict[str, Any] = {"weights": [], "intercept": [], "mistakes": int(state["mistakes"]),
                           "features": list(state.get("features") or []), "classes": []}
    avg = state.get("average")
    if state.get("classes") is None and not (out["mistakes"] or b or w.any()):
        if avg:
            out["average"] = {"steps": int(avg["steps"]), "weighted_updates": [], "weighted_intercept": []}
        return out
    out.update(weights=[(0.0 - w).tolist(), w.tolist()], intercept=[0.0 - b, b], classes=list(labels.pair))
    if avg:
        u = np.zeros(len(w))
        given = np.asarray(avg["weighted_updates"], dtype=np.float64)
        u[: len(given)] = given
        ub = float(avg["weighted_intercept"])
        out["average"] = {"steps": int(avg["steps"]), "weighted_updates": [(0.0 - u).tolist(), u.tolist()],
                          "weighted_intercept": [0.0 - ub, ub]}
    return out


def _fill(m: FloatArray, w: FloatArray, b: FloatArray, start: int, end: int, out: FloatArray,
          buf: FloatArray) -> None:
    """``out[start:end]`` = the scores of those dense rows (:func:`_dense_scores`), in blocks of
    ``buf``'s rows."""
    step = len(buf)
    for a in range(start, end, step):
        z = min(end, a + step)
        products = np.multiply(m[a:z, None, :], w[None, :, :], out=buf[: z - a])
        part = out[a:z]
        np.add.reduce(products, axis=2, out=part)
        part += b


def _reach(x: FloatArray) -> tuple[float, BoolArray]:
    """R, an upper bound of the rows' ‖[x, 1]‖ (as :mod:`.dense_pass` takes it), and the rows set
    aside for the fixed order: those whose norm is over 2^400 or not finite, left out of R."""
    with np.errstate(all="ignore"):
        sq = np.einsum("ij,ij->i", x, x)
    good = sq <= dense_pass.HUGE * dense_pass.HUGE
    return math.sqrt(float(sq[good].sum()) + len(x)), ~good


def _decide(x: FloatArray, labels: RowArray, active: npt.NDArray[np.intp], w_aug: FloatArray,
            fit_intercept: bool) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The rows of the mistakes and their runners-up, ``w_aug`` = [W, b] updated in place: the
    compiled loop (:mod:`.class_kernel`) decides each row whose margin and rival are clear of the
    tolerance, and stops at any other, which is decided here in the fixed order, as learn_one
    decides it."""
    from stream_perceptron.model import class_kernel  # numba is loaded at the first call

    n, d = x.shape
    reach, exact = _reach(x)
    rows = np.empty(n, dtype=np.intp)
    rivals = np.empty(n, dtype=np.intp)
    s = np.empty(len(w_aug), dtype=np.float64)
    scale = dense_pass.tolerance_scale(d + 1, reach)
    size = float(class_kernel.largest_row_norm(w_aug))
    since, i, k = 0, 0, 0
    while True:
        i, k, size, since = class_kernel.run(x, labels, active, exact, w_aug, i, k, rows, rivals, scale,
                                             size, since, reach, fit_intercept, s)
        if i >= n:
            return rows[:k], rivals[:k]
        y, kk = int(labels[i]), int(active[i])
        scores = _dense_scores(x, w_aug[:kk, :d], w_aug[:kk, d], i, i + 1)[0].tolist()
        rival = _argmax(scores, skip=y)
        if rival >= 0 and scores[y] <= scores[rival]:
            w_aug[y, :d] += x[i]
            w_aug[rival, :d] -= x[i]
            if fit_intercept:
                w_aug[y, d] += 1.0
                w_aug[rival, d] -= 1.0
            rows[k], rivals[k], k = i, rival, k + 1
            since, size = 0, float(class_kernel.largest_row_norm(w_aug))  # summed again: x may be past R
        i += 1


def _matrix(rows: Any, k: int) -> FloatArray:
    """K rows of a state as a k × d matrix (k × 0 when they are empty)."""
    a = np.asarray(rows, dtype=np.float64)
    if not k:
        return np.zeros((0, 0))
    return a.reshape(k, -1) if a.size else np.zeros((k, 0))


def _feature(name: Any) -> Hashable:
    return tuple(_feature(n) for n in name) if isinstance(name, list) else name


def _add(a: FloatArray, columns: npt.NDArray[np.intp], values: FloatArray, hashed: bool) -> None:
    """a[columns] += values; hashed columns may repeat within a row, and each then adds."""
    if hashed:
        np.add.at(a, columns, values)
    else:
        a[columns] += values


def _served_result(served: FloatArray, rows: RowArray, flags: BoolArray, margins: FloatArray,
                   norm: FloatArray, norm_aug: FloatArray, active: npt.NDArray[np.intp] | None,
                   scores: bool) -> ClassResult:
    """The per-row result from the served scores (−inf for a class not yet active)."""
    n, k = served.shape
    at = np.arange(n)
    if k:
        pred = served.argmax(axis=1).astype(np.int32)
        top = served[at, pred]
        others = served.copy()
        others[at, pred] = -_INF
        second = others.argmax(axis=1).astype(np.int32)
        second_score = others[at, second]
    else:
        pred = second = np.full(n, UNLABELED, dtype=np.int32)
        top = second_score = np.full(n, np.nan)
    count = np.full(n, k) if active is None else active
    pred = np.where(count >= 1, pred, UNLABELED).astype(np.int32)
    top = np.where(count >= 1, top, np.nan)
    second = np.where(count >= 2, second, UNLABELED).astype(np.int32)
    second_score = np.where(count >= 2, second_score, np.nan)
    served_mistakes = (rows >= 0) & (pred != rows)
    everything = None
    if scores:
        everything = served if active is None else np.where(np.arange(k)[None, :] < active[:, None], served,
                                                             np.nan)
    return ClassResult(rows, pred, top, second, second_score, flags, margins, served_mistakes, norm, norm_aug,
                       everything)


def _concat(parts: list[ClassResult]) -> ClassResult:
    """Results of consecutive parts as one."""
    fields: list[Any] = [np.concatenate(f) for f in list(zip(*parts, strict=True))[:-1]]
    fields.append(None if parts[0].all_scores is None else np.concatenate([p.all_scores for p in parts]))
    return ClassResult(*fields)
