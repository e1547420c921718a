"""Labels to -1/+1 for fit and produce: a dataset's values by the input contract's rule
(:func:`~stream_perceptron.contract.label_sign`), and text labels (a CSV cell) read as class
names, or as the values they spell. :class:`SeenClasses` keeps the label a source gave for each
sign, as the source wrote it, so that a model ``fit`` on it answers with the dataset's classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stream_perceptron.contract import label_sign
from stream_perceptron.errors import SourceError
from stream_perceptron.sources.base import BadRecord

__all__ = [
    "POSITIVE_CLASS_SETTING",
    "Classes",
    "SeenClasses",
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


class SeenClasses:
    """The first label a source gave for each sign, as the dataset has it: a class name, a bool,
    or a number (an integral one as an int: a CSV's ``1`` is ``1``). A label of one class against
    the rest is not kept (it names no class); a source whose labels are -1/+1 already keeps them.

    >>> seen = SeenClasses()
    >>> seen.note(1, True), seen.note(-1, False), seen.note(1, "x"), seen.names()
    (1, -1, 1, (False, True))
    """

    def __init__(self) -> None:
        self.negative: Any = None
        self.positive: Any = None

    def note(self, sign: int, label: Any) -> int:
        """Keep ``label`` for ``sign`` if it is the first; returns ``sign``."""
        if sign > 0:
            if self.positive is None:
                self.positive = label
        elif self.negative is None:
            self.negative = label
        return sign

    def names(self) -> tuple[Any, Any]:
        """``(negative, positive)``, None for a sign not seen."""
        return self.negative, self.positive


def _as_written(value: object) -> object:
    """A label value as a dataset holds it: a numpy scalar as Python's, an integral float an int."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, str):
        value = item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def no_positive_class(spec: str, positive_class: str | None, count: int, positives: int) -> None:
    """Raise :class:`SourceError` when a positive class is named but no label of ``spec`` is it:
    a misspelt name would otherwise make every example -1."""
    if positive_class is not None and count and not positives:
        raise SourceError(
            f"{spec}: no label is the positive class {positive_class!r} ({POSITIVE_CLASS_SETTING}),"
            f" so all {count} examples would be -1"
        )


def label_from_text(text: str, classes: Classes, seen: SeenClasses | None = None) -> int:
    """The sign of a text label: a class name; with a positive class only, -1 for any other text
    (one class against the rest); else the value it spells, ``true``/``false`` (any case) or a
    number (``1``, ``+1.0``, ``0``, ``-1``…), signed by the contract's rule. ``seen`` keeps the
    class name, or the value spelled."""
    value = text.strip()
    if not value:
        raise BadRecord("empty label")
    positive, negative = (None if c is None else c.strip() for c in (classes.positive, classes.negative))
    sign = label_sign(value, positive, negative)
    if sign is not None:
        return sign if seen is None else seen.note(sign, value)
    if classes.positive is not None:
        if classes.negative is None:
            return -1  # one class against the rest
        raise BadRecord(
            f"label {value!r} is neither the positive class {classes.positive!r}"
            f" nor the negative class {classes.negative!r}"
            " (SP_LIMITS__POSITIVE_CLASS, SP_LIMITS__NEGATIVE_CLASS)"
        )
    spelled = _spelled(value)
    sign = label_sign(spelled)
    if sign is None:
        raise BadRecord(f"label {value!r} is {_LABEL_HELP}")
    return sign if seen is None else seen.note(sign, _as_written(spelled))


def _spelled(text: str) -> object:
    """The bool or number ``text`` spells (ASCII only), else ``text`` itself."""
    key = text.lower()
    if key in ("true", "false"):
        return key == "true"
    try:
        return float(key) if key.isascii() else text
    except ValueError:
        return text


def label_from_value(value: object, classes: Classes, seen: SeenClasses | None = None) -> int:
    """Label of a JSON or river value: a string as :func:`label_from_text` reads it, anything
    else by the contract's rule (``seen`` keeps it as the dataset has it)."""
    if isinstance(value, str):
        return label_from_text(value, classes, seen)
    sign = label_sign(value)
    if sign is None:
        raise BadRecord(f"label {value!r} is {_LABEL_HELP}")
    return sign if seen is None else seen.note(sign, _as_written(value))
