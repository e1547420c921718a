"""The model as a river user meets it (issue 54): one test for each way it fell short of river's
contract, then the exactness of the per-call path on rows of every width.

Each test of the first part fails on the model before this contract (``e0a2192``): learn_one
returned a bool and took no weight, pandas DataFrames were read as lists of rows, int keys could
not be hashed, ``classes=`` took any label, a 0/1 stream answered −1, and None or NaN was learned
silently.
"""

from __future__ import annotations

import itertools
import json
import math
import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import base, compose, datasets, evaluate, metrics, preprocessing
from river import linear_model as river_lm
from river.datasets import synth

from stream_perceptron import Perceptron
from stream_perceptron.errors import FeatureValueError
from stream_perceptron.model.hashing import FeatureHasher, key_bytes
from tests.unit.model.exactness import assert_learn_many_is_learn_one, learned

PHISHING = list(datasets.Phishing())


# ------------------------------------------------------------------ river's signatures


def test_learn_one_returns_none_and_the_mistake_is_last_mistake():
    model = Perceptron()
    assert model.learn_one({"a": 1.0}, True) is None
    assert model.last_mistake is True  # the first example, on the boundary
    model.learn_one({"a": 1.0}, True)
    assert model.last_mistake is False


@pytest.mark.parametrize("params", [{}, {"average": True}, {"hash_bits": 6, "hash_sign": True}], ids=repr)
def test_a_sample_weight_scales_the_update_and_one_is_no_weight_bit_for_bit(params):
    unweighted, one, two = Perceptron(**params), Perceptron(**params), Perceptron(**params)
    for x, y in PHISHING[:300]:
        unweighted.learn_one(x, y)
        one.learn_one(x, y, w=1.0)
    assert json.dumps(one.get_state()) == json.dumps(unweighted.get_state())
    two.learn_one({"a": 1.5, "b": -1.0}, True, w=2.0)  # from 0: a mistake, θ += 2·x, θ0 += 2
    doubled = Perceptron(**params)
    doubled.learn_one({"a": 3.0, "b": -2.0}, True)  # θ += 1·(2x), θ0 += 1
    assert two.last_mistake and two.updates == 1 and two.intercept == 2.0
    assert two.weights.tolist() == doubled.weights.tolist()


def test_a_weight_of_zero_learns_nothing_and_a_negative_weight_is_refused():
    model = Perceptron(average=True)
    model.learn_one({"a": 1.0}, True, w=0.0)
    assert (model.updates, model.last_mistake, model.get_state()["average"]["steps"]) == (0, False, 0)
    with pytest.raises(ValueError, match="a sample weight"):
        model.learn_one({"a": 1.0}, True, w=-1.0)
    with pytest.raises(ValueError, match="a sample weight"):
        model.learn_one({"a": 1.0}, True, w=math.nan)


def test_a_weighted_mistake_enters_the_average_scaled_and_counts_once_in_t():
    model = Perceptron(average=True, fit_intercept=False)
    model.learn_one({"a": 1.0}, True, w=3.0)  # θ_1 = 3: a mistake from 0
    model.learn_one({"a": 1.0}, True)  # right: θ_2 = 3
    assert model.averaged_weights.tolist() == [3.0]  # (3 + 3) / 2: T counts examples, not weight


# ------------------------------------------------------------------ river's mini-batch contract


def test_the_model_is_a_mini_batch_classifier_and_learns_a_dataframe_as_its_rows():
    assert isinstance(Perceptron(), base.MiniBatchClassifier)
    X = pd.DataFrame([x for x, _ in PHISHING])
    y = pd.Series([y for _, y in PHISHING], name="is_phishing")
    many, one = Perceptron(), Perceptron()
    for start in range(0, len(X), 100):
        many.learn_many(X.iloc[start:start + 100], y.iloc[start:start + 100])
    for x, label in PHISHING:
        one.learn_one(x, label)
    assert json.dumps(many.get_state()) == json.dumps(one.get_state())
    assert many.feature_names == list(X.columns)


