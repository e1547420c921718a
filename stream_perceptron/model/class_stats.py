r"""The K-class perceptron's statistics: the binary quantities in their K-class form, per-class
counts and the confusion matrix (pure: no I/O).

For a labeled :math:`(x, y)` scored by :math:`W` before its update, the **multiclass margin** is
:math:`s_y - \max_{r \ne y} s_r` (functional, :math:`\le 0` exactly on a mistake); its geometric
form divides it by :math:`\lVert W\rVert_F` and its augmented form by
:math:`\lVert[W, b]\rVert_F`. :math:`R` is measured as for two classes (:func:`row_norms`), and
the bound is :math:`2(R/\gamma)^2`: by Kesler's construction the K-class perceptron is the
binary one on vectors of norm :math:`\sqrt2\,\lVert x\rVert` (K. Crammer and Y. Singer (2003),
"Ultraconservative online algorithms for multiclass problems"; M. Collins (2002),
"Discriminative training methods for hidden Markov models").

Per class, in the model's row order: ``labeled`` (records of that true class), ``mistakes``
(those of them that were mistakes, the learning W's flags) and ``predicted`` (records the served
model predicted as that class, labeled or not). The **confusion matrix** counts labeled records by
(true class, served prediction): a tie the true class wins counts on the diagonal but is a
mistake (the rule counts a tie as one). Its size is K×K, bounded by ``SP_LIMITS__MAX_CLASSES``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from stream_perceptron.model.stats import FloatArray, RunningStats

Counts = npt.NDArray[np.int64]
RowArray = npt.NDArray[np.int32]

__all__ = ["MulticlassStats", "class_margins"]


def class_margins(functional: FloatArray, theta_norm: FloatArray,
                  theta_norm_aug: FloatArray) -> tuple[FloatArray, FloatArray]:
    r"""The geometric and augmented forms of each row's functional multiclass margin (NaN where
    it is, or while :math:`W = 0`).

    >>> g, a = class_margins(np.array([1.0, -2.0, np.nan]), np.array([2.0, 0.0, 1.0]),
    ...                      np.array([4.0, 4.0, 1.0]))
    >>> g.tolist(), a.tolist()
    ([0.5, nan, nan], [0.25, -0.5, nan])
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        geometric = np.where(theta_norm > 0, functional / theta_norm, np.nan)
        augmented = np.where(theta_norm_aug > 0, functional / theta_norm_aug, np.nan)
    return geometric, augmented


