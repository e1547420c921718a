"""The compiled spec gives what the extractor gives, on random events that follow the spec and on
ones that break it in every way (the same example, the same state, or the same reason)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.errors import DecodeError
from stream_perceptron.features.compiled import compile_spec
from stream_perceptron.features.extract import Bounds, Extractor
from stream_perceptron.features.spec import FeatureSpec
from stream_perceptron.features.standardize import Standardizer

SPECS = [
    {"label": "y", "id": "id", "echo": ["id", "u.name"],
     "numeric": {"a": {"standardize": True}, "u.b": {"missing": "zero", "clip": [-5, 5]},
                 "l[1]": {"transform": "log1p"}, "c": {"missing": "dead-letter"}},
     "categorical": {"k": {}, "u.tags": {}, "d": {"missing": "dead-letter"}},
     "text": {"t": {"max_tokens": 3}}},
    {"label": "y", "positive": ["yes", True], "numeric": ["a", "u.b"], "categorical": ["k"]},
    {"label": "y", "negative": [0], "id": "id", "numeric": {"a": {"standardize": True}}},
    {"label": "y", "positive": [1], "negative": [-1], "categorical": ["k", "u.tags"]},
]
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["x", "yes", "é", "a" * 300]),
    st.just({"n": 1}), st.lists(st.sampled_from(["p", "q", 3, True, 1.5, None, ["p"]]), max_size=3))


@st.composite
def events(draw) -> Any:
    """Objects shaped like the specs' events, each field often right, sometimes missing or wrong."""
    def field(right):
        return draw(st.one_of(right, right, right, SCALARS))
    event: dict[str, Any] = {}
    for key, right in [("a", st.floats(-100, 100)), ("c", st.floats(-1, 1)),
                       ("k", st.sampled_from(["x", "y"])), ("d", st.sampled_from(["x", 1, False])),
                       ("t", st.sampled_from(["A b a", "", "c"])),
                       ("y", st.sampled_from([True, False, 1, -1, 0, "yes", "no"])),
                       ("id", st.sampled_from(["e1", 7, None])),
                       ("l", st.lists(st.floats(-0.5, 9), max_size=3))]:
        if draw(st.integers(0, 5)):
            event[key] = field(right)
    if draw(st.integers(0, 5)):
        event["u"] = {"b": field(st.integers(-9, 9)), "tags": field(st.lists(st.sampled_from(["p", "q"]))),
                      "name": field(st.sampled_from(["ann", 3]))}
    return draw(st.one_of(st.just(event), st.just(event), st.just(event), SCALARS))


def _outcome(extract, obj, state):
    try:
        return extract(obj, state), state.get_state()
    except DecodeError as exc:
        return exc.reason, state.get_state()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(SPECS))), st.lists(events(), min_size=1, max_size=8))
def test_the_compiled_spec_gives_what_the_extractor_gives(which, stream):
    spec, bounds = FeatureSpec.parse(SPECS[which]), Bounds(max_name_chars=64, max_features=6)
    compiled, generic = compile_spec(spec, bounds), Extractor(spec, bounds).event
    mine, theirs = Standardizer(), Standardizer()
    for obj in stream:
        assert _outcome(compiled, obj, mine) == _outcome(generic, obj, theirs), obj
