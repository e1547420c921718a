"""What every source is: a named, re-iterable :class:`Source` of :data:`Example` pairs, and the
helpers its readers share.

Every source yields :data:`Example` pairs ``(x, y)`` with ``y`` an ``int`` in ``{-1, +1}`` and
``x`` either a dense ``list[float]`` (in the order of :attr:`Source.feature_names`, when known)
or, for sparse sources, a ``dict[str, float]``. Sources are re-iterable: every ``iter(source)``
starts over and yields the same examples.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from stream_perceptron.contract import finite_number
from stream_perceptron.errors import SourceError

if TYPE_CHECKING:
    from stream_perceptron.sources.classes import SeenClasses

__all__ = [
    "BadRecord",
    "Chunk",
    "Example",
    "FloatArray",
    "LabelArray",
    "Source",
    "cap",
    "dense_matrix",
    "limited",
    "number",
]

Example = tuple[list[float] | dict[str, float], int]
"""``(x, y)``: features (dense list or sparse dict) and a label in ``{-1, +1}``."""

FloatArray = npt.NDArray[np.float64]
LabelArray = npt.NDArray[np.int8]
Chunk = tuple[FloatArray, LabelArray]


@dataclass(frozen=True)
class Source:
    """A named, re-iterable dataset of labeled examples.

    ``spec`` is the string it was opened from; ``n_features`` the dimension of dense ``x`` (None
    for sparse/dict sources); ``feature_names`` the column names in ``x`` order when known;
    ``length`` the number of examples when known without reading the data (after ``limit``).
    ``factory`` makes a fresh iterator over the examples; ``chunks``, when set, makes a fresh
    iterator over the same examples as ``(X, y)`` numpy blocks (used by :func:`dense_matrix`).
    ``from_file`` is True for CSV and JSONL files, whose rows are only checked as they are read.
    ``classes``, when set, is filled as the examples are read with the label the dataset gave
    for each sign (:class:`~stream_perceptron.sources.classes.SeenClasses`).
    """

    spec: str
    n_features: int | None
    feature_names: list[str] | None
    length: int | None
    factory: Callable[[], Iterator[Example]] = field(repr=False, compare=False)
    chunks: Callable[[], Iterator[Chunk]] | None = field(default=None, repr=False, compare=False)
    from_file: bool = False
    classes: SeenClasses | None = field(default=None, repr=False, compare=False)

    def __iter__(self) -> Iterator[Example]:
        """Start over: yield every example from the beginning."""
        return self.factory()


class BadRecord(Exception):
    """Internal: one record is unusable; the caller adds where (line number, example index)."""



def dense_matrix(source: Source) -> tuple[FloatArray, LabelArray]:
    """All examples of a dense source as ``X`` (float64, shape ``(n, d)``) and ``y`` (int8).

    Raises :class:`SourceError` for sparse sources (``n_features is None``) and for examples
    whose ``x`` is not a list of length ``n_features``.
    """
    d = source.n_features
    if d is None:
        raise SourceError(f"{source.spec}: sparse source (dict features) has no dense matrix")
    if source.chunks is not None:
        blocks = list(source.chunks())
        if not blocks:
            return np.empty((0, d), dtype=np.float64), np.empty(0, dtype=np.int8)
        X = np.concatenate([b[0] for b in blocks]).astype(np.float64, copy=False)
        y = np.concatenate([b[1] for b in blocks]).astype(np.int8, copy=False)
        return X, y
    rows: list[list[float]] = []
    labels: list[int] = []
    for i, (x, label) in enumerate(source):
        if not isinstance(x, list) or len(x) != d:
            raise SourceError(
                f"{source.spec}: example #{i + 1} is not a dense vector of length {d}"
            )
        rows.append(x)
        labels.append(label)
    X = np.array(rows, dtype=np.float64).reshape(len(rows), d)
    return X, np.array(labels, dtype=np.int8)



def limited(
    factory: Callable[[], Iterator[Example]], limit: int | None
) -> Callable[[], Iterator[Example]]:
    if limit is None:
        return factory

    def take() -> Iterator[Example]:
        it = factory()
        try:
            yield from itertools.islice(it, limit)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    return take


def cap(length: int | None, limit: int | None) -> int | None:
    if length is None or limit is None:
        return length
    return min(length, limit)


def number(value: object, name: str) -> float:
    """A finite float from a JSON/river feature value (:func:`~stream_perceptron.contract.finite_number`)."""
    try:
        return finite_number(value)
    except ValueError as exc:
        raise BadRecord(f"feature {name} {exc}: {value!r}") from None
