"""Avro records in the Confluent wire format: the schema id read, the payload decoded with the
writer's schema, and records encoded for producers.

The wire format: byte 0 is ``0x00`` (the magic byte), bytes 1–4 the writer's schema id
(big-endian), then the record in Avro's binary encoding. The schema's JSON text is the schema
registry's to give for the id (``kafka/registry.py``); this module only reads bytes and text.

Decoding uses the writer's schema alone, with no reader schema: a record decodes to the fields
its writer wrote. A new version of a schema that adds, removes or renames an optional field
yields a dict with other keys, and the records of every version decode side by side (what a
feature reads from them is the feature spec's business). Values come out as plain Python:

* a record as a ``dict`` (field name → value), an enum as its symbol (``str``), a union as the
  value of its branch, an array as a ``list``, a map as a ``dict``;
* ``bytes`` and ``fixed`` as ``bytes`` (a feature spec refuses them as features);
* every logical type as its underlying type, the numbers the writer wrote: ``timestamp-millis``,
  ``-micros``, ``-nanos`` and ``local-timestamp-*`` as the count since the Unix epoch in that
  unit (an ``int``), ``date`` as days since 1970-01-01, ``time-millis`` and ``time-micros`` as
  the count since midnight, ``uuid`` as its string (its 16 bytes on a ``fixed``), ``decimal`` as
  its unscaled two's-complement ``bytes``. Numbers can be features as they are, with no time zone
  or calendar in between.

What a decoder accepts is bounded. The payload is at most ``SP_LIMITS__MAX_RECORD_BYTES``
(checked before it reaches here). fastavro (1.13, measured) refuses a string, bytes or fixed
that claims more bytes than are left (``EOFError``, before allocating them), and an array or
map whose items take at least one byte each cannot claim more items than it has bytes. Two
kinds of writer schema would let a small payload cost without bound, and each is refused with
its reason (every record naming it is then a dead letter):

* an array of items that take no bytes (``null``, a ``fixed`` of size 0, a record of such
  fields): its count is free, so a 10-byte payload claiming 10⁹ items would build them all;
* a recursive schema (a record that holds itself through a union or an array), and a schema
  nested deeper than :data:`MAX_SCHEMA_DEPTH` types: fastavro's compiled reader recurses on the C
  stack, and a payload nested 10,000 deep crashed the process (a segmentation fault) rather
  than raise.

What fastavro does not check, and so neither does this module: a negative union or enum index
is taken from the end of the list, as Python indexes, and an over-long varint wraps around.

Where the compiled part is installed, a record of the schema read last is read by its Avro reader
(:func:`~stream_perceptron.codec.native.avro_reader`) into the same values, about five times as
fast as fastavro; a record it does not read exactly as fastavro does (those above among them)
is fastavro's to read or refuse, so the values and the reasons are the same either way.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache
from io import BytesIO
from typing import Any

import fastavro

from stream_perceptron.codec import native
from stream_perceptron.errors import DecodeError

MAGIC = 0
HEADER_BYTES = 5
"""The magic byte and the 4-byte schema id before the Avro payload."""

MAX_SCHEMA_DEPTH = 100
"""The most types a writer's schema may nest, through records, unions, arrays, maps and the
named types it refers to (real event schemas nest a few); deeper schemas are refused."""

DEFAULT_MAX_SCHEMAS = 1_000
"""The writer's schemas an :class:`AvroDecoder` keeps parsed, the least recently used dropped."""

_STREAM = re.compile(r" from <[^<>]*>$")
"""The object fastavro names in a message, with its address (a reason says the same each time)."""

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


