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
order of its keys (the order :mod:`~stream_perceptron.model.rowwise` states exactly), so its cost
is its number of features, not the model's width. One dict row at a time (``learn_one``,
``predict_one``, ``predict_proba_one``) is scored in plain Python in that same order, from θ kept
by name beside the array, since numpy's overhead per call outweighs a few features' arithmetic;
a batch (``learn_many``, a pandas DataFrame included) goes through numpy.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from itertools import chain
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from river import base

from stream_perceptron.errors import DimensionError, FeatureValueError
from stream_perceptron.model import dense_pass, frames
from stream_perceptron.model.classes import class_label
from stream_perceptron.model.hashing import FeatureHasher
from stream_perceptron.model.labels import LabelSpace, NotBinaryLabel, Signs
from stream_perceptron.model.rowwise import checked, dot_lists, dot_named, dot_pair, reduce_sum, value
from stream_perceptron.model.sparse import SparseRows, dot_rows

try:  # the compiled part (native/): a dict row's score in rowwise's order, the same floats
    from stream_perceptron_native import proba_named as _compiled_proba
    from stream_perceptron_native import score_named as _compiled_score
    from stream_perceptron_native import score_pair as _compiled_pair
except ImportError:  # not built here (or built before these): rowwise's loops serve
    _compiled_score = _compiled_pair = _compiled_proba = None

FloatArray = npt.NDArray[np.float64]
Features = Mapping[Any, Any] | Sequence[float] | FloatArray
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
_KEYS_BY_NAME = 1 << 16  # hashed names kept by name for dict rows one at a time
_exp = math.exp


class Refusal(str):
    """Why a row does not fit the model (the text itself), with its ``kind``: ``"names"`` when
    its new feature names would take the model past its bound on names, ``"width"`` when it
    does not fit the model's width (or dense vectors fixed the model and it is named)."""

    kind: str

    def __new__(cls, reason: str, kind: str) -> Refusal:
        refusal = super().__new__(cls, reason)
        refusal.kind = kind
        return refusal


class Widened(Exception):  # noqa: N818  (not an error: a signal to answer as the K-class model)
    """Raised by the binary model's own attributes on a perceptron that became K-class, so that
    a method of the binary class still bound to it (river's evaluation takes ``model.learn_one``
    and ``model.predict_one`` once, before the stream) answers as the K-class method does."""


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


