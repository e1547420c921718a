r"""The classes of a K-class perceptron and the rows of W they own (pure: numpy only).

A class is a label, any hashable value (a string, an int, a bool, a tuple); labels equal as
dict keys are one class (``True`` and ``1``; ``np.str_("a")`` and ``"a"``: a numpy scalar is
taken as the Python value it holds). ``None`` and NaN are no class: in ``learn_many`` they mark
an unlabeled row.

**Row order.** The classes given (``classes=``) hold the first rows, in their order, and are
active from the start. Another class, when the model learns classes as they appear, takes the
next row at the record where it first appears as a label: it is active from that record on (its
row is zero there, and competes), and never before, so that a stream cut into other batches
makes the same rows. An unlabeled row never adds a class. The order matters: among tied scores
the lowest row wins.

**Bounds.** A model given ``classes=`` takes those labels alone, unless told to learn others
(``learn_classes=True``); ``max_classes`` bounds how many classes a model holds. A label past
either is refused: :meth:`ClassSpace.refusals` says which rows of a batch would be, and why,
without changing anything, so that a caller can set them aside first.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

RowArray = npt.NDArray[np.int32]
"""Rows of W, one per example: the row of its class, −1 for an unlabeled example."""

UNLABELED = -1

Walk = tuple[RowArray, list[Hashable], list[int], dict[int, str]]
"""What :meth:`ClassSpace._walk` finds in a batch's labels."""


def plain(y: Any) -> Any:
    """A label as the class it names: a numpy scalar as the Python value it holds."""
    return y.item() if isinstance(y, np.generic) else y


def missing(y: Any) -> bool:
    """Whether ``y`` marks an unlabeled row: None or NaN."""
    return y is None or (isinstance(y, float | np.floating) and math.isnan(y))


def class_label(y: Any) -> Hashable:
    """``y`` as a class (:func:`plain`), or a ValueError saying why it is none."""
    y = plain(y)
    if missing(y):
        raise ValueError(f"label {y!r} is no class: None and NaN mark an unlabeled row")
    try:
        hash(y)
    except TypeError:
        raise ValueError(f"label {y!r} is no class: a class is a hashable value") from None
    return y  # type: ignore[no-any-return]