def wire_schema_id(value: bytes | bytearray | memoryview) -> int:
    """The writer's schema id of a record in the Confluent wire format, or :class:`DecodeError`
    saying why ``value`` is not in it.

    >>> wire_schema_id(b"\\x00\\x00\\x00\\x01\\x2a\\x02")
    298
    >>> wire_schema_id(b'{"x": [1]}')
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.DecodeError: not the Avro wire format: byte 0 is 0x7b, not 0x00
    """
    if len(value) < HEADER_BYTES:
        raise DecodeError(f"not the Avro wire format: {len(value)} bytes, shorter than its "
                          f"{HEADER_BYTES}-byte header (0x00 and a 4-byte schema id)")
    if value[0] != MAGIC:
        raise DecodeError(f"not the Avro wire format: byte 0 is {value[0]:#04x}, not 0x00")
    return int.from_bytes(value[1:HEADER_BYTES], "big")


class AvroDecoder:
    """Decodes Avro payloads with their writer's schema, each schema parsed once per id.

    Ids are immutable in a schema registry, so an id's text is parsed (or refused) once and kept;
    at most ``max_schemas`` are kept, the least recently used dropped (and parsed again if it
    comes back). A schema refused is kept refused, with its reason.

    >>> schema = '{"type": "record", "name": "Click", "fields": [{"name": "n", "type": "long"}]}'
    >>> decoder = AvroDecoder()
    >>> decoder.decode_wire(encode_wire(7, schema, {"n": 3}), {7: schema}.__getitem__)
    {'n': 3}
    """

    def __init__(self, max_schemas: int = DEFAULT_MAX_SCHEMAS) -> None:
        if max_schemas < 1:
            raise ValueError(f"max_schemas is {max_schemas}: at least 1")
        self.max_schemas = max_schemas
        self._schemas: OrderedDict[int, Any] = OrderedDict()  # id -> parsed schema or DecodeError
        self._readers: dict[int, Any] = {}  # id -> the compiled reader of a kept schema, if one
        # the id (its 4 bytes), parsed schema and compiled reader (or None) of the record
        # decode_wire read last, when it read it whole: that id is the most recent of _schemas,
        # and a record of it needs no reorder
        self._last: tuple[bytes, Any, Any] | None = None

    def __len__(self) -> int:
        """How many schemas are kept (parsed or refused)."""
        return len(self._schemas)

    def writer_schema(self, schema_id: int, schema_text: str) -> Any:
        """The parsed writer's schema of ``schema_id`` (``schema_text`` is read only the first
        time), or the :class:`DecodeError` that refuses it."""
        kept = self._schemas.get(schema_id)
        if kept is None:
            try:
                kept, named = _parse_writer_schema(schema_text)
                reader = native.avro_reader(kept, named)
                if reader is not None:
                    self._readers[schema_id] = reader
            except DecodeError as exc:
                kept = DecodeError(f"schema {schema_id}: {exc.reason}")
            self._schemas[schema_id] = kept
            if len(self._schemas) > self.max_schemas:
                self._readers.pop(self._schemas.popitem(last=False)[0], None)
        else:
            self._schemas.move_to_end(schema_id)
        if isinstance(kept, DecodeError):
            raise DecodeError(kept.reason)
        return kept

    def decode(self, schema_id: int, schema_text: str, payload: bytes | bytearray | memoryview) -> Any:
        """The record in ``payload`` (the Avro binary after the wire format's header), read with
        the writer's schema ``schema_text`` of ``schema_id``; :class:`DecodeError` with the reason
        when the schema is refused or the payload is truncated, malformed or followed by more
        bytes."""
        self._last = None  # decode_wire sets it again once this record is read
        schema = self.writer_schema(schema_id, schema_text)
        stream = BytesIO(payload)
        try:
            record = fastavro.schemaless_reader(stream, schema, None)
        except EOFError as exc:  # fastavro names its stream: "cannot read boolean from <_io.BytesIO …>"
            said = _STREAM.sub("", str(exc))
            said = f": {said}" if said else ""
            raise DecodeError(f"the Avro payload is truncated for schema {schema_id}{said}") from None
        except UnicodeDecodeError as exc:
            raise DecodeError(f"the Avro payload holds a string that is not UTF-8 "
                              f"(schema {schema_id}): {exc}") from None
        except Exception as exc:  # noqa: BLE001 - fastavro raises IndexError, ValueError, ... on bad bytes
            raise DecodeError(f"the Avro payload does not decode with schema {schema_id}: "
                              f"{type(exc).__name__}: {exc}") from None
        left = len(payload) - stream.tell()
        if left:
            raise DecodeError(f"{left} bytes after the Avro record of schema {schema_id}")
        return record

    def decode_wire(self, value: bytes | bytearray | memoryview, schema_text: Callable[[int], str]) -> Any:
        """The record of a value in the wire format; ``schema_text(id)`` gives the writer's schema
        of an id not parsed yet (what it raises, a registry's errors, passes through)."""
        if type(value) is bytes and len(value) > HEADER_BYTES and value[0] == MAGIC:
            # a record of the schema read last (the usual case): no slice of the value, no reorder
            # of the kept schemas (it is already the most recent), one reader call
            last = self._last
            if last is not None and value[1:HEADER_BYTES] == last[0]:
                if last[2] is not None:  # the compiled reader, where it reads the record as fastavro does
                    record = last[2].read(value, HEADER_BYTES)
                    if record is not None:
                        return record
                stream = BytesIO(value)
                stream.seek(HEADER_BYTES)
                try:
                    record = fastavro.schemaless_reader(stream, last[1], None)
                    if stream.tell() == len(value):
                        return record
                except Exception:  # noqa: BLE001, S110 - the general path below says what is wrong
                    pass
        schema_id = wire_schema_id(value)
        text = "" if schema_id in self._schemas else schema_text(schema_id)
        record = self.decode(schema_id, text, memoryview(value)[HEADER_BYTES:])
        kept = self._schemas.get(schema_id)
        self._last = ((schema_id.to_bytes(4, "big"), kept, self._readers.get(schema_id))
                      if not isinstance(kept, DecodeError) else None)
        return record


