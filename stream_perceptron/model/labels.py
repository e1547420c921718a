r"""The two classes as a model was taught them (pure: numpy only).

The update works on signs :math:`y \in \{-1, +1\}`. Users teach labels of their own: booleans
(river's datasets), ±1, 0/1, or two class names. :class:`LabelSpace` turns each label into its
sign for the update and remembers the labels it was given, so that a prediction answers in the
same space. An unlabeled row is marked by an explicit mask, or by ``None``/NaN in its place;
never by 0.

* **Without class names**, a label is signed by the input contract's rule
  (:func:`~stream_perceptron.contract.label_sign`): ``True`` and ``1`` are +1; ``False``, ``0``
  and ``-1`` are −1: **0 is the negative class**. Any other label (a string, 2) is refused with a
  :class:`ValueError` that says to name the classes.
* **With class names** ``(negative, positive)``, those two labels are the only ones taken (by
  equality, as a dict finds a key: ``True`` is ``1``); any other is refused, so a stream of other
  labels cannot be learned silently as one class.

The first positive and the first negative label taught are the ones predicted (the named
classes, when given). Before a class has been taught, its label is inferred from the other
(``True`` ↔ ``False``, ``1`` → ``0``, ``0`` or ``-1`` → ``1``: 0 is the negative class, so a
0/1 stream answers 0 from its first example); before any label at all the classes are
``False``/``True``, as river's are.
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


def check_classes(classes: Any) -> tuple[Any, Any] | None:
    """``classes`` as ``(negative, positive)``, or None; a ValueError for anything but two
    distinct hashable labels (a model of more classes is not this binary one)."""
    if classes is None:
        return None
    try:
        names = tuple(classes)
    except TypeError:
        raise ValueError(f"classes is two labels, (negative, positive); got {classes!r}") from None
    if len(names) != 2:
        raise ValueError(
            f"classes is two labels, (negative, positive): this perceptron is binary; got {len(names)}"
            f" ({classes!r})"
        )
    negative, positive = (_plain(c) for c in names)
    try:
        hash(negative), hash(positive)
    except TypeError:
        raise ValueError(f"the classes must be hashable labels; got {classes!r}") from None
    if bool(negative == positive) or _missing(negative) or _missing(positive):
        raise ValueError(f"classes is two distinct labels, neither None nor NaN; got {classes!r}")
    return negative, positive


class LabelSpace:
    """Labels ↔ signs, remembering the labels taught.

    >>> space = LabelSpace()
    >>> space.sign(0), space.sign(1), space.label(1), space.label(-1)
    (-1, 1, 1, 0)
    >>> LabelSpace(("ham", "spam")).sign("spam")
    1
    >>> LabelSpace(("ham", "spam")).sign(True)
    Traceback (most recent call last):
    ...
    ValueError: label True is not one of the classes ('ham', 'spam') given by classes=

    ``known`` maps each label taught so far (and the named classes) to its sign: a dict lookup
    for the labels a stream repeats. A class name restored with a state (a model ``fit`` on a
    dataset of named classes) is taken as a label again. ``pair`` is the labels predicted,
    ``(label(-1), label(1))``.
    """

    def __init__(self, classes: tuple[Any, Any] | None = None) -> None:
        self.classes = check_classes(classes)
        self.negative: Any = None if self.classes is None else self.classes[0]
        self.positive: Any = None if self.classes is None else self.classes[1]
        self.known: dict[Any, int] = {}
        if self.classes is not None:
            self.known.update({self.classes[0]: -1, self.classes[1]: 1})
        self.pair: tuple[Any, Any] = (self.label(-1), self.label(1))

    def _sign_or_none(self, y: Any) -> int | None:
        try:
            s = self.known.get(y)
        except TypeError:  # unhashable: no label
            return None
        if s is not None or self.classes is not None:
            return s
        return label_sign(y)

    def _refuse(self, y: Any) -> ValueError:
        if self.classes is not None:
            return ValueError(
                f"label {_plain(y)!r} is not one of the classes {self.classes!r} given by classes=")
        return ValueError(
            f"label {_plain(y)!r} is not True/False, -1/+1 or 0/1 (0 is the negative class); to learn"
            " two named classes, give them: Perceptron(classes=(negative, positive))"
        )

    def sign(self, y: Any) -> int:
        """The sign of one label, remembered as taught."""
        s = self.sign_of(y)
        self._remember(s, y)
        return s

    def sign_of(self, y: Any) -> int:
        """The sign of one label, not remembered (:meth:`remember` it once it is learned);
        ValueError for anything that is not a label."""
        s = self._sign_or_none(y)
        if s is None:
            raise self._refuse(y)
        return s

    def remember(self, sign: int, y: Any) -> None:
        """Take ``y``, of sign ``sign``, as taught."""
        self._remember(sign, y)

    def _remember(self, sign: int, y: Any) -> None:
        y = _plain(y)
        if sign > 0:
            if self.positive is None:
                self.positive = y
        elif self.negative is None:
            self.negative = y
        self.pair = (self.label(-1), self.label(1))
        if len(self.known) < 8:  # True, 1 and 1.0 are one key: a few entries at most
            try:
                self.known.setdefault(y, sign)
            except TypeError:
                pass

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
        if kind in "biuf" and self.classes is None:
            if kind == "f":
                mask &= ~np.isnan(arr)
            signs, ok = array_signs(arr)
            bad = mask & ~ok
            if bad.any():
                raise self._refuse(arr[int(bad.argmax())])
            return signs
        signs = np.zeros(len(arr), dtype=np.int8)  # named classes, objects or strings: one at a time
        values = arr.tolist()
        for i in np.flatnonzero(mask).tolist():
            v = values[i]
            if _missing(v):
                mask[i] = False
                continue
            s = self._sign_or_none(v)
            if s is None:
                raise self._refuse(v)
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
        return type(other)(0) if isinstance(other, int | float) else False

    def get_state(self) -> list[Any] | None:
        """The labels taught as ``[negative, positive]`` (None for one not taught), or None."""
        if self.negative is None and self.positive is None:
            return None
        return [self.negative, self.positive]

    def set_state(self, state: list[Any] | None) -> None:
        """Put back what :meth:`get_state` returned (None: nothing taught, as a checkpoint written
        before labels were kept restores). Named classes stay the ones given."""
        negative, positive = state if state is not None else (None, None)
        if self.classes is not None:
            negative, positive = self.classes
        self.negative, self.positive = negative, positive
        self.known.clear()  # the same dict: a model holds it for its per-call path
        if self.classes is not None:
            self.known.update({self.classes[0]: -1, self.classes[1]: 1})
        self.pair = (self.label(-1), self.label(1))
        for sign, label in ((-1, negative), (1, positive)):
            # a label taught is taken again (a class name too); one the contract signs otherwise is not
            if label is not None and label_sign(label) in (None, sign):
                self._remember(sign, label)

    def name(self, negative: Any, positive: Any) -> None:
        """Take ``(negative, positive)`` as the labels taught (the classes a dataset named; None
        leaves one as it is)."""
        self.set_state([negative if negative is not None else self.negative,
                        positive if positive is not None else self.positive])


__all__ = ["LabelSpace", "Signs", "check_classes"]
