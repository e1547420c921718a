"""The model and its statistics, advanced together one batch at a time (pure: no I/O).

Both the offline ``fit`` and the worker go through :meth:`Learner.step`, so the statistics a
worker publishes are computed exactly as the offline report computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stream_perceptron.perceptron import BatchResult, Features, FloatArray, Perceptron, Rows
from stream_perceptron.sparse import SparseRows
from stream_perceptron.stats import RunningStats, margins, row_norms


class Learner:
    """A :class:`Perceptron` and its :class:`RunningStats`.

    >>> import numpy as np
    >>> learner = Learner(Perceptron(fit_intercept=False), RunningStats(window=10))
    >>> result, margin = learner.step(np.array([[1.0, 0.0], [0.0, -1.0], [0.0, 1.0]]), [1, -1, 1])
    >>> result.mistakes.tolist(), learner.stats.snapshot()["mistakes"]
    ([True, True, False], 2)
    """

    def __init__(self, model: Perceptron, stats: RunningStats) -> None:
        self.model = model
        self.stats = stats

    def step(
        self, X: Sequence[Features] | Rows, y: Sequence[int] | np.ndarray
    ) -> tuple[BatchResult, FloatArray]:
        """Score, learn (labeled rows) and account for a batch; returns each row's result and
        geometric margin (NaN where unlabeled or θ = 0)."""
        m = X if isinstance(X, np.ndarray | SparseRows) else self.model.vectorize_many(list(X))[0]
        result = self.model.learn_many(m, y)
        _, geometric, augmented = margins(
            result.labels, result.scores, result.theta_norm, result.theta_norm_aug
        )
        self.stats.update_many(
            labels=result.labels,
            mistakes=result.mistakes,
            geometric=geometric,
            augmented=augmented,
            x_norms=row_norms(m, self.model.fit_intercept),
            theta_norm=self.model.norms()[0],
        )
        return result, geometric

    def state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(model state, statistics state), as a checkpoint stores them."""
        return self.model.get_state(), self.stats.get_state()

    def restore(self, model_state: dict[str, Any], stats_state: dict[str, Any]) -> None:
        """Put back what :meth:`state` returned."""
        self.model.set_state(model_state)
        self.stats.set_state(stats_state)