class MulticlassStats(RunningStats):
    """:class:`~stream_perceptron.model.stats.RunningStats` for K classes: the same keys (their
    margins the multiclass ones, ``bound`` = 2(R/γ)²), per-class counts and the confusion matrix.

    >>> stats = MulticlassStats(window=4)
    >>> stats.update_many(
    ...     labels=np.array([0, 1, -1, 1], dtype=np.int32),
    ...     predictions=np.array([0, 0, 1, 1], dtype=np.int32),
    ...     mistakes=np.array([True, True, False, False]),
    ...     geometric=np.array([np.nan, -0.5, np.nan, 2.0]), augmented=np.array([np.nan, -0.25, np.nan, 0.5]),
    ...     x_norms=np.array([1.0, 1.0, 1.0, 1.0]), theta_norm=1.0, classes=2)
    >>> s = stats.snapshot(["cat", 3])
    >>> s["per_class"][1], s["confusion"], s["classes"]
    ({'class': 3, 'labeled': 2, 'mistakes': 1, 'predicted': 2}, [[1, 0], [1, 1]], ['cat', 3])
    """

    BOUND_FACTOR = 2.0

    def __init__(self, window: int = 1000, ewma_alpha: float = 0.01) -> None:
        super().__init__(window, ewma_alpha)
        self.class_labeled: Counts = np.zeros(0, dtype=np.int64)
        self.class_mistakes: Counts = np.zeros(0, dtype=np.int64)
        self.class_predicted: Counts = np.zeros(0, dtype=np.int64)
        self.confusion: Counts = np.zeros((0, 0), dtype=np.int64)

    def grow(self, k: int) -> None:
        """Hold counts for ``k`` classes (new classes start at 0)."""
        held = len(self.class_labeled)
        if k <= held:
            return
        pad = k - held
        self.class_labeled = np.concatenate([self.class_labeled, np.zeros(pad, dtype=np.int64)])
        self.class_mistakes = np.concatenate([self.class_mistakes, np.zeros(pad, dtype=np.int64)])
        self.class_predicted = np.concatenate([self.class_predicted, np.zeros(pad, dtype=np.int64)])
        self.confusion = np.pad(self.confusion, ((0, pad), (0, pad)))

    def update_many(  # type: ignore[override]
        self,
        *,
        labels: RowArray,
        predictions: RowArray,
        mistakes: npt.NDArray[np.bool_],
        geometric: FloatArray,
        augmented: FloatArray,
        x_norms: FloatArray,
        theta_norm: float,
        classes: int,
        served_mistakes: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """Account for a batch of scored rows: ``labels`` are rows of W (−1 unlabeled),
        ``predictions`` the served model's (−1 while no class is known), ``classes`` the classes
        held after the batch; the rest as :meth:`RunningStats.update_many` takes them."""
        labeled = labels >= 0
        super().update_many(labels=labeled, mistakes=mistakes, geometric=geometric,  # type: ignore[arg-type]
                            augmented=augmented, x_norms=x_norms, theta_norm=theta_norm,
                            served_mistakes=served_mistakes)
        self.grow(classes)
        true = labels[labeled]
        np.add.at(self.class_labeled, true, 1)
        np.add.at(self.class_mistakes, labels[labeled & mistakes], 1)
        np.add.at(self.class_predicted, predictions[predictions >= 0], 1)
        both = labeled & (predictions >= 0)
        np.add.at(self.confusion, (labels[both], predictions[both]), 1)

    def snapshot(self, classes: Sequence[Any] | None = None) -> dict[str, Any]:
        """The statistics as a JSON-ready dict: the binary keys (``bound`` = 2(R/γ)²) and, given
        the class names in row order, ``classes``, ``per_class`` and ``confusion`` (rows: the
        true class; columns: the served prediction)."""
        out = super().snapshot()
        if out["bound"] is not None:
            out["bound"] = self.BOUND_FACTOR * out["bound"]
        if classes is not None:
            names = list(classes)
            self.grow(len(names))
            k = len(names)
            out["classes"] = names
            counts = zip(names, self.class_labeled[:k].tolist(), self.class_mistakes[:k].tolist(),
                         self.class_predicted[:k].tolist(), strict=True)
            out["per_class"] = [{"class": name, "labeled": a, "mistakes": b, "predicted": c}
                                for name, a, b, c in counts]
            out["confusion"] = self.confusion[:k, :k].tolist()
        return out

    def get_state(self) -> dict[str, Any]:
        """:meth:`RunningStats.get_state` and ``"classes"``: the per-class counts and the
        confusion matrix, in the model's row order."""
        state = super().get_state()
        state["classes"] = {
            "labeled": self.class_labeled.tolist(),
            "mistakes": self.class_mistakes.tolist(),
            "predicted": self.class_predicted.tolist(),
            "confusion": self.confusion.tolist(),
        }
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`get_state` returned; a binary state (no ``"classes"``) starts the
        per-class counts at 0."""
        super().set_state(state)
        held = state.get("classes") or {}
        self.class_labeled = np.asarray(held.get("labeled", []), dtype=np.int64).reshape(-1)
        self.class_mistakes = np.asarray(held.get("mistakes", []), dtype=np.int64).reshape(-1)
        self.class_predicted = np.asarray(held.get("predicted", []), dtype=np.int64).reshape(-1)
        k = len(self.class_labeled)
        self.confusion = np.asarray(held.get("confusion") or np.zeros((k, k)), dtype=np.int64).reshape(k, k)
