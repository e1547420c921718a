"""A spec compiled into one Python function for the events that follow it: the same example as
:meth:`Extractor.event <stream_perceptron.features.extract.Extractor.event>`, in straight-line
code (each path's lookup written out, shared prefixes looked up once), about a fifth of the time.

The compiled function handles what an ordinary event is: values of the expected types, present or
missing under ``absent`` or ``zero``. Anything else (a wrong type, a value out of bounds, a
feature missing under ``dead-letter``, a late label record, an event that makes no feature, a
label outside the spec's values) it leaves to the extractor, which gives the same answer or the
reason, so the two never differ (``tests/unit/features/test_compiled.py`` holds them equal on
random events). The source is built from the spec alone, every path step and name written as a
Python literal (``repr``), so no event's content is ever compiled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from stream_perceptron.contract import NotAClass, class_name, float64, label_sign
from stream_perceptron.features.extract import Bounds, Event, Extractor, LabelEvent
from stream_perceptron.features.paths import MISSING, Path
from stream_perceptron.features.spec import FeatureSpec
from stream_perceptron.features.standardize import Standardizer


class _Slow(Exception):
    """The compiled function leaves this event to the extractor."""


def _text_tokens(extractor: Extractor) -> Callable[[Any, dict[str, float]], None]:
    """The extractor's text features (their tokens), for the compiled function to call."""
    texts = extractor.spec.text

    def add(obj: Any, x: dict[str, float]) -> None:
        for text in texts:
            extractor._text(text, obj, x)  # noqa: SLF001 - the one definition of a text feature

    return add


class _Source:
    """The generated function's lines and the names its lookups bind."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._lookups: dict[tuple[str | int, ...], str] = {(): "obj"}

    def add(self, line: str, indent: int = 1) -> None:
        self.lines.append("    " * indent + line)

    def lookup(self, path: Path) -> str:
        """The variable holding ``path``'s value (or ``MISSING``), each prefix computed once."""
        steps = path.steps
        for k in range(1, len(steps) + 1):
            prefix = steps[:k]
            if prefix in self._lookups:
                continue
            parent, step = self._lookups[steps[:k - 1]], steps[k - 1]
            var = f"v{len(self._lookups)}"
            if parent == "obj":  # a dict: the function's first line holds it to that
                self.add(f"{var} = obj.get({step!r}, MISSING)")
            elif isinstance(step, str):
                self.add(f"{var} = {parent}.get({step!r}, MISSING) if type({parent}) is dict else MISSING")
            else:
                self.add(f"{var} = {parent}[{step}] if type({parent}) is list and"
                         f" {-step if step < 0 else step + 1} <= len({parent}) else MISSING")
            self._lookups[prefix] = var
        return self._lookups[steps]


def _number(missing: str) -> Callable[[Any], float | None]:
    """A numeric feature's value that is not a float: an int or a bool as a float, a missing one
    as the policy says (None: absent; 0.0: zero), anything else left to the extractor."""
    def number(value: Any) -> float | None:
        t = type(value)
        if t is int:
            return float64(value)
        if t is bool:
            return 1.0 if value else 0.0
        if value is MISSING or value is None:
            if missing == "absent":
                return None
            if missing == "zero":
                return 0.0
        raise _Slow
    return number


def _category(missing: str, max_chars: int) -> Callable[[Any, str, dict[str, float]], str | None]:
    """A categorical value that is not a string: its name (``prefix`` + its text), or None once a
    list's names are counted in ``x`` or a missing one is absent; anything else to the extractor."""
    def category(value: Any, prefix: str, x: dict[str, float]) -> str | None:
        t = type(value)
        if t is bool:
            return prefix + ("true" if value else "false")
        if t is int:
            return prefix + str(value)
        if t is list:
            for element in value:
                name = category(element, prefix, x) if type(element) is not str else prefix + element
                if name is None or len(name) > max_chars:
                    raise _Slow
                x[name] = x.get(name, 0.0) + 1.0
            return None
        if (value is MISSING or value is None) and missing == "absent":
            return None
        raise _Slow
    return category


def _echoed(max_chars: int) -> Callable[[Any], Any]:
    """An echo field that is not a short string: as it is, or None when missing; the rest to the
    extractor."""
    def echoed(value: Any) -> Any:
        t = type(value)
        if value is MISSING or value is None:
            return None
        if t is int or t is bool or t is float and -math.inf < value < math.inf:
            return value
        raise _Slow
    return echoed


def _numeric_lines(src: _Source, spec: FeatureSpec, bounds: Bounds, names: dict[str, Any]) -> None:
    limit = repr(bounds.max_abs_value)
    for k, num in enumerate(spec.numeric):
        v, name = src.lookup(num.path), num.path.text
        names[f"NUM{k}"] = _number(num.missing)
        src.add(f"f = {v}")
        if num.missing == "zero":  # a zero is a feature, not a value found
            src.add("if f is MISSING or f is None: zeros += 1")
        src.add(f"if type(f) is not float: f = NUM{k}(f)")
        indent = 1
        if num.missing == "absent":
            src.add("if f is not None:")
            indent = 2
        if num.transform == "log1p":
            src.add("if not -1.0 < f < INF: raise Slow", indent)
            src.add("f = log1p(f)", indent)
        elif num.clip is not None:
            src.add("if not -INF < f < INF: raise Slow", indent)
        if num.clip is not None:
            src.add(f"f = min(max(f, {num.clip[0]!r}), {num.clip[1]!r})", indent)
        src.add(f"if not -{limit} <= f <= {limit}: raise Slow", indent)
        src.add(f"x[{name!r}] = f", indent)


