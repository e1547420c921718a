"""One partition's decoded batch cut into the steps that process it, in offset order (pure).

A batch holds *learnable rows* (events decoded and accepted by the model: each is scored, learned
when labeled, and predicted) and *label records* (late labels of earlier events), in offset
order; mixing points fall among them. A partition's outputs and state are a function of its
records in offset order, however polls cut the stream, only if two rules hold:

* **a label record is joined at its place**: after every learnable row before it, before every
  learnable row after it (:func:`join_points`);
* **a mixing point falls at an exact record**: right after the learnable row that is the E-th
  labeled example since the last mixing point, before anything after that row; joined labels do
  not count (:func:`mix_points`).

:func:`plan` applies both and also ends a run of rows learned together where the rows were
vectorized apart (``breaks``: named and dense rows are never learned together, and wide dense
rows go in blocks). Where a mixing point and label records fall between the same two rows, the
mix comes first: the label record comes after the row that completed the E-th example.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Learn:
    """Score, learn and predict the learnable rows ``[start, stop)`` together."""

    start: int
    stop: int


@dataclass(frozen=True, slots=True)
class Join:
    """Join the label record at batch position ``position`` to its kept event."""

    position: int


@dataclass(frozen=True, slots=True)
class Mix:
    """A mixing point right after learnable row ``after`` (before the record that follows it)."""

    after: int


Segment = Learn | Join | Mix


def join_points(rows: Sequence[int], labels: Iterable[int]) -> list[tuple[int, int]]:
    """Where label records fall among the learnable rows: ``(k, i)`` for the label record at
    batch position ``i``, joined after learnable rows ``[0, k)`` and before row ``k``; in
    offset order. ``rows`` are the learnable rows' batch positions, ascending.

    >>> join_points([0, 2, 3], [4, 1])
    [(1, 1), (3, 4)]
    """
    return [(bisect.bisect_left(rows, i), i) for i in sorted(labels)]


def mix_points(labeled: Sequence[int], every: int, remaining: int) -> list[int]:
    """The learnable rows right after which a mixing point falls: the ``remaining``-th labeled
    row, then every ``every``-th labeled row after it. ``every`` 0: mixing is off, none.
    ``labeled[k]`` is true where row ``k`` is labeled (a flag, or its label's code).

    >>> mix_points([True, False, True, True, True, True], every=2, remaining=1)
    [0, 3, 5]
    >>> mix_points([True, True], every=0, remaining=0)
    []
    >>> mix_points([-1, 0, 1, 3], every=1, remaining=1)  # label codes: 0 is unlabeled
    [0, 2, 3]
    """
    if every <= 0:
        return []
    if remaining < 1:
        raise ValueError(f"remaining must be at least 1 with mixing on, not {remaining}")
    out, due = [], remaining
    for k, flag in enumerate(labeled):
        if flag:
            due -= 1
            if due == 0:
                out.append(k)
                due = every
    return out


def plan(
    rows: Sequence[int],
    labeled: Sequence[int],
    labels: Iterable[int] = (),
    *,
    breaks: Iterable[int] = (),
    every: int = 0,
    remaining: int = 0,
) -> list[Segment]:
    """The segments that process one partition's batch, in offset order.

    ``rows``: the learnable rows' batch positions, ascending; ``labeled[k]``: true where learnable
    row ``k`` is labeled (a flag, or its label's code, 0 for none); ``labels``: the label
    records' batch positions; ``breaks``: learnable rows that start a run vectorized apart from
    the rows before it; ``every``: the mixing interval E in labeled examples (0: off);
    ``remaining``: labeled examples to learn before the partition's next mixing point.

    >>> plan([0, 1, 3, 4], [True, True, True, False], [2], every=2, remaining=2)
    [Learn(start=0, stop=2), Mix(after=1), Join(position=2), Learn(start=2, stop=4)]
    >>> plan([0, 1, 2], [True, True, True], breaks=[1])
    [Learn(start=0, stop=1), Learn(start=1, stop=3)]
    >>> plan([], [], [0, 1])
    [Join(position=0), Join(position=1)]
    """
    n = len(rows)
    if len(labeled) != n:
        raise ValueError(f"{n} learnable rows, {len(labeled)} labeled flags")
    mixes = {k + 1 for k in mix_points(labeled, every, remaining)}
    joins: dict[int, list[int]] = {}
    for k, i in join_points(rows, labels):
        joins.setdefault(k, []).append(i)
    bounds = sorted({0, n, *mixes, *joins, *(b for b in breaks if 0 < b < n)})
    out: list[Segment] = []
    for j, at in enumerate(bounds):
        if at in mixes:
            out.append(Mix(at - 1))
        out.extend(Join(i) for i in joins.get(at, ()))
        if j + 1 < len(bounds):
            out.append(Learn(at, bounds[j + 1]))
    return out
