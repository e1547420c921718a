"""The Avro codec (stream_perceptron/codec/avro.py): the wire format's header, round trips, schema
evolution read with the writer's schema only, every refusal with its reason, and payloads that
claim more than they hold."""

from __future__ import annotations

import datetime as dt
import json
import time
import tracemalloc
import uuid
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.codec.avro import (
    HEADER_BYTES,
    MAX_SCHEMA_DEPTH,
    AvroDecoder,
    encode_wire,
    parse_writer_schema,
    wire_schema_id,
)
from stream_perceptron.errors import DecodeError

pytestmark = pytest.mark.timeout(60)


def varint(n: int) -> bytes:
    """Avro's long: zig-zag, then 7 bits a byte, least significant first."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def record(name: str, *fields: tuple[str, object]) -> str:
    return json.dumps({"type": "record", "name": name,
                       "fields": [{"name": n, "type": t} for n, t in fields]})


EVENT = json.dumps({
    "type": "record", "name": "Event", "namespace": "shop",
    "fields": [
        {"name": "flag", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "n", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "raw", "type": "bytes"},
        {"name": "s", "type": "string"},
        {"name": "nothing", "type": "null"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "BUY"]}},
        {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 4}},
        {"name": "xs", "type": {"type": "array", "items": "double"}},
        {"name": "m", "type": {"type": "map", "values": "long"}},
        {"name": "opt", "type": ["null", "double"]},
        {"name": "either", "type": ["string", "long"]},
        {"name": "where", "type": {"type": "record", "name": "Where",
                                   "fields": [{"name": "lat", "type": "double"}]}},
        {"name": "again", "type": "Where"},
    ],
})

AN_EVENT = {"flag": True, "i": -7, "n": 2**40, "f": 0.5, "d": -1.25, "raw": b"\x00\xff",
            "s": "héllo", "nothing": None, "kind": "BUY", "tag": b"abcd", "xs": [1.0, 2.5],
            "m": {"a": 1, "b": -2}, "opt": None, "either": 17, "where": {"lat": 51.5},
            "again": {"lat": -0.1}}


def decoded(schema: str, payload: bytes, schema_id: int = 1) -> object:
    return AvroDecoder().decode(schema_id, schema, payload)


def payload_of(schema: str, value: object) -> bytes:
    return encode_wire(1, schema, value)[HEADER_BYTES:]


# ----------------------------------------------------------------------------------- the header


def test_the_schema_id_is_bytes_1_to_4_big_endian():
    assert wire_schema_id(b"\x00\x00\x00\x00\x07") == 7
    assert wire_schema_id(bytearray(b"\x00\x01\x02\x03\x04rest")) == 0x01020304
    assert wire_schema_id(memoryview(b"\x00\xff\xff\xff\xff")) == 2**32 - 1


@pytest.mark.parametrize(("value", "reason"), [
    (b"", "not the Avro wire format: 0 bytes, shorter than its 5-byte header (0x00 and a 4-byte schema id)"),
    (b"\x00\x00\x00\x01", "not the Avro wire format: 4 bytes, shorter than its 5-byte header"),
    (b'{"x": [1.0], "y": 1}', "not the Avro wire format: byte 0 is 0x7b, not 0x00"),
    (b"\x01\x00\x00\x00\x01\x02", "not the Avro wire format: byte 0 is 0x01, not 0x00"),
])
def test_a_value_not_in_the_wire_format_is_refused_with_why(value, reason):
    with pytest.raises(DecodeError) as refused:
        wire_schema_id(value)
    assert refused.value.reason.startswith(reason)


def test_encode_writes_the_header_and_refuses_an_id_that_does_not_fit():
    assert encode_wire(258, '"null"', None) == b"\x00\x00\x00\x01\x02"
    for bad in (-1, 2**32):
        with pytest.raises(ValueError, match="does not fit the wire format's 4 bytes"):
            encode_wire(bad, '"null"', None)


# ----------------------------------------------------------------------------------- round trips


def test_every_kind_of_value_comes_back_as_plain_python():
    value = encode_wire(42, EVENT, AN_EVENT)
    assert wire_schema_id(value) == 42
    back = AvroDecoder().decode_wire(value, {42: EVENT}.__getitem__)
    assert back == AN_EVENT
    assert type(back["kind"]) is str and type(back["tag"]) is bytes and type(back["m"]) is dict


def test_a_parsed_schema_encodes_as_its_text_does():
    import fastavro

    parsed = fastavro.parse_schema(json.loads(EVENT))
    assert encode_wire(3, parsed, AN_EVENT) == encode_wire(3, EVENT, AN_EVENT)


FINITE = st.floats(allow_nan=False, allow_infinity=False)
ROWS = st.fixed_dictionaries({
    "flag": st.booleans(), "i": st.integers(-2**31, 2**31 - 1), "n": st.integers(-2**63, 2**63 - 1),
    "f": st.just(0.5), "d": FINITE, "raw": st.binary(max_size=40), "s": st.text(max_size=40),
    "nothing": st.none(), "kind": st.sampled_from(["VIEW", "BUY"]), "tag": st.binary(min_size=4, max_size=4),
    "xs": st.lists(FINITE, max_size=20),
    "m": st.dictionaries(st.text(max_size=8), st.integers(-2**63, 2**63 - 1)),
    "opt": st.none() | FINITE, "either": st.text(max_size=5) | st.integers(-2**63, 2**63 - 1),
    "where": st.fixed_dictionaries({"lat": FINITE}), "again": st.fixed_dictionaries({"lat": FINITE}),
})


@settings(max_examples=200, deadline=None)
@given(ROWS)
def test_decode_inverts_encode(row):
    assert decoded(EVENT, payload_of(EVENT, row)) == row


def test_logical_types_come_back_as_the_numbers_and_text_the_writer_wrote():
    schema = json.dumps({"type": "record", "name": "Stamped", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "maybe", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
    ]})
    at = dt.datetime(2024, 2, 29, 12, 0, 0, 250_000, tzinfo=dt.UTC)
    ref = uuid.UUID("12345678-1234-5678-1234-567812345678")
    value = {"at": at, "at_us": at, "local": dt.datetime(2024, 2, 29, 12, 0), "day": dt.date(2024, 2, 29),
             "clock": dt.time(0, 0, 1, 500_000), "ref": ref, "price": Decimal("-12.34"), "maybe": at}
    back = decoded(schema, payload_of(schema, value))
    assert back == {"at": 1_709_208_000_250, "at_us": 1_709_208_000_250_000, "local": 1_709_208_000_000,
                    "day": 19_782, "clock": 1_500, "ref": str(ref),
                    "price": (-1234).to_bytes(2, "big", signed=True), "maybe": 1_709_208_000_250}
    # the numbers encode back to the same bytes
    assert payload_of(schema, back) == payload_of(schema, value)


def test_a_schema_whose_top_is_not_a_record_decodes_too():
    assert decoded('["null", "long"]', payload_of('["null", "long"]', 5)) == 5
    assert decoded('"string"', payload_of('"string"', "x")) == "x"


# ------------------------------------------------------------------------------ schema evolution


V1 = record("Order", ("id", "string"), ("amount", "double"))
V2 = json.dumps({"type": "record", "name": "Order", "fields": [   # adds an optional field
    {"name": "id", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "coupon", "type": ["null", "string"], "default": None}]})
V3 = json.dumps({"type": "record", "name": "Order", "fields": [   # removes it, adds another
    {"name": "id", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "items", "type": ["null", "long"], "default": None}]})
V4 = json.dumps({"type": "record", "name": "Order", "fields": [   # renames it (an alias)
    {"name": "id", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "count", "type": ["null", "long"], "default": None, "aliases": ["items"]}]})


def test_each_version_of_a_schema_decodes_with_its_own_fields_side_by_side():
    versions = {1: V1, 2: V2, 3: V3, 4: V4}
    decoder = AvroDecoder()
    written = [
        encode_wire(1, V1, {"id": "a", "amount": 1.5}),
        encode_wire(2, V2, {"id": "b", "amount": 2.0, "coupon": "SPRING"}),
        encode_wire(3, V3, {"id": "c", "amount": 3.0, "items": 4}),
        encode_wire(4, V4, {"id": "d", "amount": 4.0, "count": None}),
        encode_wire(1, V1, {"id": "e", "amount": 5.5}),  # an old writer still writing
    ]
    assert [decoder.decode_wire(value, versions.__getitem__) for value in written] == [
        {"id": "a", "amount": 1.5},
        {"id": "b", "amount": 2.0, "coupon": "SPRING"},
        {"id": "c", "amount": 3.0, "items": 4},
        {"id": "d", "amount": 4.0, "count": None},
        {"id": "e", "amount": 5.5},
    ]


# ------------------------------------------------------------------------- refusals and reasons


WORD = record("Word", ("s", "string"))
PAIR = record("Pair", ("a", "long"), ("b", "long"))


@pytest.mark.parametrize(("schema", "payload", "reason"), [
    (WORD, varint(100) + b"abcde", "the Avro payload is truncated for schema 1: Expected 100 bytes, read 5"),
    (WORD, varint(-3) + b"abc", "the Avro payload is truncated for schema 1: Expected -3 bytes, read 3"),
    (PAIR, varint(1), "the Avro payload is truncated for schema 1"),
    (PAIR, b"", "the Avro payload is truncated for schema 1"),
    (record("D", ("d", "double")), b"\x00\x00", "the Avro payload is truncated for schema 1"),
    (PAIR, varint(1) + b"\x80", "the Avro payload does not decode with schema 1: IndexError"),
    (PAIR, varint(1) + varint(2) + b"\x00\x00", "2 bytes after the Avro record of schema 1"),
    (WORD, varint(2) + b"\xff\xfe", "the Avro payload holds a string that is not UTF-8 (schema 1)"),
    (record("U", ("u", ["null", "long"])), varint(5), "the Avro payload does not decode with schema 1: "
                                                      "IndexError"),
    (record("E", ("e", {"type": "enum", "name": "E1", "symbols": ["A"]})), varint(3),
     "the Avro payload does not decode with schema 1: IndexError"),
])
def test_a_payload_that_does_not_decode_is_refused_with_why(schema, payload, reason):
    with pytest.raises(DecodeError) as refused:
        decoded(schema, payload)
    assert refused.value.reason.startswith(reason), refused.value.reason


@pytest.mark.parametrize(("text", "reason"), [
    ("{not json", "schema 9: the writer's schema is not JSON: Expecting property name"),
    ('syntax = "proto3"; message M {}', "schema 9: the writer's schema is not JSON"),
    ('"no-such-type"', "schema 9: the writer's schema does not parse: UnknownType"),
    ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
     "schema 9: the writer's schema does not parse: SchemaParseException: All symbols in an enum must be "
     "unique"),
    ('{"type": "array"}', "schema 9: the writer's schema does not parse: KeyError: 'items'"),
    (record("R", ("a", "Missing")), "schema 9: the writer's schema does not parse: UnknownType: Missing"),
])
def test_a_writer_schema_that_does_not_parse_is_refused_with_why(text, reason):
    with pytest.raises(DecodeError) as refused:
        AvroDecoder().decode(9, text, b"")
    assert refused.value.reason.startswith(reason), refused.value.reason


# ------------------------------------------------------------------- payloads claiming too much


def _bounded(schema: str, payload: bytes) -> str:
    """The reason a payload is refused, checked to take under 0.5 s and 1 MB."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(DecodeError) as refused:
            decoded(schema, payload)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - started < 0.5 and peak < 1_000_000, (time.perf_counter() - started, peak)
    return refused.value.reason


