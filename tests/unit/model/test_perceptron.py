"""The seeds' perceptron: worked example, agreement with river and scikit-learn, properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from river import datasets
from river import linear_model as river_lm
from sklearn.linear_model import Perceptron as SkPerceptron

from stream_perceptron import Perceptron
from stream_perceptron.errors import DimensionError
from tests.unit.model.exactness import assert_learn_many_is_learn_one, learned


def test_worked_example_of_seed_001_ends_at_1_1_after_two_updates():
    model = Perceptron(fit_intercept=False)
    points = [([1, 0], 1), ([0, -1], -1), ([0, 1], 1), ([-1, 0], -1)]
    flags = []
    for _epoch in range(3):
        flags.append([learned(model, np.array(p, dtype=float), y) for p, y in points])
    assert flags[0] == [True, True, False, False]
    assert flags[1] == [False] * 4
    assert model.weights.tolist() == [1.0, 1.0]
    assert model.mistakes == 2
    assert model.intercept == 0.0


def test_boundary_is_a_mistake_so_first_example_always_updates():
    model = Perceptron()
    assert learned(model, [0.0, 0.0], -1) is True  # score 0 is on the boundary
    assert model.intercept == -1.0
    assert model.weights.tolist() == [0.0, 0.0]
    assert learned(model, [5.0, 1.0], -1) is False  # score -1 < 0: right
    assert model.predict_one([5.0, 1.0]) == -1


def test_update_rule_with_offset():
    model = Perceptron()
    model.learn_one([1.0, 2.0], 1)
    assert model.weights.tolist() == [1.0, 2.0] and model.intercept == 1.0
    assert model.score_one([1.0, 1.0]) == 4.0
    assert learned(model, [1.0, 1.0], -1) is True
    assert model.weights.tolist() == [0.0, 1.0] and model.intercept == 0.0


def test_labels_accept_bools_and_reject_others():
    model = Perceptron()
    assert learned(model, [1.0], True)
    assert learned(model, [-2.0], False) is False  # score -2 + 1 < 0
    with pytest.raises(ValueError, match="is not True/False, -1/\\+1 or 0/1"):
        model.learn_one([1.0], 2)
    with pytest.raises(ValueError):
        model.learn_one([1.0], "yes")


def test_dimension_is_fixed_by_first_dense_example():
    model = Perceptron()
    model.learn_one([1.0, 2.0, 3.0], 1)
    with pytest.raises(DimensionError, match="3"):
        model.learn_one([1.0, 2.0], 1)
    with pytest.raises(DimensionError):
        Perceptron(n_features=2).learn_one([1.0, 2.0, 3.0], 1)


def test_initial_weights():
    model = Perceptron(initial_weights=[1.0, -1.0])
    assert learned(model, [2.0, 1.0], 1) is False
    assert learned(model, [1.0, 2.0], 1) is True
    assert model.weights.tolist() == [2.0, 1.0]
    with pytest.raises(ValueError):
        Perceptron(n_features=3, initial_weights=[1.0])


def test_named_features_map_to_stable_indices_and_cap():
    model = Perceptron(n_features=2)
    model.learn_one({"b": 1.0, "a": 2.0}, 1)
    assert model.feature_names == ["b", "a"]
    assert model.weights.tolist() == [1.0, 2.0]
    assert model.score_one({"a": 1.0, "unknown": 9.0}) == 2.0 + 1.0
    with pytest.raises(DimensionError, match="allows 2"):
        model.learn_one({"c": 1.0}, 1)


def _phishing():
    rows = list(datasets.Phishing())
    names = list(rows[0][0])
    X = np.array([[x[n] for n in names] for x, _ in rows])
    y = np.array([1 if label else -1 for _, label in rows], dtype=np.int8)
    return rows, names, X, y


def test_phishing_one_pass_agrees_with_river_and_sklearn_row_by_row():
    rows, names, X, y = _phishing()

    ours = Perceptron()
    ours_flags = [learned(ours, X[i], int(y[i])) for i in range(len(X))]

    river_model = river_lm.Perceptron()
    river_flags = []
    for x, label in rows:
        yy = 1 if label else -1
        river_flags.append(yy * river_model._raw_dot_one(x) <= 0)
        river_model.learn_one(x, label)

    sk = SkPerceptron(fit_intercept=True, shuffle=False, eta0=1.0, alpha=0.0, penalty=None, tol=None)
    sk_flags = []
    for i in range(len(X)):
        if i == 0:
            sk_flags.append(True)  # zero weights: the boundary, a mistake
            sk.partial_fit(X[:1], y[:1], classes=[-1, 1])
        else:
            sk_flags.append(bool(y[i] * sk.decision_function(X[i : i + 1])[0] <= 0))
            sk.partial_fit(X[i : i + 1], y[i : i + 1])

    assert sum(ours_flags) > 50  # a real stream with many updates
    assert ours_flags == river_flags
    assert ours_flags == sk_flags
    river_w = np.array([river_model.weights.get(n, 0.0) for n in names])
    np.testing.assert_allclose(ours.weights, river_w, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ours.weights, sk.coef_[0], rtol=0, atol=1e-9)
    assert ours.intercept == river_model.intercept == sk.intercept_[0]


def test_learn_many_on_phishing_equals_learn_one():
    _, _, X, y = _phishing()
    a, b = Perceptron(), Perceptron()
    flags = [learned(a, X[i], int(y[i])) for i in range(len(X))]
    out = b.learn_many(X, y)
    assert out.mistakes.tolist() == flags
    assert np.array_equal(a.weights, b.weights) and a.intercept == b.intercept


def test_fit_stops_after_a_clean_pass_and_returns_per_pass_mistakes():
    X = np.array([[1.0, 0.0], [0.0, -1.0], [0.0, 1.0], [-1.0, 0.0]])
    y = [1, -1, 1, -1]
    model = Perceptron(fit_intercept=False)
    assert model.fit(X, y, passes=10) == [2, 0]
    assert Perceptron(fit_intercept=False).fit(X, y, epochs=1) == [2]  # epochs: the old name of passes


def test_learn_many_takes_unlabeled_rows_from_a_mask_or_none_never_from_zero():
    X = np.array([[1.0], [2.0], [3.0]])
    for y, labeled in (([0, 1, 0], [False, True, False]), ([None, 1, None], None),
                       ([np.nan, 1.0, np.nan], None)):
        model = Perceptron()
        out = model.learn_many(X, y, labeled=labeled)
        assert out.mistakes.tolist() == [False, True, False]
        assert out.labels.tolist() == [0, 1, 0]
        assert model.mistakes == 1
        assert out.scores.tolist() == [0.0, 0.0, 2.0 * 3.0 + 1.0]  # θ = [2], θ0 = 1 after row 1


def test_zero_is_the_negative_class_in_learn_one_learn_many_and_fit():
    """The issue's case: [1, 0, 1, 0] is two updates, as [1, -1, 1, -1] is."""
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]])
    reference = Perceptron(fit_intercept=False)
    reference.learn_many(X, [1, -1, 1, -1])
    many = Perceptron(fit_intercept=False)
    out = many.learn_many(X, [1, 0, 1, 0])
    one = Perceptron(fit_intercept=False)
    flags = [learned(one, x, y) for x, y in zip(X, [1, 0, 1, 0], strict=True)]
    fitted = Perceptron(fit_intercept=False)
    fitted.fit(X, np.array([1, 0, 1, 0]))
    assert out.mistakes.tolist() == flags == [True, False, False, False]
    for model in (many, one, fitted):
        assert model.weights.tolist() == reference.weights.tolist() == [1.0, 0.0]
    assert Perceptron().learn_many(X, [1, 0, 1, 0]).mistakes.sum() == 2
    with pytest.raises(ValueError, match="row 1 has none"):
        Perceptron().fit(X, [1, None, 1, 0])


