"""K-class records: class names decoded the same by every decoder (or refused with the reason),
the K-class prediction encoded byte for byte as its reference, the bounds of the largest
K-class outputs, and the settings that choose all this, each refused in one line."""

from __future__ import annotations

import math

import orjson
import pytest

from stream_perceptron.codec.inputs import BatchDecoder, ClassRule, decode_record
from stream_perceptron.codec.limits import Limits
from stream_perceptron.codec.outputs import (
    STATISTICS_BINARY_BYTES,
    class_prediction_record,
    encode,
    encode_class_predictions,
    encode_prediction,
    largest_class_prediction_bytes,
    largest_class_statistics_bytes,
)
from stream_perceptron.errors import SettingsError
from stream_perceptron.settings import load_settings

RULE = ClassRule(max_chars=6)
GOOD = [b'{"x": [1, 2], "y": "cat"}', b'{"x": [3, 4], "y": 3}', b'{"x": [5, 6]}', b'{"x": [7, 8], "y": "3"}',
        b'{"x": [1, 1], "y": 0}', b'{"x": [2, 2], "y": "cat", "id": 9}',
        b'{"x": [0, 1], "y": -9223372036854775808}']


@pytest.mark.parametrize("read_dense", [True, False])
def test_every_decoder_reads_the_same_class_names_keeping_their_json_types(read_dense):
    decoded = BatchDecoder(Limits(), read_dense=read_dense, classes=RULE).decode_many(GOOD)
    names = [None if c == 0 else decoded.class_names[c - 1] for c in decoded.ys]
    assert names == ["cat", 3, None, "3", 0, "cat", -(2**63)]
    assert [type(n) for n in names] == [str, int, type(None), str, int, str, int]
    one_by_one = [decode_record(v, Limits(), None, RULE).y for v in GOOD]
    assert one_by_one == names


NOT = "not a class (a class is a string or an integer)"
BAD = {
    b'{"x": [1], "y": true}': "label True is a bool, not a class (a class is a string or an integer)",
    b'{"x": [1], "y": 2.0}': "label 2.0 is a float, not a class (a class is a string or an integer)",
    b'{"x": [1], "y": [1]}': "label 'array' is an array, not a class (a class is a string or an integer)",
    b'{"x": [1], "y": {"a": 1}}': f"label 'object' is an object, {NOT}",
    b'{"x": [1], "y": "kitten"}': None,  # 6 characters: taken
    b'{"x": [1], "y": "kittens"}':
        "label 'kittens' is 7 characters, over the limit of 6 (SP_LIMITS__MAX_CLASS_CHARS)",
    b'{"x": [1], "y": 9223372036854775808}': "label 9223372036854775808 is outside int64, not a class",
    b'{"id": 4, "y": false}': "label False is a bool, not a class (a class is a string or an integer)",
}


def test_what_is_no_class_is_refused_with_its_reason_by_the_batch_decoder():
    values = list(BAD)
    decoded = BatchDecoder(Limits(), classes=RULE).decode_many(values)
    refused = {values[i]: reason for i, reason in decoded.rejected.items()}
    assert refused == {v: r for v, r in BAD.items() if r is not None}
    assert decoded.class_names == ["kitten"]


def test_a_label_record_names_a_class_and_the_fixed_classes_refuse_the_others():
    rule = ClassRule(10, frozenset({"a", 3}))
    decoded = BatchDecoder(Limits(), classes=rule).decode_many(
        [b'{"id": 1, "y": 3}', b'{"id": 2, "y": "3"}', b'{"x": [1], "y": "b"}', b'{"x": [1], "y": "a"}'])
    assert decoded.class_names[decoded.labels[0].y - 1] == 3
    assert set(decoded.rejected) == {1, 2}
    assert decoded.rejected[2].startswith("label 'b' is not one of the classes (SP_MODEL__CLASSES")


def test_binary_decoding_is_untouched_without_a_rule():
    decoded = BatchDecoder(Limits()).decode_many([b'{"x": [1], "y": 0}', b'{"x": [1], "y": true}'])
    assert decoded.ys == [-1, 1] and decoded.class_names is None


def test_the_batch_encoder_writes_each_prediction_as_its_reference_byte_for_byte():
    classes = ["cat", 3, "\u00e9\x01"]
    rows = dict(predictions=[0, -1, 2, 1], scores=[0.5, math.nan, -1e16, 2.0], runner_up=[1, -1, 0, -1],
                runner_up_scores=[0.25, math.nan, -2.5, math.nan], labels=[2, -1, 0, 1],
                mistakes=[True, False, False, False], margins=[-0.1, math.nan, 3.0, math.nan],
                updates=[1, 1, 1, 1])
    all_scores = [[0.5, 0.25, 0.0], [math.nan] * 3, [-2.5, -3.0, -1e16], [1.0, 2.0, math.nan]]
    keys = [b"k", None, b"\xff", None]
    for scored in (False, True):
        encoded = encode_class_predictions(
            topic="in", partition=2, offsets=[10, 11, 12, 13], keys=keys, ids=[1, "a", None, 2.5],
            classes=classes, all_scores=all_scores if scored else None, **rows)
        named = [*classes, None]
        for k, value in enumerate(encoded):
            scores = None if not scored else {str(c): s for c, s in zip(classes, all_scores[k], strict=True)
                                              if not math.isnan(s)}
            ref = class_prediction_record(
                topic="in", partition=2, offset=10 + k, key=keys[k], id=[1, "a", None, 2.5][k],
                prediction=named[rows["predictions"][k]], score=rows["scores"][k],
                runner_up=named[rows["runner_up"][k]], runner_up_score=rows["runner_up_scores"][k],
                label=named[rows["labels"][k]], mistake=rows["mistakes"][k], margin=rows["margins"][k],
                updates=1, scores=scores)
            assert value == encode_prediction(ref)
    first = orjson.loads(encoded[0])
    assert first["prediction"] == "cat" and first["runner_up"] == 3 and first["label"] == "\u00e9\x01"
    assert orjson.loads(encoded[1])["prediction"] is None and orjson.loads(encoded[1])["mistake"] is None


