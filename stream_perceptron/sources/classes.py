"""Labels to -1/+1 for fit and produce: a dataset's values by the input contract's rule
(:func:`~stream_perceptron.contract.label_sign`), and text labels (a CSV cell) read as class
names, or as the values they spell."""

from __future__ import annotations

from dataclasses import dataclass

from stream_perceptron.contract import label_sign
from stream_perceptron.errors import SourceError
from stream_perceptron.sources.base import BadRecord

__all__ = [
    "POSITIVE_CLASS_SETTING",
    "Classes",
    "label_from_text",
    "label_from_value",
    "no_positive_class",
]

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
    """The sign of a text label: a class name; with a positive class only, -1 for any other text
    (one class against the rest); else the value it spells, ``true``/``false`` (any case) or a
    number (``1``, ``+1.0``, ``0``, ``-1``…), signed by the contract's rule."""
    value = text.strip()
    if not value:
        raise BadRecord("empty label")
    positive, negative = (None if c is None else c.strip() for c in (classes.positive, classes.negative))
    sign = label_sign(value, positive, negative)
    if sign is not None:
        return sign
    if classes.positive is not None:
        if classes.negative is None:
            return -1  # one class against the rest
        raise BadRecord(
            f"label {value!r} is neither the positive class {classes.positive!r}"
            f" nor the negative class {classes.negative!r}"
            " (SP_LIMITS__POSITIVE_CLASS, SP_LIMITS__NEGATIVE_CLASS)"
        )
    sign = label_sign(_spelled(value))
    if sign is None:
        raise BadRecord(f"label {value!r} is {_LABEL_HELP}")
    return sign


def _spelled(text: str) -> object:
    """The bool or number ``text`` spells (ASCII only), else ``text`` itself."""
    key = text.lower()
    if key in ("true", "false"):
        return key == "true"
    try:
        return float(key) if key.isascii() else text
    except ValueError:
        return text


def label_from_value(value: object, classes: Classes) -> int:
    """Label of a JSON or river value: a string as :func:`label_from_text` reads it, anything
    else by the contract's rule."""
    if isinstance(value, str):
        return label_from_text(value, classes)
    sign = label_sign(value)
    if sign is None:
        raise BadRecord(f"label {value!r} is {_LABEL_HELP}")
    return sign