def _categorical_lines(src: _Source, spec: FeatureSpec, bounds: Bounds, names: dict[str, Any]) -> None:
    for k, cat in enumerate(spec.categorical):
        v, prefix = src.lookup(cat.path), f"{cat.path.text}="
        names[f"CAT{k}"] = _category(cat.missing, bounds.max_name_chars)
        src.add(f"n = {v}")
        src.add(f"n = {prefix!r} + n if type(n) is str else CAT{k}(n, {prefix!r}, x)")
        src.add("if n is not None:")
        src.add(f"if len(n) > {bounds.max_name_chars}: raise Slow", 2)
        src.add("x[n] = x.get(n, 0.0) + 1.0", 2)


def compile_spec(spec: FeatureSpec, bounds: Bounds) -> Callable[[Any, Standardizer], Event | LabelEvent]:
    """The function that makes an event into an example by ``spec`` (see the module's docstring)."""
    extractor = Extractor(spec, bounds)
    names: dict[str, Any] = {
        "MISSING": MISSING, "Slow": _Slow, "Event": Event, "INF": math.inf, "log1p": math.log1p,
        "LABEL": _label_rule(extractor), "TEXT": _text_tokens(extractor),
        "ECHO": _echoed(bounds.max_echo_chars),
    }
    src = _Source()
    src.add("if type(obj) is not dict: raise Slow")
    src.add("zeros = 0")
    if spec.label is None:
        src.add("y = 0")
    else:
        v = src.lookup(spec.label)
        if bounds.max_class_chars is None:
            src.add(f"y = 0 if {v} is MISSING or {v} is None else LABEL({v})")
        else:
            names["CLASS"] = _class_rule(bounds)
            src.add(f"y = None if {v} is MISSING or {v} is None else CLASS({v})")
    if spec.id is None:
        src.add("rid = None")
    else:
        v = src.lookup(spec.id)
        src.add(f"rid = None if {v} is MISSING else {v}")
        src.add(f"if rid is not None and not (type(rid) is int or type(rid) is str and len(rid) <="
                f" {bounds.max_id_chars}): raise Slow")
    src.add("x = {}")
    _numeric_lines(src, spec, bounds, names)
    _categorical_lines(src, spec, bounds, names)
    for text in spec.text:
        if text.missing == "dead-letter":
            v = src.lookup(text.path)
            src.add(f"if {v} is MISSING or {v} is None: raise Slow")
    if spec.text:
        src.add("TEXT(obj, x)")
    # an event whose paths all find nothing, or that makes too many features: the extractor's
    src.add(f"if len(x) <= zeros or len(x) > {bounds.max_features}: raise Slow")
    items = []
    for k, path in enumerate(spec.echo):
        v = src.lookup(path)
        src.add(f"e{k} = {v}")
        src.add(f"if type(e{k}) is not str or len(e{k}) > {bounds.max_echo_chars}: e{k} = ECHO(e{k})")
        items.append(f"{path.text!r}: e{k}")
    src.add(f"echo = {{{', '.join(items)}}}" if items else "echo = None")
    for num in spec.numeric:
        if num.standardize:
            name = num.path.text
            src.add(f"if {name!r} in x: x[{name!r}] = SCALE({name!r}, x[{name!r}])")
    src.add("return Event(x, y, rid, echo)")
    source = "def fast(obj, SCALE):\n" + "\n".join(src.lines) + "\n"
    exec(compile(source, f"<feature spec {spec.fingerprint()}>", "exec"), names)  # noqa: S102
    fast = names["fast"]
    generic = extractor.event

    def event(obj: Any, standardizer: Standardizer) -> Event | LabelEvent:
        try:
            return fast(obj, standardizer.update_and_scale)  # type: ignore[no-any-return]
        except _Slow:
            return generic(obj, standardizer)

    return event


def _label_rule(extractor: Extractor) -> Callable[[Any], int]:
    """The label's sign for a value the spec maps, else :class:`_Slow` (the extractor says why)."""
    spec = extractor.spec
    if not spec.positive and not spec.negative:
        def sign(value: Any) -> int:
            found = label_sign(value)
            if found is None:
                raise _Slow
            return found
        return sign
    table = {(type(v), v): 1 for v in spec.positive} | {(type(v), v): -1 for v in spec.negative}
    other = -1 if spec.positive and not spec.negative else 1 if spec.negative and not spec.positive else 0

    def mapped(value: Any) -> int:
        try:
            found = table.get((type(value), value), other)
        except TypeError:  # unhashable: not one of the spec's values
            found = other
        if not found:
            raise _Slow
        return found
    return mapped


def _class_rule(bounds: Bounds) -> Callable[[Any], str | int]:
    """The label's value as a class name, else :class:`_Slow` (the extractor says why)."""
    max_chars, known = bounds.max_class_chars or 0, bounds.known_classes

    def name(value: Any) -> str | int:
        try:
            return class_name(value, max_chars, known)
        except NotAClass:
            raise _Slow from None
    return name