@pytest.mark.parametrize(("k", "chars"), [(2, 1), (5, 3), (40, 9)])
def test_the_largest_k_class_outputs_bound_real_ones(k, chars):
    limits = Limits(max_classes=k, max_class_chars=chars, max_key_bytes=10, max_id_chars=5)
    names = [chr(1 + i % 31) * (chars - 1) + chr(1 + i // 31) for i in range(k)]  # distinct, escaped
    tiny = -2.2250738585072014e-308
    record = class_prediction_record(
        topic="t" * 249, partition=2**31 - 1, offset=2**63 - 1, key=b"\x01" * 10, id="\x01" * 5,
        prediction=names[0], score=tiny, runner_up=names[1], runner_up_score=tiny, label=names[-1],
        mistake=False, margin=tiny, updates=2**63 - 1, scores=dict.fromkeys(names, tiny))
    assert len(encode_prediction(record)) + 10 <= largest_class_prediction_bytes(limits, scores=True)
    stats = {"classes": names, "intercepts": [tiny] * k, "confusion": [[2**63 - 1] * k] * k,
             "per_class": [{"class": n, "labeled": 2**63 - 1, "mistakes": 2**63 - 1, "predicted": 2**63 - 1}
                           for n in names]}
    assert len(encode(stats)) - 2 <= largest_class_statistics_bytes(limits) - STATISTICS_BINARY_BYTES  # {}


@pytest.mark.parametrize(("env", "line"), [
    ({"SP_MODEL__CLASSES": '[true, "a", "b"]'},
     "invalid setting SP_MODEL__CLASSES (model.classes): each class is a string or an integer, got a bool"),
    ({"SP_MODEL__CLASSES": '[3, "3", "b"]'},
     "invalid settings SP_MODEL__* (model): SP_MODEL__CLASSES names 3 and '3': class names must differ"),
    ({"SP_MODEL__CLASSES": '["a"]'}, "SP_MODEL__CLASSES names 1 class"),
    ({"SP_MODEL__UNKNOWN_CLASS": "dead-letter"},
     "SP_MODEL__UNKNOWN_CLASS=dead-letter needs SP_MODEL__CLASSES"),
    ({"SP_MODEL__CLASSES": '["ham", "spam"]', "SP_LIMITS__POSITIVE_CLASS": "spam"}, "set one form"),
    ({"SP_MODEL__MULTICLASS": "true", "SP_LIMITS__NEGATIVE_CLASS": "ham"}, "SP_LIMITS__POSITIVE_CLASS /"),
    ({"SP_MODEL__MULTICLASS": "true", "SP_LIMITS__MAX_CLASSES": "1000"},
     "SP_LIMITS__MAX_CLASSES (1,000) and SP_LIMITS__MAX_CLASS_CHARS (100) allow a statistics record of"),
    ({"SP_MODEL__MULTICLASS": "true", "SP_LIMITS__MAX_CLASSES": "150", "SP_OUTPUT__SCORES": "all",
      "SP_LIMITS__MAX_CLASS_CHARS": "2000"}, "allow a prediction of"),
    ({"SP_OUTPUT__SCORES": "some"}, "invalid setting SP_OUTPUT__SCORES (output.scores)"),
])
def test_bad_class_settings_are_one_line_naming_the_variable(monkeypatch, env, line):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert len(str(caught.value).splitlines()) == 1
    assert line in str(caught.value)


def test_two_classes_are_the_binary_model_and_three_the_k_class_one(monkeypatch):
    monkeypatch.setenv("SP_MODEL__CLASSES", '["ham", "spam"]')
    two = load_settings()
    assert not two.model.k_class()
    assert (two.codec_limits().negative_class, two.codec_limits().positive_class) == ("ham", "spam")
    monkeypatch.setenv("SP_MODEL__CLASSES", '["ham", "spam", 7]')
    three = load_settings()
    assert three.model.k_class() and three.model.classes == ["ham", "spam", 7]


def test_events_through_a_feature_spec_name_their_class_or_say_why_not():
    from stream_perceptron.codec.events import EventDecoder
    from stream_perceptron.features.spec import FeatureSpec
    from stream_perceptron.features.standardize import Standardizer

    spec = FeatureSpec.parse({"label": "kind", "id": "id", "numeric": ["n"]})
    decoder = EventDecoder(spec, Limits(), ClassRule(max_chars=5))
    values = [b'{"id": 1, "n": 2, "kind": "fraud"}', b'{"id": 2, "n": 1, "kind": 0}', b'{"id": 3, "n": 1}',
              b'{"id": 3, "kind": 7}', b'{"id": 4, "n": 1, "kind": true}',
              b'{"id": 5, "n": 1, "kind": "refund"}', b'{"id": 6, "n": 1, "kind": 2.5}']
    decoded = decoder.decode_many(values, [None] * len(values), Standardizer())
    names = [None if c == 0 else decoded.class_names[c - 1] for c in decoded.ys]
    assert names == ["fraud", 0, None]  # 0 is a class, not "unlabeled"
    assert decoded.class_names[decoded.labels[3].y - 1] == 7
    assert decoded.rejected == {
        4: "kind: true is a bool, " + NOT,
        5: 'kind: "refund" is 6 characters, over the limit of 5 (SP_LIMITS__MAX_CLASS_CHARS)',
        6: "kind: 2.5 is a float, " + NOT,
    }
