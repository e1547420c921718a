"""Partition states for the store tests: a perceptron taught some labeled rows, as the worker
would store it for one input partition."""

from __future__ import annotations

import numpy as np

from stream_perceptron import Perceptron, RunningStats
from stream_perceptron.model.learner import Learner
from stream_perceptron.state.stored import StoredState, new_model_id


def partition_state(topic: str, partition: int, next_offset: int, *, names: int = 0, seed: int = 0,
                    rows: int = 40) -> StoredState:
    """The state of ``topic[partition]`` at ``next_offset``: a model taught ``rows`` dense rows of
    4 features, or, with ``names``, named rows over that many distinct feature names (about 40
    bytes each in the state)."""
    rng = np.random.default_rng(seed)
    learner = Learner(Perceptron(), RunningStats(window=20))
    if names:
        per_row = max(1, -(-names // rows))
        xs = [{f"feature-{seed}-{i:08d}": float(rng.normal()) for i in range(r, min(r + per_row, names))}
              for r in range(0, names, per_row)]
        ys = [1 if i % 2 else -1 for i in range(len(xs))]
        for i in range(0, len(xs), 10):  # every row a mistake or close: every name gets a weight
            learner.step(xs[i:i + 10], ys[i:i + 10])
    else:
        X = rng.normal(size=(rows, 4))
        learner.step(X, np.where(X @ rng.normal(size=4) > 0, 1, -1))
    model, stats = learner.state()
    return StoredState(model=model, config=learner.model.config(), stats=stats,
                      offsets={topic: {partition: next_offset}}, model_id=new_model_id())
