r"""One row at a time in plain Python: the perceptron's per-call path on dict rows (pure: the
standard library only).

A dict row is a handful of features; numpy's per-call overhead (an array built, a ufunc
dispatched) costs more than the arithmetic. So :meth:`~stream_perceptron.model.perceptron.
Perceptron.learn_one`, ``predict_one`` and ``predict_proba_one`` score a dict row here, from
Python floats, and learn_many scores the same rows with numpy (:func:`~stream_perceptron.model.
sparse.segment_sums`). Both give the same floats because both add in one order.

**The summation order of a row.** The products :math:`p_1, \dots, p_n` of a row
(:math:`p_j = \theta_{i(k_j)} x_{k_j}` over its keys :math:`k_j` in order) are summed as

.. math:: p_1 + S(p_2, \dots, p_n)

where :math:`S` is numpy's pairwise sum (``pairwise_sum`` in numpy's ``loops_utils.h.src``,
which ``np.add.reduceat`` uses on each segment): fewer than 8 terms are added left to right
starting from −0.0; up to 128 terms go to 8 running sums, term :math:`j` to sum :math:`j \bmod 8`,
which are then added as :math:`((s_0 + s_1) + (s_2 + s_3)) + ((s_4 + s_5) + (s_6 + s_7))`, and the
terms past the last multiple of 8 added to that left to right; beyond 128 terms the two halves
(the first rounded down to a multiple of 8) are summed so and added. :math:`\lVert\theta\rVert^2`
kept beside θ is summed as ``np.add.reduce`` sums: :math:`0 + S(\text{all terms})`.
``tests/unit/model/test_rowwise.py`` holds these functions to numpy's sums on random rows, so a
numpy that changed its order would fail there first.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from stream_perceptron.errors import FeatureValueError

__all__ = ["checked", "dot_lists", "dot_named", "dot_pair", "pairwise", "reduce_sum", "row_sum", "value"]


def pairwise(p: Sequence[float], lo: int, n: int) -> float:
    """numpy's pairwise sum of ``p[lo:lo + n]`` (the module's :math:`S`)."""
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += p[i]
        return res
    if n <= 128:
        r0, r1, r2, r3, r4, r5, r6, r7 = p[lo:lo + 8]
        i, end = 8, n - n % 8
        while i < end:
            j = lo + i
            r0 += p[j]
            r1 += p[j + 1]
            r2 += p[j + 2]
            r3 += p[j + 3]
            r4 += p[j + 4]
            r5 += p[j + 5]
            r6 += p[j + 6]
            r7 += p[j + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for j in range(lo + i, lo + n):
            res += p[j]
        return res
    half = n // 2
    half -= half % 8
    return pairwise(p, lo, half) + pairwise(p, lo + half, n - half)


def row_sum(p: Sequence[float]) -> float:
    """The sum of a row's products in the row's order (``segment_sums`` of one segment).

    >>> row_sum([1.0, 1e16, -1e16]), (1.0 + 1e16) - 1e16  # the first term, plus the rest summed
    (1.0, 0.0)
    """
    if not p:
        return 0.0
    return p[0] + pairwise(p, 1, len(p) - 1)


def reduce_sum(p: Sequence[float]) -> float:
    """The sum ``np.add.reduce`` gives of ``p`` as an array."""
    return 0.0 + pairwise(p, 0, len(p))


def dot_named(w: Mapping[Hashable, float], x: Mapping[Hashable, Any]) -> float:
    """θ·x of a dict row with θ by name, summed in the row's order (:func:`row_sum`'s, written
    out for rows of up to 16 features, the common ones, so that no list is built). KeyError for
    a name not in ``w``; TypeError for a value that is no number. A numpy scalar value gives a
    numpy scalar, which the caller takes for a value to convert."""
    n = len(x)
    if n <= 8:  # p1 + (p2 + ... + pn), the rest left to right from -0.0
        items = iter(x.items())
        first = 0.0
        for k, v in items:
            first = w[k] * v
            break
        rest = -0.0
        for k, v in items:
            rest += w[k] * v
        return first + rest
    if n <= 16:  # p1 + S: 8 running sums of one term each, added as a tree, then the rest in order
        row = tuple(x.items())
        (k0, v0), (k1, v1), (k2, v2), (k3, v3), (k4, v4), (k5, v5), (k6, v6), (k7, v7), (k8, v8) = row[:9]
        res = ((w[k1] * v1 + w[k2] * v2) + (w[k3] * v3 + w[k4] * v4)) + (
            (w[k5] * v5 + w[k6] * v6) + (w[k7] * v7 + w[k8] * v8))
        for k, v in row[9:]:
            res += w[k] * v
        total: float = w[k0] * v0 + res
        return total
    return row_sum([w[k] * v for k, v in x.items()])


def dot_pair(w: Mapping[Hashable, float], u: Mapping[Hashable, float],
             x: Mapping[Hashable, Any]) -> tuple[float, float]:
    """``(dot_named(w, x), dot_named(u, x))`` in one pass over the row (the averaged model's two
    sums), each in the row's order."""
    n = len(x)
    if n <= 8:
        items = iter(x.items())
        a = c = 0.0
        for k, v in items:
            a, c = w[k] * v, u[k] * v
            break
        rest_a = rest_c = -0.0
        for k, v in items:
            rest_a += w[k] * v
            rest_c += u[k] * v
        return a + rest_a, c + rest_c
    if n <= 16:
        row = tuple(x.items())
        (k0, v0), (k1, v1), (k2, v2), (k3, v3), (k4, v4), (k5, v5), (k6, v6), (k7, v7), (k8, v8) = row[:9]
        res_a = ((w[k1] * v1 + w[k2] * v2) + (w[k3] * v3 + w[k4] * v4)) + (
            (w[k5] * v5 + w[k6] * v6) + (w[k7] * v7 + w[k8] * v8))
        res_c = ((u[k1] * v1 + u[k2] * v2) + (u[k3] * v3 + u[k4] * v4)) + (
            (u[k5] * v5 + u[k6] * v6) + (u[k7] * v7 + u[k8] * v8))
        for k, v in row[9:]:
            res_a += w[k] * v
            res_c += u[k] * v
        return w[k0] * v0 + res_a, u[k0] * v0 + res_c
    return dot_named(w, x), dot_named(u, x)


