"""``stream-perceptron features``: what the feature spec makes of sample events, before a worker
learns from them.

Given the spec the settings hold (``SP_FEATURES__*``, as the worker reads it) and sample events,
:func:`report` says of each what the worker would make of it, through the worker's own decoder
(:class:`~stream_perceptron.codec.events.EventDecoder`, within ``SP_LIMITS__*``):

* an **example**: its label (the sign, and the value the event holds), its id, its named features
  with their values as the model would learn them (standardized features over the sample in
  order, as a fresh partition standardizes them: one standardization per partition of a topic),
  and its echo fields;
* a **label record** (the late label of the event with its id);
* or a **dead letter**, with the reason the worker would send it with.

Then a summary (:meth:`Report.summary`): the events read, the examples (labeled, positive,
negative, unlabeled), the label records, the dead letters by reason; for each path of the spec,
over the events that are not label records, how often it held a value, was missing (absent or
null) or held a value of a type its role does not take (a label: a boolean, a number or a string;
an id: a string or an integer; an echo field: a string, a number or a boolean; a numeric feature:
a number or a boolean; a categorical one: a string, an integer or a boolean, or a list of them; a
text: a string); the paths that never matched (found nothing in any event), each with the field
of the sample nearest its name; the categories seen per categorical feature (how many, the most
frequent); and the fields of the events that no path reads (their keys, nested through objects,
a list as one field; at most :data:`MAX_FIELDS` distinct ones are counted).

The report is pure (samples in, a :class:`Report` out). :func:`file_samples` reads a JSONL file
and :func:`topic_samples` the first records of a topic (through
:class:`~stream_perceptron.kafka.reader.TopicReader`); :func:`avro_parse` decodes Avro records
with their writer's schema from the schema registry.

>>> from stream_perceptron.features.spec import FeatureSpec
>>> spec = FeatureSpec.parse({"label": "ok", "id": "id", "numeric": ["n"], "categorical": ["c"]})
>>> found = report(spec, [Sample({"line": 1}, None, b'{"id": 1, "ok": true, "n": 2, "c": "a", "t": 0}'),
...                       Sample({"line": 2}, None, b'{"id": 2, "n": "x"}')], Limits())
>>> for line in found.lines():
...     print(line)
line 1: example, label +1 (true), id 1
    n    2
    c=a  1
line 2: dead letter: n: expected a number or a boolean, got string "x"
<BLANKLINE>
2 events read: 1 example (1 labeled: 1 positive, 0 negative; 0 unlabeled), 0 label records, 1 dead letter
dead letters by reason:
    1  n: expected a number or a boolean, got string "x"
paths, over the 2 events that are not label records:
    role         path  value  missing  wrong type
    label        ok        1        1           0
    id           id        2        0           0
    numeric      n         1        0           1
    categorical  c         1        1           0
paths that never matched (found nothing in any event): none
categories seen:
    c (1 event, 1 distinct): a 1
fields no path reads (1):
    t  1 event  int
"""

from __future__ import annotations

import difflib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any, Literal, NamedTuple

import orjson

from stream_perceptron.codec.avro import AvroDecoder
from stream_perceptron.codec.events import EventDecoder, Parse
from stream_perceptron.codec.limits import Limits
from stream_perceptron.contract import json_kind, json_object
from stream_perceptron.errors import KafkaEdgeError, SourceError
from stream_perceptron.features.extract import shown
from stream_perceptron.features.paths import MAX_PATH_STEPS, MISSING, Path, PathError
from stream_perceptron.features.spec import FeatureSpec
from stream_perceptron.features.standardize import Standardizer
from stream_perceptron.kafka.admin import partition_count
from stream_perceptron.kafka.reader import ReadShort, TopicReader
from stream_perceptron.kafka.registry import SchemaRegistry
from stream_perceptron.settings import KafkaSettings

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 20
"""How many events the command reads unless told (``--limit``)."""
TOP_CATEGORIES = 5
"""The most frequent categories the summary names per categorical feature."""
FIELDS_SHOWN = 30
"""The unread fields the summary lists at most (the most frequent first)."""
MAX_FIELDS = 1_000
"""Distinct fields counted at most, and distinct categories per categorical feature: a sample of
events with keys of their own (a map of ids) keeps the report bounded."""

Kind = Literal["example", "label record", "dead letter"]
Role = Literal["label", "id", "numeric", "categorical", "text", "echo"]