@pytest.mark.parametrize(("schema", "claim"), [
    (record("S", ("s", "string")), varint(2**62)),
    (record("B", ("b", "bytes")), varint(2**62)),
    (record("F", ("f", {"type": "fixed", "name": "Big", "size": 2**40})), b""),
    (record("A", ("a", {"type": "array", "items": "long"})), varint(2**62)),
    (record("A2", ("a", {"type": "array", "items": "boolean"})), varint(-(2**62)) + varint(10)),
    (record("M", ("m", {"type": "map", "values": "null"})), varint(2**62)),
    (record("AA", ("a", {"type": "array", "items": {"type": "array", "items": "long"}})), varint(2**62)),
])
def test_a_length_claimed_past_the_payload_is_refused_without_allocating_it(schema, claim):
    assert "truncated" in _bounded(schema, claim + b"\x02\x02\x02")


ZERO_WIDTH = [
    {"type": "array", "items": "null"},
    {"type": "array", "items": {"type": "fixed", "name": "Nothing", "size": 0}},
    {"type": "array", "items": {"type": "record", "name": "Empty", "fields": []}},
    {"type": "array", "items": {"type": "record", "name": "Nulls", "fields": [
        {"name": "a", "type": "null"},
        {"name": "b", "type": {"type": "record", "name": "E2", "fields": []}}]}},
]


