r"""The perceptron's quantities (training error, margins, R, the mistake bound), measured live
over a stream, in memory independent of its length.

For each labeled example :math:`(x, y)`, scored by the model *before* its update:

* the **functional margin** :math:`y(\theta \cdot x + \theta_0)`; it is :math:`\le 0` exactly when
  the example is a mistake (MIT 6.036's notes, "Perceptron");
* the **geometric margin** :math:`y(\theta \cdot x + \theta_0) / \lVert\theta\rVert`, the signed
  distance to the hyperplane (the geometric margin; Novikoff 1962); undefined (NaN, published as
  null) while :math:`\theta = 0`;
* the **augmented margin** :math:`y(\theta \cdot x + \theta_0) / \lVert[\theta, \theta_0]\rVert`,
  the margin of the through-origin model on :math:`[x, 1]` (the reduction to a plane through
  the origin; Tao, "Perceptron").

Over the stream: ``seen``, ``labeled``, ``mistakes`` and the cumulative mistake rate
:math:`E_n = \text{mistakes} / \text{labeled}` (the training error of MIT 6.036's notes, measured online);
the served model's own online error rate beside it (``served_mistake_rate``: an averaged
model's errors :math:`y\,\bar s \le 0`, or :math:`E_n` itself when the model serves θ);
an exponentially weighted rate :math:`e \leftarrow (1-\alpha)e + \alpha[\text{mistake}]`;
``R_all``, the largest norm seen.

Over the window of the last ``W`` labeled examples: the mistake rate and count; the min and mean
geometric margin (the margin of a dataset, as a stream sees it); :math:`R = \max
\lVert x \rVert` (of :math:`[x, 1]` with an intercept); and, when the window's minimum augmented
margin :math:`\gamma` is positive, the mistake bound :math:`(R/\gamma)^2`
(``000``, ``001``, ``003``). The model that attains :math:`\gamma` separates the window, so the best
separator's margin is at least :math:`\gamma` and :math:`(R/\gamma)^2` bounds the mistakes the
perceptron makes on such data; ``window_mistakes`` stands next to it for comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from stream_perceptron.model.sparse import SparseRows

try:  # the compiled part (native/): the same loop over the flags, the same floats
    from stream_perceptron_native import ewma_update as _compiled_ewma
except ImportError:  # not built here: numpy's runs serve
    _compiled_ewma = None

FloatArray = npt.NDArray[np.float64]


def margins(
    labels: npt.NDArray[np.int8],
    scores: FloatArray,
    theta_norm: FloatArray,
    theta_norm_aug: FloatArray,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Functional, geometric and augmented margins of each row (NaN where undefined).

    ``labels`` are signs as :class:`~stream_perceptron.model.perceptron.BatchResult` gives them:
    unlabeled rows (sign 0) and rows scored while θ = 0 get NaN geometric margins.

    >>> import numpy as np
    >>> f, g, a = margins(np.array([1, -1, 0], dtype=np.int8), np.array([3.0, 1.0, 2.0]),
    ...                   np.array([2.0, 2.0, 2.0]), np.array([4.0, 4.0, 4.0]))
    >>> f.tolist(), g.tolist()[:2], a.tolist()[:2]
    ([3.0, -1.0, nan], [1.5, -0.5], [0.75, -0.25])
    """
    y = labels.astype(np.float64)
    functional = np.where(labels != 0, y * scores, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        geometric = np.where(theta_norm > 0, functional / theta_norm, np.nan)
        augmented = np.where(theta_norm_aug > 0, functional / theta_norm_aug, np.nan)
    return functional, geometric, augmented


def row_norms(X: FloatArray | SparseRows, fit_intercept: bool) -> FloatArray:
    """‖x‖ of each row, or ‖[x, 1]‖ with an intercept (the augmented vectors of the reduction
    through the origin)."""
    if isinstance(X, SparseRows):
        sq = X.squared_norms()
    else:
        dense = np.asarray(X, dtype=np.float64)
        sq = np.einsum("ij,ij->i", dense, dense)  # no n-by-d temporary
    norms: FloatArray = np.sqrt(sq + 1.0 if fit_intercept else sq)
    return norms


class RunningStats:
    """Running mistake rates, margins, R and the (R/γ)² bound; constant memory.

    Parameters
    ----------
    window
        W, the number of most recent labeled examples the window statistics cover.
    ewma_alpha
        α of the exponentially weighted mistake rate.

    Examples
    --------
    >>> import numpy as np
    >>> stats = RunningStats(window=2)
    >>> stats.update_many(
    ...     labels=np.array([1, -1, 1, 0], dtype=np.int8),
    ...     mistakes=np.array([True, False, False, False]),
    ...     geometric=np.array([np.nan, 0.5, 2.0, np.nan]),
    ...     augmented=np.array([np.nan, 0.25, 1.0, np.nan]),
    ...     x_norms=np.array([1.0, 2.0, 1.5, 9.0]),
    ...     theta_norm=1.0,
    ... )
    >>> s = stats.snapshot()
    >>> s["seen"], s["labeled"], s["mistakes"], round(s["mistake_rate"], 4)
    (4, 3, 1, 0.3333)
    >>> s["window_mistakes"], s["margin_min"], s["R"], s["gamma"], s["bound"]
    (0, 0.5, 2.0, 0.25, 64.0)
    """

    def __init__(self, window: int = 1000, ewma_alpha: float = 0.01) -> None:
        self.window = window
        self.ewma_alpha = ewma_alpha
        self.seen = 0
        self.labeled = 0
        self.mistakes = 0
        self.served_mistakes = 0
        self.ewma: float | None = None
        self.r_all = 0.0
        self.theta_norm = 0.0
        self._flags = np.zeros(window, dtype=np.bool_)
        self._geo = np.full(window, np.nan)
        self._aug = np.full(window, np.nan)
        self._norm = np.zeros(window)
        self._pos = 0
        self._filled = 0

    def update_many(
        self,
        *,
        labels: npt.NDArray[np.int8],
        mistakes: npt.NDArray[np.bool_],
        geometric: FloatArray,
        augmented: FloatArray,
        x_norms: FloatArray,
        theta_norm: float,
        served_mistakes: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """Account for a batch of scored rows (unlabeled rows count in ``seen`` only).

        ``x_norms`` are the rows' norms as :func:`row_norms` gives them; ``theta_norm`` is ‖θ‖
        after the batch. ``served_mistakes`` are the served model's errors (an averaged model's;
        by default the learning θ's ``mistakes``).
        """
        self.seen += len(labels)
        self.theta_norm = theta_norm
        lab = labels != 0
        k = int(np.count_nonzero(lab))
        if k == 0:
            return
        if k == len(labels):  # every row labeled (the common case): the columns as they are
            flags, geo, aug, norms = mistakes, geometric, augmented, x_norms
            served = flags if served_mistakes is None else served_mistakes
        else:
            flags, geo, aug, norms = mistakes[lab], geometric[lab], augmented[lab], x_norms[lab]
            served = flags if served_mistakes is None else served_mistakes[lab]
        self.labeled += k
        self.mistakes += int(np.count_nonzero(flags))
        self.served_mistakes += int(np.count_nonzero(served))
        self.r_all = max(self.r_all, float(norms.max()))
        self._update_ewma(flags)
        self._push(flags, geo, aug, norms)

    def _update_ewma(self, flags: npt.NDArray[np.bool_]) -> None:
        """e ← (1 − α)·e + α·f for each flag f in turn (the first flag starts it), in exactly the
        floating-point operations of that loop, so the EWMA does not depend on how the flags were
        cut into batches: a run of zeros multiplies e by (1 − α) once per zero, in order
        (``np.multiply.accumulate`` is sequential). The compiled part, where it is installed,
        runs that loop flag by flag."""
        a, b = self.ewma_alpha, 1.0 - self.ewma_alpha
        if _compiled_ewma is not None:
            ones = np.ascontiguousarray(flags, dtype=np.bool_).view(np.uint8)
            self.ewma = _compiled_ewma(ones, self.ewma, a, b)
            return
        e, pos = self.ewma, 0
        if e is None:
            e, pos = float(flags[0]), 1
        n = len(flags)
        for i in [*(np.flatnonzero(flags[pos:]) + pos).tolist(), n]:
            if i > pos:
                run = np.full(i - pos + 1, b)
                run[0] = e
                e = float(np.multiply.accumulate(run)[-1])
            if i < n:
                e = b * e + a
            pos = i + 1
        self.ewma = e

    def _push(
        self,
        flags: npt.NDArray[np.bool_],
        geo: FloatArray,
        aug: FloatArray,
        norms: FloatArray,
    ) -> None:
        w = self.window
        if len(flags) >= w:
            sl = slice(len(flags) - w, None)
            self._flags[:], self._geo[:], self._aug[:], self._norm[:] = (
                flags[sl], geo[sl], aug[sl], norms[sl],
            )
            self._pos, self._filled = 0, w
            return
        n, pos = len(flags), self._pos
        first = min(n, w - pos)  # up to the ring's end, then the rest from its start
        for ring, column in ((self._flags, flags), (self._geo, geo), (self._aug, aug), (self._norm, norms)):
            ring[pos:pos + first] = column[:first]
            ring[:n - first] = column[first:]
        self._pos = (pos + n) % w
        self._filled = min(w, self._filled + len(flags))

    def _chronological(self, ring: npt.NDArray[Any]) -> npt.NDArray[Any]:
        if self._filled < self.window:
            return ring[: self._filled]
        return np.concatenate([ring[self._pos :], ring[: self._pos]])

    def snapshot(self) -> dict[str, Any]:
        """The statistics as a JSON-ready dict (None where a quantity is undefined yet)."""
        n = self._filled
        flags = self._chronological(self._flags)
        geo = self._chronological(self._geo)
        aug = self._chronological(self._aug)
        geo_ok = geo[~np.isnan(geo)]
        r = float(self._norm[:n].max()) if n else None
        # A row scored while θ = 0 has functional margin 0: no positive γ over that window.
        gamma_min = float(np.nan_to_num(aug, nan=0.0).min()) if n else 0.0
        gamma = gamma_min if gamma_min > 0 else None
        bound = (r / gamma) ** 2 if gamma is not None and r is not None else None
        return {
            "seen": self.seen,
            "labeled": self.labeled,
            "mistakes": self.mistakes,
            "mistake_rate": self.mistakes / self.labeled if self.labeled else None,
            "served_mistake_rate": self.served_mistakes / self.labeled if self.labeled else None,
            "ewma_mistake_rate": self.ewma,
            "window": self.window,
            "window_labeled": n,
            "window_mistakes": int(flags.sum()),
            "window_mistake_rate": float(flags.mean()) if n else None,
            "margin_min": float(geo_ok.min()) if len(geo_ok) else None,
            "margin_mean": float(geo_ok.mean()) if len(geo_ok) else None,
            "R": r,
            "R_all": self.r_all if self.labeled else None,
            "theta_norm": self.theta_norm,
            "gamma": gamma,
            "bound": bound if bound is None or math.isfinite(bound) else None,
        }

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Counters and the window (oldest first) as plain data; NaN becomes None."""

        def listed(a: npt.NDArray[Any]) -> list[Any]:
            return [None if isinstance(v, float) and math.isnan(v) else v for v in a.tolist()]

        return {
            "window": self.window,
            "ewma_alpha": self.ewma_alpha,
            "seen": self.seen,
            "labeled": self.labeled,
            "mistakes": self.mistakes,
            "served_mistakes": self.served_mistakes,
            "ewma": self.ewma,
            "R_all": self.r_all,
            "theta_norm": self.theta_norm,
            "window_mistakes": listed(self._chronological(self._flags)),
            "window_margins": listed(self._chronological(self._geo)),
            "window_margins_aug": listed(self._chronological(self._aug)),
            "window_norms": listed(self._chronological(self._norm)),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`get_state` returned (the window is refilled oldest first)."""
        self.seen = int(state["seen"])
        self.labeled = int(state["labeled"])
        self.mistakes = int(state["mistakes"])
        # a state written before the served model had a rate of its own: the served model was θ
        self.served_mistakes = int(state.get("served_mistakes", self.mistakes))
        self.ewma = None if state["ewma"] is None else float(state["ewma"])
        self.r_all = float(state["R_all"])
        self.theta_norm = float(state["theta_norm"])
        self._flags[:] = False
        self._geo[:] = np.nan
        self._aug[:] = np.nan
        self._norm[:] = 0.0
        self._pos = self._filled = 0

        def arr(key: str) -> FloatArray:
            return np.array([np.nan if v is None else v for v in state[key]], dtype=np.float64)

        flags = np.array(state["window_mistakes"], dtype=np.bool_)
        if len(flags):
            self._push(flags, arr("window_margins"), arr("window_margins_aug"), arr("window_norms"))