class Sample(NamedTuple):
    """One record to report on: where it was read (``{"line": n}`` in a file, ``{"partition": p,
    "offset": o}`` in a topic), its key and its value."""

    where: dict[str, int]
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class Seen:
    """What the worker makes of one sample: an example, a label record or a dead letter."""

    where: dict[str, int]
    kind: Kind
    reason: str | None = None
    """Why it is a dead letter."""
    y: int = 0
    """The label's sign, 0 when unlabeled."""
    label: Any = MISSING
    """The label as the event holds it (:data:`MISSING` when absent)."""
    id: str | int | float | None = None
    x: dict[str, float] | None = None
    echo: dict[str, Any] | None = None

    def record(self) -> dict[str, Any]:
        """This event as a ``--json`` line."""
        out: dict[str, Any] = {**self.where, "kind": self.kind}
        if self.kind == "dead letter":
            out["reason"] = self.reason
            return out
        out["y"] = self.y
        out["label"] = None if self.label is MISSING else self.label
        out["id"] = self.id
        if self.kind == "example":
            out["x"] = self.x
            if self.echo is not None:
                out["echo"] = self.echo
        return out

    def lines(self, late_labels: bool = True) -> list[str]:
        """This event as text: a line, then one per feature and one of its echo fields."""
        where = _where(self.where)
        if self.kind == "dead letter":
            return [f"{where}: dead letter: {self.reason}"]
        label = "unlabeled" if not self.y else f"label {self.y:+d} ({_json(self.label)})"
        head = f"{where}: {self.kind}, {label}"
        if self.id is not None:
            head += f", id {_json(self.id)}"
        if self.kind == "label record":
            if not late_labels:
                head += " (late labels are off, SP_LABELS__PENDING_MAX=0: the worker refuses it)"
            return [head]
        x = self.x or {}
        width = max(map(len, x), default=0)
        out = [head, *(f"    {name:<{width}}  {value:.6g}" for name, value in x.items())]
        if self.echo is not None:
            out.append("    echo: " + "  ".join(f"{p}={_json(v)}" for p, v in self.echo.items()))
        return out


@dataclass
class PathCount:
    """How often one path of the spec, in one role, held a value, was missing, or held a value of
    a type its role does not take."""

    role: Role
    path: Path
    value: int = 0
    missing: int = 0
    wrong: int = 0

    def count(self, found: Any) -> None:
        if found is MISSING or found is None:
            self.missing += 1
        elif _TAKES[self.role](found):
            self.value += 1
        else:
            self.wrong += 1

    def record(self) -> dict[str, Any]:
        return {"role": self.role, "path": self.path.text, "value": self.value, "missing": self.missing,
                "wrong_type": self.wrong}


@dataclass
class FieldCount:
    """A field of the events (a key, nested through objects): in how many events it was, and the
    JSON kinds of its values."""

    text: str
    events: int = 0
    kinds: Counter[str] = field(default_factory=Counter)

    def record(self) -> dict[str, Any]:
        return {"field": self.text, "events": self.events, "kinds": sorted(self.kinds)}