def test_predict_many_keeps_the_index_and_predict_proba_many_gives_a_frame():
    model = Perceptron()
    X = pd.DataFrame([x for x, _ in PHISHING[:200]], index=range(1000, 1200))
    model.learn_many(X, pd.Series([y for _, y in PHISHING[:200]], name="label"))
    predicted = model.predict_many(X)
    assert isinstance(predicted, pd.Series) and predicted.index.equals(X.index) and predicted.name == "label"
    assert predicted.tolist() == [model.predict_one(x) for x, _ in PHISHING[:200]]
    proba = model.predict_proba_many(X)
    assert isinstance(proba, pd.DataFrame) and proba.index.equals(X.index)
    assert list(proba.columns) == [False, True]
    one = [model.predict_proba_one(x) for x, _ in PHISHING[:200]]
    assert [dict(row) for _, row in proba.iterrows()] == one  # the same floats


def test_a_dataframe_with_integer_columns_and_numpy_input_both_work():
    rows = list(synth.SEA(seed=3).take(300))
    frame = pd.DataFrame([x for x, _ in rows])
    assert list(frame.columns) == [0, 1, 2]
    model = Perceptron()
    model.learn_many(frame, pd.Series([y for _, y in rows]))
    assert model.feature_names == [0, 1, 2]
    dense = Perceptron()
    dense.learn_many(frame.to_numpy(), np.array([y for _, y in rows]))
    assert isinstance(dense.predict_many(frame.to_numpy()), np.ndarray)
    assert dense.predict_proba_many(frame.to_numpy()).shape == (300, 2)
    assert dense.weights.tolist() == model.weights.tolist()  # three features: one order of sums


def test_a_pipeline_behind_a_standard_scaler_learns_mini_batches():
    model = compose.Pipeline(preprocessing.StandardScaler(), Perceptron())
    X = pd.DataFrame([x for x, _ in PHISHING])
    y = pd.Series([y for _, y in PHISHING])
    for start in range(0, len(X), 250):
        model.learn_many(X.iloc[start:start + 250], y.iloc[start:start + 250])
    assert (model.predict_many(X) == y).mean() > 0.8


# ------------------------------------------------------------------ any hashable key


def test_the_hashed_model_takes_int_and_tuple_keys_and_rivers_generators():
    model = Perceptron(hash_bits=20)
    model.learn_one({0: 1.0}, True)
    model.learn_one({("user", 17): 1.0, "clicks": 2.0}, False)
    for stream in (synth.SEA(seed=1), synth.Hyperplane(seed=1, n_features=5)):
        accuracy = evaluate.progressive_val_score(stream.take(2_000), Perceptron(hash_bits=20),
                                                  metrics.Accuracy())
        assert accuracy.get() > 0.6


def test_equal_keys_share_a_column_and_strings_keep_their_column():
    hasher = FeatureHasher(bits=20)
    assert hasher.column(1) == hasher.column(True) == hasher.column(1.0) == hasher.column(np.int64(1))
    assert hasher.column(("u", 1)) == hasher.column(("u", 1.0)) != hasher.column(("u", "1"))
    assert hasher.column("1") != hasher.column(1)
    assert key_bytes("clicks") == b"clicks"  # a string's bytes are its UTF-8 alone: stored models keep
    assert FeatureHasher(bits=4, signed=True).column("user:17") == (13, 1.0)
    with pytest.raises(TypeError, match="a hashed feature name is"):
        hasher.column(frozenset({1}))


# ------------------------------------------------------------------ labels


def test_classes_refuse_any_other_label_with_one_clear_error():
    model = Perceptron(classes=("ham", "spam"))
    for label in (True, 1, "eggs", None):
        with pytest.raises(ValueError, match=r"not one of the classes \('ham', 'spam'\) given by classes="):
            model.learn_one({"a": 1.0}, label)
    with pytest.raises(ValueError, match="given by classes="):
        model.learn_many([{"a": 1.0}, {"a": 2.0}], ["spam", True])
    assert model.updates == 0
    model.learn_one({"a": 1.0}, "spam")
    assert set(model.predict_proba_one({"a": 1.0})) == {"ham", "spam"}


def test_classes_are_two_labels():
    with pytest.raises(ValueError, match="this perceptron is binary; got 3"):
        Perceptron(classes=("a", "b", "c"))
    with pytest.raises(ValueError, match="two distinct labels"):
        Perceptron(classes=("a", "a"))


def test_a_zero_one_stream_answers_zero_from_its_first_example():
    model = Perceptron()
    model.learn_one({"a": 1.0}, 1)
    assert model.predict_one({"a": -5.0}) == 0
    assert set(model.predict_proba_one({"a": 1.0})) == {0, 1}


