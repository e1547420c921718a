"""A learned perceptron out to river or scikit-learn, and one of theirs in.

:func:`to_river` and :func:`to_sklearn` give the model served (θ and θ0; θ̄ and θ̄0 with
``average=True``) as river's ``linear_model.Perceptron`` or scikit-learn's
``linear_model.Perceptron``: the same weights, intercept, feature order and classes, so that each
predicts as the model does. :func:`from_river` and :func:`from_sklearn` bring one of theirs in.
Each library is imported only when its functions are called (river is the model's own
dependency; scikit-learn is not).

What goes across: θ and θ0 bit for bit, the feature names in the model's order (river's weights
are a dict keyed by name, in that order; scikit-learn's ``coef_`` columns are in that order and
``feature_names_in_`` names them when every name is a string), and the classes (scikit-learn's
``classes_`` is ``[negative, positive]``, the order it reads a binary model in). What does not:
the count of updates, the averaging sums (an averaged model goes as the θ̄ it serves, and comes
back a plain model holding θ̄), river's ``l2`` and ``clip_gradient`` and scikit-learn's
regularisation, which are not the perceptron's. river's Perceptron answers ``False``/``True``,
``True`` for the positive class, whatever the classes are named.

Scores agree to rounding, not bit for bit: each library adds a row's products in its own order
(river left to right, scikit-learn in BLAS), where this model keeps one order on every path
(:mod:`~stream_perceptron.model.rowwise`). A score within rounding of 0 can therefore be
predicted otherwise; ``tests/unit/test_interop.py`` holds the scores of 1,000 rows to 1e-12.

>>> from stream_perceptron import Perceptron, to_river, from_river
>>> model = Perceptron()
>>> model.learn_one({"clicks": 2.0, "age": -1.0}, True)
>>> theirs = to_river(model)
>>> theirs.weights, theirs.intercept
({'clicks': 2.0, 'age': -1.0}, 1.0)
>>> back = from_river(theirs)
>>> back.weights.tolist(), back.intercept, back.feature_names, back.class_labels
([2.0, -1.0], 1.0, ['clicks', 'age'], (False, True))
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from stream_perceptron.model.perceptron import Perceptron

__all__ = ["from_river", "from_sklearn", "to_river", "to_sklearn"]


def _served(model: Perceptron) -> tuple[list[float], float]:
    """The weights and intercept the model serves."""
    return model.averaged_weights.tolist(), model.averaged_intercept


def _names(model: Perceptron, width: int) -> list[Hashable]:
    """A name for each of the model's columns: its feature names, then the column's index for a
    column no name reaches (all of them, for a model learned from dense vectors only)."""
    names: list[Hashable] = list(model.feature_names)
    return names + list(range(len(names), width))


def to_river(model: Perceptron) -> Any:
    """The model served, as river's ``linear_model.Perceptron`` keyed by the feature names (by the
    column's index for a model of dense vectors). A hashed model has no names to key it by and
    is refused (ValueError)."""
    from river import linear_model, utils

    if model.hash_bits is not None:
        raise ValueError("a hashed model keeps no feature names, and river's Perceptron is keyed by them:"
                         " export it with to_sklearn, whose columns are the hashed ones")
    weights, intercept = _served(model)
    out = linear_model.Perceptron()
    out._weights = utils.VectorDict(dict(zip(_names(model, len(weights)), weights, strict=True)))
    out.intercept = intercept
    return out


def to_sklearn(model: Perceptron) -> Any:
    """The model served, as scikit-learn's ``linear_model.Perceptron`` set up to go on learning by
    the same rule (``eta0=1``, no penalty, no shuffling: ``partial_fit`` updates θ += y·x,
    θ0 += y when y·score ≤ 0, as this model does)."""
    from sklearn.linear_model import Perceptron as SkPerceptron

    weights, intercept = _served(model)
    out = SkPerceptron(eta0=1.0, alpha=0.0, penalty=None, fit_intercept=model.fit_intercept, shuffle=False,
                       tol=None)
    out.coef_ = np.array([weights], dtype=np.float64).reshape(1, len(weights))
    out.intercept_ = np.array([intercept], dtype=np.float64)
    out.classes_ = np.array(list(model.class_labels))
    out.n_features_in_ = len(weights)
    names = model.feature_names
    if names and len(names) == len(weights) and all(isinstance(n, str) for n in names):
        out.feature_names_in_ = np.array(names, dtype=object)
    return out


def from_river(theirs: Any) -> Perceptron:
    """river's ``linear_model.Perceptron`` as this package's: its weights in their order as named
    features, its intercept, and the classes ``False``/``True``."""
    from river import linear_model

    if not isinstance(theirs, linear_model.Perceptron):
        raise TypeError(f"from_river takes river's linear_model.Perceptron, not {type(theirs).__name__}")
    weights = theirs.weights
    model = Perceptron()
    model.set_state({"weights": [float(v) for v in weights.values()], "intercept": float(theirs.intercept),
                     "mistakes": 0, "features": list(weights), "classes": [False, True]})
    return model


def from_sklearn(theirs: Any) -> Perceptron:
    """A fitted binary linear classifier of scikit-learn (its ``Perceptron``, or another with
    ``coef_``, ``intercept_`` and ``classes_``) as this package's perceptron: ``coef_`` as θ,
    named by ``feature_names_in_`` when it has them, ``intercept_`` as θ0, and ``classes_`` as
    its negative and positive class. A model of more than two classes is refused."""
    coef = np.asarray(getattr(theirs, "coef_", None), dtype=np.float64)
    classes = list(getattr(theirs, "classes_", []))
    if coef.ndim != 2 or coef.shape[0] != 1 or len(classes) != 2:
        raise ValueError("from_sklearn takes a fitted binary linear classifier (coef_ of one row, two"
                         f" classes_); got coef_ of shape {coef.shape} and {len(classes)} classes")
    names = getattr(theirs, "feature_names_in_", None)
    fit_intercept = bool(getattr(theirs, "fit_intercept", True))
    negative, positive = (c.item() if isinstance(c, np.generic) else c for c in classes)
    model = Perceptron(fit_intercept=fit_intercept)
    model.set_state({"weights": coef[0].tolist(), "intercept": float(np.ravel(theirs.intercept_)[0]),
                     "mistakes": 0, "features": [] if names is None else [str(n) for n in names],
                     "classes": [negative, positive]})
    return model