@dataclass
class Report:
    """What :func:`report` found: each event (:attr:`seen`), then the counts of the summary."""

    spec: FeatureSpec
    late_labels: bool = True
    """Whether the worker joins label records (``SP_LABELS__PENDING_MAX`` > 0)."""
    seen: list[Seen] = field(default_factory=list)
    paths: list[PathCount] = field(default_factory=list)
    categories: dict[str, Counter[str]] = field(default_factory=dict)
    """Per categorical feature, each category's count."""
    fields: dict[tuple[str, ...], FieldCount] = field(default_factory=dict)
    """Every field seen (at most :data:`MAX_FIELDS`), by its keys."""
    fields_dropped: int = 0
    """Fields seen once :data:`MAX_FIELDS` were counted, not counted."""
    events: int = 0
    """Events that are objects and not label records: what :attr:`paths` count over."""

    # ------------------------------------------------------------------ the summary
    def summary(self) -> dict[str, Any]:
        """The counts, as plain data (the ``--json`` summary line)."""
        kinds = Counter(s.kind for s in self.seen)
        unread = self.unread()
        signs = Counter(s.y for s in self.seen if s.kind == "example")
        return {
            "events": len(self.seen), "examples": kinds["example"], "labeled": signs[1] + signs[-1],
            "positive": signs[1], "negative": signs[-1], "unlabeled": signs[0],
            "label_records": kinds["label record"], "dead_letters": kinds["dead letter"],
            "dead_letter_reasons": dict(self.reasons()),
            "paths_over": self.events,
            "paths": [p.record() for p in self.paths],
            "never_matched": [{"path": p, "nearest": n} for p, n in self.never_matched()],
            "categories": {path: {"distinct": len(seen), "events": self._holding(path),
                                  "top": [[c, n] for c, n in seen.most_common(TOP_CATEGORIES)]}
                           for path, seen in self.categories.items()},
            "unread_fields": [f.record() for f in unread[:FIELDS_SHOWN]],
            "unread_fields_not_shown": max(len(unread) - FIELDS_SHOWN, 0),
            "fields_not_counted": self.fields_dropped,
        }

    def reasons(self) -> list[tuple[str, int]]:
        """The dead letters' reasons, the most frequent first."""
        counted = Counter(s.reason for s in self.seen if s.kind == "dead letter" and s.reason is not None)
        return sorted(counted.items(), key=lambda item: (-item[1], item[0]))

    def never_matched(self) -> list[tuple[str, str | None]]:
        """The paths that held nothing in any event (missing everywhere), each with the field of
        the sample whose name is nearest (None when none is near); none without events."""
        if not self.events:
            return []
        names = [f.text for f in self.fields.values()]
        out: dict[str, str | None] = {}
        for p in self.paths:
            if not p.value and not p.wrong and p.path.text not in out:
                near = difflib.get_close_matches(p.path.text, names, n=1, cutoff=0.6)
                out[p.path.text] = near[0] if near else None
        return list(out.items())

    def unread(self) -> list[FieldCount]:
        """The fields no path of the spec reads (nor reads into), the most frequent first."""
        steps = [p.steps for p in (*self.spec.paths, *self.spec.echo,
                                   *(q for q in (self.spec.label, self.spec.id) if q is not None))]
        out = [f for keys, f in self.fields.items()
               if not any(s[:len(keys)] == keys or keys[:len(s)] == s for s in steps)]
        return sorted(out, key=lambda f: (-f.events, f.text))

    def _holding(self, path: str) -> int:
        return next(p.value for p in self.paths if p.role == "categorical" and p.path.text == path)

    # ------------------------------------------------------------------ output
    def lines(self) -> Iterator[str]:
        """The report as text: each event, a blank line, the summary."""
        for seen in self.seen:
            yield from seen.lines(self.late_labels)
        yield ""
        yield from self.summary_lines()

    def summary_lines(self) -> Iterator[str]:
        s = self.summary()
        yield (f"{_many(s['events'], 'event')} read: {_many(s['examples'], 'example')} ({s['labeled']}"
               f" labeled: {s['positive']} positive, {s['negative']} negative; {s['unlabeled']} unlabeled),"
               f" {_many(s['label_records'], 'label record')}, {_many(s['dead_letters'], 'dead letter')}")
        if s["label_records"] and not self.late_labels:
            yield ("late labels are off (SP_LABELS__PENDING_MAX=0): the worker sends label records to the"
                   " dead-letter topic")
        if s["dead_letters"]:
            yield "dead letters by reason:"
            yield from _table([[str(n), reason] for reason, n in self.reasons()], right=(0,))
        yield f"paths, over the {_many(self.events, 'event')} that are not label records:"
        yield from _table([["role", "path", "value", "missing", "wrong type"],
                           *([p.role, p.path.text, str(p.value), str(p.missing), str(p.wrong)]
                             for p in self.paths)], right=(2, 3, 4))
        never = self.never_matched()
        yield "paths that never matched (found nothing in any event): " + (", ".join(
            path + ("" if near is None else f" (nearest field: {near})") for path, near in never) or "none")
        if self.categories:
            yield "categories seen:"
            for path, seen in self.categories.items():
                top = ", ".join(f"{c} {n}" for c, n in seen.most_common(TOP_CATEGORIES))
                more = f", {len(seen) - TOP_CATEGORIES} more" if len(seen) > TOP_CATEGORIES else ""
                yield (f"    {path} ({_many(self._holding(path), 'event')}, {len(seen)} distinct)"
                       + (f": {top}{more}" if top else ""))
        unread = self.unread()
        yield f"fields no path reads ({len(unread)}):" if unread else "fields no path reads: none"
        yield from _table([[f.text, _many(f.events, "event"), ", ".join(sorted(f.kinds))]
                           for f in unread[:FIELDS_SHOWN]])
        if len(unread) > FIELDS_SHOWN:
            yield f"    and {len(unread) - FIELDS_SHOWN} more"
        if self.fields_dropped:
            yield f"    (past {MAX_FIELDS} distinct fields, {self.fields_dropped} more were not counted)"

    def json_lines(self) -> Iterator[str]:
        """The report as JSON lines: one per event, then ``{"summary": {...}}``."""
        for seen in self.seen:
            yield _dumps(seen.record())
        yield _dumps({"summary": self.summary()})


