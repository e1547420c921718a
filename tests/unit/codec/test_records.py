"""The record codec: what is accepted, what is refused and why, and the output formats."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.codec.inputs import (
    BatchDecoder,
    Example,
    LabelRecord,
    decode_example,
    decode_record,
    input_record,
)
from stream_perceptron.codec.limits import FRAMING_BYTES, OUTPUT_RECORD_BYTES, Limits, check_output_bounds
from stream_perceptron.codec.outputs import (
    dead_letter_record,
    decode,
    encode,
    encode_prediction,
    encode_predictions,
    largest_dead_letter_bytes,
    largest_prediction_bytes,
    prediction_record,
)
from stream_perceptron.errors import DecodeError

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
    with pytest.raises(DecodeError,
                       match="no class names are set: SP_LIMITS__POSITIVE_CLASS, SP_LIMITS__NEGATIVE_CLASS"):
        decode_example(b'{"x": [1], "y": "spam"}', Limits())


def test_an_unknown_class_name_is_refused_naming_the_settings_of_the_classes():
    with pytest.raises(DecodeError) as err:
        decode_example(b'{"x": [1], "y": "eggs"}', Limits(positive_class="spam", negative_class="ham"))
    assert err.value.reason == (
        "unknown label 'eggs': expected 'spam' (SP_LIMITS__POSITIVE_CLASS)"
        " or 'ham' (SP_LIMITS__NEGATIVE_CLASS)")


@pytest.mark.parametrize(
    ("value", "bound", "printed"),
    [
        (b"1.0000001e12", 1e12, "1.0000001e+12, over the limit of 1e+12"),
        (b"-1000000.5", 1e6, "1000000.5, over the limit of 1000000"),
        (b"10000000000000003", 1e16, "10000000000000004, over the limit of 10000000000000000"),
        (b"1e7", 1e6, "1e+07, over the limit of 1e+06"),  # as short as before where that tells them apart
    ],
)
def test_a_value_over_the_bound_is_printed_apart_from_it(value, bound, printed):
    with pytest.raises(DecodeError) as err:
        decode_example(b'{"x": [' + value + b"]}", Limits(max_abs_value=bound))
    assert err.value.reason == f"x has a value of magnitude {printed} (SP_LIMITS__MAX_ABS_VALUE)"


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (b"\xff\xfe", "byte 0 (0xff)"),
        (b'{"x": [1], "y": "\xff"}', "byte 17 (0xff)"),
        ('{"x": [1], "id": "\ud800"}'.encode("utf-8", "surrogatepass"), "byte 18 (0xed)"),
        (b'{"x": [1], "id": "caf\xc3"}', "byte 21 (0xc3)"),  # a sequence cut short
    ],
)
def test_invalid_utf8_is_named_with_the_byte_where_it_starts(value, where):
    for reason in (_reason(value), BatchDecoder(Limits()).decode_many([value]).rejected[0]):
        assert reason == f"not valid JSON: invalid UTF-8 at {where}"


def _reason(value: bytes) -> str:
    with pytest.raises(DecodeError) as err:
        decode_example(value, Limits())
    return err.value.reason


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


def reference(values, limits, keys=None):
    """What decode_record makes of each value: ``(x, y, id)``, ``LabelRecord`` or the refusal's
    reason."""
    out = []
    for i, v in enumerate(values):
        try:
            ex = decode_record(v, limits, None if keys is None else keys[i])
        except DecodeError as exc:
            out.append(exc.reason)
        else:
            out.append(ex if isinstance(ex, LabelRecord) else (ex.x, ex.y, ex.id))
    return out


def fast(values, limits, keys=None):
    d = BatchDecoder(limits).decode_many(values, keys)
    out = [d.rejected.get(i) for i in range(len(values))]
    for i, label in d.labels.items():
        assert out[i] is None, "a label record both taken and rejected"
        out[i] = label
    for k, i in enumerate(d.rows):
        assert out[i] is None, "a row both accepted and rejected"
        x = d.xs[k]
        out[i] = (x.tolist() if isinstance(x, np.ndarray) else x, d.ys[k], d.ids[k])
    return out


def same(a, b):
    """Equal results, with ``1 == 1.0`` in features but not ``True == 1`` anywhere."""
    if isinstance(a, str | LabelRecord) or isinstance(b, str | LabelRecord):
        return a == b and type(a.id if isinstance(a, LabelRecord) else a) is type(
            b.id if isinstance(b, LabelRecord) else b)
    (xa, ya, ia), (xb, yb, ib) = a, b

    def values(x):
        return list(x.values()) if isinstance(x, dict) else x

    return (
        type(xa) is type(xb)
        and (list(xa) if isinstance(xa, dict) else 0) == (list(xb) if isinstance(xb, dict) else 0)
        and [float(v) for v in values(xa)] == [float(v) for v in values(xb)]
        and ya == yb
        and type(ia) is type(ib) and ia == ib
    )


numbers = st.integers(-(10**7), 10**7) | st.floats(-2e6, 2e6) | st.integers() | st.floats()
near_numbers = numbers | st.booleans() | st.none() | st.text(max_size=2) | st.lists(numbers, max_size=1)
features = (
    st.lists(near_numbers, max_size=7)
    | st.dictionaries(st.text(max_size=3), near_numbers, max_size=7)
    | json_values
)
labels = st.sampled_from(
    [None, -1, 0, 1, 1.0, -1.0, 0.0, -0.0, 2, 0.5, True, False, "spam", "ham", "eggs", ""]
)
ids = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4) | json_values


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {}, optional={"x": features, "y": labels | json_values, "id": ids, "z": json_values}
        ),
        max_size=6,
    ),
    st.sampled_from([LIMITS, Limits(), Limits(max_features=1, max_abs_value=0.5, negative_class="ham")]),
)
def test_the_batch_decoder_agrees_with_the_reference_decoder(objs, limits):
    values = [json.dumps(o).encode() for o in objs]  # stdlib: integers of any size, Infinity
    for want, got in zip(reference(values, limits), fast(values, limits), strict=True):
        assert same(want, got), (want, got)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6) | st.integers(-5, 5), min_size=1, max_size=5)
    | st.dictionaries(st.text(max_size=3), st.floats(-1e6, 1e6), min_size=1, max_size=5),
    labels,
    ids,
)
def test_the_batch_decoder_agrees_on_labels_and_ids_of_valid_features(x, y, rid):
    values = [json.dumps({"x": x, "y": y, "id": rid}).encode()]
    for limits in (LIMITS, Limits(positive_class="eggs")):
        assert same(reference(values, limits)[0], fast(values, limits)[0])


@pytest.mark.parametrize(
    "value",
    [
        None,
        b"",
        b"\xff\xfe",
        b'\xef\xbb\xbf{"x": [1]}',
        b'{"x": [1], "x": [2, 3]}',
        b'{"x": {"a": 1, "a": 2}}',
        b'{"x": [1], "id": 18446744073709551615}',
        b'{"x": [1], "id": 184467440737095516150}',
        b'{"x": [1], "id": -9223372036854775809}',
        b'{"x": [123456789012345678901234567890]}',
        b'{"x": [1], "y": -0.0}',
        b'{"x": [1], "y": 1e400}',
        b'{"x": [NaN]}',
        b'{"x": [1, 2, 3, 4, 5]} ',
        b'{"x": [1, 2, 3, 4, 5, 6]}',
        b'{"x": [1], "pad": "' + b"a" * 1000 + b'"}',
        b'{"x": ' + b"[" * 2000 + b"}",
        '{"x": [1], "id": "\ud800"}'.encode("utf-8", "surrogatepass"),
        # an unknown member is checked as the rest of the document is
        b'{"x": [1, 2], "y": 1, "z": "\xff"}',
        b'{"x": [1], "\xff": 1}',
        b'{"y": null, "x": [1000000, 1], "z": 1e999}',
        b'{"x": [1, 2], "y": 1, "ts": "2026-11-24"}',
    ],
)
def test_the_batch_decoder_agrees_at_the_edges(value):
    assert same(reference([value], LIMITS)[0], fast([value], LIMITS)[0])


@pytest.mark.parametrize("literal", [b"10000000000000001", b"10000000000000003", b"-10000000000000001",
                                     b"1" + b"0" * 400, b"10000000000000001.0"])
@pytest.mark.parametrize("rest", [b"", b', "note": "a"'])  # the dense reader, or the typed decoder
def test_the_value_bound_is_checked_on_the_float_a_row_holds(literal, rest):
    # 10000000000000001 is 1e16 as a float64, so it is within a bound of 1e16 whatever reads it;
    # 10000000000000003 rounds to 1.0000000000000004e16, over it; 1e400 as an integer is infinite
    limits = Limits(max_abs_value=1e16)
    value = b'{"x": [' + literal + b", 1]" + rest + b"}"
    want, got = reference([value], limits)[0], fast([value], limits)[0]
    assert same(want, got), (want, got)
    assert isinstance(want, str) == (float(literal.replace(b"0" * 400, b"e400")) > 1e16)


def test_the_batch_decoder_keeps_batch_positions():
    values = [b'{"x": [1]}', b"{nope", b'{"x": [2], "y": "spam"}', None, b'{"x": [3], "y": 0}']
    d = BatchDecoder(LIMITS).decode_many(values)
    assert d.rows == [0, 2, 4]
    assert d.xs == [[1.0], [2.0], [3.0]] and d.ys == [0, 1, -1] and d.ids == [None, None, None]
    assert set(d.rejected) == {1, 3} and "not valid JSON" in d.rejected[1]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**62), st.none() | st.binary(max_size=6),
            st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=4),
            st.sampled_from([-1, 1]), st.floats(), st.sampled_from([-1, 0, 1]), st.booleans(),
            st.floats(), st.integers(0, 2**40),
        ),
        max_size=5,
    ),
    st.none() | st.tuples(st.none() | st.text(max_size=5), st.none() | st.text(max_size=5)),
)
def test_encode_predictions_is_prediction_record_byte_for_byte(rows, classes):
    columns = list(zip(*rows, strict=True)) or [[]] * 9
    got = encode_predictions(
        topic="in", partition=3, offsets=columns[0], keys=columns[1], ids=columns[2],
        predictions=columns[3], scores=columns[4], labels=columns[5], mistakes=columns[6],
        margins=columns[7], updates=columns[8], classes=classes,
    )
    records = [
        prediction_record(topic="in", partition=3, offset=o, key=k, id=i, prediction=p,
                          score=s, label=lab, mistake=m, margin=g, updates=u, classes=classes)
        for o, k, i, p, s, lab, m, g, u in rows
    ]
    for r in records:  # the configured name of the predicted class, only when names are configured
        assert ("class" in r) is (classes is not None)
        assert classes is None or r["class"] == classes[r["prediction"] == 1]
    assert got == [encode_prediction(r) for r in records]
    # the same JSON values as the other records' encoder writes (floats may differ in spelling only)
    assert [decode(b) for b in got] == [decode(encode(r)) for r in records]


def test_prediction_floats_round_trip_in_either_spelling():
    got = encode_predictions(
        topic="in", partition=0, offsets=[1, 2], keys=[None, None], ids=[1e16, None],
        predictions=[1, -1], scores=[1.5e300, -2.5e-10], labels=[1, -1], mistakes=[False, False],
        margins=[1e22, 5e-324], updates=[0, 0],
    )
    assert b'"score":1.5e300' in got[0] and b'"margin":1e22' in got[0] and b'"id":1e16' in got[0]
    assert [decode(b) for b in got] == [decode(encode(decode(b))) for b in got]
    assert decode(got[1])["margin"] == 5e-324 and decode(got[1])["score"] == -2.5e-10


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


# ------------------------------------------------------------------ keys, ids and output sizes
SMALL = Limits(max_key_bytes=3, max_id_chars=3)


def test_a_key_or_id_at_its_limit_is_taken_and_one_more_is_refused():
    assert decode_example(b'{"x": [1], "id": "abc"}', SMALL, b"key").id == "abc"
    assert decode_example('{"x": [1], "id": "ééé"}'.encode(), SMALL).id == "ééé"  # characters, not bytes
    with pytest.raises(DecodeError) as err:
        decode_example(b'{"x": [1]}', SMALL, b"keys")
    assert err.value.reason == "key is 4 bytes, over the limit of 3 (SP_LIMITS__MAX_KEY_BYTES)"
    with pytest.raises(DecodeError) as err:
        decode_example(b'{"x": [1], "id": "abcd"}', SMALL)
    assert err.value.reason == "id is 4 characters, over the limit of 3 (SP_LIMITS__MAX_ID_CHARS)"
    assert decode_example(b'{"x": [1], "id": 123456789}', SMALL).id == 123456789  # numbers are bounded


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.fixed_dictionaries(
                {"x": st.just([1.0]) | json_values}, optional={"id": ids | st.text(max_size=6)}
            ),
            st.none() | st.binary(max_size=6),
        ),
        max_size=6,
    ),
)
def test_the_batch_decoder_agrees_on_keys_and_long_ids(recs):
    values = [json.dumps(o).encode() for o, _ in recs]
    keys = [k for _, k in recs]
    for want, got in zip(reference(values, SMALL, keys), fast(values, SMALL, keys), strict=True):
        assert same(want, got), (want, got)


floats = st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([Limits(), Limits(max_key_bytes=0, max_id_chars=0), SMALL]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz._-", min_size=1, max_size=249),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**63 - 1),
    st.binary(max_size=8) | st.sampled_from([b"\x01", b"\x80", b"\\", b'"', b"\xf0\x9f\x98\x80"]),
    st.none() | st.integers(-(2**63), 2**63 - 1) | floats | st.text(max_size=8),
    st.sampled_from([-1, 0, 1]),
    floats,
    floats,
)
def test_no_prediction_within_the_limits_is_larger_than_the_bound(
    limits, topic, partition, offset, piece, rid, label, score, margin
):
    key = (piece * limits.max_key_bytes)[: limits.max_key_bytes]
    if isinstance(rid, str):
        rid = (rid * limits.max_id_chars)[: limits.max_id_chars]
    value = encode_prediction(prediction_record(
        topic=topic, partition=partition, offset=offset, key=key, id=rid, prediction=-1,
        score=score, label=label, mistake=True, margin=margin, updates=offset,
    ))
    assert len(key) + len(value) <= largest_prediction_bytes(limits)


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([Limits(), Limits(max_key_bytes=0, dead_letter_value_bytes=0), SMALL]),
    st.binary(min_size=1, max_size=8),
    st.text(max_size=30),
    st.none() | st.binary(max_size=300_000),
)
def test_no_dead_letter_is_larger_than_the_bound(limits, piece, error, value):
    key = piece * 5_000  # over every limit: kept only in part
    letter = dead_letter_record(
        topic="t" * 249, partition=0, offset=2**63 - 1, key=key, error=error * 100, value=value,
        max_value_bytes=limits.dead_letter_value_bytes, max_key_bytes=limits.max_key_bytes,
    )
    assert limits.max_key_bytes + len(encode(letter)) <= largest_dead_letter_bytes(limits)


def test_a_dead_letter_keeps_the_start_of_a_long_key_and_error():
    rec = dead_letter_record(topic="in", partition=0, offset=1, key=b"abcdef", error="e" * 5000,
                             value=None, max_key_bytes=4)
    assert (rec["key"], rec["key_bytes"], rec["key_truncated"]) == ("abcd", 6, True)
    assert rec["error"] == "e" * 1024 + "…"
    short = dead_letter_record(topic="in", partition=0, offset=1, key=None, error="e", value=None)
    assert (short["key"], short["key_bytes"], short["key_truncated"]) == (None, None, False)


def test_the_default_limits_leave_every_output_within_a_request():
    room = OUTPUT_RECORD_BYTES - FRAMING_BYTES
    check_output_bounds(Limits())
    check_output_bounds(Limits(dead_letter_value_bytes=700_000))
    assert largest_prediction_bytes(Limits()) < 40_000
    assert largest_dead_letter_bytes(Limits(dead_letter_value_bytes=700_000)) <= room


@pytest.mark.parametrize(
    ("limits", "named"),
    [
        (Limits(max_key_bytes=200_000),
         r"SP_LIMITS__MAX_KEY_BYTES \(200,000\) and SP_LIMITS__MAX_ID_CHARS \(1,024\) allow a prediction"),
        (Limits(max_id_chars=170_000), r"SP_LIMITS__MAX_ID_CHARS \(170,000\) allow a prediction"),
        (Limits(max_key_bytes=20_000, dead_letter_value_bytes=700_000),
         r"SP_LIMITS__DEAD_LETTER_VALUE_BYTES \(700,000\) allow a dead letter"),
    ],
)
def test_limits_that_allow_an_output_too_large_to_send_are_refused(limits, named):
    with pytest.raises(ValueError, match=named):
        check_output_bounds(limits)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b'{"id": "evt-1", "y": 1}', LabelRecord("evt-1", 1)),
        (b'{"id": 7, "y": 0}', LabelRecord(7, -1)),
        (b'{"id": 7.5, "y": "spam", "note": "late"}', LabelRecord(7.5, 1)),
        (b'{"id": "e", "y": false}', LabelRecord("e", -1)),
    ],
)
def test_a_record_with_id_and_y_and_no_x_is_a_label_record(value, expected):
    got = decode_record(value, LIMITS)
    assert got == expected and type(got.id) is type(expected.id)
    with pytest.raises(DecodeError, match="record has no 'x'$"):
        decode_example(value, LIMITS)  # the examples-only decoder (produce) refuses it


@pytest.mark.parametrize(
    ("value", "key", "reason"),
    [
        (b'{"id": "e"}', None, "record has no 'x' (a label record has 'id' and 'y')"),
        (b'{"id": "e", "y": null}', None, "record has no 'x' (a label record has 'id' and 'y')"),
        (b'{"y": 1}', None, "record has no 'x' (a label record has 'id' and 'y')"),
        (b'{"id": "e", "y": 2}', None, "unknown label 2"),
        (b'{"id": true, "y": 1}', None, "id must be a string or a number, got bool"),
        (b'{"id": "e", "y": 1}', b"k" * 4097, "key is 4097 bytes, over the limit"),
        (b'{"id": "e", "y": 1, "pad": "' + b"a" * 1000 + b'"}', None, "over the limit of 1000"),
    ],
)
def test_a_label_record_is_bounded_like_every_record(value, key, reason):
    with pytest.raises(DecodeError) as exc:
        decode_record(value, LIMITS, key)  # LIMITS: ids of 1,024 characters, keys of 4,096 bytes
    assert reason in exc.value.reason
    assert BatchDecoder(LIMITS).decode_many([value], [key]).rejected == {0: exc.value.reason}


def test_a_label_record_id_is_bounded_by_max_id_chars():
    reason = r"^id is 4 characters, over the limit of 3 \(SP_LIMITS__MAX_ID_CHARS\)$"
    with pytest.raises(DecodeError, match=reason):
        decode_record(b'{"id": "abcd", "y": 1}', Limits(max_id_chars=3))


def test_the_batch_decoder_sets_label_records_apart_in_offset_order():
    values = [b'{"x": [1, 2], "id": "a"}', b'{"id": "a", "y": 1}', b'{"x": [3, 4], "y": -1}',
              b'{"id": 9, "y": 0}', b'{"id": 9}']
    d = BatchDecoder(LIMITS).decode_many(values)
    assert d.rows == [0, 2]
    assert d.labels == {1: LabelRecord("a", 1), 3: LabelRecord(9, -1)}
    assert set(d.rejected) == {4}
    plain = BatchDecoder(LIMITS).decode_many([values[0], values[2]])
    assert plain.labels == {} and plain.rows == [0, 1]  # the typed path takes examples as before


def test_the_largest_prediction_counts_the_longer_class_name():
    plain = largest_prediction_bytes(Limits())
    named = largest_prediction_bytes(Limits(positive_class="spam", negative_class="\x01" * 10))
    # ,"class":"…" with ten control characters at six bytes each as JSON text
    assert named - plain == len(',"class":""') + 60
