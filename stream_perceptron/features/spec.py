"""The feature spec: how an event (any JSON object, a decoded Avro record) becomes a labeled
example, declared in configuration (the config file's ``[features]`` table, or the TOML file
``SP_FEATURES__SPEC`` names).

.. code-block:: toml

    [features]
    label = "outcome.fraud"          # the label's path; absent or null: an unlabeled event
    positive = [true, "fraud"]       # the values of the positive class
    negative = [false, "legit"]      # and of the negative one (unset: every other value)
    id = "payment.id"                # joins a late label record to its event
    echo = ["payment.id", "user.id"] # copied into each prediction record

    [features.numeric]               # numbers, and booleans as 0/1; the name is the path
    "amount" = { transform = "log1p", standardize = true }
    "user.age" = { clip = [0, 120], missing = "zero" }

    [features.categorical]           # a string becomes the name "path=value"; a list, a bag
    "merchant.category" = {}
    "basket.tags" = {}

    [features.text]                  # lower-cased word tokens "path:token", counted
    "note" = { max_tokens = 64 }

Each feature's ``missing`` says what a path that finds nothing (or ``null``) does: ``absent``
(the default: no feature), ``zero`` (a numeric feature of 0) or ``dead-letter``. A kind may also
be a list of paths (``categorical = ["merchant.category"]``), each with the defaults.

The spec's :meth:`~FeatureSpec.fingerprint` covers what decides the examples (the label, the id,
the features and their options; not ``echo``): a partition's state remembers it, and a worker
whose spec has another refuses the state.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from stream_perceptron.features.paths import Path, PathError

Missing = Literal["absent", "zero", "dead-letter"]
MISSING_POLICIES: tuple[Missing, ...] = ("absent", "zero", "dead-letter")
TRANSFORMS = ("none", "log1p")
LabelValue = bool | int | str

DEFAULT_MAX_TOKENS = 256


class SpecError(ValueError):
    """A spec that cannot be used; the message names the key (``features.numeric.amount.clip``)."""


@dataclass(frozen=True, slots=True)
class Numeric:
    """A number (or a boolean, as 0/1) at ``path``, transformed, clipped, then standardized."""

    path: Path
    transform: str = "none"
    clip: tuple[float, float] | None = None
    standardize: bool = False
    missing: Missing = "absent"


@dataclass(frozen=True, slots=True)
class Categorical:
    """A string (or an integer or boolean, as its JSON text) at ``path``: the name
    ``path=value``; a list of them: one such name per element, counted."""

    path: Path
    missing: Missing = "absent"


@dataclass(frozen=True, slots=True)
class Text:
    """A string at ``path``: its lower-cased word tokens, each the name ``path:token``, counted;
    at most ``max_tokens`` tokens (the first ones)."""

    path: Path
    max_tokens: int = DEFAULT_MAX_TOKENS
    missing: Missing = "absent"


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """A parsed spec (see the module's docstring)."""

    numeric: tuple[Numeric, ...] = ()
    categorical: tuple[Categorical, ...] = ()
    text: tuple[Text, ...] = ()
    label: Path | None = None
    positive: tuple[LabelValue, ...] = ()
    negative: tuple[LabelValue, ...] = ()
    id: Path | None = None
    echo: tuple[Path, ...] = field(default=())

    @property
    def paths(self) -> tuple[Path, ...]:
        """Every feature's path, in the order the example lists the features."""
        return tuple(f.path for kind in (self.numeric, self.categorical, self.text) for f in kind)

    @property
    def standardizes(self) -> bool:
        return any(f.standardize for f in self.numeric)

    def describe(self) -> dict[str, Any]:
        """What decides the examples, as plain data (the fingerprint's input)."""
        return {
            "label": None if self.label is None else self.label.text,
            "positive": list(self.positive), "negative": list(self.negative),
            "id": None if self.id is None else self.id.text,
            "numeric": [{"path": f.path.text, "transform": f.transform,
                         "clip": None if f.clip is None else list(f.clip),
                         "standardize": f.standardize, "missing": f.missing} for f in self.numeric],
            "categorical": [{"path": f.path.text, "missing": f.missing} for f in self.categorical],
            "text": [{"path": f.path.text, "max_tokens": f.max_tokens, "missing": f.missing}
                     for f in self.text],
        }

    def fingerprint(self) -> str:
        """16 hex digits of the SHA-256 of :meth:`describe` in canonical JSON.

        >>> FeatureSpec.parse({"numeric": ["a"]}).fingerprint() == FeatureSpec.parse(
        ...     {"numeric": {"a": {}}, "echo": ["b"]}).fingerprint()
        True
        """
        canonical = json.dumps(self.describe(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @classmethod
    def parse(cls, table: Mapping[str, Any], where: str = "features") -> FeatureSpec:
        """The spec in ``table`` (the ``[features]`` table); :class:`SpecError` names the key.

        >>> FeatureSpec.parse({"numeric": {"x": {"transform": "log2"}}})
        Traceback (most recent call last):
        ...
        stream_perceptron.features.spec.SpecError: features.numeric.x.transform: 'log2' is not one of ...
        """
        known = {"numeric", "categorical", "text", "label", "positive", "negative", "id", "echo"}
        for key in table:
            if key not in known:
                raise SpecError(f"{where}.{key}: no such key (the keys: {', '.join(sorted(known))})")
        spec = cls(
            numeric=tuple(_numeric(p, o, f"{where}.numeric.{p}")
                          for p, o in _entries(table.get("numeric"), f"{where}.numeric")),
            categorical=tuple(_categorical(p, o, f"{where}.categorical.{p}")
                              for p, o in _entries(table.get("categorical"), f"{where}.categorical")),
            text=tuple(_text(p, o, f"{where}.text.{p}")
                       for p, o in _entries(table.get("text"), f"{where}.text")),
            label=_optional_path(table.get("label"), f"{where}.label"),
            positive=_values(table.get("positive"), f"{where}.positive"),
            negative=_values(table.get("negative"), f"{where}.negative"),
            id=_optional_path(table.get("id"), f"{where}.id"),
            echo=tuple(_path(p, f"{where}.echo") for p in _list(table.get("echo"), f"{where}.echo")),
        )
        if not spec.paths:
            raise SpecError(f"{where}: no features (numeric, categorical or text)")
        if (spec.positive or spec.negative) and spec.label is None:
            raise SpecError(f"{where}.positive/negative: without a label path")
        both = set(spec.positive) & set(spec.negative)
        if both:
            raise SpecError(f"{where}: {sorted(map(repr, both))[0]} is both positive and negative")
        for kind in ("numeric", "categorical", "text"):
            paths = [f.path.text for f in getattr(spec, kind)]
            if len(set(paths)) != len(paths):
                raise SpecError(f"{where}.{kind}: a path is listed twice")
        return spec


def _entries(value: Any, where: str) -> list[tuple[str, Mapping[str, Any]]]:
    """A kind's features: a table of path → options, or a list of paths."""
    if value is None:
        return []
    if isinstance(value, list):
        return [(_text_of(p, where), {}) for p in value]
    if isinstance(value, Mapping):
        out = []
        for path, options in value.items():
            if not isinstance(options, Mapping):
                raise SpecError(f"{where}.{path}: expected a table of options, got {type(options).__name__}")
            out.append((path, options))
        return out
    raise SpecError(f"{where}: expected a table of paths or a list of paths")


def _text_of(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SpecError(f"{where}: expected a path (a string), got {value!r}")
    return value


def _path(text: Any, where: str) -> Path:
    try:
        return Path.parse(_text_of(text, where))
    except PathError as exc:
        raise SpecError(f"{where}: {exc}") from None


def _optional_path(text: Any, where: str) -> Path | None:
    return None if text is None else _path(text, where)


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(f"{where}: expected a list")
    return value


def _values(value: Any, where: str) -> tuple[LabelValue, ...]:
    out = []
    for v in _list(value, where):
        if not isinstance(v, bool | int | str):
            raise SpecError(f"{where}: {v!r} is not a label value (a boolean, an integer or a string)")
        out.append(v)
    return tuple(out)


def _only(options: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in options:
        if key not in allowed:
            raise SpecError(f"{where}.{key}: no such option (the options: {', '.join(sorted(allowed))})")


def _missing(options: Mapping[str, Any], where: str, *, numeric: bool = False) -> Missing:
    value = options.get("missing", "absent")
    if value not in MISSING_POLICIES:
        raise SpecError(f"{where}.missing: {value!r} is not one of {', '.join(MISSING_POLICIES)}")
    if value == "zero" and not numeric:
        raise SpecError(f"{where}.missing: 'zero' is for numeric features; use absent or dead-letter")
    return value  # type: ignore[no-any-return]


def _categorical(path: str, options: Mapping[str, Any], where: str) -> Categorical:
    _only(options, {"missing"}, where)
    return Categorical(_path(path, where), _missing(options, where))


def _numeric(path: str, options: Mapping[str, Any], where: str) -> Numeric:
    _only(options, {"transform", "clip", "standardize", "missing"}, where)
    transform = options.get("transform", "none")
    if transform not in TRANSFORMS:
        raise SpecError(f"{where}.transform: {transform!r} is not one of {', '.join(TRANSFORMS)}")
    clip = options.get("clip")
    if clip is not None:
        if (not isinstance(clip, list) or len(clip) != 2
                or not all(isinstance(c, int | float) and not isinstance(c, bool) for c in clip)
                or not clip[0] <= clip[1]):
            raise SpecError(f"{where}.clip: expected [low, high] with low <= high, got {clip!r}")
        clip = (float(clip[0]), float(clip[1]))
    standardize = options.get("standardize", False)
    if not isinstance(standardize, bool):
        raise SpecError(f"{where}.standardize: expected true or false, got {standardize!r}")
    return Numeric(_path(path, where), transform, clip, standardize, _missing(options, where, numeric=True))


def _text(path: str, options: Mapping[str, Any], where: str) -> Text:
    _only(options, {"max_tokens", "missing"}, where)
    max_tokens = options.get("max_tokens", DEFAULT_MAX_TOKENS)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= 10_000:
        raise SpecError(f"{where}.max_tokens: expected an integer from 1 to 10000, got {max_tokens!r}")
    return Text(_path(path, where), max_tokens, _missing(options, where))