@pytest.mark.parametrize(
    ("taught", "answers"),
    [
        ((True, False), (True, False)),
        ((np.True_, np.False_), (True, False)),
        ((1, -1), (1, -1)),
        ((1, 0), (1, 0)),
        ((np.int64(1), np.int64(0)), (1, 0)),
        (("spam", "ham"), ("spam", "ham")),
    ],
)
def test_predictions_answer_in_the_label_space_taught(taught, answers):
    positive, negative = taught
    model = Perceptron(classes=("ham", "spam") if isinstance(positive, str) else None)
    model.learn_one([1.0, 0.0], positive)
    model.learn_one([-1.0, 0.0], negative)
    got = model.predict_one([5.0, 0.0]), model.predict_one([-5.0, 0.0])
    assert got == answers and [type(g) for g in got] == [type(a) for a in answers]
    assert set(model.predict_proba_one([1.0, 0.0])) == set(answers)


def test_a_class_not_yet_taught_is_inferred_from_the_other():
    for label, other in ((True, False), (1, 0), (0, 1), (-1, 1), (False, True)):  # 0 is the negative class
        model = Perceptron()
        model.learn_one([1.0], label)
        assert set(model.predict_proba_one([1.0])) == {label, other}
    assert set(Perceptron().predict_proba_one([1.0])) == {False, True}  # nothing taught: river's


