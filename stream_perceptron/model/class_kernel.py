r"""The K-class perceptron's mistake loop over dense rows, compiled (numba): rows decided one by one.

:func:`run` takes the rows :math:`x_i`, their classes' rows of W (−1: unlabeled), how many
classes are active at each, and :math:`[W, b]` (K rows of :math:`[W_j, b_j]`); from row ``i`` on
it computes each active class's score in its own (left to right) order, and the multiclass
margin :math:`s_y - \max_{j \ne y} s_j`. A margin above the tolerance is a right row; one below
minus the tolerance is a mistake **when the best rival also leads the second best by more than
the tolerance** (then the lowest-row rule among ties cannot pick another), and the update is
learn_one's, :math:`W_y \mathrel{+}= x`, :math:`W_r \mathrel{-}= x` (the elementwise additions
numpy makes), :math:`b_y \mathrel{+}= 1`, :math:`b_r \mathrel{-}= 1`. Any other row (a margin or
a lead within the tolerance, a score not finite, a row set aside as ``exact``) stops the run
there: the caller decides it in learn_one's fixed order
(:mod:`~stream_perceptron.model.multiclass`), which decides it exactly.

**The tolerance** is twice the binary loop's (:func:`~.dense_pass.tolerance`, with
:math:`S` bounding every row's :math:`\lVert[W_j, b_j]\rVert`): a difference of two scores holds
the rounding errors of two dot products, in each order, where the binary margin holds one. S
grows by R at each mistake (each row moves by at most :math:`\lVert[x, 1]\rVert \le R`) and is
summed again, as the largest row's norm, every :data:`~.dense_pass.RESUM_EVERY` mistakes
(:func:`~.dense_pass.bound_after_mistake`, compiled as it stands). No fast-math: the compiled code
rounds as IEEE 754 does, addition by addition.

The kernel is compiled at its first call and cached on disk as :mod:`.dense_kernel` is, with the
tolerance functions that module compiles (numba keys that cache on this file: a change to what
it calls from :mod:`.dense_kernel` or :mod:`.dense_pass` needs this file touched, or the cache
cleared).
"""

from __future__ import annotations

import math

import numpy as np

from stream_perceptron.model.dense_kernel import _bound_after_mistake, _compiled, _tol


@_compiled
def largest_row_norm(w_aug: np.ndarray) -> float:  # pragma: no cover - compiled
    """max_j ‖[W_j, b_j]‖, summed."""
    k, m = w_aug.shape
    top = 0.0
    for j in range(k):
        sq = 0.0
        for c in range(m):
            sq += w_aug[j, c] * w_aug[j, c]
        top = max(top, sq)
    return math.sqrt(top)


@_compiled
def margin(x: np.ndarray, i: int, w_aug: np.ndarray, kk: int, y: int,
           s: np.ndarray) -> tuple[float, float, int]:  # pragma: no cover - compiled
    """Row ``i``'s margin s_y − max_{j≠y} s_j over the first ``kk`` classes (each score summed
    left to right, into ``s``), the best rival's lead over the second best (inf without one),
    and the best rival."""
    d = x.shape[1]
    for j in range(kk):
        acc = 0.0
        for c in range(d):
            acc += x[i, c] * w_aug[j, c]
        s[j] = acc + w_aug[j, d]
    best, second, r = -math.inf, -math.inf, -1
    for j in range(kk):
        if j != y:
            v = s[j]
            if v > best:
                second, best, r = best, v, j
            elif v > second:
                second = v
    return s[y] - best, best - second, r


@_compiled
def run(
    x: np.ndarray, labels: np.ndarray, active: np.ndarray, exact: np.ndarray, w_aug: np.ndarray,
    i: int, k: int, rows: np.ndarray, rivals: np.ndarray, scale: float, size: float, since: int,
    reach: float, fit_intercept: bool, s: np.ndarray,
) -> tuple[int, int, float, int]:  # pragma: no cover - compiled (its lines run as machine code)
    """Decide rows ``i``.. of ``x`` against ``w_aug`` (updated in place at each mistake), appending
    each mistake's row and runner-up to ``rows`` and ``rivals`` from ``k`` on; ``s`` is a buffer
    of K scores. ``size`` is S and ``since`` the mistakes since S was last summed. Returns (the row
    where it stopped: ``len(x)`` or a row to decide in the fixed order, the mistakes now in
    ``rows``, S, ``since``)."""
    n, d = x.shape
    tol = 2.0 * _tol(scale, size)
    while i < n:
        y = labels[i]
        kk = active[i]
        if y < 0 or kk < 2:  # unlabeled, or no rival: no decision to make
            i += 1
            continue
        if exact[i]:
            return i, k, size, since
        gap, lead, r = margin(x, i, w_aug, kk, y, s)
        if gap > tol:
            i += 1
            continue
        if not (gap < -tol and lead > tol):  # near a tie, or not finite
            return i, k, size, since
        for c in range(d):
            w_aug[y, c] += x[i, c]
            w_aug[r, c] -= x[i, c]
        if fit_intercept:
            w_aug[y, d] += 1.0
            w_aug[r, d] -= 1.0
        rows[k] = i
        rivals[k] = r
        k += 1
        size, since = _bound_after_mistake(size, since, reach)
        if since == 0:  # S summed again
            size = largest_row_norm(w_aug)
        tol = 2.0 * _tol(scale, size)
        i += 1
    return i, k, size, since