class ClassSpace:
    """Class names ↔ rows of W, in row order (see the module's doc).

    >>> space = ClassSpace(["cat", "dog"], learn=True)
    >>> rows, new = space.rows([None, "dog", "owl", "cat", "owl"])
    >>> rows.tolist(), new, space.names
    ([-1, 1, 2, 0, 2], [2], ('cat', 'dog', 'owl'))
    >>> ClassSpace(["cat", "dog"]).refusals(["cat", "owl"])
    {1: "label 'owl' is not one of the classes ('cat', 'dog') given by classes="}
    """

    def __init__(self, classes: Iterable[Any] | None = None, learn: bool | None = None,
                 limit: int | None = None) -> None:
        given = [] if classes is None else [class_label(c) for c in classes]
        if len(set(given)) != len(given):
            raise ValueError(f"the classes repeat: {given!r}")
        if limit is not None and (limit < 1 or len(given) > limit):
            raise ValueError(f"max_classes={limit} for {len(given)} classes given")
        self.given: tuple[Hashable, ...] = tuple(given)
        self.learn = classes is None if learn is None else learn
        self.limit = limit
        self.index: dict[Hashable, int] = {}
        self.names: tuple[Hashable, ...] = ()
        self.extend(given)

    def __len__(self) -> int:
        return len(self.names)

    def extend(self, names: Iterable[Hashable]) -> None:
        """Give each of ``names`` not a class yet the next row."""
        for name in names:
            if name not in self.index:
                self.index[name] = len(self.index)
        self.names = tuple(self.index)

    def refusal(self, y: Hashable, known: int) -> str | None:
        """Why a label not a class yet is refused, ``known`` classes being held; None when it
        may become one."""
        if not self.learn:
            return f"label {y!r} is not one of the classes {self.given!r} given by classes="
        if self.limit is not None and known >= self.limit:
            return (f"label {y!r} would be class {known + 1}; the model holds at most"
                    f" max_classes={self.limit}")
        return None

    def refusals(self, y: Sequence[Any] | npt.NDArray[Any],
                 labeled: Sequence[bool] | npt.NDArray[np.bool_] | None = None) -> dict[int, str]:
        """``{row: why}`` for the labels of a batch that :meth:`rows` would refuse, in row order
        (the classes the rows before each would add counted), changing nothing."""
        return self._walk(y, labeled, strict=False)[3]

    def rows(self, y: Sequence[Any] | npt.NDArray[Any],
             labeled: Sequence[bool] | npt.NDArray[np.bool_] | None = None) -> tuple[RowArray, list[int]]:
        """The row of each label (−1 where unlabeled: ``labeled`` False, None or NaN), new classes
        added in order of first appearance; and the first row of each class added. A refused
        label raises a ValueError, and no class is added then."""
        n = len(y)
        if labeled is not None and len(labeled) != n:
            raise ValueError(f"labeled has {len(labeled)} entries for {n} labels")
        rows, added, firsts, _ = self._walk(y, labeled, strict=True)
        self.extend(added)
        return rows, firsts

    def _walk(self, y: Sequence[Any] | npt.NDArray[Any],
              labeled: Sequence[bool] | npt.NDArray[np.bool_] | None, strict: bool) -> Walk:
        """Each row's class row (−1: unlabeled or refused), the classes the rows would add in
        order of first appearance, the first row of each, and the rows refused (``strict``: a
        ValueError at the first)."""
        mask = None if labeled is None else np.asarray(labeled, dtype=np.bool_)
        if isinstance(y, np.ndarray) and y.dtype.kind in "biufUS":
            return self._walk_array(y, mask, strict)
        values = y.tolist() if isinstance(y, np.ndarray) else list(y)
        marks = None if mask is None else mask.tolist()
        out = [UNLABELED] * len(values)
        lookup = dict(self.index)  # and the classes added, and the values found equal to one
        added: list[Hashable] = []
        firsts: list[int] = []
        refused: dict[int, str] = {}
        for i, v in enumerate(values):
            if marks is not None and not marks[i]:
                continue
            try:
                out[i] = lookup[v]
                continue
            except (KeyError, TypeError):
                pass
            if missing(v):
                continue
            label = class_label(v)
            r = lookup.get(label)
            if r is None:
                why = self.refusal(label, len(self.index) + len(added))
                if why is not None:
                    if strict:
                        raise ValueError(why)
                    refused[i] = why
                    continue
                r = len(self.index) + len(added)
                added.append(label)
                firsts.append(i)
            lookup[label] = lookup[v] = r
            out[i] = r
        return np.array(out, dtype=np.int32), added, firsts, refused

    def _walk_array(self, y: npt.NDArray[Any], mask: npt.NDArray[np.bool_] | None, strict: bool) -> Walk:
        """:meth:`_walk` of an array of bools, numbers or text: each distinct value looked at
        once (NaN is unlabeled)."""
        at = np.arange(len(y)) if mask is None else np.flatnonzero(mask)
        values = y[at]
        if values.dtype.kind == "f":
            keep = ~np.isnan(values)
            at, values = at[keep], values[keep]
        uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # the values in order of first appearance
        codes, added, firsts, why = self._walk(uniq[order].tolist(), None, strict)
        code = np.empty(len(uniq), dtype=np.int32)
        code[order] = codes
        inverse = inverse.ravel()
        rows = np.full(len(y), UNLABELED, dtype=np.int32)
        rows[at] = code[inverse]
        reasons = {int(order[j]): text for j, text in why.items()}
        refused = {i: reasons[u] for i, u in zip(at.tolist(), inverse.tolist(), strict=True) if u in reasons}
        return rows, added, at[first[order]][firsts].tolist(), refused

    def get_state(self) -> list[Any]:
        """The classes in row order."""
        return list(self.names)

    def set_state(self, names: Sequence[Any]) -> None:
        """The classes of a state: the classes given must be the first of them, or they theirs
        (a state of fewer classes gains the rest, zero rows, after its own); ValueError else."""
        restored = [_name(c) for c in names]
        k = min(len(restored), len(self.given))
        if list(self.given[:k]) != restored[:k]:
            raise ValueError(f"the state's classes {restored!r} do not begin with the classes"
                             f" {list(self.given)!r} given by classes=")
        self.index = {}
        self.extend([*restored, *self.given[k:]])


def _name(name: Any) -> Hashable:
    """A class as a state holds it: a list (a tuple read back from JSON) is a tuple."""
    return tuple(_name(n) for n in name) if isinstance(name, list) else plain(name)


__all__ = ["UNLABELED", "ClassSpace", "RowArray", "class_label", "missing", "plain"]
