r"""The mixed model as a reader of the model topic sees it, and scoring with it (pure: no I/O).

A worker mixing partitions (:mod:`~stream_perceptron.worker.mixer`) writes a mixing record of
input partition p to the model topic at each of p's mixing points (docs/records.md, "Model";
:mod:`~stream_perceptron.state.model_topic` says which record is p's newest):
``{"topic", "partition", "offset", "state", "log", "ts"}``, where ``log`` lists p's adoptions
``{"offset", "epoch", "mix"}`` (``epoch``: the mix version), oldest first. The last entry of p's
newest record is the mix p adopted last, :math:`w_n = [\theta, \theta_0]` of mix version n at
input offset o: from o on, p predicts with it until its next mixing point. So a reader that
keeps, per (input topic, partition), the last log entry of the newest record holds what each
partition serves right after its latest mixing point, and can score with it elsewhere.

**Scoring** is the perceptron's rule with the mixed weights: the score of a dense row x is

.. math:: s(x) = \theta\cdot x + \theta_0 ,

computed as ``(x * θ).sum() + θ0`` in float64, the operations of
:meth:`Perceptron.score_one <stream_perceptron.model.perceptron.Perceptron.score_one>` on a dense
row, so a perceptron holding the mix scores the same float, bit for bit. The prediction is the
positive class (+1) when :math:`s(x) > 0`, else −1: a point on the boundary is on the negative
side, as the worker predicts (y·s ≤ 0 counts as an error, the boundary included).

>>> record = {"topic": "in", "partition": 1, "state": {}, "ts": 0.0, "log": [
...     {"offset": 20, "epoch": 1, "mix": {"weights": [1.0, -2.0], "intercept": 0.5,
...      "partitions": [0, 1], "epochs": [1, 1], "offsets": [20, 20], "mistakes": [3, 1],
...      "mu": [0.5, 0.5], "rule": "uniform"}}]}
>>> newest = Adopted.from_record(record)
>>> newest.version, newest.offset, newest.score([2.0, 1.0]), newest.predict([2.0, 1.0])
(1, 20, 0.5, 1)
>>> Adopted.from_record({**record, "log": []}) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stream_perceptron.model.mixing import Mix


@dataclass(frozen=True)
class Adopted:
    """The mix input partition ``partition`` of ``topic`` adopted at input ``offset`` (the first
    record predicted with it), as its ``version``-th mixing point."""

    topic: str
    partition: int
    version: int
    offset: int
    mix: Mix

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Adopted | None:
        """The last adoption a model-topic record logs; None when its log is empty."""
        log = record["log"]
        if not log:
            return None
        last = log[-1]
        return cls(str(record["topic"]), int(record["partition"]), int(last["epoch"]),
                   int(last["offset"]), Mix.from_record(last["mix"]))

    def record(self) -> dict[str, Any]:
        """JSON-ready: where it was adopted, θ, θ0, the partitions mixed and the μ given to each."""
        return {"topic": self.topic, "partition": self.partition, "version": self.version,
                "epoch": self.version,  # the field's old name, kept
                "offset": self.offset, "weights": self.mix.weights.tolist(),
                "intercept": self.mix.intercept, "partitions": list(self.mix.partitions),
                "mu": list(self.mix.mu)}

    def score(self, x: Sequence[float]) -> float:
        """θ·x + θ0 of the dense row ``x`` (as many values as θ has weights; ValueError else)."""
        row = np.asarray(x, dtype=np.float64)
        w = self.mix.weights
        if row.shape != w.shape:
            raise ValueError(f"a row of {row.size} values, for a mix of {w.size} weights")
        return float((row * w).sum() + self.mix.intercept)

    def predict(self, x: Sequence[float]) -> int:
        """+1 when :meth:`score` is > 0, else −1."""
        return 1 if self.score(x) > 0 else -1