@pytest.mark.parametrize("array", ZERO_WIDTH)
def test_an_array_of_items_that_take_no_bytes_is_refused_at_the_schema(array):
    schema = record("Z", ("z", array))
    # without the check, this 10-byte payload would make a list of 2**62 items
    reason = _bounded(schema, varint(2**62) + b"\x00")
    assert reason == ("schema 1: the writer's schema has an array of items that take no bytes (null, or "
                      "records of such fields): a payload could claim any number of them")


def test_arrays_of_items_that_take_a_byte_are_kept():
    for items in ("boolean", ["null"], {"type": "enum", "name": "One", "symbols": ["A"]},
                  {"type": "array", "items": "long"}, {"type": "map", "values": "null"}):
        schema = record("K", ("k", {"type": "array", "items": items}))
        parse_writer_schema(schema)  # does not raise


LINKED = record("Node", ("value", "long"), ("next", ["null", "Node"]))


def test_a_recursive_schema_is_refused_before_a_payload_can_nest_in_it():
    # fastavro's compiled reader recursed on the C stack into a segmentation fault on this payload
    payload = (varint(1) + varint(1)) * 100_000 + varint(1) + varint(0)
    assert _bounded(LINKED, payload) == ("schema 1: the writer's schema is recursive (Node holds itself): "
                                         "its payloads could nest without bound")
    through_array = record("Tree", ("kids", {"type": "array", "items": "Tree"}))
    with pytest.raises(DecodeError, match=r"recursive \(Tree holds itself\)"):
        parse_writer_schema(through_array)


