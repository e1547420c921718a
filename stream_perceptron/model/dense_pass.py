r"""learn_many's loop over dense rows without averaging: the decisions first, then the outputs.

The perceptron's decisions are sequential (each mistake moves θ for every later row), but its
outputs need not be: once the mistakes of a stretch of rows are known, the weights in effect at
each row, the scores and the norms follow from whole-array operations. So the loop does only
what the decisions need, and the outputs are computed after it with whole-array operations.

**The decisions.** A compiled loop (:mod:`.dense_kernel`; for calls of fewer than
:data:`COMPILED_MIN_ROWS` rows, and wherever numba is not installed, numpy over blocks of rows)
takes each margin :math:`y(\theta \cdot x + \theta_0)` as the dot product of the signed row
:math:`[y x, y]` with :math:`[\theta, \theta_0]`, in its own order (numpy: BLAS's). Rounding
errors of a dot product are bounded (Higham's :math:`\gamma_d`), so where such a margin is farther
from 0 than a tolerance of a few :math:`d\,\varepsilon\,R\,\lVert[\theta, \theta_0]\rVert` (R bounds
the rows' norms; see :func:`tolerance_scale`), the fixed order's score has the same sign, and the
row is decided. A row nearer to 0 (or not finite) is scored in the fixed order, as learn_one
scores it. The update is learn_one's: θ += y x, θ0 += y.

**The outputs.** The weights after each mistake are the same additions in the same order
(``np.cumsum`` adds row after row), and every row is then scored in the fixed order,
``(x * θ).sum() + θ0`` with the weights in effect at that row, as learn_one scores it: the same
floats, whatever the blocks and chunks.

**The compiled part** (``native/``, ``learn_dense``), where it is installed, does both in one loop:
each row scored in that fixed order and decided by its sign, θ and θ0 updated, the norms summed
again after each mistake; the same floats. It serves every call that does not ask for a decider
(``compiled`` None); numba's loop and numpy's blocks remain the pure-Python path.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

try:  # the compiled part (native/): every row scored and decided in the fixed order, the same floats
    from stream_perceptron_native import learn_dense as _compiled_pass
except ImportError:  # not built here: the decisions and outputs below serve
    _compiled_pass = None

FloatArray = npt.NDArray[np.float64]

_log = logging.getLogger(__name__)

_FIRST_BLOCK = 16
# numpy's decider: after a mistake, a block of at least this many rows. Its margins cost a fixed
# 2-3 µs a call and about 10 ns a row, so rows scored past the next mistake are cheaper than
# calls (unlike the general loop's blocks, perceptron._MIN_SCORED_BLOCK, scored in full)
_MIN_MARGIN_BLOCK = 64
_CHUNK_BYTES = 1 << 20  # the signed rows of a chunk stay in cache, and need no fresh pages
_EPS = 2.0**-53
HUGE, TINY_ABS = 2.0**400, 2.0**-600  # rows or ‖[θ, θ0]‖ past HUGE: the fixed order; tol's floor
RESUM_EVERY = 16
"""S, the bound of ‖[θ, θ0]‖ in the tolerance, grows by R at each mistake and is summed again
from [θ, θ0] at every this many (:func:`bound_after_mistake`)."""
# Calls of fewer rows decide in numpy: the compiled loop's first call in a process loads numba
# (about 1 s of CPU and tens of MB), which the worker's polls (SP_KAFKA__MAX_POLL_RECORDS, 2,000
# by default) need not pay for a few µs a mistake
COMPILED_MIN_ROWS = 4096


def tolerance_scale(width: int, reach: float) -> float:
    r"""16(d+3)·ε·R, with ``width`` = d+1 the entries of [θ, θ0] and R = ``reach`` an upper bound
    of the rows' ‖[x, 1]‖; times S, an upper bound of ‖[θ, θ0]‖, the margins' tolerance.

    Why a margin outside it is decided: the margin [y x, y]·[θ, θ0] summed in any order (BLAS's,
    the compiled loop's) is within :math:`\gamma_{d+1} \sum_j |s_j w_j| \le
    (d+1)\varepsilon/(1-(d+1)\varepsilon) \cdot \lVert[x, 1]\rVert \lVert[\theta, \theta_0]\rVert`
    of the exact value (Higham, *Accuracy and Stability of Numerical Algorithms*, 3.1), and so
    is the fixed order's score, (x * θ).sum() + θ0. The tolerance is eight times the two errors
    together, so a margin outside it has the fixed order's sign."""
    return 16 * (width + 2) * _EPS * reach


def tolerance(scale: float, size: float) -> float:
    """The tolerance of a margin, ``scale`` · S + a tiny absolute term, with S = ``size`` an upper
    bound of ‖[θ, θ0]‖; infinite (every row to the fixed order) past :data:`HUGE`. Compiled as
    it stands by :mod:`.dense_kernel`."""
    return scale * size + TINY_ABS if size <= HUGE else math.inf


def bound_after_mistake(size: float, since: int, reach: float) -> tuple[float, int]:
    """S and the mistakes since it was last summed, after one more mistake: S + R, as
    ‖a + b‖ ≤ ‖a‖ + ‖b‖ and R bounds the row added; at every :data:`RESUM_EVERY`-th, (inf, 0):
    the caller sums S again from [θ, θ0] (inf is still a bound, though useless). Compiled as it
    stands by :mod:`.dense_kernel`.

    >>> bound_after_mistake(1.0, 0, 2.0), bound_after_mistake(1.0, RESUM_EVERY - 1, 2.0)
    ((3.0, 1), (inf, 0))
    """
    since += 1
    if since < RESUM_EVERY:
        return size + reach, since
    return math.inf, 0


def _norm(w_aug: FloatArray) -> float:
    """‖[θ, θ0]‖, summed (S summed again)."""
    return math.sqrt(float(np.dot(w_aug, w_aug)))


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
    fit_intercept: bool, max_block: int, chunk_bytes: int = _CHUNK_BYTES, compiled: bool | None = None,
) -> DensePass:
    """Rosenblatt's perceptron over the rows of ``X`` in order (``signs`` −1/+1, 0 unlabeled),
    from θ = ``w`` (updated in place) and θ0 = ``b``; ``norms`` are ‖θ‖ and ‖[θ, θ0]‖ before
    the first row. The rows are taken in chunks whose signed rows take about ``chunk_bytes`` (the
    chunk's other temporaries are about as large). The outputs are written in place, chunk by
    chunk, into arrays as long as ``X``. ``compiled``: decide in the compiled loop; None: when
    ``X`` has at least :data:`COMPILED_MIN_ROWS` rows (else numpy's blocks of up to
    ``max_block`` rows); without numba, numpy's blocks in any case. Both decide the same rows.

    Where the compiled part is installed and ``compiled`` is None, it runs the whole pass instead
    (:func:`_pass`): the same outputs, bit for bit."""
    n, d = X.shape
    if compiled is None and _compiled_pass is not None:
        return _pass(X, signs, w, b, norms, fit_intercept)
    scores, mistakes = np.empty(n), np.zeros(n, dtype=np.bool_)
    theta_norm, theta_norm_aug = np.empty(n), np.empty(n)
    chunk = max(_FIRST_BLOCK, chunk_bytes // (8 * (d + 1)))
    signed = np.empty((min(n, chunk), d + 1))  # the rows [y x, y] of every chunk, in turn
    total = 0
    compiled = (n >= COMPILED_MIN_ROWS if compiled is None else compiled) and numba_installed()
    for start in range(0, n, chunk):
        part = slice(start, start + chunk)
        k, b = _chunk(X[part], signs[part], w, b, norms, fit_intercept, max_block, compiled, signed,
                      Outputs(scores[part], mistakes[part], theta_norm[part], theta_norm_aug[part]))
        if k:  # ‖θ‖ summed over θ after the chunk's last mistake, as Perceptron.norms does
            total += k
            sq = float((w * w).sum())
            norms = math.sqrt(sq), math.sqrt(sq + b * b)
    return DensePass(scores, mistakes, theta_norm, theta_norm_aug, b, total)


def _pass(X: FloatArray, signs: npt.NDArray[np.int8], w: FloatArray, b: float, norms: tuple[float, float],
          fit_intercept: bool) -> DensePass:
    """:func:`learn_dense` by the compiled part: each row scored as learn_one scores it,
    ``(x * θ).sum() + θ0`` with θ in effect at it, and decided by that score's sign; θ += y x and
    θ0 += y at a mistake, then ‖θ‖ and ‖[θ, θ0]‖ summed again as ``Perceptron.norms`` sums them.
    These are the floats the outputs above are built from, row by row."""
    n = len(X)
    scores, mistakes = np.empty(n), np.empty(n, dtype=np.bool_)
    theta_norm, theta_norm_aug = np.empty(n), np.empty(n)
    assert _compiled_pass is not None
    intercept, k = _compiled_pass(
        np.ascontiguousarray(X, dtype=np.float64), np.ascontiguousarray(signs, dtype=np.int8), w, b,
        norms[0], norms[1], fit_intercept, scores, mistakes.view(np.uint8), theta_norm, theta_norm_aug)
    return DensePass(scores, mistakes, theta_norm, theta_norm_aug, intercept, k)


@functools.cache
def numba_installed() -> bool:
    """Whether numba imports (the ``[fast]`` extra). Without it every call decides in numpy's
    blocks: the same rows (:func:`_decide`), more slowly on long calls."""
    try:
        import numba  # noqa: F401
    except ImportError as exc:
        _log.info("learn_many decides in numpy: numba is not installed (%s); the same results, more"
                  " slowly on calls of %d rows or more: pip install 'stream-perceptron[fast]'",
                  exc, COMPILED_MIN_ROWS)
        return False
    return True


class Outputs(NamedTuple):
    """Where a chunk writes its rows' scores, mistake flags, ‖θ‖ and ‖[θ, θ0]‖."""

    scores: FloatArray
    mistakes: npt.NDArray[np.bool_]
    theta_norm: FloatArray
    theta_norm_aug: FloatArray


def _chunk(
    X: FloatArray, signs: npt.NDArray[np.int8], w: FloatArray, b: float, norms: tuple[float, float],
    fit_intercept: bool, max_block: int, compiled: bool, signed: FloatArray, out: Outputs,
) -> tuple[int, float]:
    """One chunk: its mistakes decided, then its outputs written to ``out``; how many mistakes
    it made, and θ0 after it."""
    n, d = X.shape
    labeled = np.flatnonzero(signs)  # unlabeled rows are only scored, after the loop
    every = len(labeled) == n
    y = signs.astype(np.float64) if every else signs[labeled].astype(np.float64)
    x = X if every else X[labeled]
    w0 = w.copy()
    w_aug = np.append(w, b)  # [θ, θ0]: the margin of a row is [y x, y]·[θ, θ0]
    rows = _decide(x, y, w_aug, fit_intercept, max_block, signed[: len(x)], compiled)
    k = len(rows)
    if not k:  # θ did not move: every row scored with it
        np.add(np.multiply(X, w0).sum(axis=1), b, out=out.scores)
        out.theta_norm[:], out.theta_norm_aug[:] = norms
        return 0, b
    if not every:
        rows = labeled[rows]
    w[:] = w_aug[:d]
    # the weights in effect at each row: θ before the rows, then after each mistake (row by row)
    weights = np.empty((k + 1, d))
    weights[0] = w0
    np.multiply(X[rows], signs[rows, None], out=weights[1:])
    np.cumsum(weights, axis=0, out=weights)
    intercepts = np.empty(k + 1)
    intercepts[0] = b
    if fit_intercept:
        intercepts[1:] = signs[rows]
        np.cumsum(intercepts, out=intercepts)
    else:
        intercepts[1:] = b
    lengths = np.diff(rows, prepend=-1, append=n - 1)  # rows in effect: up to each mistake, inclusive
    scores = _products(X, weights, rows, lengths).sum(axis=1)
    np.add(scores, np.repeat(intercepts, lengths), out=out.scores)
    theta_norm, theta_norm_aug = _norms(weights, intercepts)
    theta_norm[0], theta_norm_aug[0] = norms  # kept by the model (sparse updates keep ‖θ‖² apart)
    out.theta_norm[:] = np.repeat(theta_norm, lengths)
    out.theta_norm_aug[:] = np.repeat(theta_norm_aug, lengths)
    out.mistakes[rows] = True
    return k, float(intercepts[-1])


def _products(X: FloatArray, weights: FloatArray, rows: npt.NDArray[np.intp],
              lengths: npt.NDArray[np.intp]) -> FloatArray:
    """x * θ of each row, θ the weights in effect at it: the weights repeated row by row when
    the segments are short, one multiplication a segment when they are long."""
    if 64 * len(weights) > len(X):
        products = weights.take(np.repeat(np.arange(len(weights)), lengths), axis=0)
        return np.multiply(X, products, out=products)
    products = np.empty_like(X)
    edges = [0, *(rows + 1).tolist(), len(X)]
    for k in range(len(weights)):
        a, b = edges[k], edges[k + 1]
        np.multiply(X[a:b], weights[k], out=products[a:b])
    return products


def _norms(weights: FloatArray, intercepts: FloatArray) -> tuple[FloatArray, FloatArray]:
    """‖θ‖ and ‖[θ, θ0]‖ of each row of weights, as ``Perceptron.norms`` computes them."""
    sq = (weights * weights).sum(axis=1)
    return np.sqrt(sq), np.sqrt(sq + intercepts * intercepts)


def _signed_rows(x: FloatArray, y: FloatArray, signed: FloatArray) -> float:
    """[y x, y] for each row, written to ``signed`` (exact: y is ±1), and R, an upper bound of
    their norms ‖[x, 1]‖: the root of their squares' sum, ‖x‖_F² + n (one pass, within a
    relative n·d·ε, far inside :func:`_decide`'s factor of eight). Rows whose norm is over
    2^400 or not finite are set to NaN and left out of R: those rows are always scored in the
    fixed order."""
    np.multiply(x, y[:, None], out=signed[:, :-1])
    signed[:, -1] = y
    with np.errstate(all="ignore"):  # rows with inf or NaN are set aside below
        reach = math.sqrt(float(np.einsum("ij,ij->", x, x)) + len(x))
        if reach <= HUGE:
            return reach
        sq = np.einsum("ij,ij->i", x, x)
    good = sq <= HUGE * HUGE
    signed[~good] = np.nan
    return math.sqrt(float(sq[good].sum()) + len(x))


def _fixed_order(x: FloatArray, label: float, w_aug: FloatArray, fit_intercept: bool) -> bool:
    """One row decided as learn_one decides it: scored in the fixed order, (x * θ).sum() + θ0,
    and on a mistake θ += y x (the row as it is: its signed row may be set aside as NaN) and
    θ0 += y, in ``w_aug`` = [θ, θ0]. Whether it was a mistake."""
    w, b = w_aug[:-1], float(w_aug[-1])
    if not label * ((x * w).sum() + b) <= 0:
        return False
    if label > 0:
        w += x
    else:
        w -= x
    if fit_intercept:
        w_aug[-1] = b + label
    return True


def _decide(
    x: FloatArray, y: FloatArray, w_aug: FloatArray, fit_intercept: bool, max_block: int,
    signed: FloatArray, compiled: bool,
) -> npt.NDArray[np.intp]:
    """The mistakes' rows, [θ, θ0] (``w_aug``) updated in place; ``signed`` a buffer as long as
    ``x`` for the rows [y x, y].

    The compiled loop (:func:`.dense_kernel.run`) decides every row whose margin
    y(θ·x + θ0) = [y x, y]·[θ, θ0] is farther from 0 than the tolerance (:func:`tolerance`,
    :func:`tolerance_scale`). It stops at a row nearer to 0 (or not finite), which is scored
    here in the fixed order, as learn_one scores it, and then goes on after it. Without
    ``compiled``, :func:`_decide_in_blocks` decides the same rows in numpy."""
    reach = _signed_rows(x, y, signed)  # R
    if not compiled:
        return _decide_in_blocks(x, y, w_aug, fit_intercept, max_block, signed, reach)
    from stream_perceptron.model import dense_kernel  # numba is loaded at the first call

    n = len(x)
    rows = np.empty(n, dtype=np.intp)
    scale, size = tolerance_scale(len(w_aug), reach), _norm(w_aug)  # size: S
    since, i, k = 0, 0, 0  # mistakes since S was last summed; the next row; mistakes
    while True:
        i, k, size, since = dense_kernel.run(signed, w_aug, i, k, rows, scale, size, since, reach,
                                             fit_intercept)
        if i >= n:
            return rows[:k]
        if not _fixed_order(x[i], float(y[i]), w_aug, fit_intercept):  # row i: the fixed order decides
            i += 1
            continue
        rows[k], k, i = i, k + 1, i + 1
        since, size = 0, _norm(w_aug)  # summed again: x may be past R


def _decide_in_blocks(
    x: FloatArray, y: FloatArray, w_aug: FloatArray, fit_intercept: bool, max_block: int,
    signed: FloatArray, reach: float,
) -> npt.NDArray[np.intp]:
    """:func:`_decide` in numpy, for calls too short to load the compiled loop.

    The margins y(θ·x + θ0) = [y x, y]·[θ, θ0] of a block of rows are computed at once, in
    BLAS's order; one farther from 0 than the tolerance decides its row, as in the compiled
    loop, and a row nearer to 0 (or not finite) is scored in the fixed order. The block is cut
    at its first mistake, and the next one starts after it; blocks grow while they are right."""
    n = len(x)
    w = w_aug[:-1]
    rows: list[int] = []
    scale, size = tolerance_scale(len(w_aug), reach), _norm(w_aug)  # size: S
    tol = tolerance(scale, size)
    since = 0  # mistakes since S was last summed
    i, block = 0, _FIRST_BLOCK
    while i < n:
        end = i + block
        margins = signed[i:end].dot(w_aug)  # ndarray.dot: the cheapest call for small blocks
        right = margins > tol
        k = int(right.argmin())
        if right[k]:
            i = end
            block = max_block if 2 * block > max_block else 2 * block
            continue
        r = i + k
        if not margins[k] < -tol:  # near the boundary, or not finite: the fixed order decides
            if not _fixed_order(x[r], float(y[r]), w_aug, fit_intercept):
                i = r + 1
                continue
            since, size = 0, _norm(w_aug)  # summed again: x may be past R
        else:
            if fit_intercept:  # θ += y x, θ0 += y: learn_one's additions
                w_aug += signed[r]
            else:
                w += signed[r, :-1]
            size, since = bound_after_mistake(size, since, reach)
            if not since:
                size = _norm(w_aug)
        rows.append(r)
        tol = tolerance(scale, size)
        i = r + 1
        block = k + 1  # about as many rows as the last stretch without a mistake
        block = (_MIN_MARGIN_BLOCK if block < _MIN_MARGIN_BLOCK
                 else max_block if block > max_block else block)
    return np.array(rows, dtype=np.intp)