# ---------------------------------------------------------------------------------- the report


class _Capture:
    """A parse that keeps what it parsed last (the event as the decoder read it)."""

    def __init__(self, parse: Parse) -> None:
        self._parse = parse
        self.taken: Any = MISSING

    def __call__(self, value: bytes) -> Any:
        self.taken = self._parse(value)
        return self.taken


def report(spec: FeatureSpec, samples: Iterable[Sample], limits: Limits, *, parse: Parse = json_object,
           late_labels: bool = True) -> Report:
    """What the worker makes of each of ``samples`` by ``spec`` within ``limits`` (values read by
    ``parse``, JSON by default), and the summary's counts; see the module's docstring.

    Each sample goes through the worker's decoder alone, in order: the standardized features are
    what a fresh partition would learn (one standardization per partition of a topic; a file is
    one partition)."""
    decoder = EventDecoder(spec, limits)
    capture = _Capture(parse)
    out = Report(spec, late_labels, paths=_path_counts(spec),
                 categories={c.path.text: Counter() for c in spec.categorical})
    standardizers: dict[int | None, Standardizer] = {}
    for sample in samples:
        capture.taken = MISSING
        standardizer = standardizers.setdefault(sample.where.get("partition"), Standardizer())
        decoded = decoder.decode_many([sample.value], [sample.key], standardizer, capture)
        event = capture.taken
        label = MISSING if spec.label is None or not isinstance(event, dict) else spec.label.find(event)
        if decoded.rejected:
            seen = Seen(sample.where, "dead letter", reason=decoded.rejected[0])
        elif decoded.labels:
            joined = decoded.labels[0]
            seen = Seen(sample.where, "label record", y=int(joined.y), label=label, id=joined.id)
        else:
            assert isinstance(decoded.xs, list)
            x = decoded.xs[0]
            assert isinstance(x, dict)  # an event's features are named
            seen = Seen(sample.where, "example", y=decoded.ys[0], label=label, id=decoded.ids[0], x=x,
                        echo=None if decoded.echo is None else decoded.echo[0])
        out.seen.append(seen)
        if isinstance(event, dict):
            _count_fields(out, event)
            if seen.kind != "label record":
                _count_paths(out, event)
    return out


_TAKES: dict[Role, Callable[[Any], bool]] = {
    "label": lambda v: isinstance(v, bool | int | float | str),
    "id": lambda v: isinstance(v, str | int) and not isinstance(v, bool),
    "echo": lambda v: isinstance(v, str | int | float | bool),
    "numeric": lambda v: isinstance(v, bool | int | float),
    "categorical": lambda v: isinstance(v, str | int) or (
        isinstance(v, list) and all(isinstance(e, str | int) for e in v)),
    "text": lambda v: isinstance(v, str),
}
"""What a path in each role takes (the extractor's types; a value of another type is refused)."""


def _path_counts(spec: FeatureSpec) -> list[PathCount]:
    """A count for each path of ``spec`` in each of its roles, in the spec's order."""
    out = [PathCount("label", spec.label)] if spec.label is not None else []
    if spec.id is not None:
        out.append(PathCount("id", spec.id))
    out += [PathCount("numeric", f.path) for f in spec.numeric]
    out += [PathCount("categorical", f.path) for f in spec.categorical]
    out += [PathCount("text", f.path) for f in spec.text]
    out += [PathCount("echo", p) for p in spec.echo]
    return out


def _category(value: Any) -> str:
    """A category's text, as the extractor names it (``path=text``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _count_paths(out: Report, event: dict[str, Any]) -> None:
    """Count what each path of the spec finds in ``event``, and the categories it holds."""
    out.events += 1
    for p in out.paths:
        found = p.path.find(event)
        p.count(found)
        if p.role == "categorical" and _TAKES["categorical"](found):
            seen = out.categories[p.path.text]
            for element in found if isinstance(found, list) else [found]:
                text = _category(element)
                if text in seen or len(seen) < MAX_FIELDS:
                    seen[text] += 1


def _count_fields(out: Report, event: dict[str, Any]) -> None:
    """Count the fields of ``event``: its keys, nested through objects (a list is one field)."""
    for keys, value in _leaves(event, ()):
        counted = out.fields.get(keys)
        if counted is None:
            if len(out.fields) >= MAX_FIELDS:
                out.fields_dropped += 1
                continue
            counted = out.fields[keys] = FieldCount(field_text(keys))
        counted.events += 1
        counted.kinds[json_kind(value)] += 1


def _leaves(obj: dict[str, Any], prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Each key path of ``obj`` that ends at a value other than a non-empty object (at most
    :data:`~stream_perceptron.features.paths.MAX_PATH_STEPS` keys deep), and that value."""
    for key, value in obj.items():
        keys = (*prefix, str(key))
        if isinstance(value, dict) and value and len(keys) < MAX_PATH_STEPS:
            yield from _leaves(value, keys)
        else:
            yield keys, value


