"""The K-class perceptron, its statistics and its drift detectors, advanced together one batch at
a time (pure: no I/O): :class:`~stream_perceptron.model.learner.Learner` for
:class:`~stream_perceptron.model.multiclass.MulticlassPerceptron`.

The worker chooses it once, when a partition's learner is made; the binary learner is left as
it is. Its :class:`~stream_perceptron.model.learner.Step` carries a
:class:`~stream_perceptron.model.multiclass.ClassResult` and the geometric multiclass margins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stream_perceptron.model.class_stats import MulticlassStats, class_margins
from stream_perceptron.model.drift import Alarm, DriftWatch
from stream_perceptron.model.learner import Learner, Step
from stream_perceptron.model.multiclass import ClassResult, MulticlassPerceptron
from stream_perceptron.model.perceptron import Features, Rows
from stream_perceptron.model.sparse import SparseRows
from stream_perceptron.model.stats import row_norms

__all__ = ["MulticlassLearner"]


def _objects(y: Any) -> Any:
    """Labels as an object array: numpy would read ``["a", 3]`` as two strings."""
    if isinstance(y, np.ndarray) and y.dtype == object:
        return y
    out = np.empty(len(y), dtype=object)
    out[:] = list(y)
    return out


class MulticlassLearner(Learner):
    """A :class:`MulticlassPerceptron`, its :class:`MulticlassStats` and, optionally, a
    :class:`DriftWatch` on its mistakes (what an alarm does as for two classes). ``scores``:
    each step also reports every class's served score (``SP_OUTPUT__SCORES=all``).

    >>> learner = MulticlassLearner(MulticlassPerceptron(fit_intercept=False), MulticlassStats(window=10))
    >>> step = learner.step(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]), ["a", "b", "a"])
    >>> step.result.mistakes.tolist(), learner.stats.snapshot(learner.model.classes)["confusion"]
    ([False, True, True], [[1, 0], [1, 0]])
    """

    model: MulticlassPerceptron
    stats: MulticlassStats

    def __init__(self, model: MulticlassPerceptron, stats: MulticlassStats, drift: DriftWatch | None = None,
                 on_drift: str = "none", *, scores: bool = False) -> None:
        super().__init__(model, stats, drift, on_drift)
        self.scores = scores

    def step(
        self, X: Sequence[Features] | Rows, y: Sequence[Any] | np.ndarray,
        labeled: Sequence[bool] | np.ndarray | None = None,
    ) -> Step:
        """Score, learn (labeled rows) and account for a batch: ``y`` the class names (None:
        unlabeled), ``labeled`` as :meth:`MulticlassPerceptron.learn_many` takes it."""
        m = X if isinstance(X, np.ndarray | SparseRows) else self.model.vectorize_many(list(X))[0]
        y = _objects(y)
        alarms: list[Alarm] = []
        labeled_before = self.stats.labeled
        if self.drift is not None and self.on_drift == "reset-model":
            result, alarms = self._learn_resetting(m, y, labeled)
        else:
            result = self._learn_many(m, y, labeled)
            if self.drift is not None:
                alarms = self.drift.update_many(self._labeled(result), result.mistakes,
                                                self._served(result))  # type: ignore[arg-type]
        if alarms:
            counts = labeled_before + np.cumsum(result.labels >= 0)
            alarms = [a._replace(labeled=int(counts[a.row])) for a in alarms]
        geometric, augmented = class_margins(result.margins, result.theta_norm, result.theta_norm_aug)
        norms = row_norms(m, self.model.fit_intercept)
        cuts = [a.row + 1 for a in alarms] if self.on_drift == "reset-window" else []
        start, k = 0, len(self.model.classes)
        for end in [*cuts, len(result.labels)]:
            if end > start:
                part = slice(start, end)
                self.stats.update_many(
                    labels=result.labels[part], predictions=result.predictions[part],
                    mistakes=result.mistakes[part], served_mistakes=result.served_mistakes[part],
                    geometric=geometric[part], augmented=augmented[part], x_norms=norms[part],
                    theta_norm=self.model.norms()[0], classes=k,
                )
            if end in cuts:
                self._empty_window()
            start = end
        return Step(result, geometric, alarms)  # a ClassResult

    def _learn_many(self, m: Rows, y: Any, labeled: Any) -> ClassResult:
        return self.model.learn_many(m, y, labeled, scores=self.scores)

    @staticmethod
    def _labeled(result: Any) -> Any:
        return result.labels >= 0

    @staticmethod
    def _joined(parts: list[Any]) -> ClassResult:
        """The parts' results as one; ``all_scores`` padded with NaN for a class that came in a
        later part."""
        fields: list[Any] = [np.concatenate(f) for f in list(zip(*parts, strict=True))[:-1]]
        scores = [p.all_scores for p in parts]
        if any(s is None for s in scores):
            return ClassResult(*fields)
        k = max(s.shape[1] for s in scores)
        padded = [np.pad(s, ((0, 0), (0, k - s.shape[1])), constant_values=np.nan) for s in scores]
        return ClassResult(*fields, np.concatenate(padded))  # type: ignore[call-arg]

    def _zero_model(self) -> None:
        """W = 0, b = 0 and the averaging afresh; the classes (in their rows), the feature names
        and the update count stay."""
        state = self.model.get_state()
        state["weights"] = [[0.0] * len(row) for row in state["weights"]]
        state["intercept"] = [0.0] * len(state["intercept"])
        state.pop("theta_sq", None)
        if "average" in state:
            state["average"] = {"steps": 0, "weighted_updates": [], "weighted_intercept": []}
        self.model.set_state(state)