def test_predict_proba_one_is_the_logistic_of_the_score():
    model = Perceptron()
    model.learn_one([1.0, 2.0], 1)  # θ = [1, 2], θ0 = 1
    for x in ([1.0, 1.0], [-3.0, -1.0], [0.0, -0.5], [400.0, 0.0], [-400.0, 0.0]):
        s = model.score_one(x)
        proba = model.predict_proba_one(x)
        assert proba[1] == pytest.approx(1 / (1 + np.exp(-s)))
        assert proba[0] + proba[1] == pytest.approx(1.0)  # taught 1 alone: the negative class is 0
        assert (proba[1] > 0.5) == (model.predict_one(x) == 1)


# ---------------------------------------------------------------- properties

@st.composite
def streams(draw):
    d = draw(st.integers(1, 12))
    n = draw(st.integers(1, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    scale = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    X = rng.normal(size=(n, d)) * scale
    if draw(st.booleans()):
        X = np.round(X)  # integer data hits the boundary often
    y = rng.choice(np.array([-1, 1], dtype=np.int8), size=n)
    return X, y


def _assert_learn_many_is_learn_one(rows, y, fit_intercept, cuts):
    """learn_one and learn_many in ``cuts`` batches agree bit for bit (see exactness.py)."""
    one, many = assert_learn_many_is_learn_one(lambda: Perceptron(fit_intercept=fit_intercept), rows, y, cuts)
    assert np.array_equal(one.weights, many.weights)
    assert one.feature_names == many.feature_names
    assert one.intercept == many.intercept and one.mistakes == many.mistakes


@settings(max_examples=60, deadline=None)
@given(streams(), st.booleans(), st.integers(1, 7))
def test_learn_many_is_learn_one_row_by_row(stream, fit_intercept, cuts):
    X, y = stream
    _assert_learn_many_is_learn_one(X, y, fit_intercept, cuts)


@settings(max_examples=40, deadline=None)
@given(streams())
def test_dict_and_vector_inputs_agree(stream):
    # A named row is summed over its own features and a dense row over all its columns, so the
    # two scores may differ in the last bits; the decisions, and so the weights, agree.
    X, y = stream
    X = np.round(X * 8) / 8  # dyadic values: every sum is exact, whatever its order
    dense, named = Perceptron(), Perceptron()
    for i in range(len(X)):
        x_named = {f"f{j}": float(v) for j, v in enumerate(X[i])}
        assert dense.score_one(X[i]) == named.score_one(x_named)
        assert learned(dense, X[i], int(y[i])) == learned(named, x_named, int(y[i]))
    assert np.array_equal(dense.weights, named.weights)


@st.composite
def named_streams(draw):
    """Rows of a few named features out of many names (sparse), some rows with none."""
    names = draw(st.integers(1, 60))
    n = draw(st.integers(1, 200))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = []
    for _ in range(n):
        k = int(rng.integers(0, min(names, 12) + 1))
        keys = rng.choice(names, size=k, replace=False)  # in a random order: the record's own
        rows.append({f"n{j}": float(v) for j, v in zip(keys, rng.normal(size=k) * 10, strict=True)})
    y = rng.choice(np.array([-1, 1], dtype=np.int8), size=n)
    return rows, y


@settings(max_examples=60, deadline=None)
@given(named_streams(), st.booleans(), st.integers(1, 7))
def test_named_rows_learn_many_is_learn_one_row_by_row(stream, fit_intercept, cuts):
    rows, y = stream
    _assert_learn_many_is_learn_one(rows, y, fit_intercept, cuts)


_NAMES = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@settings(max_examples=100, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.dictionaries(_NAMES, st.floats(-5, 5, allow_nan=False), max_size=4), max_size=6),
        min_size=1, max_size=4,
    ),
    limit=st.none() | st.integers(1, 6),
    bound=st.sampled_from(["n_features", "max_names"]),
)
def test_named_rows_index_new_names_in_order_and_refuse_those_over_the_limit(batches, limit, bound):
    # n_features fixes the width; max_names (with n_features unset) only bounds the names
    model = Perceptron(**{bound: limit})
    setting = {"n_features": "SP_MODEL__N_FEATURES", "max_names": "SP_LIMITS__MAX_NAMES"}[bound]
    width = limit if bound == "n_features" else None
    index: dict[str, int] = {}  # the reference: rows in order, each row's new names in its keys' order
    for batch in batches:
        rows, rejected = model.vectorize_many(batch) if batch else (None, {})
        want_rejected, want_rows = {}, []
        for i, x in enumerate(batch):
            new = [k for k in x if k not in index]
            if limit is not None and len(index) + len(new) > limit:
                want_rejected[i] = (
                    f"x brings {len(new)} new feature names; the model allows {limit} in all ({setting})"
                )
                continue
            for k in new:
                index[k] = len(index)
            want_rows.append(([index[k] for k in x], list(x.values())))
        assert rejected == want_rejected
        assert model.feature_names == list(index)
        if rows is not None:
            got = [(cols.tolist(), vals.tolist()) for cols, vals in map(rows.row, range(len(rows)))]
            assert got == want_rows
            assert rows.n_cols == len(model.weights) == max(len(index), width or 0)


