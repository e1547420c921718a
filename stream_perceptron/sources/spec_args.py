"""The ``key=value,...`` arguments of the generator specs, and the limits they share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stream_perceptron.contract import NotANumber, NotFinite, finite_text
from stream_perceptron.errors import SourceError

__all__ = ["MAX_D", "check", "parse_args"]

MAX_D = 100_000
"""The widest x of a generated stream: the worker's default ``limits.max_features``."""


def parse_args(scheme: str, text: str, defaults: Mapping[str, int | float]) -> dict[str, Any]:
    """``key=value,...`` -> dict; a key's type is its default's type (int or float)."""
    out: dict[str, Any] = dict(defaults)
    seen: set[str] = set()
    for piece in text.split(","):
        if not piece.strip():
            continue
        key, eq, raw = piece.partition("=")
        key, raw = key.strip(), raw.strip()
        if not eq or not key or not raw:
            raise SourceError(f"{scheme}: bad key=value {piece.strip()!r}")
        if key not in defaults:
            raise SourceError(f"{scheme}: unknown key {key!r} (known: {', '.join(defaults)})")
        if key in seen:
            raise SourceError(f"{scheme}: key {key!r} given twice")
        seen.add(key)
        out[key] = _parse_value(scheme, key, raw, isinstance(defaults[key], int))
    return out


def _parse_value(scheme: str, key: str, raw: str, integer: bool) -> int | float:
    try:
        number = finite_text(raw)
    except NotANumber:
        kind = "an integer" if integer else "a number"
        raise SourceError(f"{scheme}: {key}={raw!r} is not {kind}") from None
    except NotFinite as exc:
        raise SourceError(f"{scheme}: {key}={raw!r} {exc}") from None
    if not integer:
        return number
    try:
        return int(raw)
    except ValueError:
        if number.is_integer():
            return int(number)
        raise SourceError(f"{scheme}: {key}={raw!r} is not an integer") from None


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SourceError(message)
