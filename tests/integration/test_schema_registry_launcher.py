"""The test schema registry itself (tests/schema_registry): it serves the Confluent-compatible API
on loopback, and a stop and a start keep its port and its schemas."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.timeout(120)

SCHEMA = json.dumps({"type": "record", "name": "Launched", "fields": [{"name": "a", "type": "long"}]})


def _call(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def test_a_stop_and_a_start_keep_its_port_and_its_schemas(schema_registry):
    subject = f"launcher-{time.monotonic_ns()}-value"
    schema_id = _call(f"{schema_registry.url}/subjects/{subject}/versions", {"schema": SCHEMA})["id"]
    port = schema_registry.port
    with schema_registry.stopped():
        assert not schema_registry.running
        with pytest.raises(urllib.error.URLError, match="Connection refused"):
            _call(f"{schema_registry.url}/schemas/ids/{schema_id}")
    assert schema_registry.running and schema_registry.port == port
    assert json.loads(_call(f"{schema_registry.url}/schemas/ids/{schema_id}")["schema"]) == json.loads(SCHEMA)


def test_it_listens_on_loopback_only(schema_registry):
    # the address of this host on another interface, where there is one
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent
            address = probe.getsockname()[0]
        except OSError:
            pytest.skip("this host has no address but loopback")
    if address.startswith("127."):
        pytest.skip("this host has no address but loopback")
    for port in (schema_registry.port, schema_registry.management_port):
        with pytest.raises(OSError), socket.create_connection((address, port), timeout=2):
            pass
