"""The schema registry client (stream_perceptron/kafka/registry.py) and the Avro codec against a
real registry, Apicurio Registry (the ``schema_registry`` fixture): register, fetch by id,
evolve a subject under a compatibility level, the cache, the registry stopped and started
again, an id it does not hold."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from stream_perceptron.codec.avro import AvroDecoder, encode_wire, wire_schema_id
from stream_perceptron.errors import RegistryRefused, RegistryUnavailable, SchemaNotFound
from stream_perceptron.kafka.registry import SchemaRegistry

pytestmark = pytest.mark.timeout(120)

TIMEOUT_S = 2.0


def _subject() -> str:
    return f"orders-{uuid.uuid4().hex[:12]}-value"


def _order(*extra: dict) -> str:
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "string"}, {"name": "amount", "type": "double"}, *extra]})


V1 = _order()
V2 = _order({"name": "coupon", "type": ["null", "string"], "default": None})
V3_REQUIRED = _order({"name": "country", "type": "string"})  # no default: not BACKWARD compatible


@pytest.fixture
def registry(schema_registry) -> SchemaRegistry:
    return SchemaRegistry(schema_registry.url, timeout_s=TIMEOUT_S)


def test_a_registered_schema_is_fetched_by_its_id(registry):
    subject = _subject()
    schema_id = registry.register(subject, V1)
    assert registry.register(subject, V1) == schema_id  # the same schema again: the same version
    fresh = SchemaRegistry(registry.url, timeout_s=TIMEOUT_S)
    assert json.loads(fresh.schema(schema_id)) == json.loads(V1)
    assert fresh.lookup(schema_id).schema_type == "AVRO"


def test_a_subject_evolves_as_its_compatibility_level_allows_and_every_version_decodes(registry):
    subject = _subject()
    registry.set_compatibility(subject, "BACKWARD")
    first = registry.register(subject, V1)
    second = registry.register(subject, V2)  # an optional field added: backward compatible
    assert first != second
    with pytest.raises(RegistryRefused, match=f"registering under '{subject}': .* refused it with HTTP 409"):
        registry.register(subject, V3_REQUIRED)
    written = [encode_wire(first, V1, {"id": "a", "amount": 1.5}),
               encode_wire(second, V2, {"id": "b", "amount": 2.0, "coupon": "SPRING"}),
               encode_wire(first, V1, {"id": "c", "amount": 3.0})]
    reader = SchemaRegistry(registry.url, timeout_s=TIMEOUT_S)
    decoder = AvroDecoder()
    assert [decoder.decode_wire(value, reader.schema) for value in written] == [
        {"id": "a", "amount": 1.5}, {"id": "b", "amount": 2.0, "coupon": "SPRING"},
        {"id": "c", "amount": 3.0}]
    assert reader.cached() == 2 and len(decoder) == 2


def test_a_level_the_registry_does_not_know_is_refused(registry):
    with pytest.raises(RegistryRefused, match="HTTP 422"):
        registry.set_compatibility(_subject(), "SOMETIMES")


def test_an_id_the_registry_does_not_hold_is_schema_not_found(registry):
    with pytest.raises(SchemaNotFound, match=r"schema 999999999 is not in the schema registry"):
        registry.schema(999_999_999)


def test_the_url_without_the_api_path_is_named_as_the_problem(schema_registry):
    bare = SchemaRegistry(schema_registry.base_url, timeout_s=TIMEOUT_S)
    with pytest.raises(RegistryRefused, match=r"HTTP 404 from .*: is it the registry's Confluent-compatible"):
        bare.schema(1)


def test_a_stopped_registry_is_unavailable_within_the_timeout_and_serves_again_once_started(
        registry, schema_registry):
    subject = _subject()
    kept = registry.register(subject, V1)
    assert registry.schema(kept)  # now cached
    later = registry.register(subject + "-later", V2)  # registered, never fetched by this client
    value = encode_wire(later, V2, {"id": "x", "amount": 1.0, "coupon": None})
    decoder = AvroDecoder()
    with schema_registry.stopped():
        assert json.loads(registry.schema(kept)) == json.loads(V1)  # from the cache: no request
        started = time.monotonic()
        with pytest.raises(RegistryUnavailable, match="did not answer"):
            registry.schema(later)
        with pytest.raises(RegistryUnavailable):  # through the decoder, untouched
            decoder.decode_wire(value, registry.schema)
        assert time.monotonic() - started < 2 * TIMEOUT_S
        assert len(decoder) == 0  # nothing kept for an id whose schema did not come
    assert decoder.decode_wire(value, registry.schema) == {"id": "x", "amount": 1.0, "coupon": None}
    assert wire_schema_id(value) == later
