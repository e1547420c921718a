"""The per-class part of a K-class statistics record, as ``watch`` and ``dashboard`` show it.

A K-class worker's statistics record (README, "Statistics") names its classes in row order
(``classes``), counts per class (``per_class``: labeled examples, mistakes, served predictions)
and holds the confusion matrix (``confusion``: K×K counts, rows the true class, columns the
served prediction). A reader tells it from a binary record by the ``classes`` key.

:func:`class_view` keeps of it what is shown, bounded and cleaned (:class:`ClassView`): the
:data:`CLASSES_SHOWN` classes with the most labeled examples, in row order, their rates (the
mistake rate of the class's labeled examples, the class's share of the served predictions), and
the confusion matrix cut to them; the classes not shown are summed in one "other" row and column,
so each row still sums to its labeled examples and each column to its predictions. A class name
is chosen by whoever writes the input topic: it is shown as text, cleaned
(:func:`~stream_perceptron.clean.class_text`) and cut to
:data:`~stream_perceptron.clean.MAX_CLASS_TEXT` characters. The
work is bounded by what the record holds: at most :data:`CLASSES_READ` classes are read, and every
count is checked to be a non-negative integer (else shown as unknown).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stream_perceptron.clean import MAX_CLASS_TEXT, class_text

CLASSES_SHOWN = 10
"""The classes shown of a K-class record: those with the most labeled examples."""
CLASSES_READ = 10_000
"""The most classes read of a record (a worker's hold at most ``SP_LIMITS__MAX_CLASSES``); a
record naming more has the rest left out."""


def is_class_record(rec: Mapping[str, Any]) -> bool:
    """Whether a statistics record is a K-class worker's: it has ``classes``.

    >>> is_class_record({"seen": 1, "classes": ["a", "b", "c"]}), is_class_record({"seen": 1})
    (True, False)
    """
    return "classes" in rec


def class_name(value: Any) -> str | None:
    """A class name as it is shown (:func:`~stream_perceptron.clean.class_text`), None where the
    record's is not a class name.

    >>> class_name("cat\\x1b[2J"), class_name(3), class_name(True), class_name(3.0), class_name(10**30)
    ('cat', '3', None, None, None)
    """
    return class_text(value)


def _count(value: Any) -> int | None:
    """A count: a non-negative integer, else None (a bool, a float, a negative number, anything else)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _rate(part: int | None, whole: int | None) -> float | None:
    return None if part is None or not whole else part / whole


@dataclass(frozen=True)
class ClassRow:
    """One class as shown (or the classes not shown, summed): its name (None where the record's is
    not a class name, and for the "other" row), its labeled examples, mistakes and served
    predictions, the mistake rate of its labeled examples, and its share of all the served
    predictions; None where the record does not tell."""

    name: str | None
    labeled: int | None
    mistakes: int | None
    predicted: int | None
    mistake_rate: float | None
    predicted_share: float | None

    def json(self) -> dict[str, Any]:
        return {"class": self.name, "labeled": self.labeled, "mistakes": self.mistakes,
                "mistake_rate": self.mistake_rate, "predicted": self.predicted,
                "predicted_share": self.predicted_share}


@dataclass(frozen=True)
class ClassView:
    """The per-class part of a K-class record as shown (:func:`class_view`).

    ``count``: the classes the record names; ``shown``: the classes shown, in row order;
    ``other``: the others summed (None when every class is shown), ``others`` of them;
    ``confusion``: rows the true class, columns the served prediction, in the order of ``shown``
    then "other" (None when the record holds no matrix; a cell None where it holds no count).
    """

    count: int
    shown: list[ClassRow]
    other: ClassRow | None
    others: int
    confusion: list[list[int | None]] | None

    @property
    def rows(self) -> list[ClassRow]:
        """The rows of the per-class table: the classes shown, then the other classes'."""
        return [*self.shown, *([self.other] if self.other is not None else [])]

    def json(self) -> dict[str, Any]:
        """The view as JSON (``watch --json`` and the dashboard's ``/api/state``)."""
        other = None if self.other is None else {**self.other.json(), "class": None, "classes": self.others}
        return {"count": self.count, "per_class": [row.json() for row in self.shown], "other": other,
                "confusion": self.confusion}


def class_view(rec: Mapping[str, Any], shown: int = CLASSES_SHOWN) -> ClassView | None:
    """The per-class view of a statistics record, None for a binary record (no ``classes``).

    >>> rec = {"classes": ["a", "b", "c"], "confusion": [[5, 1, 0], [2, 6, 0], [0, 0, 1]],
    ...        "per_class": [{"class": "a", "labeled": 6, "mistakes": 1, "predicted": 7},
    ...                      {"class": "b", "labeled": 8, "mistakes": 2, "predicted": 7},
    ...                      {"class": "c", "labeled": 1, "mistakes": 0, "predicted": 1}]}
    >>> view = class_view(rec, shown=2)
    >>> [(r.name, r.labeled, r.mistake_rate) for r in view.rows], view.others
    ([('a', 6, 0.16666666666666666), ('b', 8, 0.25), (None, 1, 0.0)], 1)
    >>> view.confusion
    [[5, 1, 0], [2, 6, 0], [0, 0, 1]]
    >>> class_view({"seen": 3}) is None
    True
    """
    if not is_class_record(rec):
        return None
    names, counts = _read(rec)
    read = names[:CLASSES_READ]
    predicted = sum(p or 0 for _, _, p in counts)
    chosen = _most_labeled(counts, shown)
    hidden = sorted(set(range(len(read))) - set(chosen))

    def row(name: str | None, labeled: int | None, mistakes: int | None, served: int | None) -> ClassRow:
        return ClassRow(name, labeled, mistakes, served, _rate(mistakes, labeled), _rate(served, predicted))

    rows = [row(class_name(read[i]), *counts[i]) for i in chosen]
    others = len(names) - len(chosen)
    other = None
    if others:
        other = row(None, *(sum(counts[i][k] or 0 for i in hidden) for k in range(3)))
    confusion = _confusion(rec.get("confusion"), chosen, hidden, others > 0)
    return ClassView(len(names), rows, other, others, confusion)


def most_labeled(rec: Mapping[str, Any],
                 shown: int = CLASSES_SHOWN) -> dict[str, tuple[int | None, int | None]]:
    """The labeled examples and mistakes of a K-class record's ``shown`` most labeled classes, by
    name as shown (:func:`class_name`; a record's entry that is not a class name is left out): what
    ``plot`` keeps of a record (no confusion matrix read). Empty for a binary record.

    >>> most_labeled({"classes": ["a", "b"], "per_class": [{"labeled": 2, "mistakes": 1},
    ...                                                    {"labeled": 5, "mistakes": 0}]}, shown=1)
    {'b': (5, 0)}
    """
    if not is_class_record(rec):
        return {}
    names, counts = _read(rec)
    chosen = _most_labeled(counts, shown)
    return {name: (counts[i][0], counts[i][1]) for i in chosen if (name := class_name(names[i])) is not None}


def _read(rec: Mapping[str, Any]) -> tuple[list[Any], list[tuple[int | None, int | None, int | None]]]:
    """A K-class record's class names (all of them), and the labeled examples, mistakes and served
    predictions of each of the first :data:`CLASSES_READ` (None where not a count)."""
    names = rec["classes"] if isinstance(rec["classes"], list) else []
    per_class = rec.get("per_class")
    entries = [per_class[i] if isinstance(per_class, list) and i < len(per_class)
               and isinstance(per_class[i], Mapping) else {} for i in range(min(len(names), CLASSES_READ))]
    return names, [(_count(e.get("labeled")), _count(e.get("mistakes")), _count(e.get("predicted")))
                   for e in entries]


def _most_labeled(counts: Sequence[tuple[int | None, ...]], shown: int) -> list[int]:
    """The rows of the ``shown`` classes with the most labeled examples (ties: the first rows), in
    row order."""
    return sorted(heapq.nsmallest(max(shown, 0), range(len(counts)), key=lambda i: (-(counts[i][0] or 0), i)))


def _confusion(matrix: Any, chosen: Sequence[int], hidden: Sequence[int],
               other: bool) -> list[list[int | None]] | None:
    """The confusion matrix cut to the classes ``chosen``, the ``hidden`` ones summed in a last row
    and column when there are ``other`` classes; None when ``matrix`` is not a list. Only the
    columns of classes read count, and the work is the cells the matrix holds."""
    if not isinstance(matrix, list):
        return None
    width = len(chosen) + len(hidden)
    shown = set(chosen)

    def cells(i: int) -> list[Any]:
        line = matrix[i] if i < len(matrix) else None
        return line[:width] if isinstance(line, list) else []

    def cell(line: list[Any], j: int) -> int | None:
        return _count(line[j]) if j < len(line) else None

    def summed(line: list[Any]) -> int:
        return sum(_count(v) or 0 for j, v in enumerate(line) if j not in shown)

    out: list[list[int | None]] = []
    for i in chosen:
        line = cells(i)
        out.append([cell(line, j) for j in chosen] + ([summed(line)] if other else []))
    if other:
        lines = [cells(i) for i in hidden]
        sums: list[int | None] = [sum(cell(line, j) or 0 for line in lines) for j in chosen]
        out.append([*sums, sum(summed(line) for line in lines)])
    return out


__all__ = ["CLASSES_READ", "CLASSES_SHOWN", "MAX_CLASS_TEXT", "ClassRow", "ClassView", "class_name",
           "class_view", "is_class_record", "most_labeled"]
