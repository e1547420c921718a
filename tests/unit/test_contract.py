"""The input contract (stream_perceptron/contract.py): one rule of labels, one of feature values,
one reading of a record, and every road into the package keeping them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_perceptron.codec.inputs import BatchDecoder, decode_example, decode_label
from stream_perceptron.codec.limits import Limits
from stream_perceptron.contract import (
    NotANumber,
    NotFinite,
    array_signs,
    finite_number,
    finite_text,
    float64,
    json_object,
    label_sign,
    label_table,
)
from stream_perceptron.errors import DecodeError, SourceError
from stream_perceptron.model.labels import LabelSpace
from stream_perceptron.sources import open_source
from stream_perceptron.sources.base import BadRecord, number
from stream_perceptron.sources.classes import Classes, label_from_value
from stream_perceptron.sources.spec_args import parse_args

POSITIVE, NEGATIVE = "spam", "ham"

LABELS = [
    (True, 1), (1, 1), (1.0, 1), (np.True_, 1), (np.int64(1), 1), (np.uint8(1), 1), (np.float32(1), 1),
    (False, -1), (0, -1), (0.0, -1), (-0.0, -1), (np.False_, -1), (np.int8(0), -1), (-1, -1),
    (-1.0, -1), (np.int64(-1), -1), (POSITIVE, 1), (NEGATIVE, -1),
]
NOT_LABELS = [2, -2, 0.5, 2**70, float("nan"), float("inf"), np.int64(2), "eggs", "1", "", None,
              [1], {"y": 1}]


@pytest.mark.parametrize(("y", "sign"), LABELS)
def test_a_label_has_one_sign(y, sign):
    assert label_sign(y, POSITIVE, NEGATIVE) == sign


@pytest.mark.parametrize("y", NOT_LABELS, ids=repr)
def test_anything_else_is_not_a_label(y):
    assert label_sign(y, POSITIVE, NEGATIVE) is None


def test_a_class_name_is_a_label_only_once_named():
    assert label_sign(POSITIVE) is None and label_sign(NEGATIVE, POSITIVE) is None
    assert label_sign(NEGATIVE, negative=NEGATIVE) == -1


def _codec(y):
    try:
        return decode_label(y, Limits(positive_class=POSITIVE, negative_class=NEGATIVE))
    except DecodeError:
        return None


def _sources(y):
    try:
        return label_from_value(y, Classes(POSITIVE, NEGATIVE))
    except BadRecord:
        return None


def _model(y, classes=None):
    try:
        return LabelSpace(classes).sign(y)
    except ValueError:
        return None


def _model_many(y, classes=None):
    try:
        return int(LabelSpace(classes).signs(np.array([y]), 1)[0])
    except ValueError:
        return None


@pytest.mark.parametrize(("y", "sign"), LABELS + [(y, None) for y in NOT_LABELS if y is not None])
@pytest.mark.parametrize("road", [_codec, _sources, _model, _model_many])
def test_every_road_signs_a_label_as_the_contract_does(road, y, sign):
    """The worker's decoder, fit and produce's sources, and the model's learn_one and learn_many:
    0 is the negative class on each, and what is not a label is refused by each (but NaN, which
    learn_many takes for a missing label). The model is given no class names: a class name is
    then not one of its labels."""
    if road is _model_many and isinstance(y, float) and np.isnan(y):
        assert road(y) == 0  # unlabeled
    elif road in (_model, _model_many) and y in (POSITIVE, NEGATIVE):
        assert road(y) is None
    else:
        assert road(y) == sign


@pytest.mark.parametrize(("y", "sign"), LABELS + [(y, None) for y in NOT_LABELS if y is not None])
@pytest.mark.parametrize("road", [_model, _model_many])
def test_a_model_given_class_names_takes_those_two_alone(road, y, sign):
    """``Perceptron(classes=(negative, positive))``: any other label is refused, so that a stream of
    other labels (bools, 0/1) is not learned silently as one class."""
    if road is _model_many and isinstance(y, float) and np.isnan(y):
        assert road(y, (NEGATIVE, POSITIVE)) == 0  # unlabeled
    else:
        assert road(y, (NEGATIVE, POSITIVE)) == (sign if y in (POSITIVE, NEGATIVE) else None)


json_labels = st.none() | st.booleans() | st.integers() | st.floats() | st.sampled_from(
    [POSITIVE, NEGATIVE, "eggs", "1", ""]) | st.text(max_size=3)


@given(json_labels, st.sampled_from([None, POSITIVE]), st.sampled_from([None, NEGATIVE]))
def test_the_lookup_is_the_rule(y, positive, negative):
    table = label_table(positive, negative)
    want = 0 if y is None else label_sign(y, positive, negative)
    assert table.get(y) == want


def test_the_batch_decoder_looks_labels_up_by_the_rule():
    values = [b'{"x": [1], "y": %s}' % y for y in (b"1", b"1.0", b"true", b"0", b"-0.0", b"false",
                                                    b"-1", b'"spam"', b'"ham"', b"null")]
    d = BatchDecoder(Limits(positive_class=POSITIVE, negative_class=NEGATIVE)).decode_many(values)
    assert d.ys == [1, 1, 1, -1, -1, -1, -1, 1, -1, 0]


@given(st.lists(st.integers(-3, 3) | st.floats(), max_size=8),
       st.sampled_from([np.bool_, np.int8, np.uint8, np.int64, np.float32, np.float64]))
def test_an_array_is_signed_as_its_values(values, dtype):
    with np.errstate(all="ignore"):  # casts of NaN, negatives and the out of range, whatever they give
        y = np.array(values).astype(dtype)
    signs, ok = array_signs(y)
    for v, s, is_label in zip(y.tolist(), signs.tolist(), ok.tolist(), strict=True):
        sign = label_sign(v)
        assert is_label == (sign is not None)
        if is_label:
            assert s == sign


@pytest.mark.parametrize(
    ("value", "error", "why"),
    [
        (True, NotANumber, "is not a number"),
        (np.True_, NotANumber, "is not a number"),
        ("1", NotANumber, "is not a number"),
        (None, NotANumber, "is not a number"),
        (10**400, NotFinite, "is too large"),
        (float("inf"), NotFinite, "is not finite"),
        (np.float32("nan"), NotFinite, "is not finite"),
    ],
    ids=repr,
)
def test_a_feature_value_is_a_finite_number(value, error, why):
    with pytest.raises(error, match=f"^{why}$"):
        finite_number(value)
    with pytest.raises(BadRecord, match=f"^feature x\\[0\\] {why}: "):  # a dataset's words
        number(value, "x[0]")


@given(st.integers() | st.integers(-(2**1100), 2**1100) | st.floats(allow_nan=False))
def test_a_number_is_the_float64_a_row_holds(v):
    got = float64(v)
    try:
        assert got == float(v)
    except OverflowError:  # an integer past the float range
        assert got == (math.inf if v > 0 else -math.inf)
    if math.isfinite(got):  # the same float, whether a value or its text
        assert finite_number(v) == got == finite_text(repr(v))


@pytest.mark.parametrize(("text", "error"), [("abc", NotANumber), ("0x10", NotANumber), ("nan", NotFinite),
                                             ("-inf", NotFinite), ("1e400", NotFinite)])
def test_a_texts_number_is_finite(text, error):
    with pytest.raises(error):
        finite_text(text)
    kind = "not a number" if error is NotANumber else "not finite"
    with pytest.raises(SourceError, match=f"^sea: noise={text!r} is {kind}$"):  # a spec's words
        parse_args("sea", f"noise={text}", {"noise": 0.0})


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"[1, 2]", "record must be a JSON object, got array"),
        (b'"x"', "record must be a JSON object, got string"),
        (b"{nope", "not valid JSON: "),  # and orjson's words, with a position in the record
        (b'{"x": [NaN]}', "not valid JSON: "),
        (b'{"x": [1], "y": "\xff"}', "not valid JSON: invalid UTF-8 at byte 17 (0xff)"),
    ],
)
def test_a_record_that_is_not_a_json_object_is_refused_in_one_wording(tmp_path, value, reason):
    """The worker's dead letter and a JSON-lines file given to fit or produce give one reason."""
    with pytest.raises(DecodeError) as err:
        json_object(value)
    if reason.endswith(": "):
        assert err.value.reason.startswith(reason) and "(char " in err.value.reason
        reason = err.value.reason
    assert err.value.reason == reason
    with pytest.raises(DecodeError) as err:
        decode_example(value, Limits())
    assert err.value.reason == reason
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"x": [1], "y": 1}\n' + value + b"\n")
    with pytest.raises(SourceError) as info:
        list(open_source(str(path)))
    assert str(info.value) == f"{path}:2: {reason}"
