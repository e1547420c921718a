"""The model, its statistics and its drift detectors, advanced together one batch at a time
(pure: no I/O).

Both the offline ``fit`` and the worker go through :meth:`Learner.step`, so the statistics a
worker publishes are computed exactly as the offline report computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from stream_perceptron.model.drift import Alarm, DriftWatch
from stream_perceptron.model.perceptron import BatchResult, Features, FloatArray, Perceptron, Rows
from stream_perceptron.model.sparse import SparseRows, take_rows
from stream_perceptron.model.stats import RunningStats, margins, row_norms

__all__ = ["ON_DRIFT", "Learner", "Step", "take_rows"]

# The feature matrix of one learned chunk stays under this many bytes.
MATRIX_BYTES = 16 << 20

#: What an alarm does besides being reported (``SP_DRIFT__ON_DRIFT``).
ON_DRIFT = ("none", "reset-window", "reset-model")


class Step(NamedTuple):
    """What one :meth:`Learner.step` did: each row's result, each row's geometric margin (NaN
    where unlabeled or θ = 0), and the drift alarms the rows raised, each with its row's index in
    the step."""

    result: BatchResult
    margin: FloatArray
    alarms: list[Alarm]


class Learner:
    """A :class:`Perceptron`, its :class:`RunningStats` and, optionally, a :class:`DriftWatch`
    on its mistakes.

    ``on_drift`` is what an alarm does, at the labeled row that raised it (so it does not depend
    on where batches were cut):

    * ``"none"``: nothing; the alarm is only reported (in the :class:`Step` it returns).
    * ``"reset-window"``: the window statistics (window mistake rate, margins, R, γ, the bound)
      start empty after that row; E_n, the counters and the EWMA go on.
    * ``"reset-model"``: θ and θ0 (and the averaging sums) restart at zero after that row, so the
      rows after it are scored and learned by a fresh model; E_n goes on counting its mistakes,
      and ``updates`` (the model version) keeps counting up.

    >>> import numpy as np
    >>> learner = Learner(Perceptron(fit_intercept=False), RunningStats(window=10))
    >>> step = learner.step(np.array([[1.0, 0.0], [0.0, -1.0], [0.0, 1.0]]), [1, -1, 1])
    >>> step.result.mistakes.tolist(), learner.stats.snapshot()["mistakes"], step.alarms
    ([True, True, False], 2, [])
    """

    def __init__(self, model: Perceptron, stats: RunningStats, drift: DriftWatch | None = None,
                 on_drift: str = "none") -> None:
        if on_drift not in ON_DRIFT:
            raise ValueError(f"on_drift is one of {ON_DRIFT}, not {on_drift!r}")
        self.model = model
        self.stats = stats
        self.drift = drift
        self.on_drift = on_drift

    @property
    def drifts(self) -> int:
        """Alarms raised in this state so far (0 without a detector)."""
        return 0 if self.drift is None else self.drift.drifts

    @property
    def last_drift_offset(self) -> int | None:
        """The input offset of the latest alarm, as the worker recorded it."""
        return None if self.drift is None else self.drift.last_offset

    def step(
        self, X: Sequence[Features] | Rows, y: Sequence[Any] | np.ndarray,
        labeled: Sequence[bool] | np.ndarray | None = None,
    ) -> Step:
        """Score, learn (labeled rows) and account for a batch (see :class:`Step`). ``y`` and
        ``labeled`` are as :meth:`Perceptron.learn_many` takes them (0 is the negative class; the
        mask marks the labeled rows)."""
        m = X if isinstance(X, np.ndarray | SparseRows) else self.model.vectorize_many(list(X))[0]
        alarms: list[Alarm] = []
        labeled_before = self.stats.labeled
        if self.drift is not None and self.on_drift == "reset-model":
            result, alarms = self._learn_resetting(m, y, labeled)
        else:
            result = self.model.learn_many(m, y, labeled)
            if self.drift is not None:
                alarms = self.drift.update_many(result.labels, result.mistakes, self._served(result))
        if alarms:
            counts = labeled_before + np.cumsum(result.labels != 0)
            alarms = [a._replace(labeled=int(counts[a.row])) for a in alarms]
        _, geometric, augmented = margins(
            result.labels, result.scores, result.theta_norm, result.theta_norm_aug
        )
        norms = row_norms(m, self.model.fit_intercept)
        cuts = [a.row + 1 for a in alarms] if self.on_drift == "reset-window" else []
        start = 0
        for end in [*cuts, len(result.labels)]:
            if end > start:
                part = slice(start, end)
                self.stats.update_many(
                    labels=result.labels[part], mistakes=result.mistakes[part],
                    served_mistakes=result.served_mistakes[part], geometric=geometric[part],
                    augmented=augmented[part], x_norms=norms[part], theta_norm=self.model.norms()[0],
                )
            if end in cuts:
                self._empty_window()
            start = end
        return Step(result, geometric, alarms)

    def _served(self, result: BatchResult) -> Any:
        return result.served_mistakes if self.model.average else None

    def _learn_resetting(self, m: Rows, y: Any, labeled: Any) -> tuple[Any, list[Alarm]]:
        """Learn ``m`` with θ, θ0 restarted at zero right after each row that raises an alarm:
        learn the rest, feed the detector up to its first alarm; when that is not the last row,
        go back to the state before and learn only up to it, reset, and go on from the next row.
        Returns the rows' results and the alarms."""
        assert self.drift is not None
        n = len(m)
        ys, mask = np.asarray(y), None if labeled is None else np.asarray(labeled)
        parts: list[BatchResult] = []
        raised: list[Alarm] = []
        start = 0
        while start < n:
            before = self.model.get_state()
            result = self._learn_many(take_rows(m, start, n), ys[start:],
                                      None if mask is None else mask[start:])
            alarms = self.drift.update_many(self._labeled(result), result.mistakes, self._served(result),
                                            first_only=True)
            raised += [a._replace(row=a.row + start) for a in alarms]
            if not alarms:
                parts.append(result)
                break
            end = start + alarms[0].row + 1
            if end < n:  # learned past the alarm: learn again up to it
                self.model.set_state(before)
                result = self._learn_many(take_rows(m, start, end), ys[start:end],
                                          None if mask is None else mask[start:end])
            parts.append(result)
            self._zero_model()
            start = end
        if len(parts) == 1:
            return parts[0], raised
        return self._joined(parts), raised

    # The three things _learn_resetting does that depend on the kind of model (a subclass's own).
    def _learn_many(self, m: Rows, y: Any, labeled: Any) -> Any:
        return self.model.learn_many(m, y, labeled)

    @staticmethod
    def _labeled(result: Any) -> Any:
        """What the drift detectors take as the labels (its nonzero entries: the labeled rows)."""
        return result.labels

    @staticmethod
    def _joined(parts: list[Any]) -> Any:
        return BatchResult(*(np.concatenate(f) for f in zip(*parts, strict=True)))

    def _zero_model(self) -> None:
        """θ = 0, θ0 = 0 and the averaging afresh; the feature names, the labels taught and the
        update count stay."""
        state = self.model.get_state()
        state["weights"] = [0.0] * len(state["weights"])
        state["intercept"] = 0.0
        state.pop("theta_sq", None)
        if "average" in state:
            state["average"] = {"steps": 0, "weighted_updates": [], "weighted_intercept": 0.0}
        self.model.set_state(state)

    def _empty_window(self) -> None:
        state = self.stats.get_state()
        for key in ("window_mistakes", "window_margins", "window_margins_aug", "window_norms"):
            state[key] = []
        self.stats.set_state(state)

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
        """(model state, statistics state), as a checkpoint stores them; the drift detectors'
        state is the statistics state's ``"drift"``."""
        stats = self.stats.get_state()
        if self.drift is not None:
            stats["drift"] = self.drift.get_state()
        return self.model.get_state(), stats

    def restore(self, model_state: dict[str, Any], stats_state: dict[str, Any]) -> None:
        """Put back what :meth:`state` returned. A state without ``"drift"`` (written before
        detectors, or with none) starts the detectors afresh."""
        self.model.set_state(model_state)
        self.stats.set_state(stats_state)
        if self.drift is not None and isinstance(stats_state.get("drift"), dict):
            self.drift.set_state(stats_state["drift"])