def _chain(levels: int) -> str:
    """Records R0 … R<levels-1>, each holding the one before by name: flat JSON, deep values."""
    types: list[object] = [{"type": "record", "name": "R0", "fields": [{"name": "v", "type": "long"}]}]
    for i in range(1, levels):
        types.append({"type": "record", "name": f"R{i}", "fields": [{"name": "v", "type": f"R{i - 1}"}]})
    return json.dumps({"type": "record", "name": "Top",
                       "fields": [{"name": f"f{i}", "type": t} for i, t in enumerate(types)]})


def test_a_schema_nested_deeper_than_the_bound_is_refused_however_it_is_written():
    parse_writer_schema(_chain(MAX_SCHEMA_DEPTH - 2))  # within the bound
    with pytest.raises(DecodeError, match=f"nests deeper than {MAX_SCHEMA_DEPTH} types"):
        parse_writer_schema(_chain(MAX_SCHEMA_DEPTH + 1))
    nested: object = "long"
    for _ in range(MAX_SCHEMA_DEPTH + 1):
        nested = {"type": "array", "items": nested}
    with pytest.raises(DecodeError, match=f"nests deeper than {MAX_SCHEMA_DEPTH} types"):
        parse_writer_schema(json.dumps(nested))
    with pytest.raises(DecodeError, match="nests deeper than"):
        parse_writer_schema("[" * 100_000 + "]" * 100_000)  # deeper than the JSON parser goes


