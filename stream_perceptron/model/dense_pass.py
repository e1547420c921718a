r"""learn_many's loop over dense rows without averaging: the decisions first, then the outputs.

The perceptron's decisions are sequential (each mistake moves θ for every later row), but its
outputs need not be: once the mistakes of a stretch of rows are known, the weights in effect at
each row, the scores and the norms follow from whole-array operations. So the loop does only
what the decisions need, a few numpy calls a mistake, and the outputs are computed after it.

**The decisions.** The loop takes the margins :math:`y(\theta \cdot x + \theta_0)` of a block of
rows from one matrix-vector product over the unit rows :math:`[y x, y] / \lVert [x, 1] \rVert`
(BLAS's summation order, not the fixed one). Rounding errors of a dot product are bounded
(Higham's :math:`\gamma_d`), so where such a margin is farther from 0 than a tolerance of a few
:math:`d\,\varepsilon\,\lVert[\theta, \theta_0]\rVert` (see :func:`_decide`), the fixed order's
score has the same sign, and the row is decided. A row nearer to 0 (or not finite) is scored in
the fixed order, as learn_one scores it. The update is learn_one's: θ += y x, θ0 += y.

**The outputs.** The weights after each mistake are the same additions in the same order
(``np.cumsum`` adds row after row), and every row is then scored in the fixed order,
``(x * θ).sum() + θ0`` with the weights in effect at that row, as learn_one scores it: the same
floats, whatever the blocks and chunks.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

_FIRST_BLOCK = 16
_CHUNK_BYTES = 1 << 20  # the unit rows of a chunk stay in cache, and need no fresh pages
_MIN_BLOCK = 32
_EPS = 2.0**-53
_TINY, _HUGE, _TINY_ABS = 2.0**-400, 2.0**400, 2.0**-600


class DensePass(NamedTuple):
    """Per row, taken before its update: its score θ·x+θ0, whether it was a mistake, ‖θ‖ and
    ‖[θ, θ0]‖; and θ0 after the rows, and how many mistakes they made."""

    scores: FloatArray
    mistakes: npt.NDArray[np.bool_]
    theta_norm: FloatArray
    theta_norm_aug: FloatArray
    intercept: float
    n_mistakes: int


def learn_dense(
    X: FloatArray, signs: npt.NDArray[np.int8], w: FloatArray, b: float, norms: tuple[float, float],
    fit_intercept: bool, max_block: int, chunk_bytes: int = _CHUNK_BYTES,
) -> DensePass:
    """The seeds' perceptron over the rows of ``X`` in order (``signs`` −1/+1, 0 unlabeled),
    from θ = ``w`` (updated in place) and θ0 = ``b``; ``norms`` are ‖θ‖ and ‖[θ, θ0]‖ before
    the first row. Blocks hold up to ``max_block`` rows; the rows are taken in chunks whose
    unit rows take about ``chunk_bytes`` (the chunk's other temporaries are about as large)."""
    n = len(X)
    if not n:
        empty = np.zeros(0)
        return DensePass(empty, np.zeros(0, dtype=np.bool_), empty, empty, b, 0)
    parts: list[DensePass] = []
    chunk = max(_FIRST_BLOCK, chunk_bytes // (8 * (X.shape[1] + 1)))
    for start in range(0, n, chunk):
        part = _chunk(X[start : start + chunk], signs[start : start + chunk], w, b, norms,
                      fit_intercept, max_block)
        parts.append(part)
        b = part.intercept
        if part.n_mistakes:  # ‖θ‖ summed over θ after the chunk's last mistake, as Perceptron.norms does
            sq = float((w * w).sum())
            norms = math.sqrt(sq), math.sqrt(sq + b * b)
    if len(parts) == 1:
        return parts[0]
    return DensePass(
        np.concatenate([p.scores for p in parts]), np.concatenate([p.mistakes for p in parts]),
        np.concatenate([p.theta_norm for p in parts]), np.concatenate([p.theta_norm_aug for p in parts]),
        b, sum(p.n_mistakes for p in parts),
    )


def _chunk(
    X: FloatArray, signs: npt.NDArray[np.int8], w: FloatArray, b: float, norms: tuple[float, float],
    fit_intercept: bool, max_block: int,
) -> DensePass:
    n, d = X.shape
    labeled = np.flatnonzero(signs != 0)  # unlabeled rows are only scored, after the loop
    every = len(labeled) == n
    y = signs.astype(np.float64) if every else signs[labeled].astype(np.float64)
    x = X if every else X[labeled]
    w0, b0 = w.copy(), b
    w_aug = np.append(w, b)  # [θ, θ0]: the margin of a row is [y x, y]·[θ, θ0]
    rows = _decide(x, y, w_aug, fit_intercept, max_block)
    if not every:
        rows = labeled[rows]
    w[:] = w_aug[:d]
    k = len(rows)
    # the weights in effect at each row: θ before the rows, then after each mistake (row by row)
    steps = np.empty((k + 1, d))
    steps[0] = w0
    np.multiply(X[rows], signs[rows, None], out=steps[1:])
    weights = np.cumsum(steps, axis=0)
    if fit_intercept:
        intercepts = np.cumsum(np.concatenate(([b0], signs[rows].astype(np.float64))))
    else:
        intercepts = np.full(k + 1, b0)
    lengths = np.diff(np.concatenate(([0], rows + 1, [n])))
    segment = np.repeat(np.arange(k + 1), lengths)
    scores = _products(X, weights, segment, rows + 1).sum(axis=1) + intercepts[segment]
    theta_norm, theta_norm_aug = _norms(weights, intercepts)
    theta_norm[0], theta_norm_aug[0] = norms  # kept by the model (sparse updates keep ‖θ‖² apart)
    mistakes = np.zeros(n, dtype=np.bool_)
    mistakes[rows] = True
    return DensePass(scores, mistakes, np.repeat(theta_norm, lengths),
                     np.repeat(theta_norm_aug, lengths), float(intercepts[-1]), k)


def _products(X: FloatArray, weights: FloatArray, segment: npt.NDArray[np.intp],
              starts: npt.NDArray[np.intp]) -> FloatArray:
    """x * θ of each row, θ the weights of its segment: one gather when the segments are short,
    one multiplication a segment when they are long."""
    if 64 * len(weights) > len(X):
        return X * weights[segment]
    products = np.empty_like(X)
    for k, (a, b) in enumerate(zip([0, *starts.tolist()], [*starts.tolist(), len(X)], strict=True)):
        np.multiply(X[a:b], weights[k], out=products[a:b])
    return products


def _norms(weights: FloatArray, intercepts: FloatArray) -> tuple[FloatArray, FloatArray]:
    """‖θ‖ and ‖[θ, θ0]‖ of each row of weights, as ``Perceptron.norms`` computes them."""
    sq = (weights * weights).sum(axis=1)
    return np.sqrt(sq), np.sqrt(sq + intercepts * intercepts)


def _unit_rows(x: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray]:
    """[y x, y] / ‖[x, 1]‖ for each row, and ‖[x, 1]‖; NaN rows where the bound of
    :func:`_decide` would not hold (a norm out of [2^-400, 2^400], or not finite): those rows
    are always scored in the fixed order."""
    unit = np.empty((len(x), x.shape[1] + 1))
    unit[:, :-1] = x
    unit[:, -1] = 1.0
    with np.errstate(all="ignore"):  # rows with inf or NaN are set aside below
        norm = np.sqrt(np.einsum("ij,ij->i", unit, unit))
        unit *= (y / norm)[:, None]
    unit[~((norm >= _TINY) & (norm <= _HUGE))] = np.nan
    return unit, norm


def _decide(
    x: FloatArray, y: FloatArray, w_aug: FloatArray, fit_intercept: bool, max_block: int,
) -> npt.NDArray[np.intp]:
    """The mistakes' rows, [θ, θ0] (``w_aug``) updated in place.

    The margins of a block of rows are computed at once with unit rows, in BLAS's order. Such a
    margin is within about (d+2)·ε·‖[θ, θ0]‖ of the true margin over ‖[x, 1]‖, and so is the
    fixed order's (rounding errors of a dot product, Higham's γ_d bound); a margin farther from
    0 than ``tol`` = 16(d+3)·ε times an upper bound of ‖[θ, θ0]‖ (eight times the two errors
    together) has the fixed order's sign, so it decides its row. A row nearer to 0 is scored in
    the fixed order. The block is cut at its first mistake, and the next one starts after it."""
    n = len(x)
    unit, norm = _unit_rows(x, y)
    w = w_aug[:-1]
    rows: list[int] = []
    scale = 16 * (len(w_aug) + 2) * _EPS
    size = math.sqrt(float(np.dot(w_aug, w_aug)))  # an upper bound of ‖[θ, θ0]‖
    tol = scale * size + _TINY_ABS if size <= _HUGE else math.inf
    i, block = 0, _FIRST_BLOCK
    while i < n:
        end = i + block
        margins = unit[i:end].dot(w_aug)  # ndarray.dot: the cheapest call for small blocks
        right = margins > tol
        k = int(right.argmin())
        if right[k]:
            i, block = end, min(2 * block, max_block)
            continue
        r = i + k
        label = y[r]
        if not margins[k] < -tol and not label * ((x[r] * w).sum() + w_aug[-1]) <= 0:
            i = r + 1  # near the boundary (or not finite), and no mistake in the fixed order
            continue
        if label > 0:
            w += x[r]
        else:
            w -= x[r]
        if fit_intercept:
            w_aug[-1] += label
        rows.append(r)
        if len(rows) % 16:
            size += norm[r]  # ‖a + b‖ ≤ ‖a‖ + ‖b‖, summed exactly every 16 mistakes
        else:
            size = math.sqrt(float(np.dot(w_aug, w_aug)))
        tol = scale * size + _TINY_ABS if size <= _HUGE else math.inf
        i, block = r + 1, max(_MIN_BLOCK, min(4 * (k + 1), max_block))
    return np.array(rows, dtype=np.intp)
