r"""The mistake loop of learn_many's dense pass, compiled (numba): rows decided one by one.

:func:`run` takes the signed rows :math:`s_i = [y_i x_i, y_i]` and :math:`w = [\theta, \theta_0]`
and, from row ``i`` on, computes each margin :math:`s_i \cdot w` in its own (left to right)
order. A margin above ``tol`` is a right row; one below ``-tol`` is a mistake, and the update is
learn_one's, :math:`\theta \mathrel{+}= y x`, :math:`\theta_0 \mathrel{+}= y` (the elementwise
additions ``w += s_i``, the same floats numpy's in-place addition makes). A margin within
``tol`` of 0, or not finite, stops the run at that row: the caller scores it in learn_one's fixed
order (:mod:`.dense_pass`), which decides it exactly.

Why the order of the margin's sum does not matter: any order of a (d+1)-term dot product is
within :math:`\gamma_{d+1} \sum_j |s_{ij} w_j| \le (d+1)\varepsilon/(1-(d+1)\varepsilon)
\cdot \lVert s_i\rVert \lVert w\rVert` of the exact value (Higham, *Accuracy and Stability of
Numerical Algorithms*, 3.1), and so is the fixed order's score. ``tol`` =
``scale`` · S + a tiny absolute term, with ``scale`` = 16(d+3)·ε·R (R bounds the rows' norms)
and S an upper bound of ‖w‖, is eight times the two errors together: a margin outside it has the
fixed order's sign. S grows by R at each mistake (‖a + b‖ ≤ ‖a‖ + ‖b‖) and is summed again every
16 mistakes. No fast-math: the compiled code rounds as IEEE 754 does, addition by addition.

The kernel is compiled at its first call (about 1–4 s) and cached on disk, in numba's first
writable place (``NUMBA_CACHE_DIR``, else the package's ``__pycache__``, else the user's cache
directory), so later processes load it (well under a second, numba's import included). Where no
place is writable it is compiled in every process instead of failing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

from stream_perceptron.model.dense_pass import HUGE, TINY_ABS


def _compiled(fn: Callable[..., Any]) -> Any:
    """``fn`` compiled, cached on disk when numba finds a writable place for it."""
    try:
        return njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return njit(nogil=True)(fn)


@_compiled
def _tol(scale: float, size: float) -> float:
    return scale * size + TINY_ABS if size <= HUGE else math.inf


@_compiled
def run(
    signed: np.ndarray, w_aug: np.ndarray, i: int, k: int, rows: np.ndarray, scale: float,
    size: float, since: int, reach: float, fit_intercept: bool,
) -> tuple[int, int, float, int]:  # pragma: no cover - compiled (its lines run as machine code)
    """Decide rows ``i``.. of ``signed`` against ``w_aug`` (updated in place at each mistake;
    without an intercept θ0 stays), appending each mistake's row to ``rows`` from ``k`` on.
    ``size`` is S and ``since`` the mistakes since S was last summed. Returns (the row where it
    stopped: ``len(signed)`` or a row to decide in the fixed order, the mistakes now in
    ``rows``, S, ``since``)."""
    n, m = signed.shape
    updated = m if fit_intercept else m - 1
    tol = _tol(scale, size)
    while i < n:
        margin = 0.0
        for j in range(m):
            margin += signed[i, j] * w_aug[j]
        if margin > tol:
            i += 1
            continue
        if not margin < -tol:  # near the boundary, or not finite
            return i, k, size, since
        for j in range(updated):
            w_aug[j] += signed[i, j]
        rows[k] = i
        k += 1
        since += 1
        if since < 16:
            size += reach
        else:
            since = 0
            sq = 0.0
            for j in range(m):
                sq += w_aug[j] * w_aug[j]
            size = math.sqrt(sq)
        tol = _tol(scale, size)
        i += 1
    return i, k, size, since