def encode_wire(schema_id: int, schema: str | dict[str, Any] | list[Any], record: Any) -> bytes:
    """``record`` in the Confluent wire format under ``schema_id``, for producers, tests and
    benchmarks. ``schema`` is the JSON text (parsed once per text) or a schema fastavro parsed;
    its logical types take their Python values (``datetime``, ``Decimal``, ...) or the numbers
    a decoder gives back. :class:`ValueError` when the record does not fit the schema.

    >>> encode_wire(1, '"long"', 3)
    b'\\x00\\x00\\x00\\x00\\x01\\x06'
    """
    if not 0 <= schema_id < 2**32:
        raise ValueError(f"schema id {schema_id} does not fit the wire format's 4 bytes")
    parsed = _schema_for_writing(schema) if isinstance(schema, str) else schema
    out = BytesIO()
    out.write(bytes((MAGIC,)) + schema_id.to_bytes(4, "big"))
    try:
        fastavro.schemaless_writer(out, parsed, record)
    except Exception as exc:  # noqa: BLE001 - fastavro's TypeError, ValueError, AttributeError, ...
        raise ValueError(f"the record does not fit the schema: {type(exc).__name__}: {exc}") from exc
    return out.getvalue()


@lru_cache(maxsize=64)
def _schema_for_writing(text: str) -> Any:
    return fastavro.parse_schema(json.loads(text))


def parse_writer_schema(text: str) -> Any:
    """A writer's schema as fastavro reads it: its logical types read as their underlying types,
    and refused (:class:`DecodeError`) when it is not JSON, does not parse, or would let a
    payload cost without bound (see the module's notes)."""
    return _parse_writer_schema(text)[0]


def _parse_writer_schema(text: str) -> tuple[Any, dict[str, Any]]:
    """:func:`parse_writer_schema`'s schema and its named types by full name."""
    try:
        raw = json.loads(text)
    except RecursionError:
        raise DecodeError(f"the writer's schema nests deeper than {MAX_SCHEMA_DEPTH} types") from None
    except ValueError as exc:
        raise DecodeError(f"the writer's schema is not JSON: {exc}") from None
    plain = _without_logical_types(raw, 0)
    named: dict[str, Any] = {}
    try:
        parsed = fastavro.parse_schema(plain, named_schemas=named)
    except Exception as exc:  # noqa: BLE001 - SchemaParseException, UnknownType, ValueError, ...
        raise DecodeError(f"the writer's schema does not parse: {type(exc).__name__}: {exc}") from None
    _Bounds(named).check(parsed)
    return parsed, named


