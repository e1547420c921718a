"""The per-call path's sums (model/rowwise.py) are numpy's, bit for bit: a dict row scored one at a
time in Python gets the float learn_many gets from ``segment_sums``, and ‖θ‖² kept by learn_one is
the one ``np.add.reduce`` keeps. A numpy that summed in another order would fail here first."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.errors import FeatureValueError
from stream_perceptron.model.rowwise import checked, dot_lists, dot_named, dot_pair, reduce_sum, row_sum
from stream_perceptron.model.sparse import segment_sums


def _terms(rng: np.random.Generator, n: int) -> list[float]:
    """Terms of wildly different sizes and both signs: any other order of addition rounds apart."""
    return (rng.normal(size=n) * 10.0 ** rng.integers(-8, 17, size=n)).tolist()


@pytest.mark.parametrize("n", [*range(0, 40), 63, 64, 65, 127, 128, 129, 130, 200, 257, 1000])
def test_row_sum_is_segment_sums_and_reduce_sum_is_add_reduce(n):
    rng = np.random.default_rng(n)
    for _ in range(30):
        p = _terms(rng, n)
        arr = np.array(p, dtype=np.float64)
        segment = float(segment_sums(arr, np.array([0, n], dtype=np.intp))[0])
        assert repr(row_sum(p)) == repr(segment)
        assert repr(reduce_sum(p)) == repr(float(np.add.reduce(arr)))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 40), seed=st.integers(0, 2**32 - 1), ints=st.booleans())
def test_dot_named_is_the_sparse_rows_sum(n, seed, ints):
    """The written-out loops (up to 8 and up to 16 features) and the general case alike, alone or
    two at a time."""
    rng = np.random.default_rng(seed)
    names = [f"f{i}" for i in rng.permutation(n)]
    w = dict(zip(names, _terms(rng, n), strict=True))
    values = rng.integers(-5, 6, size=n).tolist() if ints else _terms(rng, n)
    x = dict(zip(names, values, strict=True))
    products = np.array([w[k] for k in x]) * np.array(list(x.values()), dtype=np.float64)
    want = float(segment_sums(products, np.array([0, n], dtype=np.intp))[0])
    assert repr(dot_named(w, x)) == repr(want)
    assert repr(dot_lists([w[k] for k in x], [float(v) for v in x.values()])) == repr(want)
    u = dict(zip(names, _terms(rng, n), strict=True))
    assert repr(dot_pair(w, u, x)) == repr((want, dot_named(u, x)))  # the averaged model's two sums


def test_checked_values_are_floats_and_bad_ones_name_their_feature():
    assert checked({"a": 1, "b": True, "c": np.float32(0.5), "d": np.int64(3)}) == {"a": 1.0, "b": 1.0,
                                                                                    "c": 0.5, "d": 3.0}
    for bad, what in ((None, "is None"), (float("nan"), "is NaN"), (float("inf"), "is not finite"),
                      ("1.5", "is not a number"), (10**400, "is too large")):
        with pytest.raises(FeatureValueError, match=f"feature 'b' {what}"):
            checked({"a": 1.0, "b": bad})
