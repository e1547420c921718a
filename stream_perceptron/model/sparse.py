r"""Rows of named features, held sparse (pure: numpy only).

A record with named features (``{"clicks": 3, "age": 41}``) has a value for a few of the model's
columns and zero for all the others. :class:`SparseRows` keeps only the values given, in
compressed sparse row form, so that scoring a row costs its number of features, not the model's
width:

.. math:: \theta \cdot x = \sum_{k \in x} \theta_{i(k)} x_k

summed over the record's features in the order its keys came. :func:`segment_sums` is the one
place that adds them up: :func:`dot_rows` uses it for a block of rows, and
:class:`~stream_perceptron.model.perceptron.Perceptron` for a single row, so a row's score does not
depend on the rows around it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True, eq=False)
class SparseRows:
    """Row ``i`` holds ``values[indptr[i]:indptr[i + 1]]`` at the columns
    ``indices[indptr[i]:indptr[i + 1]]`` (distinct within a row); ``n_cols`` is the model's
    width when the rows were built.

    >>> rows = SparseRows.build([[0, 2], [], [1]], [[1.0, -2.0], [], [3.0]], n_cols=3)
    >>> len(rows), rows.dense().tolist()
    (3, [[1.0, 0.0, -2.0], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    >>> rows.squared_norms().tolist()
    [5.0, 0.0, 9.0]
    """

    indptr: IndexArray
    indices: IndexArray
    values: FloatArray
    n_cols: int

    @classmethod
    def build(cls, indices: list[list[int]], values: list[list[float]], n_cols: int) -> SparseRows:
        """Rows from one list of column indices and one list of values per row."""
        return cls.concat(
            map(len, indices), chain.from_iterable(indices), chain.from_iterable(values),
            n_rows=len(indices), n_cols=n_cols,
        )

    @classmethod
    def concat(
        cls, lengths: Iterable[int], indices: Iterable[int], values: Iterable[float], *, n_rows: int,
        n_cols: int,
    ) -> SparseRows:
        """Rows from their ``n_rows`` lengths and their columns and values one row after another
        (iterated in C, with no list per row)."""
        indptr = np.zeros(n_rows + 1, dtype=np.intp)
        np.cumsum(np.fromiter(lengths, dtype=np.intp, count=n_rows), out=indptr[1:])
        nnz = int(indptr[-1])
        flat_i = np.fromiter(indices, dtype=np.intp, count=nnz)
        flat_v = np.fromiter(values, dtype=np.float64, count=nnz)
        return cls(indptr, flat_i, flat_v, n_cols)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def row(self, i: int) -> tuple[IndexArray, FloatArray]:
        """The columns and values of row ``i``."""
        a, b = self.indptr[i], self.indptr[i + 1]
        return self.indices[a:b], self.values[a:b]

    def squared_norms(self) -> FloatArray:
        """‖x‖² of each row."""
        return segment_sums(self.values * self.values, self.indptr)

    def dense(self) -> FloatArray:
        """The rows as a dense matrix of ``n_cols`` columns (for tests and small inputs)."""
        out = np.zeros((len(self), self.n_cols), dtype=np.float64)
        rows = np.repeat(np.arange(len(self)), np.diff(self.indptr))
        out[rows, self.indices] = self.values
        return out


def segment_sums(values: FloatArray, indptr: IndexArray) -> FloatArray:
    """The sum of each segment ``values[indptr[i]:indptr[i + 1]]`` (0 for an empty one).

    Each segment is summed by ``np.add.reduceat`` on its own elements, so its sum depends on
    those elements and their order only, not on the segments around it.

    >>> segment_sums(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 2, 2, 4])).tolist()
    [3.0, 0.0, 7.0]
    """
    n = len(indptr) - 1
    sums = np.zeros(max(n, 0), dtype=np.float64)
    if n <= 0 or not len(values):
        return sums
    starts = indptr[:-1] - indptr[0]
    nonempty = indptr[1:] > indptr[:-1]
    # Only non-empty segments go to reduceat: each then ends where the next one starts, which
    # is its own end (the empty segments between them have no elements).
    if nonempty.all():
        sums[:] = np.add.reduceat(values, starts)
    elif nonempty.any():
        sums[nonempty] = np.add.reduceat(values, starts[nonempty])
    return sums


def dot_rows(w: FloatArray, rows: SparseRows, start: int, end: int) -> FloatArray:
    """θ·x of the rows ``start`` to ``end`` (exclusive); columns beyond ``len(w)`` do not occur."""
    a, b = rows.indptr[start], rows.indptr[end]
    products = w[rows.indices[a:b]] * rows.values[a:b]
    return segment_sums(products, rows.indptr[start : end + 1])


def take_rows(m: FloatArray | SparseRows, start: int, stop: int) -> FloatArray | SparseRows:
    """The rows ``[start, stop)`` of a dense matrix or of :class:`SparseRows`.

    >>> take_rows(SparseRows.build([[0], [1], [0, 1]], [[1.0], [2.0], [3.0, 4.0]], 2), 1, 3).dense().tolist()
    [[0.0, 2.0], [3.0, 4.0]]
    """
    if isinstance(m, SparseRows):
        a, b = int(m.indptr[start]), int(m.indptr[stop])
        return SparseRows(m.indptr[start:stop + 1] - a, m.indices[a:b], m.values[a:b], m.n_cols)
    return m[start:stop]


__all__ = ["SparseRows", "dot_rows", "segment_sums", "take_rows"]
