"""Events made into examples by a spec: features by kind, labels, ids, echo, every refusal naming
its path, and standardization exactly as river's StandardScaler."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import preprocessing

from stream_perceptron.errors import DecodeError
from stream_perceptron.features.extract import Bounds, Event, Extractor, LabelEvent
from stream_perceptron.features.spec import FeatureSpec
from stream_perceptron.features.standardize import Standardizer

PAYMENT = {
    "payment": {"id": "p-17", "amount": 120.0, "method": "card", "first": True},
    "user": {"id": 42, "age": 37, "segments": ["web", "returning", "web"]},
    "items": [{"sku": "A1", "price": 80.0}, {"sku": "B2", "price": 40.0}],
    "note": "Gift for Mum, gift-wrapped!",
    "outcome": {"fraud": False},
}
SPEC = FeatureSpec.parse({
    "label": "outcome.fraud", "positive": [True], "negative": [False], "id": "payment.id",
    "echo": ["payment.id", "user.id"],
    "numeric": {"payment.amount": {"transform": "log1p"}, "user.age": {}, "payment.first": {},
                "items[0].price": {"clip": [0, 50]}},
    "categorical": ["payment.method", "user.segments", "items[1].sku"],
    "text": {"note": {"max_tokens": 4}},
})


def test_a_nested_event_makes_its_named_features_in_the_specs_order():
    event = Extractor(SPEC).event(PAYMENT, Standardizer())
    assert isinstance(event, Event)
    assert event.x == {
        "payment.amount": math.log1p(120.0), "user.age": 37.0, "payment.first": 1.0,
        "items[0].price": 50.0,
        "payment.method=card": 1.0, "user.segments=web": 2.0, "user.segments=returning": 1.0,
        "items[1].sku=B2": 1.0,
        "note:gift": 2.0, "note:for": 1.0, "note:mum": 1.0,  # four tokens: gift, for, mum, gift
    }
    assert list(event.x)[:4] == ["payment.amount", "user.age", "payment.first", "items[0].price"]
    assert (event.y, event.id, event.echo) == (-1, "p-17", {"payment.id": "p-17", "user.id": 42})


def test_a_record_with_a_label_and_an_id_and_no_feature_is_a_late_label():
    late = {"payment": {"id": "p-17"}, "outcome": {"fraud": True}}
    assert Extractor(SPEC).event(late, Standardizer()) == LabelEvent("p-17", 1)


def test_an_event_without_its_label_is_unlabeled():
    event = Extractor(SPEC).event({**PAYMENT, "outcome": {}}, Standardizer())
    assert isinstance(event, Event) and event.y == 0


@pytest.mark.parametrize(("change", "reason"), [
    ({"payment": {**PAYMENT["payment"], "amount": "120"}},
     'payment.amount: expected a number or a boolean, got string "120"'),
    ({"payment": {**PAYMENT["payment"], "amount": -3.0}},
     "payment.amount: log1p of -3.0 is not defined (the value must be greater than -1)"),
    ({"user": {**PAYMENT["user"], "segments": ["web", 2.5]}},
     "user.segments: a category is a string, an integer or a boolean, got float 2.5"),
    ({"note": ["not", "text"]}, 'note: text is a string, got array ["not", "text"]'),
    ({"outcome": {"fraud": "maybe"}},
     'outcome.fraud: "maybe" is neither a positive (true) nor a negative (false) value'),
    ({"payment": {**PAYMENT["payment"], "id": {"nested": 1}}},
     "payment.id: an id is a string or an integer, got object"),
    ({"user": {**PAYMENT["user"], "id": [1]}},
     "user.id: an echo field is a string, a number, a boolean or null, got array"),
    ({"user": {**PAYMENT["user"], "age": 1e13}}, "user.age: magnitude 1e+13 is over the limit of 1e+12"),
])
def test_every_refusal_names_the_path(change, reason):
    with pytest.raises(DecodeError) as caught:
        Extractor(SPEC).event({**PAYMENT, **change}, Standardizer())
    assert caught.value.reason.startswith(reason), caught.value.reason


def test_the_missing_policies():
    spec = FeatureSpec.parse({"numeric": {"a": {}, "b": {"missing": "zero"},
                                          "c": {"missing": "dead-letter"}}})
    extract = Extractor(spec).event
    assert extract({"c": 1}, Standardizer()).x == {"b": 0.0, "c": 1.0}
    assert extract({"a": None, "c": 1}, Standardizer()).x == {"b": 0.0, "c": 1.0}  # null: missing
    with pytest.raises(DecodeError, match="^c: missing$"):
        extract({"a": 1}, Standardizer())
    with pytest.raises(DecodeError, match="makes no feature"):
        Extractor(FeatureSpec.parse({"numeric": ["a"]})).event({"b": 1}, Standardizer())


def test_bounds_on_names_and_features():
    spec = FeatureSpec.parse({"categorical": ["tags"]})
    with pytest.raises(DecodeError, match="over the limit of 8 .SP_LIMITS__MAX_NAME_CHARS."):
        Extractor(spec, Bounds(max_name_chars=8)).event({"tags": ["abcdefgh"]}, Standardizer())
    with pytest.raises(DecodeError, match="makes 3 features, over the limit of 2"):
        Extractor(spec, Bounds(max_features=2)).event({"tags": ["a", "b", "c"]}, Standardizer())


@pytest.mark.parametrize(("values", "event", "expected"), [
    ({}, True, 1), ({}, 0, -1), ({}, -1, -1),
    ({"positive": ["fraud"]}, "fraud", 1), ({"positive": ["fraud"]}, "legit", -1),
    ({"negative": ["legit"]}, "legit", -1), ({"negative": ["legit"]}, "chargeback", 1),
    ({"positive": [1]}, True, -1),  # a boolean matches only a boolean
])
def test_labels_map_by_the_specs_values(values, event, expected):
    spec = FeatureSpec.parse({"label": "y", "numeric": ["x"], **values})
    assert Extractor(spec).event({"x": 1, "y": event}, Standardizer()).y == expected


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50))
def test_standardization_is_rivers_standard_scaler_bit_for_bit(values):
    spec = FeatureSpec.parse({"numeric": {"v": {"standardize": True}}})
    extract, mine = Extractor(spec).event, Standardizer()
    scaler = preprocessing.StandardScaler()
    for v in values:
        scaler.learn_one({"v": v})
        assert extract({"v": v}, mine).x["v"] == scaler.transform_one({"v": v})["v"]


def test_a_refused_event_leaves_the_standardization_as_it_was():
    spec = FeatureSpec.parse({"numeric": {"v": {"standardize": True}}, "categorical": ["c"]})
    extract, state = Extractor(spec).event, Standardizer()
    extract({"v": 1.0, "c": "a"}, state)
    before = state.get_state()
    with pytest.raises(DecodeError):
        extract({"v": 99.0, "c": 1.5}, state)
    assert state.get_state() == before
    restored = Standardizer.from_state(before)
    assert extract({"v": 3.0}, state).x == extract({"v": 3.0}, restored).x
    assert np.isfinite(list(state.get_state()["v"])).all()
