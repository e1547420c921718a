"""The record codec: what is accepted, what is refused and why, and the output formats."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.errors import DecodeError
from stream_perceptron.records import (
    Example,
    Limits,
    dead_letter_record,
    decode,
    decode_example,
    encode,
    input_record,
    prediction_record,
)

LIMITS = Limits(max_record_bytes=1000, max_features=5, max_abs_value=1e6,
                positive_class="spam", negative_class="ham")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b'{"x": [1, 2.5]}', Example([1, 2.5], 0)),
        (b'{"x": [1], "y": null}', Example([1], 0)),
        (b'{"x": [1], "y": 1}', Example([1], 1)),
        (b'{"x": [1], "y": -1}', Example([1], -1)),
        (b'{"x": [1], "y": 0}', Example([1], -1)),
        (b'{"x": [1], "y": true}', Example([1], 1)),
        (b'{"x": [1], "y": false}', Example([1], -1)),
        (b'{"x": [1], "y": "spam", "id": "e1"}', Example([1], 1, "e1")),
        (b'{"x": {"a": 1, "b": -2}, "y": "ham", "id": 3}', Example({"a": 1, "b": -2}, -1, 3)),
    ],
)
def test_accepted_inputs(value, expected):
    assert decode_example(value, LIMITS) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "no value"),
        (b"\xff\xfe", "not valid JSON"),
        (b"{nope", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object, got array"),
        (b'{"y": 1}', "no 'x'"),
        (b'{"x": "1,2"}', "x must be a list"),
        (b'{"x": []}', "x is empty"),
        (b'{"x": [1, "2"]}', "x[1] is not a number (got string)"),
        (b'{"x": [1, null]}', "x[1] is not a number (got null)"),
        (b'{"x": {"a": true}}', "x['a'] is not a number (got bool)"),
        (b'{"x": [1, [2]]}', "x[1] is not a number (got array)"),
        (b'{"x": [1e400]}', "not valid JSON"),
        (b'{"x": [1e7]}', "magnitude 1e+07, over the limit"),
        (b'{"x": [1, 2, 3, 4, 5, 6]}', "6 features, over the limit of 5"),
        (b'{"x": [1], "y": 2}', "unknown label 2"),
        (b'{"x": [1], "y": "eggs"}', "unknown label 'eggs'"),
        (b'{"x": [1], "y": [1]}', "unknown label of type array"),
        (b'{"x": [1], "id": {"a": 1}}', "id must be a string or a number"),
        (b'{"x": [1], "pad": "' + b"a" * 1000 + b'"}', "over the limit of 1000"),
    ],
)
def test_refused_inputs_say_why(value, reason):
    with pytest.raises(DecodeError) as err:
        decode_example(value, LIMITS)
    assert reason in err.value.reason


def test_deep_nesting_is_refused():
    with pytest.raises(DecodeError, match="not valid JSON: depth limit"):
        decode_example(b'{"x": ' + b"[" * 2000 + b"}", Limits())


def test_string_labels_without_class_names_are_refused():
    with pytest.raises(DecodeError, match="no class names are set"):
        decode_example(b'{"x": [1], "y": "spam"}', Limits())


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_decoded_or_refused_with_a_reason(raw):
    try:
        ex = decode_example(raw, LIMITS)
    except DecodeError as exc:
        assert exc.reason
    else:
        assert ex.y in (-1, 0, 1)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["x", "y", "id", "z"]), json_values))
def test_arbitrary_json_objects_are_decoded_or_refused_with_a_reason(obj):
    raw = json.dumps(obj).encode()  # stdlib: integers of any size
    try:
        ex = decode_example(raw, LIMITS)
    except DecodeError as exc:
        assert exc.reason
    else:
        values = ex.x.values() if isinstance(ex.x, dict) else ex.x
        assert all(type(v) in (int, float) and abs(v) <= 1e6 for v in values)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=5),
    st.sampled_from([None, -1, 1]),
    st.none() | st.text(max_size=8) | st.integers(-5, 5),
)
def test_input_record_round_trip(x, y, rid):
    ex = decode_example(input_record(x, y, rid), LIMITS)
    assert ex == Example(x, 0 if y is None else y, rid)


def test_prediction_record_format():
    rec = prediction_record(topic="in", partition=0, offset=7, key=b"k\xff", id="a",
                            prediction=-1, score=-0.5, label=1, mistake=True,
                            margin=float("nan"), updates=3)
    assert rec == {"topic": "in", "partition": 0, "offset": 7, "key": "k\\xff", "id": "a",
                   "prediction": -1, "score": -0.5, "label": 1, "mistake": True,
                   "margin": None, "updates": 3}
    unlabeled = prediction_record(topic="in", partition=0, offset=8, key=None, id=None,
                                  prediction=1, score=2.0, label=0, mistake=False,
                                  margin=0.3, updates=3)
    assert unlabeled["label"] is None and unlabeled["mistake"] is None
    assert unlabeled["margin"] is None
    assert decode(encode(rec)) == rec


def test_dead_letter_record_keeps_the_original_bytes():
    rec = dead_letter_record(topic="in", partition=1, offset=9, key=None, error="x is empty",
                             value=b'{"x": []}')
    assert base64.b64decode(rec["value"]) == b'{"x": []}'
    assert rec["error"] == "x is empty" and rec["offset"] == 9
