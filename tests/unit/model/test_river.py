"""The model as river users meet it: river's own checks, and river's evaluation with raw labels.

river's datasets label with bools (Phishing, Bananas, SEA) or 0/1 ints (Shuttle, Agrawal); the
model is handed them as they come, so a label space that came back as −1/+1 would score about
a third of Phishing right instead of river's 83.6%.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from river import checks, datasets, evaluate, metrics
from river import linear_model as river_lm
from river.datasets import synth

from stream_perceptron import Perceptron


@pytest.mark.parametrize("params", list(Perceptron._unit_test_params()), ids=repr)
def test_river_check_estimator_passes(params):
    checks.check_estimator(Perceptron(**params))  # raises on the first failing check


def test_river_runs_every_dataset_check_with_numpy_booleans_too():
    """check_estimator feeds Phishing with ``np.bool_`` labels; the model must answer with them."""
    model = Perceptron()
    for x, y in itertools.islice(datasets.Phishing(), 200):
        model.learn_one(x, np.bool_(y))
    assert set(model.predict_proba_one(x)) == {False, True}
    assert type(model.predict_one(x)) is bool


def _name(v):
    return v if isinstance(v, str) else ""


def _streams():
    yield "Phishing", list(datasets.Phishing())
    yield "Bananas", list(datasets.Bananas())
    yield "Shuttle", list(itertools.islice(datasets.Shuttle(), 10_000))  # 0/1 ints
    yield "SEA", list(synth.SEA(seed=1, noise=0.1).take(3_000))
    yield "Agrawal", list(synth.Agrawal(seed=1, perturbation=0.1).take(3_000))  # 0/1 ints


@pytest.mark.parametrize(("name", "stream"), list(_streams()), ids=_name)
def test_progressive_val_score_with_raw_labels_equals_rivers_perceptron(name, stream):
    ours = evaluate.progressive_val_score(stream, Perceptron(), metrics.Accuracy())
    theirs = evaluate.progressive_val_score(stream, river_lm.Perceptron(), metrics.Accuracy())
    assert ours.get() == theirs.get()
    if name == "Phishing":
        assert round(ours.get(), 4) == 0.8360  # the figure river's Perceptron reports


@pytest.mark.parametrize(("name", "stream"), list(_streams())[:2], ids=_name)
def test_rocauc_works_and_equals_rivers_perceptron(name, stream):
    ours = evaluate.progressive_val_score(stream, Perceptron(), metrics.ROCAUC())
    theirs = evaluate.progressive_val_score(stream, river_lm.Perceptron(), metrics.ROCAUC())
    assert ours.get() == pytest.approx(theirs.get(), abs=1e-12)
    if name == "Phishing":
        assert ours.get() > 0.85  # a score that ranks, not a constant


def test_the_averaged_model_is_evaluated_by_river_too():
    stream = list(datasets.Phishing())
    plain = evaluate.progressive_val_score(stream, Perceptron(), metrics.Accuracy()).get()
    averaged = evaluate.progressive_val_score(stream, Perceptron(average=True), metrics.Accuracy()).get()
    assert averaged > plain  # Phishing is noisy: the average serves better than the last θ
