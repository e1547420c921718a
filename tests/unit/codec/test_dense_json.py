"""The simdjson reader of dense batches: what it takes it reads bit for bit as the msgspec way
does, and anything else it leaves to that way."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.codec import dense_json
from stream_perceptron.codec.inputs import BatchDecoder
from stream_perceptron.codec.limits import Limits

LIMITS = Limits(max_features=6, max_abs_value=1e300, max_id_chars=5, positive_class="spam")

pytestmark = pytest.mark.skipif(not dense_json.available(), reason="pysimdjson is not installed")


def reader(limits: Limits = LIMITS) -> dense_json.DenseBatchReader:
    decoder = BatchDecoder(limits)
    assert decoder._dense is not None
    return decoder._dense


def msgspec_way(values, limits: Limits = LIMITS):
    """The batch as the typed msgspec decoder (and the reference decoder behind it) reads it."""
    d = BatchDecoder(limits, read_dense=False).decode_many(values)
    assert not d.rejected and isinstance(d.xs, list)
    return np.array(d.xs, dtype=np.float64), d.ys, d.ids


def number_text(v) -> str:
    """A JSON number in one of the forms writers use."""
    return json.dumps(v) if isinstance(v, int) else repr(v) if v != int(v) or abs(v) > 1e15 else f"{v:.1f}"


numbers = (
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
    | st.integers(-(2**63), 2**64 - 1)
    | st.sampled_from([0.0, -0.0, 5e-324, 2.2250738585072014e-308, 0.1, 1e16, 123456789012345678])
)
labels = st.sampled_from([None, -1, 0, 1, 1.0, -1.0, 0.0, -0.0, True, False, "spam"])
ids = (
    st.none()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(exclude_characters="[", exclude_categories=["Cs"]), max_size=5)
)
_ABSENT = object()


@st.composite
def dense_batches(draw):
    width = draw(st.integers(1, LIMITS.max_features))
    values = []
    for _ in range(draw(st.integers(1, 8))):
        x = draw(st.lists(numbers, min_size=width, max_size=width))
        members = [("x", "[" + draw(st.sampled_from([",", ", "])).join(map(number_text, x)) + "]")]
        for name, strategy in (("y", labels), ("id", ids)):
            v = draw(st.just(_ABSENT) | strategy)
            if v is not _ABSENT:
                members.append((name, json.dumps(v)))
        order = draw(st.permutations(members))
        space = draw(st.sampled_from(["", " "]))
        values.append(("{" + ",".join(f'"{k}":{space}{v}' for k, v in order) + "}" + space).encode())
    return values


@settings(max_examples=400, deadline=None)
@given(dense_batches())
def test_a_plain_dense_batch_is_read_bit_for_bit_as_the_msgspec_way_reads_it(values):
    got = reader().read(values)
    assert got is not None, values
    X, ys, ids = got
    want_X, want_ys, want_ids = msgspec_way(values)
    assert X.dtype == np.float64 and X.shape == want_X.shape
    assert X.tobytes() == want_X.tobytes()  # -0.0 and 0.0 told apart
    assert ys == want_ys
    assert [(type(i), i) for i in ids] == [(type(i), i) for i in want_ids]


def test_the_decoder_hands_the_worker_one_matrix_for_a_plain_dense_batch():
    values = [orjson.dumps({"x": [0.5, -1, 2e-3], "y": y, "id": i}) for i, y in enumerate([1, 0, None])]
    d = BatchDecoder(LIMITS).decode_many(values, [b"k", None, b"key"])
    assert isinstance(d.xs, np.ndarray) and d.xs.tolist() == [[0.5, -1.0, 0.002]] * 3
    assert d.ys == [1, -1, 0] and d.ids == [0, 1, 2] and d.rows == [0, 1, 2] and not d.rejected


@pytest.mark.parametrize(
    ("values", "why"),
    [
        ([b'{"x": [1], "z": 0}'], "another member"),
        ([b'{"x": [1], "x": [2]}'], "a member twice"),
        ([b'{"x": [1], "y": 1, "y": 0}'], "the label twice"),
        ([b'{"x": [[1], [2]]}'], "nested arrays, which as_buffer flattens"),
        ([b'{"x": [[]]}'], "a nested empty array"),
        ([b'{"x": [1], "id": "a[b"}'], "a '[' anywhere: left to msgspec"),
        ([b'\xef\xbb\xbf{"x": [1]}'], "a byte-order mark"),
        ([b'{"x": [1], "id": "\xef\xbb\xbf"}'], "a byte-order mark anywhere: left to msgspec"),
        ([b'{"x": [1], "y": 1, "y": 1}'], "three members, y twice"),
        ([b'{"x": [1], "id": 1, "z": 1}'], "three members, one unknown"),
        ([b'{"x": [1], "x": [1], "x": [1]}'], "three members, x thrice"),
        ([b'{"x": [1], "id": 1, "id": 2}'], "the id twice"),
        ([b'{"x": [1], "y": 1, "id": 1, "z": 0}'], "four members"),
        ([b'[1]'], "not an object"),
        ([b'{"x": [true]}'], "a boolean feature"),
        ([b'{"x": [null]}'], "a null feature"),
        ([b'{"x": ["1"]}'], "a string feature"),
        ([b'{"x": {"a": 1}}'], "named features"),
        ([b'{"x": []}'], "no features"),
        ([b'{"x": [1, 2]}', b'{"x": [1]}'], "two widths"),
        ([b'{"x": [1, 2, 3, 4, 5, 6, 7]}'], "more than max_features"),
        ([b'{"x": [1e301]}'], "over max_abs_value"),
        ([b'{"x": [1e400]}'], "beyond a double"),
        ([b'{"x": [123456789012345678901234567890]}'], "an integer beyond 64 bits"),
        ([b'{"x": [1], "id": 9223372036854775808}'], "an id beyond int64"),
        ([b'{"x": [1], "id": true}'], "a boolean id"),
        ([b'{"x": [1], "id": "abcdef"}'], "an id over max_id_chars"),
        ([b'{"x": [1], "id": {}}'], "an object id"),
        ([b'{"x": [1], "y": 2}'], "an unknown label"),
        ([b'{"x": [1], "y": "ham"}'], "an unknown class name"),
        ([b'{"x": [1], "y": {}}'], "an object label"),
        ([b'{"x": [1]} x'], "text after the object"),
        ([b'{"x": [1]}{"x": [2]}'], "two objects"),
        ([b'{"x": [1,]}'], "not JSON"),
        ([b'{"x": [1], "id": "\xed\xa0\x80"}'], "not UTF-8"),
        ([b'{"x": [1], "id": "\\ud800"}'], "a lone surrogate"),
        ([b'{"x": [1]}', b'{"x": [1], "z": 0}'], "one record of the batch"),
        ([], "no records"),
    ],
)
def test_anything_else_is_left_to_the_msgspec_way(values, why):
    r = reader()
    assert r.read(values) is None, why
    assert r.read([b'{"x": [1, 2], "y": 1}']) is not None  # and the next batch is read


def test_without_the_reader_the_decoder_gives_lists():
    d = BatchDecoder(LIMITS, read_dense=False).decode_many([b'{"x": [1, 2]}'])
    assert d.xs == [[1.0, 2.0]]
