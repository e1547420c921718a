"""The model out to river and scikit-learn and back (stream_perceptron/interop.py): the exported
models score 1,000 rows as the model does, and the round trips are exact both ways."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from river import datasets
from river import linear_model as river_lm
from river.datasets import synth
from sklearn.linear_model import LogisticRegression
from sklearn.linear_model import Perceptron as SkPerceptron

from stream_perceptron import Perceptron, from_river, from_sklearn, to_river, to_sklearn

PHISHING = list(datasets.Phishing())
SEA = list(synth.SEA(seed=7, noise=0.1).take(3_000))


def _trained(rows, **params) -> Perceptron:
    model = Perceptron(**params)
    for x, y in rows:
        model.learn_one(x, y)
    return model


def _close(a: float, b: float) -> bool:
    """Equal but for the order each library adds a row's products in."""
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


@pytest.mark.parametrize("average", [False, True], ids=["plain", "averaged"])
@pytest.mark.parametrize(("name", "rows"), [("Phishing", PHISHING), ("SEA", SEA)], ids=["Phishing", "SEA"])
def test_river_scores_1000_rows_as_the_model_does(name, rows, average):
    model = _trained(rows[:1_000], average=average)
    theirs = to_river(model)
    assert isinstance(theirs, river_lm.Perceptron)
    assert list(theirs.weights) == model.feature_names  # the feature order
    test = rows[-1_000:] if name == "SEA" else rows[:1_000]
    for x, _ in test:
        ours, river_score = model.score_one(x), theirs._raw_dot_one(x)
        assert _close(ours, river_score)
        assert theirs.predict_one(x) is (ours > 0) or _close(ours, 0.0)
        assert _close(theirs.predict_proba_one(x)[True], model.predict_proba_one(x)[True])


@pytest.mark.parametrize("average", [False, True], ids=["plain", "averaged"])
def test_scikit_learn_scores_1000_rows_as_the_model_does(average):
    model = _trained(PHISHING[:1_000], average=average)
    theirs = to_sklearn(model)
    assert list(theirs.feature_names_in_) == model.feature_names and list(theirs.classes_) == [False, True]
    X = pd.DataFrame([x for x, _ in PHISHING[:1_000]])
    scores = theirs.decision_function(X)
    ours = model.score_many(X)
    assert all(_close(a, b) for a, b in zip(ours.tolist(), scores.tolist(), strict=True))
    assert theirs.predict(X).tolist() == model.predict_many(X).tolist()


def test_class_names_go_to_scikit_learn_and_come_back():
    model = Perceptron(classes=("ham", "spam"))
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = np.where(X @ np.array([1.0, -2.0, 0.5, 0.0]) > 0.1, "spam", "ham")
    model.learn_many(X, y)
    theirs = to_sklearn(model)
    assert theirs.classes_.tolist() == ["ham", "spam"] and not hasattr(theirs, "feature_names_in_")
    assert theirs.predict(X).tolist() == model.predict_many(X).tolist()
    back = from_sklearn(theirs)
    assert back.class_labels == ("ham", "spam") and back.weights.tobytes() == model.weights.tobytes()
    back.learn_one(X[0], "spam")  # the names restored are labels again


def test_the_round_trips_are_exact_both_ways():
    model = _trained(PHISHING)
    state = model.get_state()
    for there, back in ((to_river, from_river), (to_sklearn, from_sklearn)):
        again = back(there(model)).get_state()
        for key in ("weights", "intercept", "features", "classes"):
            assert json.dumps(again[key]) == json.dumps(state[key]), key
    theirs = river_lm.Perceptron()
    for x, y in SEA:
        theirs.learn_one(x, y)
    again = to_river(from_river(theirs))
    assert again.weights == theirs.weights and list(again.weights) == list(theirs.weights)
    assert again.intercept == theirs.intercept
    X = np.array([list(x.values()) for x, _ in SEA])
    y = np.array([y for _, y in SEA])
    sk = SkPerceptron(random_state=0).fit(pd.DataFrame(X, columns=["a", "b", "c"]), y)
    again_sk = to_sklearn(from_sklearn(sk))
    assert again_sk.coef_.tobytes() == sk.coef_.tobytes()
    assert again_sk.intercept_.tobytes() == sk.intercept_.tobytes()
    assert again_sk.classes_.tolist() == sk.classes_.tolist()
    assert again_sk.feature_names_in_.tolist() == sk.feature_names_in_.tolist()


def test_a_dense_model_is_keyed_by_column_and_scikit_learn_goes_on_learning_by_the_same_rule():
    rng = np.random.default_rng(3)
    X = np.round(rng.normal(size=(2_000, 5)) * 4)  # integers: every library's sums are exact
    y = np.where(X @ np.array([1.0, -1.0, 2.0, 0.0, 0.5]) + 1 > 0, 1, -1)
    model = Perceptron()
    model.learn_many(X[:500], y[:500])
    assert list(to_river(model).weights) == [0, 1, 2, 3, 4]  # as river's generators key them
    theirs = to_sklearn(model)
    theirs.partial_fit(X[500:], y[500:])
    out = model.learn_many(X[500:], y[500:])
    assert out.mistakes.sum() > 0
    assert theirs.coef_[0].tolist() == model.weights.tolist() and theirs.intercept_[0] == model.intercept


def test_what_cannot_cross_is_refused():
    with pytest.raises(ValueError, match="a hashed model keeps no feature names"):
        to_river(_trained(SEA[:50], hash_bits=6))
    assert to_sklearn(_trained(SEA[:50], hash_bits=6)).coef_.shape == (1, 64)
    with pytest.raises(TypeError, match="river's linear_model.Perceptron"):
        from_river(river_lm.LogisticRegression())
    three = LogisticRegression().fit(np.eye(3), [0, 1, 2])
    with pytest.raises(ValueError, match="binary linear classifier"):
        from_sklearn(three)


def test_an_imported_river_model_keeps_learning_as_river_would():
    theirs = river_lm.Perceptron()
    for x, y in itertools.islice(PHISHING, 500):
        theirs.learn_one(x, y)
    ours = from_river(theirs)
    for x, y in PHISHING[500:]:
        theirs.learn_one(x, y)
        ours.learn_one(x, y)
    assert all(_close(a, b) for a, b in zip(ours.weights.tolist(), theirs.weights.values(), strict=True))