def test_a_string_label_without_classes_says_to_name_them():
    with pytest.raises(ValueError, match=r"Perceptron\(classes=\(negative, positive\)\)"):
        Perceptron().learn_one({"a": 1.0}, "spam")


def test_the_class_set_tracks_the_labels_seen():
    model = Perceptron()
    for x, y in itertools.islice(synth.Agrawal(seed=1), 50):  # 0/1 labels
        model.learn_one(x, y)
    assert set(model.predict_proba_one(x)) == {0, 1}


# ------------------------------------------------------------------ bad values


@pytest.mark.parametrize("bad", [None, math.nan, math.inf, "1.0"], ids=repr)
@pytest.mark.parametrize("params", [{}, {"average": True}, {"hash_bits": 8}], ids=repr)
def test_none_and_nan_are_refused_with_one_error_and_nothing_is_learned(bad, params):
    model = Perceptron(**params)
    model.learn_one({"a": 1.0, "b": 2.0}, True)
    state = json.dumps(model.get_state())
    for call in (lambda: model.learn_one({"a": 1.0, "b": bad}, False), lambda: model.predict_one({"b": bad}),
                 lambda: model.predict_proba_one({"a": 1.0, "b": bad}),
                 lambda: model.learn_many([{"a": 1.0}, {"b": bad}], [True, False]),
                 lambda: model.learn_many(pd.DataFrame({"a": [1.0, 2.0], "b": [0.5, bad]}), [True, False]),
                 lambda: model.learn_one([1.0, bad], True) if not params else model.predict_one({"b": bad})):
        with pytest.raises(FeatureValueError, match="feature values are finite numbers"):
            call()
    assert json.dumps(model.get_state()) == state


def test_a_dataframe_value_is_named_by_row_and_column():
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [0.5, None]}, index=["r1", "r2"])
    with pytest.raises(FeatureValueError, match="row 1 \\(index 'r2'\\): feature 'b' is NaN"):
        Perceptron().learn_many(frame, [True, False])


# ------------------------------------------------------------------ the same as before, and river's


@pytest.mark.parametrize("make", [Perceptron, lambda: Perceptron(average=True),
                                  lambda: Perceptron(hash_bits=20)], ids=["plain", "averaged", "hashed"])
def test_progressive_val_score_is_unchanged_and_pickles_round_trip(make):
    stream = list(synth.SEA(seed=2, noise=0.1).take(3_000))
    model = make()
    score = evaluate.progressive_val_score(stream[:2_000], model, metrics.Accuracy()).get()
    copy = pickle.loads(pickle.dumps(model))
    assert json.dumps(copy.get_state()) == json.dumps(model.get_state())
    for x, y in stream[2_000:]:
        assert copy.predict_proba_one(x) == model.predict_proba_one(x)
        copy.learn_one(x, y)
        model.learn_one(x, y)
    assert json.dumps(copy.get_state()) == json.dumps(model.get_state())
    if make is Perceptron:
        theirs = evaluate.progressive_val_score(stream[:2_000], river_lm.Perceptron(), metrics.Accuracy())
        assert score == theirs.get()


@st.composite
def wide_named_streams(draw):
    """Named rows of 0 to 40 features, int or string keys, so every written-out sum is reached."""
    d = draw(st.integers(1, 40))
    n = draw(st.integers(1, 120))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-3, 4, size=d)
    keys = list(range(d)) if draw(st.booleans()) else [f"f{j}" for j in range(d)]
    rows = [{keys[j]: float(v) for j, v in enumerate(row) if rng.random() < 0.8} for row in X]
    return rows, rng.choice(np.array([-1, 1], dtype=np.int8), size=n)


@settings(max_examples=60, deadline=None)
@given(wide_named_streams(), st.sampled_from([{}, {"average": True}, {"hash_bits": 5, "hash_sign": True},
                                              {"hash_bits": 5, "average": True}]), st.integers(1, 4))
def test_the_per_call_path_is_learn_many_bit_for_bit_on_rows_of_any_width(stream, params, cuts):
    rows, y = stream
    one, _ = assert_learn_many_is_learn_one(lambda: Perceptron(**params), rows, y, cuts)
    twin = pickle.loads(pickle.dumps(one))
    assert [twin.score_one(x) for x in rows] == [one.score_one(x) for x in rows]
    assert [learned(twin, x, int(v)) for x, v in zip(rows, y, strict=True)] == [
        learned(one, x, int(v)) for x, v in zip(rows, y, strict=True)]
