"""An event (a JSON object, or a decoded Avro record) made into a labeled example by a
:class:`~stream_perceptron.features.spec.FeatureSpec`, or refused with a reason that names the
path (pure).

The example's features are named, in the spec's order: each numeric feature under its path (its
value transformed, clipped, then standardized), each categorical value as ``path=value`` (a list:
one name per element, counted), each text token as ``path:token`` (counted). A record with a
label and an id and none of the features' paths is a **label record**: the late label of the
event with that id.

>>> from stream_perceptron.features.spec import FeatureSpec
>>> spec = FeatureSpec.parse({"label": "fraud", "id": "id", "numeric": ["amount"],
...                           "categorical": ["card.kind", "tags"], "echo": ["id"]})
>>> extractor = Extractor(spec)
>>> event = extractor.event({"id": "p1", "fraud": False, "amount": 12.5, "card": {"kind": "debit"},
...                          "tags": ["web", "new", "web"]}, Standardizer())
>>> event.x, event.y, event.id, event.echo
({'amount': 12.5, 'card.kind=debit': 1.0, 'tags=web': 2.0, 'tags=new': 1.0}, -1, 'p1', {'id': 'p1'})
>>> extractor.event({"id": "p1", "fraud": True}, Standardizer())
LabelEvent(id='p1', y=1)
>>> extractor.event({"id": "p2", "amount": "12"}, Standardizer())
Traceback (most recent call last):
...
stream_perceptron.errors.DecodeError: amount: expected a number or a boolean, got string "12"
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from stream_perceptron.contract import NotAClass, class_name, float64, json_kind, label_sign
from stream_perceptron.errors import DecodeError
from stream_perceptron.features.paths import MISSING, Path
from stream_perceptron.features.spec import Categorical, FeatureSpec, LabelValue, Numeric, Text
from stream_perceptron.features.standardize import Standardizer

_TOKEN = re.compile(r"\w+")
_SHOWN = 60


class Event(NamedTuple):
    """An example: its named features, its sign (0: unlabeled; with classes, its class name or
    None), its id and its echo fields."""

    x: dict[str, float]
    y: int | str | None
    id: str | int | None
    echo: dict[str, Any] | None


class LabelEvent(NamedTuple):
    """A late label: the sign (or the class name) for the event with this id."""

    id: str | int
    y: int | str


@dataclass(frozen=True, slots=True)
class Bounds:
    """What an event may make (the worker's ``SP_LIMITS__*``)."""

    max_features: int = 100_000
    max_name_chars: int = 256
    max_abs_value: float = 1e12
    max_id_chars: int = 1_024
    max_echo_chars: int = 1_024
    max_class_chars: int | None = None
    """Set: the label's value is a class name (a K-class worker), of at most this many characters."""
    known_classes: frozenset[str | int] | None = None
    """With ``max_class_chars``: the only classes taken (the others are refused), or None."""


def shown(value: Any) -> str:
    """``value`` as a reason quotes it: as JSON writes it (``true``, ``"card"``), or its repr where
    JSON has no spelling (Avro's bytes), cut to 60 characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


@dataclass
class Extractor:
    """Makes events into examples by ``spec``, within ``bounds``."""

    spec: FeatureSpec
    bounds: Bounds = field(default_factory=Bounds)

    def __post_init__(self) -> None:
        # chosen once: a sign (0 unlabeled), or a class name (None unlabeled: 0 is a class)
        classes = self.bounds.max_class_chars is not None
        self._label_of = self._class if classes else self._label
        self._unlabeled: int | None = None if classes else 0

    def event(self, obj: Any, standardizer: Standardizer) -> Event | LabelEvent:
        """``obj`` as an example or a late label; :class:`DecodeError` (naming the path) when it
        breaks the spec. Each event accepted updates ``standardizer`` (the partition's) with its
        standardized features before they are scaled, in the order events come."""
        if not isinstance(obj, dict):
            raise DecodeError(f"event must be an object, got {json_kind(obj)}")
        spec = self.spec
        y = self._label_of(obj)
        rid = self._id(obj)
        if y != self._unlabeled and rid is not None and not any(
                p.find(obj) not in (MISSING, None) for p in spec.paths):
            return LabelEvent(rid, y)  # type: ignore[arg-type]  # labeled: not None
        x: dict[str, float] = {}
        for num in spec.numeric:
            self._numeric(num, obj, x)
        for cat in spec.categorical:
            self._categorical(cat, obj, x)
        for text in spec.text:
            self._text(text, obj, x)
        if len(x) > self.bounds.max_features:
            raise DecodeError(f"the event makes {len(x)} features, over the limit of"
                              f" {self.bounds.max_features} (SP_LIMITS__MAX_FEATURES)")
        if not x:
            raise DecodeError("the event makes no feature: none of the spec's paths holds a value")
        echo = self._echo(obj)
        for num in spec.numeric:  # an event the spec accepts, and only such, moves the statistics
            name = num.path.text
            if num.standardize and name in x:
                x[name] = standardizer.update_and_scale(name, x[name])
        return Event(x, y, rid, echo)

    # ------------------------------------------------------------------ label, id, echo
    def _label(self, obj: dict[str, Any]) -> int:
        spec = self.spec
        if spec.label is None:
            return 0
        value = spec.label.find(obj)
        if value is MISSING or value is None:
            return 0
        if spec.positive:
            if _member(value, spec.positive):
                return 1
            if not spec.negative or _member(value, spec.negative):
                return -1
            raise DecodeError(f"{spec.label}: {shown(value)} is neither a positive ({_listed(spec.positive)})"
                              f" nor a negative ({_listed(spec.negative)}) value")
        if spec.negative:
            return -1 if _member(value, spec.negative) else 1
        sign = label_sign(value)
        if sign is None:
            raise DecodeError(f"{spec.label}: {shown(value)} is not a label (true/false, 1/0/-1; or set"
                              " the spec's positive and negative values)")
        return sign

    def _class(self, obj: dict[str, Any]) -> str | int | None:
        spec = self.spec
        if spec.label is None:
            return None
        value = spec.label.find(obj)
        if value is MISSING or value is None:
            return None
        try:
            return class_name(value, self.bounds.max_class_chars or 0, self.bounds.known_classes)
        except NotAClass as exc:
            raise DecodeError(f"{spec.label}: {shown(value)} {exc}") from None

    def _id(self, obj: dict[str, Any]) -> str | int | None:
        if self.spec.id is None:
            return None
        value = self.spec.id.find(obj)
        if value is MISSING or value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise DecodeError(f"{self.spec.id}: an id is a string or an integer, got {json_kind(value)}")
        if isinstance(value, str) and len(value) > self.bounds.max_id_chars:
            raise DecodeError(f"{self.spec.id}: the id is {len(value)} characters, over the limit of"
                              f" {self.bounds.max_id_chars} (SP_LIMITS__MAX_ID_CHARS)")
        return value

    def _echo(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        if not self.spec.echo:
            return None
        out: dict[str, Any] = {}
        for path in self.spec.echo:
            value = path.find(obj)
            if value is MISSING:
                value = None
            elif not (value is None or isinstance(value, str | int | float | bool)):
                raise DecodeError(f"{path}: an echo field is a string, a number, a boolean or null,"
                                  f" got {json_kind(value)}")
            elif isinstance(value, str) and len(value) > self.bounds.max_echo_chars:
                raise DecodeError(f"{path}: the echo field is {len(value)} characters, over the limit"
                                  f" of {self.bounds.max_echo_chars} (SP_LIMITS__MAX_ID_CHARS)")
            elif isinstance(value, float) and not math.isfinite(value):
                raise DecodeError(f"{path}: the echo field is not finite")
            out[path.text] = value
        return out

    # ------------------------------------------------------------------ features
    def _missing(self, path: Path, policy: str) -> bool:
        """Whether to go on without the feature (``absent``); raises for ``dead-letter``."""
        if policy == "dead-letter":
            raise DecodeError(f"{path}: missing")
        return policy == "absent"

    def _numeric(self, num: Numeric, obj: dict[str, Any], x: dict[str, float]) -> None:
        value = num.path.find(obj)
        if value is MISSING or value is None:
            if self._missing(num.path, num.missing):
                return
            v = 0.0
        elif isinstance(value, bool):
            v = 1.0 if value else 0.0
        elif isinstance(value, int | float):
            v = float64(value)
            if not math.isfinite(v):
                raise DecodeError(f"{num.path}: {shown(value)} is not finite")
        else:
            raise DecodeError(f"{num.path}: expected a number or a boolean, got {json_kind(value)}"
                              f" {shown(value)}")
        if num.transform == "log1p":
            if v <= -1.0:
                raise DecodeError(f"{num.path}: log1p of {shown(value)} is not defined (the value must be"
                                  " greater than -1)")
            v = math.log1p(v)
        if num.clip is not None:
            v = min(max(v, num.clip[0]), num.clip[1])
        if abs(v) > self.bounds.max_abs_value:
            raise DecodeError(f"{num.path}: magnitude {abs(v):g} is over the limit of"
                              f" {self.bounds.max_abs_value:g} (SP_LIMITS__MAX_ABS_VALUE)")
        x[num.path.text] = v

    def _name(self, name: str) -> str:
        if len(name) > self.bounds.max_name_chars:
            raise DecodeError(f"the feature name {shown(name)} is {len(name)} characters, over the limit"
                              f" of {self.bounds.max_name_chars} (SP_LIMITS__MAX_NAME_CHARS)")
        return name

    def _categorical(self, cat: Categorical, obj: dict[str, Any], x: dict[str, float]) -> None:
        value = cat.path.find(obj)
        if value is MISSING or value is None:
            self._missing(cat.path, cat.missing)
            return
        for element in value if isinstance(value, list) else [value]:
            if isinstance(element, str):
                text = element
            elif isinstance(element, bool):
                text = "true" if element else "false"
            elif isinstance(element, int):
                text = str(element)
            else:
                raise DecodeError(f"{cat.path}: a category is a string, an integer or a boolean, got"
                                  f" {json_kind(element)} {shown(element)}")
            name = self._name(f"{cat.path.text}={text}")
            x[name] = x.get(name, 0.0) + 1.0

    def _text(self, text: Text, obj: dict[str, Any], x: dict[str, float]) -> None:
        value = text.path.find(obj)
        if value is MISSING or value is None:
            self._missing(text.path, text.missing)
            return
        if not isinstance(value, str):
            raise DecodeError(f"{text.path}: text is a string, got {json_kind(value)} {shown(value)}")
        for k, m in enumerate(_TOKEN.finditer(value.lower())):
            if k == text.max_tokens:
                break
            name = self._name(f"{text.path.text}:{m.group()}")
            x[name] = x.get(name, 0.0) + 1.0


def _member(value: Any, values: tuple[LabelValue, ...]) -> bool:
    """``value`` is one of ``values``, a boolean matching only a boolean (``True`` is not 1)."""
    return any(type(value) is type(v) and value == v for v in values)


def _listed(values: tuple[LabelValue, ...]) -> str:
    return ", ".join(map(shown, values)) or "none"