def field_text(keys: tuple[str, ...]) -> str:
    """A field's keys written as a spec's path reads them.

    >>> field_text(("user", "age")), field_text(("headers", "content type"))
    ('user.age', 'headers["content type"]')
    """
    text = ""
    for key in keys:
        try:
            name = Path.parse(key).steps == (key,)
        except PathError:
            name = False
        text += (f".{key}" if text else key) if name else f"[{orjson.dumps(key).decode()}]"
    return text


# ---------------------------------------------------------------------------------- formatting


def _json(value: Any) -> str:
    return orjson.dumps(value, default=shown).decode()


def _dumps(record: dict[str, Any]) -> str:
    return orjson.dumps(record, default=shown).decode()


def _where(where: dict[str, int]) -> str:
    if "line" in where:
        return f"line {where['line']}"
    return f"partition {where['partition']} offset {where['offset']}"


def _many(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _table(rows: list[list[str]], right: tuple[int, ...] = ()) -> Iterator[str]:
    """``rows`` in aligned columns, indented (the columns ``right`` aligned right)."""
    if not rows:
        return
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    for row in rows:
        cells = [cell.rjust(w) if c in right else cell.ljust(w)
                 for c, (cell, w) in enumerate(zip(row, widths, strict=True))]
        yield ("    " + "  ".join(cells)).rstrip()


# ---------------------------------------------------------------------------------- the samples


def file_samples(path: FilePath, limit: int = DEFAULT_LIMIT) -> Iterator[Sample]:
    """The first ``limit`` events of a JSONL file, one a line (blank lines skipped), as the
    values of records without a key; :class:`SourceError` when the file cannot be read."""
    taken = 0
    try:
        with open(path, "rb") as fh:
            for number, line in enumerate(fh, 1):
                value = line.strip()
                if not value:
                    continue
                yield Sample({"line": number}, None, value)
                taken += 1
                if taken == limit:
                    return
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None


def topic_samples(kafka: KafkaSettings, topic: str, limit: int = DEFAULT_LIMIT, *, max_record_bytes: int,
                  timeout_s: float = 30.0, idle_s: float = 2.0) -> list[Sample]:
    """The first ``limit`` records of ``topic`` the reader fetches from the beginning of every
    partition (the topic's end, or a read cut short by ``timeout_s``, ends them sooner), in
    (partition, offset) order; :class:`KafkaEdgeError` when the topic does not exist."""
    if partition_count(kafka, topic, kafka.request_timeout_ms / 1000) is None:
        raise KafkaEdgeError(f"the topic {topic} does not exist (--topic, or the input topic"
                             " SP_TOPICS__INPUT)")
    got: list[Sample] = []
    reader = TopicReader(kafka, topic, max_record_bytes=max_record_bytes)
    try:
        for record in reader.read_to_end(timeout_s=timeout_s, idle_s=idle_s):
            got.append(Sample({"partition": record.partition, "offset": record.offset}, record.key,
                              record.value))
            if len(got) == limit:
                break
    except ReadShort as short:  # say so, and report on what came
        log.warning("%s", short)
    finally:
        reader.close()
    return sorted(got, key=lambda s: (s.where["partition"], s.where["offset"]))


def avro_parse(registry: SchemaRegistry) -> Parse:
    """Reads a value in the Confluent wire format with its writer's schema, fetched from
    ``registry`` (a schema id it does not hold: :class:`DecodeError`, a dead letter, as in the
    worker; a registry that does not answer: :class:`~stream_perceptron.errors.RegistryUnavailable`,
    which ends the report)."""
    decoder = AvroDecoder()

    def parse(value: bytes) -> Any:
        return decoder.decode_wire(value, registry.schema)

    return parse


__all__ = ["DEFAULT_LIMIT", "Report", "Sample", "Seen", "avro_parse", "field_text",
           "file_samples", "report", "topic_samples"]