def dot_lists(weights: Sequence[float], values: Sequence[float]) -> float:
    """θ·x of a row given as its weights and values in order (:func:`row_sum`'s order)."""
    return row_sum([a * v for a, v in zip(weights, values, strict=True)])


def value(v: Any) -> float:
    """A feature value as the float64 learned: a real number (a bool is 0 or 1) that is finite,
    else :class:`~stream_perceptron.errors.FeatureValueError` saying what it is.

    >>> value(3), value(True), value(2.5)
    (3.0, 1.0, 2.5)
    >>> value(None)
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.FeatureValueError: is None
    """
    if v is None:
        raise FeatureValueError("is None")
    if not isinstance(v, numbers.Real):
        raise FeatureValueError(f"is not a number ({type(v).__name__})")
    try:
        f = float(v)
    except OverflowError:
        raise FeatureValueError("is too large") from None
    if math.isnan(f):
        raise FeatureValueError("is NaN")
    if math.isinf(f):
        raise FeatureValueError("is not finite")
    return f


def checked(x: Mapping[Hashable, Any], where: str = "") -> dict[Hashable, float]:
    """A dict row with its values as :func:`value` gives them, in its order; the first value that
    is not a finite number raises :class:`~stream_perceptron.errors.FeatureValueError` naming its
    feature (after ``where``, when given).

    >>> checked({"a": 1, "b": 0.5})
    {'a': 1.0, 'b': 0.5}
    >>> checked({"a": 1, "b": float("nan")})
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.FeatureValueError: feature 'b' is NaN: feature values are finite numbers
    """
    out = {}
    for k, v in x.items():
        try:
            out[k] = value(v)
        except FeatureValueError as exc:
            raise FeatureValueError(
                f"{where}feature {k!r} {exc.reason}: feature values are finite numbers") from None
    return out
