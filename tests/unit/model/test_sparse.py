"""Sparse rows of named features: each row's sum depends on that row alone."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.model.sparse import SparseRows, dot_rows, segment_sums


@st.composite
def layouts(draw):
    lengths = draw(st.lists(st.integers(0, 40), min_size=0, max_size=30))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.normal(size=sum(lengths)) * rng.choice([1e-8, 1.0, 1e8], size=sum(lengths))
    indptr = np.zeros(len(lengths) + 1, dtype=np.intp)
    np.cumsum(lengths, out=indptr[1:])
    return values, indptr


@settings(max_examples=200, deadline=None)
@given(layouts())
def test_each_segment_sums_as_it_would_alone(layout):
    values, indptr = layout
    sums = segment_sums(values, indptr)
    assert len(sums) == len(indptr) - 1
    for i in range(len(sums)):
        alone = values[indptr[i] : indptr[i + 1]].copy()  # on its own, in a fresh array
        expected = segment_sums(alone, np.array([0, len(alone)], dtype=np.intp))[0]
        assert sums[i] == expected
        assert abs(sums[i] - alone.sum()) <= 1e-12 * np.abs(alone).sum()


@settings(max_examples=100, deadline=None)
@given(layouts(), st.integers(0, 30), st.integers(0, 30))
def test_dot_rows_of_any_range_equals_each_row_scored_alone(layout, a, b):
    values, indptr = layout
    n = len(indptr) - 1
    width = 50
    rng = np.random.default_rng(len(values))
    indices = np.concatenate(
        [rng.choice(width, size=int(k), replace=False) for k in np.diff(indptr)] or [np.zeros(0)]
    ).astype(np.intp)
    rows = SparseRows(indptr, indices, values, width)
    w = rng.normal(size=width)
    start, end = sorted((min(a, n), min(b, n)))
    got = dot_rows(w, rows, start, end)
    for i in range(start, end):
        cols, vals = rows.row(i)
        one = SparseRows.build([cols.tolist()], [vals.tolist()], width)
        assert got[i - start] == dot_rows(w, one, 0, 1)[0]
    dense = rows.dense()[start:end]
    scale = np.abs(dense) @ np.abs(w)  # rounding error is relative to the sum of |products|
    assert (np.abs(got - dense @ w) <= 1e-12 * scale + 1e-300).all()


def test_build_dense_and_norms():
    rows = SparseRows.build([[3, 0], [], [1]], [[2.0, -1.0], [], [4.0]], n_cols=4)
    assert rows.dense().tolist() == [[-1.0, 0.0, 0.0, 2.0], [0.0] * 4, [0.0, 4.0, 0.0, 0.0]]
    assert rows.squared_norms().tolist() == [5.0, 0.0, 16.0]
    cols, vals = rows.row(0)
    assert cols.tolist() == [3, 0] and vals.tolist() == [2.0, -1.0]  # the record's own order
    assert len(SparseRows.build([], [], 4)) == 0
