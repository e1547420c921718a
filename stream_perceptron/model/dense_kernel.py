r"""The mistake loop of learn_many's dense pass, compiled (numba): rows decided one by one.

:func:`run` takes the signed rows :math:`s_i = [y_i x_i, y_i]` and :math:`w = [\theta, \theta_0]`
and, from row ``i`` on, computes each margin :math:`s_i \cdot w` in its own (left to right)
order. A margin above ``tol`` is a right row; one below ``-tol`` is a mistake, and the update is
learn_one's, :math:`\theta \mathrel{+}= y x`, :math:`\theta_0 \mathrel{+}= y` (the elementwise
additions ``w += s_i``, the same floats numpy's in-place addition makes). A margin within
``tol`` of 0, or not finite, stops the run at that row: the caller scores it in learn_one's fixed
order (:mod:`.dense_pass`), which decides it exactly.

The order of the margin's sum does not matter. ``tol``, and S (an upper bound of ‖w‖ that grows
by R at each mistake and is summed again every :data:`~.dense_pass.RESUM_EVERY`), are
:mod:`.dense_pass`'s (:func:`~.dense_pass.tolerance_scale` gives the argument): its
:func:`~.dense_pass.tolerance` and :func:`~.dense_pass.bound_after_mistake` are compiled here as
they stand, so numpy's decider and this loop keep one rule. No fast-math: the compiled code
rounds as IEEE 754 does, addition by addition.

The kernel is compiled at its first call (about 1–4 s) and cached on disk, in numba's first
writable place (``NUMBA_CACHE_DIR``, else the package's ``__pycache__``, else the user's cache
directory), so later processes load it (well under a second, numba's import included). Where no
place is writable it is compiled in every process instead of failing. numba keys that cache on
this file alone: a change to what it compiles from :mod:`.dense_pass` (those functions, ``HUGE``,
``TINY_ABS``, ``RESUM_EVERY``) needs this file touched, or the cache cleared, to take effect.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

from stream_perceptron.model import dense_pass


def _compiled(fn: Callable[..., Any]) -> Any:
    """``fn`` compiled, cached on disk when numba finds a writable place for it."""
    try:
        return njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return njit(nogil=True)(fn)


_tol = _compiled(dense_pass.tolerance)
_bound_after_mistake = _compiled(dense_pass.bound_after_mistake)


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
        size, since = _bound_after_mistake(size, since, reach)
        if since == 0:  # S summed again
            sq = 0.0
            for j in range(m):
                sq += w_aug[j] * w_aug[j]
            size = math.sqrt(sq)
        tol = _tol(scale, size)
        i += 1
    return i, k, size, since
