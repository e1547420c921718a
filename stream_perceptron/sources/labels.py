"""Labels to -1/+1: the fixed spellings, and class names read by ``positive_class`` and
``negative_class``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stream_perceptron.errors import SourceError
from stream_perceptron.sources.base import BadRecord

__all__ = [
    "POSITIVE_CLASS_SETTING",
    "Classes",
    "label_from_text",
    "label_from_value",
    "no_positive_class",
]

_POSITIVE_TEXT = frozenset({"1", "+1", "1.0", "+1.0", "true"})
_NEGATIVE_TEXT = frozenset({"-1", "0", "-1.0", "0.0", "false"})

POSITIVE_CLASS_SETTING = "SP_LIMITS__POSITIVE_CLASS or [limits] in --config"
"""Where a user names the positive class, for ``fit``, ``produce`` and the worker alike."""

_LABEL_HELP = f"not -1/1, 0/1 or true/false (name the positive class with {POSITIVE_CLASS_SETTING})"


@dataclass(frozen=True)
class Classes:
    """The class names of string labels (``limits.positive_class``, ``limits.negative_class``)."""

    positive: str | None = None
    negative: str | None = None


def no_positive_class(spec: str, positive_class: str | None, count: int, positives: int) -> None:
    """Raise :class:`SourceError` when a positive class is named but no label of ``spec`` is it:
    a misspelt name would otherwise make every example -1."""
    if positive_class is not None and count and not positives:
        raise SourceError(
            f"{spec}: no label is the positive class {positive_class!r} ({POSITIVE_CLASS_SETTING}),"
            f" so all {count} examples would be -1"
        )


def label_from_text(text: str, classes: Classes) -> int:
    value = text.strip()
    if not value:
        raise BadRecord("empty label")
    if classes.positive is not None and value == classes.positive.strip():
        return 1
    if classes.negative is not None and value == classes.negative.strip():
        return -1
    if classes.positive is not None:
        if classes.negative is None:
            return -1  # one class against the rest
        raise BadRecord(
            f"label {value!r} is neither the positive class {classes.positive!r}"
            f" nor the negative class {classes.negative!r}"
            " (SP_LIMITS__POSITIVE_CLASS, SP_LIMITS__NEGATIVE_CLASS)"
        )
    key = value.lower()
    if key in _POSITIVE_TEXT:
        return 1
    if key in _NEGATIVE_TEXT:
        return -1
    raise BadRecord(f"label {value!r} is {_LABEL_HELP}")


def label_from_value(value: object, classes: Classes) -> int:
    """Label of a JSON or river value: bools and numbers fixed, strings via positive_class."""
    if isinstance(value, bool | np.bool_):
        return 1 if value else -1
    if isinstance(value, str):
        return label_from_text(value, classes)
    if isinstance(value, int | float | np.integer | np.floating):
        if value == 1:
            return 1
        if value in (0, -1):
            return -1
    raise BadRecord(f"label {value!r} is {_LABEL_HELP}")
