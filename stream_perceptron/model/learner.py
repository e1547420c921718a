"""The model and its statistics, advanced together one batch at a time (pure: no I/O).

Both the offline ``fit`` and the worker go through :meth:`Learner.step`, so the statistics a
worker publishes are computed exactly as the offline report computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stream_perceptron.model.perceptron import BatchResult, Features, FloatArray, Perceptron, Rows
from stream_perceptron.model.sparse import SparseRows
from stream_perceptron.model.stats import RunningStats, margins, row_norms

# The feature matrix of one learned chunk stays under this many bytes.
MATRIX_BYTES = 16 << 20


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
        self, X: Sequence[Features] | Rows, y: Sequence[Any] | np.ndarray,
        labeled: Sequence[bool] | np.ndarray | None = None,
    ) -> tuple[BatchResult, FloatArray]:
        """Score, learn (labeled rows) and account for a batch; returns each row's result and
        geometric margin (NaN where unlabeled or θ = 0). ``y`` and ``labeled`` are as
        :meth:`Perceptron.learn_many` takes them (0 is the negative class; the mask marks the
        labeled rows)."""
        m = X if isinstance(X, np.ndarray | SparseRows) else self.model.vectorize_many(list(X))[0]
        result = self.model.learn_many(m, y, labeled)
        _, geometric, augmented = margins(
            result.labels, result.scores, result.theta_norm, result.theta_norm_aug
        )
        self.stats.update_many(
            labels=result.labels,
            mistakes=result.mistakes,
            served_mistakes=result.served_mistakes,
            geometric=geometric,
            augmented=augmented,
            x_norms=row_norms(m, self.model.fit_intercept),
            theta_norm=self.model.norms()[0],
        )
        return result, geometric

    def chunk_end(self, xs: Sequence[Features] | np.ndarray, start: int) -> int:
        """Where the chunk of ``xs`` that starts at ``start`` ends: the rows learned together.

        Consecutive rows of one kind are learned together, never named and dense mixed, so a
        record is summed the same way wherever a batch was cut. Named rows are held sparse
        (memory grows with the values given); dense rows go in blocks whose matrix stays under
        :data:`MATRIX_BYTES` (wide rows in smaller blocks).

        >>> Learner(Perceptron(), RunningStats()).chunk_end([[1.0], [2.0], {"a": 1.0}, [3.0]], 0)
        2
        """
        x0 = xs[start]
        named = isinstance(x0, dict)
        limit = len(xs)
        if not named:
            width = max(self.model.dim or 0, len(x0), 1)
            limit = min(limit, start + max(1, MATRIX_BYTES // (8 * width)))
        if isinstance(xs, np.ndarray):  # one dense matrix
            return limit
        return next((j for j in range(start + 1, limit) if isinstance(xs[j], dict) is not named), limit)

    def state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(model state, statistics state), as a checkpoint stores them."""
        return self.model.get_state(), self.stats.get_state()

    def restore(self, model_state: dict[str, Any], stats_state: dict[str, Any]) -> None:
        """Put back what :meth:`state` returned."""
        self.model.set_state(model_state)
        self.stats.set_state(stats_state)