def test_a_value_deep_within_the_bound_decodes():
    schema = _chain(40)
    value = AvroDecoder().decode(1, schema, b"\x02" * 40)  # each field's innermost long: 1
    assert value["f0"] == {"v": 1} and value["f39"] == {"v": value["f38"]}
    deepest, levels = value["f39"], 0
    while isinstance(deepest, dict):
        deepest, levels = deepest["v"], levels + 1
    assert (deepest, levels) == (1, 40)


# ------------------------------------------------------------------------------------ the cache


def test_the_decoder_asks_only_for_ids_it_does_not_hold():
    asked: list[int] = []
    schema = record("R", ("n", "long"))
    values = {i: encode_wire(i, schema, {"n": i}) for i in (1, 2, 3)}

    def text(schema_id: int) -> str:
        asked.append(schema_id)
        return schema

    decoder = AvroDecoder(max_schemas=2)
    for schema_id in (1, 1, 2, 1, 2, 3, 3, 1):
        assert decoder.decode_wire(values[schema_id], text) == {"n": schema_id}
    # 3 evicted 1 (the least recently used), so 1 was asked for again
    assert asked == [1, 2, 3, 1] and len(decoder) == 2


def test_a_refused_schema_is_kept_refused_and_the_registrys_errors_pass_through():
    asked: list[int] = []

    def text(schema_id: int) -> str:
        asked.append(schema_id)
        if schema_id == 2:
            raise ConnectionError("registry down")
        return LINKED

    decoder = AvroDecoder()
    for _ in range(3):
        with pytest.raises(DecodeError, match="schema 1: the writer's schema is recursive"):
            decoder.decode_wire(b"\x00\x00\x00\x00\x01\x02", text)
    with pytest.raises(ConnectionError, match="registry down"):
        decoder.decode_wire(b"\x00\x00\x00\x00\x02\x02", text)
    assert asked == [1, 2]


def test_a_record_that_does_not_fit_the_schema_is_refused_when_encoding():
    with pytest.raises(ValueError, match="the record does not fit the schema"):
        encode_wire(1, PAIR, {"a": "not a number", "b": 1})
    with pytest.raises(ValueError, match="the record does not fit the schema"):
        encode_wire(1, PAIR, {"a": 1})


def _answer(decoder: AvroDecoder, value: bytes, text) -> object:
    try:
        return decoder.decode_wire(value, text)
    except DecodeError as exc:
        return ("refused", exc.reason)


def test_a_record_of_the_schema_read_last_is_read_and_refused_as_a_first_one_is():
    # decode_wire's path for a record of the id it read last must answer what a decoder meeting
    # that record first answers: the record, or the same refusal
    a, b = record("A", ("n", "long"), ("s", "string")), record("B", ("x", "double"))
    texts = {1: a, 2: b}.__getitem__
    good = encode_wire(1, a, {"n": 7, "s": "hé"})
    values = [good, good, good[:-1], good, good + b"\x00", good, encode_wire(2, b, {"x": 1.5}),
              encode_wire(2, b, {"x": -2.0}), good, bytes(good[:3]), good, b"\x00" + good[1:5] + b"\x80",
              good, bytearray(good), memoryview(good)]
    decoder = AvroDecoder()
    for value in values:
        assert _answer(decoder, value, texts) == _answer(AvroDecoder(), value, texts), value
    assert ("refused", "1 bytes after the Avro record of schema 1") == _answer(decoder, good + b"\x00", texts)
