"""The K-class perceptron's rule as a plain loop, written apart from the model, for the worker
tests to compare a partition's W with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class PlainLoop:
    """W (one row per class, in order of first appearance as a label after ``given``) and b,
    learned one record at a time: the true class's score not strictly above every other's is
    a mistake; then its row gains x (and 1) and the best other class's row (the first among
    ties) loses x (and 1). A record is predicted before its label is read, and a new class
    competes from its first record on. Unlabeled records (None) are predicted only."""

    def __init__(self, given: Sequence[Any] = ()) -> None:
        self.classes: list[Any] = list(given)
        self.W: list[np.ndarray] = []
        self.b: list[float] = []
        self.d: int | None = None

    def _scores(self, x: np.ndarray) -> list[float]:
        return [float((x * w).sum() + b) for w, b in zip(self.W, self.b, strict=True)]

    def learn(self, x: Sequence[float], y: Any) -> tuple[Any, bool]:
        """The served prediction (before the update) and the mistake flag; :attr:`score` is then
        the predicted class's score (NaN without a class)."""
        x = np.asarray(x, dtype=np.float64)
        if self.d is None:
            self.d = len(x)
            self.W = [np.zeros(self.d) for _ in self.classes]
            self.b = [0.0 for _ in self.classes]
        s = self._scores(x)
        # predicted before the label is read: a class new at this record is no prediction here
        prediction = None if not s else self.classes[int(np.argmax(s))]
        self.score = float("nan") if not s else max(s)
        if y is not None and y not in self.classes:  # it competes from this record on
            self.classes.append(y)
            self.W.append(np.zeros(self.d))
            self.b.append(0.0)
            s.append(0.0)
        if y is None or len(s) < 2:
            return prediction, False
        t = self.classes.index(y)
        rival = max((j for j in range(len(s)) if j != t), key=lambda j: (s[j], -j))
        if s[t] > s[rival]:
            return prediction, False
        self.W[t] = self.W[t] + x
        self.W[rival] = self.W[rival] - x
        self.b[t] += 1.0
        self.b[rival] -= 1.0
        return prediction, True

    def weights(self) -> list[list[float]]:
        return [w.tolist() for w in self.W]