class Perceptron(base.MiniBatchClassifier):
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
        weight. ``n_features`` is then :math:`2^b`. A name is a string, an integer, a float,
        ``bytes``, ``None`` or a tuple of these (river's generators key features 0, 1, 2…).
    hash_sign
        With ``hash_bits``, also give each name a hashed sign (colliding names then cancel on
        average instead of adding).
    classes
        Two class names, ``(negative, positive)``: the only labels taken (any other is refused
        with a ValueError) and the ones predicted. Three or more names make the K-class
        perceptron (:class:`~stream_perceptron.model.multiclass.MulticlassPerceptron`, what
        ``Perceptron(classes=[...])`` then returns), whose labels are those classes.

    Notes
    -----
    **Labels.** The update works on signs; labels are mapped to them by
    :class:`~stream_perceptron.model.labels.LabelSpace`: ``True``, ``1`` and the positive class
    are +1; ``False``, ``0``, ``-1`` and the negative class are −1 (0 is the negative class
    everywhere). :meth:`predict_one` answers in the label space taught: bools give bools, ±1 gives
    ±1, 0/1 gives 0/1, class names give those names (a class not yet taught is inferred from the
    other: 0 for 1, so a 0/1 stream answers 0 from its first example). It predicts the positive
    label when the score is > 0, else the negative one; a point on the boundary (score 0) is still
    counted a mistake for either label, as the perceptron's texts do.

    **Many classes.** A perceptron without ``classes=`` that meets a label which is no binary
    value (a string, an int other than −1, 0 and 1, a tuple) becomes the K-class perceptron
    (:class:`~stream_perceptron.model.multiclass.MulticlassPerceptron`), learning classes as they
    appear, as river's multiclass models do. What it learned from binary labels carries over
    exactly: its rows are ``[negative, positive]`` with weights :math:`[0 - \theta, \theta]`
    and intercepts :math:`[0 - \theta_0, \theta_0]` (averaging sums likewise), the K-class
    perceptron that learns from the start with those two classes makes the same updates, and
    the new class takes the next row.

    **Probabilities.** :meth:`predict_proba_one` gives the positive class
    :math:`\sigma(s) = 1/(1 + e^{-s})` of the served score :math:`s`, as river's Perceptron does.
    It is a monotone squashing of the score, so rank-based metrics such as ROC AUC work, but it
    is **not a calibrated probability**: the perceptron fits no likelihood and the score's scale
    grows with ‖θ‖.

    **Sample weights.** ``learn_one(x, y, w)`` scales the update by :math:`w \ge 0`: on a
    mistake (still :math:`y(\theta \cdot x + \theta_0) \le 0`, whatever w),
    :math:`\theta \leftarrow \theta + w y x` and :math:`\theta_0 \leftarrow \theta_0 + w y`, the
    step river's linear models take with a sample weight. ``w = 1`` is the rule itself, bit for
    bit; ``w = 0`` learns nothing (the example is not counted). :attr:`updates` counts updates,
    whatever their weight. With ``average=True`` the weight scales the update that enters the
    average, :math:`\Delta_s = w_s y_s x_s`, and each example learned still counts once in T:
    θ̄ stays the mean of θ over the examples. learn_many takes no weights.

    **Bad values.** A feature value is a number (a bool counts as 0 or 1). ``None``, NaN, ±inf
    or anything else in a dict row, a list, a list of rows or a DataFrame is refused with one
    :class:`~stream_perceptron.errors.FeatureValueError` naming the feature, as the worker's
    decoder refuses such a record; nothing is learned from the row. numpy arrays (and
    :class:`~stream_perceptron.model.sparse.SparseRows`) are taken as they are: the worker
    builds them from records it has checked, and a check would cost its batches a pass (a
    non-finite value then gives a non-finite score, never a mistake).

    **Mini-batches** (river's ``MiniBatchClassifier``): :meth:`learn_many`,
    :meth:`predict_many` and :meth:`predict_proba_many` take a pandas DataFrame (its columns are
    feature names, each row learned or scored as the dict of its columns would be, in column
    order) and answer with a Series or a DataFrame on its index; they take numpy arrays and lists
    of rows too, and answer those with numpy arrays. pandas is imported only when given.

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

    Named features map to stable indices, and labels come back as taught; whether an example
    was a mistake is :attr:`last_mistake`:

    >>> model = Perceptron()
    >>> model.learn_one({"a": 2.0, "b": -1.0}, True)
    >>> model.last_mistake
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

    Class names are the only labels taken once given:

    >>> model = Perceptron(classes=("ham", "spam"))
    >>> model.learn_one({"offer": 1.0}, "spam")
    >>> model.predict_one({"offer": 2.0})
    'spam'
    >>> model.learn_one({"offer": 1.0}, True)
    Traceback (most recent call last):
    ...
    ValueError: label True is not one of the classes ('ham', 'spam') given by classes=
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
    ) -> None:
        self.n_features = n_features
        self.max_names = max_names
        self.fit_intercept = fit_intercept
        self.initial_weights = initial_weights
        self.average = average
        self.hash_bits = hash_bits
        self.hash_sign = hash_sign
        self.classes = classes
        # θ is _w, the first entries of the buffer _wbuf (which grows by doubling; its entries
        # past θ are 0); _wv is a memoryview of _wbuf, for Python floats one at a time
        self._w: FloatArray | None = None
        self._wbuf: FloatArray | None = None
        self._wv: memoryview | None = None
        # θ by feature name for dict rows one at a time: _wd[k] = s_k·θ[c_k], with c_k the name's
        # column and s_k its sign (1 unless hash_sign), equal to the array at every name it holds
        # (all indexed names; the names met lately when hashing, and _keys_at lists them by
        # column). None until needed, and again whenever the array moved without it.
        self._wd: dict[Hashable, float] | None = None
        self._keys_at: dict[int, list[tuple[Hashable, float]]] = {}
        self._b = 0.0
        self._updates = 0
        # ‖θ‖², kept up to date by sparse updates (a mistake then costs the row's features, not
        # the model's width); None: the full sum over θ, as after a dense update
        self._sq: float | None = None
        self._zeros = initial_weights is None  # θ is 0 until an update or a state: set_state clears it
        self._index: dict[Hashable, int] = {}
        self._names_refused = 0
        self._labels = LabelSpace(classes)
        self._signs = self._labels.known  # label → sign, for the labels met (the same dict, kept)
        # averaging (lazy): u = Σ n_s Δ_s beside θ, u0 beside θ0, T labeled examples learned;
        # u kept as θ is (_u, _ubuf, _uv, and _ud by name)
        self._u: FloatArray | None = None
        self._ubuf: FloatArray | None = None
        self._uv: memoryview | None = None
        self._ud: dict[Hashable, float] | None = None
        self._ub = 0.0
        self._steps = 0
        self._mistake = False
        self._y_name: Hashable = None  # the name of the last y Series learned: predict_many's name
        self._hasher, width = hashing(n_features, hash_bits, hash_sign)
        if initial_weights is not None:
            w = np.array(initial_weights, dtype=np.float64).ravel()
            if width is not None and len(w) != width:
                raise ValueError(f"initial_weights has {len(w)} entries but n_features is {width}")
            self._set_w(w.copy())
        elif width is not None:
            self._set_w(np.zeros(width, dtype=np.float64))

    def __new__(cls, *args: Any, **kwargs: Any) -> Perceptron:
        """The K-class perceptron when ``classes`` names three or more classes."""
        target = cls
        if cls is Perceptron and _many(args[7] if len(args) > 7 else kwargs.get("classes")):
            from stream_perceptron.model.multiclass import MulticlassPerceptron  # imports this module

            target = MulticlassPerceptron
        model: Perceptron = super().__new__(target)
        return model

    @classmethod
    def _unit_test_params(cls) -> Any:
        yield {}
        yield {"average": True}
        yield {"hash_bits": 8, "hash_sign": True}
        yield {"classes": (False, True)}  # river's checks teach bools: the two names they use

    def __getstate__(self) -> dict[str, Any]:
        """The object's state for pickle and deepcopy: memoryviews do not pickle, and the by-name
        copies and buffers are rebuilt from θ and u."""
        state = self.__dict__.copy()
        for key in ("_wbuf", "_wv", "_wd", "_ubuf", "_uv", "_ud"):
            state[key] = None
        state["_keys_at"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._set_w(self._w)
        self._set_u(self._u)
        self._signs = self._labels.known

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
    def class_labels(self) -> tuple[Any, Any]:
        """``(negative, positive)``: the labels the model predicts (see Notes)."""
        return self._labels.pair

    @property
    def last_mistake(self) -> bool:
        """Whether the example :meth:`learn_one` learned last was a mistake, so that θ and θ0
        moved (False before any, and after an example of weight 0). learn_many reports each of
        its rows in its result instead."""
        return self._mistake

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
    def feature_names(self) -> list[Hashable]:
        """Named features in index order (empty when only dense vectors were seen)."""
        return list(self._index)  # names are indexed in the order they come: index order

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

    @property
    def _multiclass(self) -> bool:
        """Whether river may teach it more than two classes: without ``classes=`` it becomes
        K-class on a label that is no binary value."""
        return self.classes is None

    def _widen(self, label: Any) -> None:
        """Become the K-class perceptron, ``label`` being no binary value (see Notes); a
        ValueError, changing nothing, when it is no class either."""
        from stream_perceptron.model.multiclass import MulticlassPerceptron  # imports this module

        class_label(label)
        MulticlassPerceptron.widen(self)

    # ------------------------------------------------------------------ inputs
    def _set_w(self, w: FloatArray | None) -> None:
        """θ replaced by ``w`` (None: no dimension yet); the copy by name is dropped."""
        self._w = self._wbuf = w
        self._wv = None if w is None else w.data
        self._names_changed()

    def _set_u(self, u: FloatArray | None) -> None:
        """u replaced by ``u``, as :meth:`_set_w` replaces θ."""
        self._u = self._ubuf = u
        self._uv = None if u is None else u.data
        self._names_changed()

    def _ensure_dim(self, d: int) -> FloatArray:
        """θ at least ``d`` wide (new entries 0; the copy by name stays equal to it)."""
        if self._w is None or d > len(self._w):
            self._w, self._wbuf, self._wv = _grown(self._w, self._wbuf, self._wv, d)
        return self._w

    def _ensure_u(self, d: int) -> FloatArray:
        """The averaging sums u, as wide as θ."""
        if self._u is None or d > len(self._u):
            self._u, self._ubuf, self._uv = _grown(self._u, self._ubuf, self._uv, d)
        return self._u

    def _names_changed(self) -> None:
        """Names were indexed, or θ or u moved, other than one row at a time: the copies by name
        are built again when next needed."""
        self._wd = self._ud = None

    def vectorize(self, x: Features, *, grow: bool = True) -> FloatArray:
        """``x`` as a float vector in the model's coordinates.

        Dense input must match the dimension (the first one fixes it). Dict input maps each name
        to its index; new names get new indices when ``grow`` (zero weight until learned), and are
        ignored otherwise. Raises :class:`DimensionError` when ``x`` cannot fit.
        """
        if isinstance(x, Mapping):
            return self._vectorize_named(x, grow)
        try:
            v = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            raise FeatureValueError(f"x holds a value that is not a number: {x!r}") from None
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
            v = np.zeros(self.dim or 0, dtype=np.float64)
            np.add.at(v, cols, values)
            return v
        index = self._index
        if self._fixed_by_dense():
            raise DimensionError(_FIXED_BY_DENSE)
        if grow:
            self._take_names([k for k in x if k not in index])
        v = np.zeros(len(index) if self.dim is None else self.dim, dtype=np.float64)
        for name, x_k in x.items():
            i = index.get(name)
            if i is not None:
                v[i] = x_k
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
        known = len(index)
        for i, x in enumerate(xs):
            new = [k for k in x if k not in index]
            if limit is not None and len(index) + len(new) > limit:
                rejected[i] = self._refuse_names(len(new))
                continue
            for name in new:
                index[name] = len(index)
        if len(index) > known:
            self._names_changed()
        return rejected

    def _index_names(self, new: Iterable[Hashable]) -> None:
        """Give ``new`` names (none of them indexed) the next indices, θ growing to hold them."""
        index, names = self._index, list(new)
        first = len(index)
        for name in names:
            index[name] = len(index)
        self._ensure_dim(max(len(index), self.n_features or 0))
        wd, ud, wv = self._wd, self._ud, self._wv
        if wd is not None and wv is not None:  # kept equal to θ
            for i, name in enumerate(names, first):
                wd[name] = wv[i]
            if ud is not None:
                u, uv = self._u, self._uv
                for i, name in enumerate(names, first):
                    ud[name] = uv[i] if u is not None and uv is not None and i < len(u) else 0.0

    def _hashed(self, names: Sequence[Hashable], values: FloatArray
                ) -> tuple[npt.NDArray[np.intp], FloatArray]:
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
        return SparseRows(indptr, cols, values, self.dim or 0)

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
        try:
            if isinstance(x, dict):
                return self._score_dict(x)
            if isinstance(x, Mapping):
                return self._score_dict(dict(x))
            v = self.vectorize(x if isinstance(x, np.ndarray) else _checked_list(x), grow=False)
            if self._w is None or not len(v):
                return self._b  # nothing learned yet
        except Widened:
            return self.score_one(x)
        a = float((v * self._w).sum() + self._b)
        if not self._averaging():
            return a
        assert self._u is not None
        return self._served(a, float((v * self._u).sum() + self._ub))

    def _score_dict(self, x: dict[Hashable, Any]) -> float:
        """:meth:`score_one` of a dict row, in plain Python (:mod:`.rowwise`), with learn_many's
        floats: a name not indexed weighs 0, as it would once indexed (the same products)."""
        wd = self._wd
        if wd is None:
            wd = self._by_name()
        try:
            if _compiled_score is not None and type(x) is dict \
                    and (s := self._compiled_dict_score(wd, x)) is not None:
                return s
            if self.average and self._steps:
                a, c = self._served_parts(wd, x)
                if type(a) is not float or a - a or type(c) is not float:  # as below
                    raise TypeError
                return a - c / self._steps
            if len(x) <= 8:  # dot_named's loop, written out here: a call costs a third of a row
                items = iter(x.items())
                a = 0.0
                for k, v in items:
                    a = wd[k] * v
                    break
                rest = -0.0
                for k, v in items:
                    rest += wd[k] * v
                a = (a + rest) + self._b
            else:
                a = dot_named(wd, x) + self._b
            if type(a) is not float or a - a:  # a numpy value, or one not finite: checked below
                raise TypeError
            return a
        except (KeyError, TypeError, OverflowError):
            pass
        xf = checked(x)  # a value to refuse or convert, or a name not met: the same sums from floats
        values = list(xf.values())
        if self._hasher is not None:
            self._take_keys(xf)
        wd = self._wd
        assert wd is not None
        a = dot_lists([wd.get(k, 0.0) for k in xf], values) + self._b
        if not (self.average and self._steps):
            return a
        ud = self._ud
        assert ud is not None
        return a - (dot_lists([ud.get(k, 0.0) for k in xf], values) + self._ub) / self._steps

    def _compiled_dict_score(self, wd: dict[Hashable, float], x: dict[Hashable, Any]) -> float | None:
        """:meth:`_score_dict`'s served score from the compiled part (the same floats), or None
        where it declines the row (the Python loops then take it and say what is wrong)."""
        if not (self.average and self._steps):
            s: float | None = _compiled_score(wd, x, self._b)
            return s
        pair: tuple[float, float] | None = _compiled_pair(wd, self._ud, x, self._b, self._ub)
        return None if pair is None else pair[0] - pair[1] / self._steps

    def _served_parts(self, wd: dict[Hashable, float], x: dict[Hashable, Any]) -> tuple[float, float]:
        """θ·x + θ0 and u·x + u0 of a dict row, in one pass (:func:`~.rowwise.dot_pair`)."""
        assert self._ud is not None
        a, c = dot_pair(wd, self._ud, x)
        return a + self._b, c + self._ub

    def _by_name(self) -> dict[Hashable, float]:
        """θ (and u when averaging) by name, built from the arrays (empty when hashing: names
        are added as they are met); DimensionError when dense vectors fixed the model (it has no
        names)."""
        self._keys_at = {}
        if self._hasher is not None:
            self._wd, self._ud = {}, ({} if self.average else None)
            return self._wd
        if self._fixed_by_dense():
            raise DimensionError(_FIXED_BY_DENSE)
        w = [] if self._w is None else self._w.tolist()
        self._wd = dict(zip(self._index, w, strict=False))
        if self.average:
            u = [] if self._u is None else self._u.tolist()
            ud = dict(zip(self._index, u, strict=False))
            for name in list(self._index)[len(ud):]:  # u narrower than the names: 0 past it
                ud[name] = 0.0
            self._ud = ud
        return self._wd

    def _take_keys(self, xf: dict[Hashable, float]) -> None:
        """Put the names of a checked dict row that are not by name yet there, with their hashed
        columns and signs (the copy holds at most 65,536 names: past that it starts afresh)."""
        assert self._hasher is not None
        wd = self._wd if self._wd is not None else self._by_name()
        new = [k for k in xf if k not in wd]
        if not new:
            return
        if len(wd) + len(new) > _KEYS_BY_NAME:
            wd = self._by_name()
        ud, keys_at, wv, uv = self._ud, self._keys_at, self._wv, self._uv
        assert wv is not None
        column = self._hasher.column
        for k in new:
            c, sign = column(k)
            wd[k] = wv[c] * sign  # s·θ[c]: times x_k, the product s·x_k·θ[c] of learn_many's rows
            if ud is not None:
                ud[k] = (0.0 if uv is None else uv[c]) * sign
            keys_at.setdefault(c, []).append((k, sign))

    def _averaging(self) -> bool:
        """Whether the served model differs from θ: averaging, once a label was learned."""
        return self.average and self._steps > 0 and self._u is not None

    def _served(self, score: float, weighted: float) -> float:
        """θ̄·x + θ̄0 from θ·x + θ0 and u·x + u0 (the same operation as learn_many's)."""
        return score - weighted / self._steps

    def predict_one(self, x: Features) -> Any:  # type: ignore[override]  # also dense x
        """The positive label when the served score is > 0, else the negative one, in the label
        space taught (see Notes)."""
        try:
            s = self._score_dict(x) if type(x) is dict else self.score_one(x)
            negative, positive = self._labels.pair
        except Widened:
            return self.predict_one(x)
        return positive if s > 0 else negative

    def predict_proba_one(self, x: Features) -> dict[Any, float]:  # type: ignore[override]
        """``{negative: 1 − σ(s), positive: σ(s)}`` with σ the logistic function of the served
        score s: a squashing for ranking, **not a calibrated probability** (see Notes)."""
        try:
            negative, positive = self._labels.pair
            if type(x) is dict and _compiled_proba is not None and (wd := self._wd) is not None \
                    and not self.average:  # the answer below, compiled: a call a row
                proba = _compiled_proba(wd, x, self._b, negative, positive)
                if proba is not None:
                    return proba  # type: ignore[no-any-return]
            s = self._score_dict(x) if type(x) is dict else self.score_one(x)
        except Widened:
            return self.predict_proba_one(x)
        if s >= 0:  # _sigmoid, written out
            p = 1.0 / (1.0 + _exp(-s))
        else:
            e = _exp(s)
            p = e / (1.0 + e)
        return {negative: 1.0 - p, positive: p}

    def score_many(self, X: Any, *, served: bool = True) -> FloatArray:
        """:meth:`score_one` of each row (same summation order, so the same floats); with
        ``served=False``, θ·x+θ0 of the learning weights even when averaging (the
        quantities: margins, training error). ``X`` as :meth:`learn_many` takes it."""
        try:
            b = self._b
        except Widened:
            return self.score_many(X, served=served)
        m = self._matrix(X)
        width = m.n_cols if isinstance(m, SparseRows) else m.shape[1]
        w = self._ensure_dim(width)
        scores = _block(m, w, b, 0, len(m))
        if not served or not self._averaging():
            return scores
        u = self._ensure_u(width)
        averaged: FloatArray = scores - _block(m, u, self._ub, 0, len(m)) / self._steps
        return averaged

    def predict_many(self, X: Any) -> Any:
        """:meth:`predict_one` of each row: a pandas Series on X's index for a DataFrame (named
        as the last y Series learned, as river's linear models name it), else an array of the
        labels taught."""
        try:
            negative_label, positive_label = self._labels.pair
        except Widened:
            return self.predict_many(X)
        positive = self.score_many(X) > 0
        labels: npt.NDArray[Any] = np.where(positive, positive_label, negative_label)
        if frames.is_pandas(X):
            return frames.series(labels, X, self._y_name)
        return labels

    def predict_proba_many(self, X: Any) -> Any:
        """:meth:`predict_proba_one` of each row (the same floats): a pandas DataFrame on X's
        index, its columns the negative and the positive label, for a DataFrame; else an array
        of two columns in that order."""
        try:
            pair = self._labels.pair
        except Widened:
            return self.predict_proba_many(X)
        p = np.array([_sigmoid(s) for s in self.score_many(X).tolist()], dtype=np.float64)
        proba = np.column_stack([1.0 - p, p])
        if frames.is_pandas(X):
            return frames.frame(proba, X, pair)
        return proba

    def norms(self) -> tuple[float, float]:
        """‖θ‖ and ‖[θ, θ0]‖ (the augmented weights of the reduction through the origin)."""
        sq = self._sq if self._sq is not None else self._full_sq()
        return math.sqrt(sq), math.sqrt(sq + self._b * self._b)

    def _full_sq(self) -> float:
        """‖θ‖² summed over all of θ (0 without a sum while θ is the zeros it was made: a hashed
        model's first mistake costs its row, not its 2^b columns)."""
        w = self._w
        if w is None or (self._zeros and not self._updates):
            return 0.0
        return float((w * w).sum())

    # ------------------------------------------------------------------ learning
    def learn_one(self, x: Features, y: Any, w: float = 1.0) -> None:
        """One step of Rosenblatt's update, scaled by the sample weight ``w`` (see Notes);
        :attr:`last_mistake` then says whether (x, y) was a mistake and θ, θ0 moved."""
        try:
            sign = self._signs[y]
            new_label = False
        except (KeyError, TypeError):
            try:
                sign = self._labels.sign_of(y)  # taught once the row is learned
            except NotBinaryLabel:
                self._widen(y)
                return self.learn_one(x, y, w)  # as the K-class perceptron it is now
            new_label = True
        except Widened:
            return self.learn_one(x, y, w)
        if w == 1.0:
            g = 1.0 if sign > 0 else -1.0
        else:
            g = sign * _weight(w)
            if not g:  # weight 0: nothing is learned, nor counted
                self._mistake = False
                return
        if isinstance(x, dict):
            self._mistake = self._learn_dict(x, sign, g)
        elif isinstance(x, Mapping):
            self._mistake = self._learn_dict(dict(x), sign, g)
        else:
            self._mistake = self._learn_vector(x, sign, g)
        if new_label:
            self._labels.remember(sign, y)

    def _learn_dict(self, x: dict[Hashable, Any], sign: int, g: float) -> bool:
        """learn_one of a dict row, in plain Python (:mod:`.rowwise`), with learn_many's floats."""
        wd = self._wd
        if wd is None:
            wd = self._by_name()
        try:
            a = dot_named(wd, x) + self._b
            if type(a) is not float or a - a:  # a numpy value, or one not finite: checked below
                raise TypeError
        except (KeyError, TypeError, OverflowError):
            x = self._take(x)
            wd = self._wd
            assert wd is not None
            a = dot_named(wd, x) + self._b
        if sign * a <= 0:  # a mistake: the boundary counts
            if self._hasher is None:
                self._update_named(x, g)
            else:
                self._update_hashed(x, g)
            return True
        if self.average:
            self._counted()
        return False

    def _counted(self) -> None:
        """An example learned without a mistake, when averaging: T counts it (and u is as wide
        as θ, as learn_many leaves it)."""
        if self._w is not None:
            self._ensure_u(len(self._w))
        self._steps += 1

    def _take(self, x: dict[Hashable, Any]) -> dict[Hashable, float]:
        """A dict row checked (its values as floats, FeatureValueError else), every name of it
        then by name: new names indexed (DimensionError past the bound on names, none indexed
        then), or hashed."""
        if self._hasher is not None:
            xf = checked(x)
            self._take_keys(xf)
            return xf
        if self._fixed_by_dense():
            raise DimensionError(_FIXED_BY_DENSE)
        xf = checked(x)
        index = self._index
        self._take_names([k for k in xf if k not in index])
        return xf

    def _update_named(self, x: dict[Hashable, Any], g: float) -> None:
        """θ += g·x, θ0 += g (and u, u0 when averaging) over a row whose names are all indexed,
        in θ's array and by name at once; ‖θ‖² kept as learn_many keeps it."""
        if self._wv is None:  # no name yet: θ is empty
            self._ensure_dim(0)
        index, wd, wv = self._index, self._wd, self._wv
        assert wd is not None and wv is not None
        sq = self._sq if self._sq is not None else self._full_sq()
        columns = [index[k] for k in x]
        before = [wd[k] for k in x]  # the names of a dict are distinct: each column once
        after = []
        for k, c, v, old in zip(x, columns, x.values(), before, strict=True):
            new = old + g * v
            wd[k] = wv[c] = new
            after.append(new)
        self._sq = _moved(sq, before, after)
        if self.average:
            step = self._steps
            assert self._w is not None
            self._ensure_u(len(self._w))
            ud, uv = self._ud, self._uv
            assert ud is not None and uv is not None
            gs = step * g
            for k, c, v in zip(x, columns, x.values(), strict=True):
                ud[k] = uv[c] = ud[k] + gs * v
            if self.fit_intercept:
                self._ub += gs
            self._steps = step + 1
        if self.fit_intercept:
            self._b += g
        self._updates += 1

    def _update_hashed(self, x: dict[Hashable, Any], g: float) -> None:
        """:meth:`_update_named` for hashed names: a column may repeat within a row, and each
        occurrence adds, in order, as ``np.add.at`` adds; then every name by name at a column
        that moved takes its new value."""
        hasher, wv = self._hasher, self._wv
        assert hasher is not None and wv is not None
        known, column = hasher.known, hasher.column
        pairs = [known.get(k) or column(k) for k in x]
        columns = [c for c, _ in pairs]
        values = ([v * s for (_, s), v in zip(pairs, x.values(), strict=True)] if self.hash_sign
                  else list(x.values()))
        sq = self._sq if self._sq is not None else self._full_sq()
        touched = sorted(set(columns))
        before = [wv[c] for c in touched]
        for c, v in zip(columns, values, strict=True):
            wv[c] += g * v
        self._sq = _moved(sq, before, [wv[c] for c in touched])
        uv = None
        if self.average:
            step = self._steps
            assert self._w is not None
            self._ensure_u(len(self._w))
            uv = self._uv
            assert uv is not None
            gs = step * g
            for c, v in zip(columns, values, strict=True):
                uv[c] += gs * v
            if self.fit_intercept:
                self._ub += gs
            self._steps = step + 1
        if self.fit_intercept:
            self._b += g
        self._updates += 1
        wd, ud, keys_at = self._wd, self._ud, self._keys_at
        assert wd is not None
        for c in touched:
            for k, sign in keys_at.get(c, ()):
                wd[k] = wv[c] * sign
                if ud is not None and uv is not None:
                    ud[k] = uv[c] * sign

    def _learn_vector(self, x: Sequence[float] | FloatArray, sign: int, g: float) -> bool:
        """learn_one of a dense vector: learn_many's dense operations on one row."""
        v = self.vectorize(x if isinstance(x, np.ndarray) else _checked_list(x))
        w = self._ensure_dim(len(v))
        if not sign * ((v * w).sum() + self._b) <= 0:
            if self.average:
                self._counted()
            return False
        if self.average:
            step = self._steps
            self._ensure_u(len(w))
            assert self._u is not None
            self._u += (step * g) * v
            if self.fit_intercept:
                self._ub += step * g
            self._steps = step + 1
        w += g * v
        self._sq = None
        self._names_changed()
        if self.fit_intercept:
            self._b += g
        self._updates += 1
        return True

    def learn_many(  # type: ignore[override]  # also a mask, and it returns what it learned
        self, X: Any, y: Iterable[Any], labeled: Iterable[bool] | None = None
    ) -> BatchResult:
        """:meth:`learn_one` over the rows in order, with the same flags and weights, but fast.

        The scores of a whole block come from one vectorised product; the block is cut at its
        first mistake, the update applied, and scoring resumes from the next row. Block sizes
        adapt (grow while the model is right, shrink after mistakes), so a model that is mostly
        right costs about one pass of array arithmetic. Dense rows without averaging take
        :mod:`~stream_perceptron.model.dense_pass`: its loop only decides the mistakes, from
        margins with a bounded rounding error, and every row is scored after it.

        ``X`` is a matrix, a list of rows (dense, or dicts), sparse rows, or a pandas DataFrame
        (each row the dict of its columns; the Series ``y`` taken by position, as river does).
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
        if frames.is_pandas(y):
            self._y_name = frames.name_of(y)
            y = frames.values_of(y)
        elif not isinstance(y, np.ndarray | list | tuple):
            y = list(y)  # read twice should it become K-class
        if labeled is not None and not isinstance(labeled, np.ndarray | list | tuple):
            labeled = list(labeled)
        try:
            signs = self._labels.signs(y, len(m), labeled)
        except NotBinaryLabel as exc:
            self._widen(exc.label)
            return self.learn_many(m, y, labeled)  # as the K-class perceptron it is now
        except Widened:
            return self.learn_many(m, y, labeled)
        return self._learn_signs(m, signs)

    def _learn_signs(self, m: Rows, signs: Signs) -> BatchResult:
        """learn_many of rows in the model's coordinates and their signs (0: unlabeled)."""
        updates = self._updates
        out = self._learn_rows(m, signs)
        if self._updates != updates:  # θ moved in its array: the copies by name are stale
            self._names_changed()
        return out

    def _learn_rows(self, m: Rows, signs: Signs) -> BatchResult:
        n = len(m)
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

    def fit(self, X: Any, y: Iterable[Any], passes: int = 1, *, epochs: int | None = None) -> list[int]:
        """Up to ``passes`` passes over (X, y) in order (the perceptron with offset over T
        passes, T = ``passes``; ``epochs`` is its old name, kept).

        Stops after the first pass with no mistake, as the Batch Perceptron of Shalev-Shwartz &
        Ben-David (*Understanding Machine Learning*, §9.1.2) does (such a pass separates the
        data, and further passes would change nothing). Returns the mistakes
        of each pass made. Every row needs a label (0 is the negative class).
        """
        m = self._matrix(X)
        ys = frames.values_of(y) if frames.is_pandas(y) else y if isinstance(y, np.ndarray) else list(y)
        try:
            signs = self._labels.signs(ys, len(m))
        except NotBinaryLabel as exc:
            self._widen(exc.label)
            return self.fit(m, ys, passes, epochs=epochs)  # as the K-class perceptron it is now
        except Widened:
            return self.fit(m, ys, passes, epochs=epochs)
        if (signs == 0).any():
            raise ValueError(f"fit needs a label for every row; row {int((signs == 0).argmax())} has none")
        per_pass: list[int] = []
        for _ in range(passes if epochs is None else epochs):
            per_pass.append(int(self._learn_signs(m, signs).mistakes.sum()))
            if per_pass[-1] == 0:
                break
        return per_pass

    # ------------------------------------------------------------------ helpers
    def _matrix(self, X: Any) -> Rows:
        """``X`` in the model's coordinates (the model's width grown to fit), or DimensionError;
        a list of rows or a DataFrame with a value that is not a finite number,
        FeatureValueError."""
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
        if frames.is_frame(X):
            return self._frame_rows(X)
        xs = list(X)
        _checked_rows(xs)
        rows, rejected = self.vectorize_many(xs)
        if rejected:
            row, reason = next(iter(rejected.items()))
            raise DimensionError(f"row {row}: {reason}")
        return rows

    def _frame_rows(self, X: Any) -> SparseRows:
        """A DataFrame as sparse rows: each row the dict of its columns, in column order."""
        names, values = frames.columns_and_values(X)
        n, k = values.shape
        if self._hasher is not None:
            columns, signs = self._hasher.columns(names)
            if self.hash_sign:
                values = values * signs
            width = self.dim or 0
        else:
            if self._fixed_by_dense():
                raise DimensionError(_FIXED_BY_DENSE)
            index = self._index
            new = [c for c in names if c not in index]
            limit = self.name_limit
            if new and limit is not None and len(index) + len(new) > limit:
                raise DimensionError(f"X: {self._refuse_names(len(new))}")
            self._index_names(new)
            columns = np.fromiter((index[c] for c in names), dtype=np.intp, count=k)
            self._ensure_dim(max(len(index), self.n_features or 0))
            width = self.dim or 0
        indptr = np.arange(n + 1, dtype=np.intp) * k
        return SparseRows(indptr, np.tile(columns, n), values.ravel(), width)

    def _take_names(self, new: list[Hashable]) -> None:
        """Give the names ``new`` (none of them known) columns, or refuse them all when they
        would pass the name limit."""
        if not new:
            return
        limit = self.name_limit
        if limit is not None and len(self._index) + len(new) > limit:
            raise DimensionError(self._refuse_names(len(new)))
        self._index_names(new)

    def _refuse_names(self, new: int) -> Refusal:
        """Count a row refused for bringing ``new`` names past the bound; returns the reason."""
        self._names_refused += 1
        bound = "SP_MODEL__N_FEATURES" if self.n_features is not None else "SP_LIMITS__MAX_NAMES"
        return Refusal(f"x brings {new} new feature names; the model allows {self.name_limit} in all"
                       f" ({bound})", "names")

    def _fixed_by_dense(self) -> bool:
        """Whether dense vectors fixed the dimension (named features are then refused). A model
        that has seen only empty named rows has no dimension yet."""
        return bool(self.dim) and not self._index and self.n_features is None and self._hasher is None

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
        self._zeros = False
        w = np.array(state["weights"], dtype=np.float64)
        width = self.n_features if self._hasher is None else 1 << (self.hash_bits or 0)
        if width is not None and len(w) not in (0, width):
            raise DimensionError(f"state has {len(w)} weights, the model has {width}")
        if len(w):
            self._set_w(w)
        else:
            self._set_w(None if width is None else np.zeros(width))
        self._b = float(state["intercept"])
        sq = state.get("theta_sq")  # absent: the full sum (as in files written before it)
        self._sq = None if sq is None else float(sq)
        self._updates = int(state["mistakes"])
        # a tuple name comes back from JSON as a list: a tuple again
        self._index = {_name(name): i for i, name in enumerate(state.get("features") or [])}
        self._labels.set_state(state.get("classes"))
        avg = state.get("average")
        self._steps = int(avg["steps"]) if avg else 0
        self._ub = float(avg["weighted_intercept"]) if avg else 0.0
        u = np.array(avg["weighted_updates"], dtype=np.float64) if avg else np.zeros(0)
        self._set_u(u if len(u) else None)
        self._mistake = False

    def name_features(self, names: Sequence[Hashable]) -> None:
        """Name the model's columns, in order: a model learned from dense vectors (a matrix whose
        columns a dataset named) then takes dict rows by these names too. The model must have no
        names yet, and as many columns as ``names`` (or no width yet)."""
        names = [_name(n) for n in names]
        if self._index or self._hasher is not None:
            raise ValueError("the model has names already (or hashes them): its columns are named")
        if len(set(names)) != len(names):
            raise ValueError(f"the feature names repeat: {names!r}")
        if self.dim not in (None, len(names)):
            raise DimensionError(f"{len(names)} names for a model of {self.dim} columns")
        self._index_names(names)

    def name_classes(self, negative: Any, positive: Any) -> None:
        """Name the two classes the model predicts, as a dataset labeled them (``fit`` learns from
        signs): the model then answers with these labels, and takes them when learning."""
        self._labels.name(negative, positive)

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


def hashing(n_features: int | None, hash_bits: int | None,
            hash_sign: bool) -> tuple[FeatureHasher | None, int | None]:
    """The hasher of a model's parameters (None without ``hash_bits``) and the width it fixes
    (``n_features`` without hashing); a ValueError when the two disagree."""
    if hash_bits is None:
        return None, n_features
    if n_features is not None and n_features != 1 << hash_bits:
        raise ValueError(f"n_features is {n_features} but hash_bits={hash_bits} makes {1 << hash_bits}")
    return FeatureHasher(hash_bits, hash_sign), 1 << hash_bits


def _many(classes: Any) -> bool:
    """Whether ``classes`` names more than two classes (the K-class perceptron's)."""
    try:
        return classes is not None and len(classes) > 2
    except TypeError:  # no length: the binary model's check says what it is
        return False


def _grown(a: FloatArray | None, buf: FloatArray | None, view: memoryview | None,
           d: int) -> tuple[FloatArray, FloatArray, memoryview]:
    """``a`` grown to ``d`` entries, the new ones 0, as the first entries of a buffer at least
    twice as long as ``a`` was (so that names arriving one at a time cost a copy now and then,
    not each): the vector, its buffer and a memoryview of the buffer."""
    if buf is not None and view is not None and d <= len(buf):
        return buf[:d], buf, view  # the buffer's entries past ``a`` are 0
    n = 0 if a is None else len(a)
    grown = np.zeros(max(d, 2 * n), dtype=np.float64)
    if a is not None:
        grown[:n] = a
    return grown[:d], grown, grown.data


def _name(name: Any) -> Hashable:
    """A feature name as stored in a state: a list (a tuple read back from JSON) is a tuple."""
    return tuple(_name(n) for n in name) if isinstance(name, list) else name


def _moved(sq: float, before: Sequence[float], after: Sequence[float]) -> float:
    """‖θ‖², ``sq`` before θ moved at some columns from ``before`` to ``after``, as learn_many
    keeps it (the squares summed as ``np.add.reduce`` sums them)."""
    return max(0.0, sq + (reduce_sum([a * a for a in after]) - reduce_sum([b * b for b in before])))


def _weight(w: Any) -> float:
    """A sample weight as a float: finite and at least 0, else ValueError."""
    try:
        f = float(w)
    except (TypeError, ValueError):
        raise ValueError(f"w is a sample weight, a number >= 0; got {w!r}") from None
    if not 0.0 <= f < math.inf:
        raise ValueError(f"w is a sample weight, a finite number >= 0; got {w!r}")
    return f


def _sigmoid(s: float) -> float:
    """σ(s) = 1/(1 + e^(−s)), as :meth:`Perceptron.predict_proba_one` computes it."""
    if s >= 0:
        return 1.0 / (1.0 + _exp(-s))
    e = _exp(s)
    return e / (1.0 + e)


def _checked_list(x: Any, where: str = "") -> list[float]:
    """A dense row given as a Python sequence, its values as :func:`~.rowwise.value` takes them;
    FeatureValueError naming the first that is not a finite number."""
    if isinstance(x, str | bytes) or not isinstance(x, Sequence):
        raise FeatureValueError(f"{where}x is a dict, a sequence of numbers or a numpy array,"
                                f" not {type(x).__name__}")
    out = []
    for i, v in enumerate(x):
        try:
            out.append(value(v))
        except FeatureValueError as exc:
            raise FeatureValueError(f"{where}x[{i}] {exc.reason}: feature values are finite"
                                    " numbers") from None
    return out


def _checked_rows(xs: list[Any]) -> None:
    """FeatureValueError for the first value of a list of rows (dicts or dense) that is not a
    finite number, naming its row and feature (a numpy row is taken as it is, as a matrix is)."""
    for i, x in enumerate(xs):
        if isinstance(x, Mapping):
            checked(x, f"row {i}: ")
        elif not isinstance(x, np.ndarray):
            _checked_list(x, f"row {i}: ")


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
