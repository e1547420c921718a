r"""The two classes as a model was taught them (pure: numpy only).

The update works on signs :math:`y \in \{-1, +1\}`. Users teach labels of their own: booleans
(river's datasets), ±1, 0/1, or two class names. :class:`LabelSpace` turns each label into its
sign for the update, by the input contract's rule (:func:`~stream_perceptron.contract.label_sign`:
``True``, ``1`` and the positive class are +1; ``False``, ``0``, ``-1`` and the negative class are
−1: **0 is the negative class**), and remembers the labels it was given, so that a prediction
answers in the same space. An unlabeled row is marked by an explicit mask, or by ``None``/NaN in
its place; never by 0.

The first positive and the first negative label taught are the ones predicted. Before a class
has been taught, its label is inferred from the other (``True`` ↔ ``False``, ``1`` ↔ ``-1``,
``0`` → ``1``); before any label at all the classes are ``False``/``True``, as river's are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from stream_perceptron.contract import Signs, array_signs, label_sign


def _plain(label: Any) -> Any:
    """A numpy scalar as the Python value it holds (``np.True_`` → ``True``)."""
    return label.item() if isinstance(label, np.generic) else label


def _missing(y: Any) -> bool:
    return y is None or (isinstance(y, float | np.floating) and math.isnan(y))


class LabelSpace:
    """Labels ↔ signs, remembering the labels taught.

    >>> space = LabelSpace()
    >>> space.sign(0), space.sign(1), space.label(1), space.label(-1)
    (-1, 1, 1, 0)
    >>> LabelSpace(("ham", "spam")).sign("spam")
    1
    """

    def __init__(self, classes: tuple[Any, Any] | None = None) -> None:
        self.classes = classes
        self.negative: Any = None if classes is None else classes[0]
        self.positive: Any = None if classes is None else classes[1]

    def _sign_or_none(self, y: Any) -> int | None:
        classes = (None, None) if self.classes is None else self.classes
        return label_sign(y, classes[1], classes[0])

    def _refuse(self, y: Any) -> ValueError:
        named = "" if self.classes is None else f" or the classes {self.classes[0]!r}/{self.classes[1]!r}"
        return ValueError(f"labels are True/False, -1/+1 or 0/1{named} (0 is the negative class), got {y!r}")

    def sign(self, y: Any) -> int:
        """The sign of one label, remembered as taught."""
        s = self._sign_or_none(y)
        if s is None:
            raise self._refuse(y)
        self._remember(s, y)
        return s

    def _remember(self, sign: int, y: Any) -> None:
        if sign > 0:
            if self.positive is None:
                self.positive = _plain(y)
        elif self.negative is None:
            self.negative = _plain(y)

    def signs(self, y: Iterable[Any], n: int, labeled: Iterable[bool] | None = None) -> Signs:
        """Signs of ``n`` labels, 0 where a row is unlabeled: where ``labeled`` is False, or
        where ``y`` holds None or NaN. The labels of unlabeled rows are not looked at."""
        arr = np.asarray(y if isinstance(y, np.ndarray) else list(y))
        if arr.shape != (n,):
            raise ValueError(f"y has shape {arr.shape}, expected ({n},)")
        mask = np.ones(n, dtype=np.bool_) if labeled is None else np.array(  # a copy: cleared below
            labeled if isinstance(labeled, np.ndarray) else list(labeled), dtype=np.bool_)
        if mask.shape != (n,):
            raise ValueError(f"labeled has shape {mask.shape}, expected ({n},)")
        signs = self._signs_of(arr, mask)
        signs[~mask] = 0
        for s in (1, -1):
            if (self.positive if s > 0 else self.negative) is None:
                hit = signs == s
                if hit.any():
                    self._remember(s, arr[int(hit.argmax())])
        return signs

    def _signs_of(self, arr: npt.NDArray[Any], mask: npt.NDArray[np.bool_]) -> Signs:
        """The signs of ``arr`` where ``mask`` holds; clears ``mask`` where a label is missing."""
        kind = arr.dtype.kind
        if kind in "biuf":
            if kind == "f":
                mask &= ~np.isnan(arr)
            signs, ok = array_signs(arr)
            bad = mask & ~ok
            if bad.any():
                raise self._refuse(arr[int(bad.argmax())])
            return signs
        signs = np.zeros(len(arr), dtype=np.int8)  # objects or strings: one at a time
        for i in np.flatnonzero(mask):
            if _missing(arr[i]):
                mask[i] = False
                continue
            s = self._sign_or_none(arr[i])
            if s is None:
                raise self._refuse(arr[i])
            signs[i] = s
        return signs

    def label(self, sign: int) -> Any:
        """The label predicted for a sign: the one taught, else inferred from the other class."""
        if sign > 0:
            if self.positive is not None:
                return self.positive
            other = self.negative
            if other is None or isinstance(other, bool):
                return True
            return type(other)(1) if isinstance(other, int | float) else True
        if self.negative is not None:
            return self.negative
        other = self.positive
        if other is None or isinstance(other, bool):
            return False
        return type(other)(-1) if isinstance(other, int | float) else False

    def get_state(self) -> list[Any] | None:
        """The labels taught as ``[negative, positive]`` (None for one not taught), or None."""
        if self.negative is None and self.positive is None:
            return None
        return [self.negative, self.positive]

    def set_state(self, state: list[Any] | None) -> None:
        """Put back what :meth:`get_state` returned (None: nothing taught, as a checkpoint written
        before labels were kept restores)."""
        negative, positive = state if state is not None else (None, None)
        configured = self.classes if self.classes is not None else (None, None)
        self.negative = negative if negative is not None else configured[0]
        self.positive = positive if positive is not None else configured[1]


__all__ = ["LabelSpace", "Signs"]
