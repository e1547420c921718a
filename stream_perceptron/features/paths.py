"""Paths into an event: ``user.age``, ``items[0].price``, ``attributes["content-type"]``.

A path is a name, then any number of ``.name``, ``[index]`` or ``["key"]`` steps. A step into a
JSON object takes the value of that key; ``[i]`` takes the i-th element of an array (negative
counts from the end). A path that does not lead anywhere (a missing key, an index past the end,
a step into a number) finds nothing, which the spec's missing-field policy then decides.

>>> p = Path.parse('items[0]["unit price"]')
>>> p.steps
('items', 0, 'unit price')
>>> p.find({"items": [{"unit price": 4.5}]})
4.5
>>> p.find({"items": []}) is MISSING
True
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


class _Missing:
    """The type of :data:`MISSING`."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""What a path finds where nothing is (not even ``null``)."""

_NAME = re.compile(r"[A-Za-z_$@][\w$@-]*")
_INDEX = re.compile(r"\[\s*(-?\d+)\s*\]")
_QUOTED = re.compile(r'\[\s*("(?:[^"\\]|\\.)*")\s*\]')

MAX_PATH_STEPS = 32


class PathError(ValueError):
    """A path that is not written as this module reads paths."""


@dataclass(frozen=True, slots=True)
class Path:
    """A parsed path: its text as written, and its steps (str: a key; int: an index)."""

    text: str
    steps: tuple[str | int, ...]

    @classmethod
    def parse(cls, text: str) -> Path:
        """Read ``text``; raises :class:`PathError` naming what is wrong.

        >>> Path.parse("a.b[-1]").steps
        ('a', 'b', -1)
        >>> Path.parse("a..b")
        Traceback (most recent call last):
        ...
        stream_perceptron.features.paths.PathError: path 'a..b': expected a name at character 2
        """
        steps: list[str | int] = []
        pos = 0
        while pos < len(text):
            if pos == 0 or text[pos] == ".":
                start = pos if pos == 0 else pos + 1
                m = _NAME.match(text, start)
                if m is None:
                    raise PathError(f"path {text!r}: expected a name at character {start}")
                steps.append(m.group())
                pos = m.end()
            elif (m := _INDEX.match(text, pos)) is not None:
                steps.append(int(m.group(1)))
                pos = m.end()
            elif (m := _QUOTED.match(text, pos)) is not None:
                steps.append(json.loads(m.group(1)))
                pos = m.end()
            else:
                raise PathError(f"path {text!r}: unexpected {text[pos]!r} at character {pos}")
            if len(steps) > MAX_PATH_STEPS:
                raise PathError(f"path {text!r}: more than {MAX_PATH_STEPS} steps")
        if not steps:
            raise PathError("a path cannot be empty")
        return cls(text, tuple(steps))

    def find(self, event: Any) -> Any:
        """The value at this path in ``event``, or :data:`MISSING`."""
        value = event
        for step in self.steps:
            if isinstance(step, str):
                if not isinstance(value, dict):
                    return MISSING
                value = value.get(step, MISSING)
                if value is MISSING:
                    return MISSING
            else:
                if not isinstance(value, list) or not -len(value) <= step < len(value):
                    return MISSING
                value = value[step]
        return value

    def __str__(self) -> str:
        return self.text