def _without_logical_types(schema: Any, depth: int) -> Any:
    """``schema`` (JSON) with ``logicalType`` removed from every type in it."""
    if depth > MAX_SCHEMA_DEPTH:
        raise DecodeError(f"the writer's schema nests deeper than {MAX_SCHEMA_DEPTH} types")
    if isinstance(schema, list):
        return [_without_logical_types(branch, depth + 1) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: value for key, value in schema.items() if key != "logicalType"}
    kind = out.get("type")
    if kind in ("record", "error") and isinstance(out.get("fields"), list):
        out["fields"] = [{**f, "type": _without_logical_types(f["type"], depth + 1)}
                         if isinstance(f, dict) and "type" in f else f for f in out["fields"]]
    elif kind == "array" and "items" in out:
        out["items"] = _without_logical_types(out["items"], depth + 1)
    elif kind == "map" and "values" in out:
        out["values"] = _without_logical_types(out["values"], depth + 1)
    elif isinstance(kind, dict | list):
        out["type"] = _without_logical_types(kind, depth + 1)
    return out


class _Bounds:
    """The checks of a parsed schema that keep a decoder's work bounded by its payload."""

    def __init__(self, named: dict[str, Any]) -> None:
        self.named = named
        self.done: dict[str, tuple[bool, int]] = {}  # a named type: (takes no bytes, its height)
        self.open: list[str] = []  # the named types being walked, outermost first

    def check(self, schema: Any) -> None:
        self.walk(schema, 1)

    def walk(self, schema: Any, depth: int) -> tuple[bool, int]:
        """Whether ``schema`` can take no bytes at all, and how many types it nests."""
        if depth > MAX_SCHEMA_DEPTH:
            raise DecodeError(f"the writer's schema nests deeper than {MAX_SCHEMA_DEPTH} types")
        if isinstance(schema, str):
            return (schema == "null", 1) if schema in _PRIMITIVES else self.refer(schema, depth)
        if isinstance(schema, list):  # a union: its branch's index takes a byte or more
            height = max((self.walk(branch, depth + 1)[1] for branch in schema), default=0)
            return False, height + 1
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            return self.named_type(schema, depth)
        if kind == "array":
            empty, height = self.walk(schema["items"], depth + 1)
            if empty:
                raise DecodeError("the writer's schema has an array of items that take no bytes (null, or "
                                  "records of such fields): a payload could claim any number of them")
            return False, height + 1
        if kind == "map":  # each entry's key takes a byte or more
            return False, self.walk(schema["values"], depth + 1)[1] + 1
        return self.walk(kind, depth)  # {"type": "long"}

    def refer(self, name: str, depth: int) -> tuple[bool, int]:
        if name in self.open:
            raise DecodeError(f"the writer's schema is recursive ({name} holds itself): its payloads "
                              "could nest without bound")
        if name not in self.done:
            return self.named_type(self.named[name], depth)
        empty, height = self.done[name]
        if depth - 1 + height > MAX_SCHEMA_DEPTH:
            raise DecodeError(f"the writer's schema nests deeper than {MAX_SCHEMA_DEPTH} types")
        return empty, height

    def named_type(self, schema: dict[str, Any], depth: int) -> tuple[bool, int]:
        name, kind = schema["name"], schema["type"]
        if name in self.done:
            return self.done[name]
        if kind == "enum":
            result = (False, 1)
        elif kind == "fixed":
            result = (schema["size"] == 0, 1)
        else:
            self.open.append(name)
            walked = [self.walk(f["type"], depth + 1) for f in schema["fields"]]
            self.open.pop()
            result = (all(empty for empty, _ in walked), 1 + max((h for _, h in walked), default=0))
        self.done[name] = result
        return result
