"""The feature spec as a user writes it: what it accepts, and each mistake named by its key."""

from __future__ import annotations

import pytest

from stream_perceptron.features.paths import MISSING, Path, PathError
from stream_perceptron.features.spec import FeatureSpec, SpecError


@pytest.mark.parametrize(("text", "steps"), [
    ("amount", ("amount",)),
    ("user.age", ("user", "age")),
    ("items[0].price", ("items", 0, "price")),
    ("items[-1]", ("items", -1)),
    ('attributes["content-type"]', ("attributes", "content-type")),
    ('a["x.y"].b', ("a", "x.y", "b")),
    ("$meta.@ts", ("$meta", "@ts")),
])
def test_paths_read_as_written(text, steps):
    assert Path.parse(text).steps == steps


@pytest.mark.parametrize("text", ["", ".a", "a.", "a[", "a[x]", "a[0", "a b", "[0]"])
def test_a_path_that_is_not_one_is_refused(text):
    with pytest.raises(PathError):
        Path.parse(text)


def test_a_path_finds_values_and_nothing_where_nothing_is():
    event = {"a": {"b": [1, {"c": None}]}, "n": 3}
    assert Path.parse("a.b[0]").find(event) == 1
    assert Path.parse("a.b[1].c").find(event) is None  # null is a value found: null
    assert Path.parse("a.b[2]").find(event) is MISSING
    assert Path.parse("n.x").find(event) is MISSING  # a step into a number
    assert Path.parse("a[0]").find(event) is MISSING  # an index into an object


SPEC = {
    "label": "outcome.fraud", "positive": [True], "negative": [False], "id": "payment.id",
    "echo": ["payment.id"],
    "numeric": {"amount": {"transform": "log1p", "standardize": True}, "user.age": {"clip": [0, 120]}},
    "categorical": ["merchant.category"],
    "text": {"note": {"max_tokens": 8}},
}


def test_a_whole_spec_parses_with_its_options():
    spec = FeatureSpec.parse(SPEC)
    assert [p.text for p in spec.paths] == ["amount", "user.age", "merchant.category", "note"]
    assert spec.numeric[0].transform == "log1p" and spec.numeric[0].standardize
    assert spec.numeric[1].clip == (0.0, 120.0) and spec.text[0].max_tokens == 8
    assert spec.standardizes and spec.id is not None and spec.id.text == "payment.id"


def test_the_fingerprint_follows_what_decides_the_examples_only():
    base = FeatureSpec.parse(SPEC).fingerprint()
    assert FeatureSpec.parse({**SPEC, "echo": ["user.id"]}).fingerprint() == base
    assert FeatureSpec.parse({**SPEC, "negative": []}).fingerprint() != base
    changed = {**SPEC, "numeric": {**SPEC["numeric"], "amount": {"transform": "log1p"}}}
    assert FeatureSpec.parse(changed).fingerprint() != base


@pytest.mark.parametrize(("table", "message"), [
    ({"numeric": {"a": {"transform": "sqrt"}}},
     "features.numeric.a.transform: 'sqrt' is not one of none, log1p"),
    ({"numeric": {"a": {"clip": [5, 1]}}}, "features.numeric.a.clip: expected [low, high]"),
    ({"numeric": {"a": {"scale": True}}}, "features.numeric.a.scale: no such option"),
    ({"categorical": {"a": {"missing": "zero"}}}, "features.categorical.a.missing: 'zero' is for numeric"),
    ({"numeric": ["a"], "colour": 1}, "features.colour: no such key"),
    ({"numeric": ["a..b"]}, "features.numeric.a..b: path 'a..b': expected a name at character 2"),
    ({"label": "y"}, "features: no features"),
    ({"numeric": ["a"], "positive": [True]}, "features.positive/negative: without a label path"),
    ({"numeric": ["a"], "label": "y", "positive": ["x"], "negative": ["x"]}, "is both positive and negative"),
    ({"numeric": ["a", "a"]}, "features.numeric: a path is listed twice"),
    ({"text": {"t": {"max_tokens": 0}}}, "features.text.t.max_tokens: expected an integer from 1"),
    ({"numeric": ["a"], "label": "y", "positive": [1.5]}, "features.positive: 1.5 is not a label value"),
])
def test_each_mistake_in_a_spec_is_named_by_its_key(table, message):
    with pytest.raises(SpecError, match=None) as caught:
        FeatureSpec.parse(table)
    assert message in str(caught.value)