def test_named_rows_are_scored_over_their_own_features_only():
    model = Perceptron(n_features=100_000)  # a wide model: a row costs its features, not the width
    X, rejected = model.vectorize_many([{"a": 1.0, "b": 2.0}, {}, {"c": -1.0}])
    assert not rejected and len(X.values) == 3  # held sparse, no 3 x 100,000 matrix
    out = model.learn_many(X, [1, 1, -1])
    # row 0 is on the boundary (a mistake: θ_a = 1, θ_b = 2, θ0 = 1); the empty row scores θ0;
    # row 2 scores θ_c·(−1) + θ0 = 1 against label −1 (a mistake: θ_c = 1, θ0 = 0)
    assert out.mistakes.tolist() == [True, False, True]
    assert out.scores.tolist() == [0.0, 1.0, 1.0]
    assert model.score_one({"a": 1.0, "unknown": 5.0}) == 1.0  # unknown names weigh 0
    assert model.feature_names == ["a", "b", "c"]


@settings(max_examples=40, deadline=None)
@given(
    d=st.integers(2, 6),
    gamma=st.floats(0.05, 0.5),
    seed=st.integers(0, 2**32 - 1),
)
def test_mistakes_until_a_clean_pass_never_exceed_the_bound(d, gamma, seed):
    rng = np.random.default_rng(seed)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    X = rng.uniform(-1, 1, size=(400, d))
    X = X[np.abs(X @ u) >= gamma][:150]  # margin >= gamma w.r.t. the unit separator u
    if len(X) == 0:
        return
    y = np.where(X @ u > 0, 1, -1).astype(np.int8)
    R = float(np.linalg.norm(X, axis=1).max())
    model = Perceptron(fit_intercept=False)
    per_pass = model.fit(X, y, passes=10_000)
    assert per_pass[-1] == 0  # converged: a clean pass
    assert sum(per_pass) <= (R / gamma) ** 2
    assert (y * (X @ model.weights) > 0).all()


def test_the_names_in_use_their_limit_and_the_rows_refused_for_them_are_counted():
    model = Perceptron(max_names=2)
    assert (model.n_names, model.name_limit, model.names_refused) == (0, 2, 0)
    _, rejected = model.vectorize_many([{"a": 1.0}, {"b": 1.0, "c": 1.0}, {"b": 2.0}, {"a": 1.0}])
    assert list(rejected) == [1]
    with pytest.raises(DimensionError):
        model.learn_one({"c": 1.0}, 1)
    assert (model.n_names, model.names_refused) == (2, 2)
    assert Perceptron(n_features=7, max_names=2).name_limit == 7  # a set width bounds the names
