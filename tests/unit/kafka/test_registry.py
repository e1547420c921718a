"""The schema registry client (stream_perceptron/kafka/registry.py) against a small HTTP server in
this process that answers as the Confluent-compatible API does, or fails as a registry can: what
each answer becomes, the cache, the bounds on time and size, TLS, and secrets kept out of every
message. tests/integration/kafka/test_registry.py runs it against Apicurio Registry."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from stream_perceptron.errors import (
    DecodeError,
    RegistryRefused,
    RegistryUnavailable,
    SchemaNotFound,
    SettingsError,
)
from stream_perceptron.kafka.registry import SchemaRegistry
from stream_perceptron.settings import RegistrySettings
from tests.unit.test_layers import loaded_by

pytestmark = pytest.mark.timeout(60)

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]})
PASSWORD = "pw-0d9f2c"  # noqa: S105 - a test's
TOKEN = "tok-77ab31"  # noqa: S105


class Fake:
    """What the fake registry holds and answers, and what it was asked."""

    def __init__(self) -> None:
        self.schemas: dict[int, dict[str, Any]] = {1: {"schema": SCHEMA}}
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        # path -> (status, headers, body) answered instead of the API's own answer
        self.answers: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.stall_s = 0.0
        self.next_id = 10

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if path in self.answers:
            return self.answers[path]
        if method == "GET" and path.startswith("/schemas/ids/"):
            found = self.schemas.get(int(path.rsplit("/", 1)[1]))
            if found is None:
                return _json(404, {"error_code": 40403, "message": "Schema not found"})
            return _json(200, found)
        if method == "POST" and path.endswith("/versions"):
            self.next_id += 1
            self.schemas[self.next_id] = {"schema": json.loads(body)["schema"]}
            return _json(200, {"id": self.next_id})
        if method == "PUT" and path.startswith("/config/"):
            return _json(200, json.loads(body))
        return 404, {}, b""


def _json(status: int, body: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/vnd.schemaregistry.v1+json"}, json.dumps(body).encode()


def serve(fake: Fake, tls: ssl.SSLContext | None = None) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            fake.requests.append((self.command, self.path, dict(self.headers), body))
            if fake.stall_s:
                time.sleep(fake.stall_s)
            status, headers, data = fake.answer(self.command, self.path, body)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _any

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    scheme = "https" if tls is not None else "http"
    return server, f"{scheme}://{'localhost' if tls else '127.0.0.1'}:{server.server_address[1]}"


@pytest.fixture
def fake() -> Fake:
    return Fake()


@pytest.fixture
def registry_url(fake: Fake) -> Iterator[str]:
    server, url = serve(fake)
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture
def client(registry_url: str) -> Callable[..., SchemaRegistry]:
    def make(**options: Any) -> SchemaRegistry:
        return SchemaRegistry(registry_url, **{"timeout_s": 2.0, **options})

    return make


# ---------------------------------------------------------------------------------- reading


def test_a_schema_is_fetched_once_and_kept(client, fake):
    registry = client()
    assert registry.schema(1) == SCHEMA
    assert registry.schema(1) == SCHEMA
    assert [(m, p) for m, p, _, _ in fake.requests] == [("GET", "/schemas/ids/1")]
    assert registry.cached() == 1
    found = registry.lookup(1)
    assert (found.schema_type, found.references) == ("AVRO", ())


def test_at_most_max_cached_schemas_are_kept_the_least_recently_used_dropped(client, fake):
    fake.schemas.update({2: {"schema": '"long"'}, 3: {"schema": '"string"'}})
    registry = client(max_cached=2)
    for schema_id in (1, 2, 1, 3, 1, 2):
        registry.schema(schema_id)
    assert [p for _, p, _, _ in fake.requests] == [f"/schemas/ids/{i}" for i in (1, 2, 3, 2)]
    assert registry.cached() == 2


def test_the_type_and_references_of_a_schema_are_kept_as_given(client, fake):
    fake.schemas[5] = {"schema": 'syntax = "proto3";', "schemaType": "PROTOBUF",
                       "references": [{"name": "other.proto", "subject": "other", "version": 1}]}
    found = client().lookup(5)
    assert found.schema_type == "PROTOBUF" and found.references[0]["subject"] == "other"


def test_an_unknown_id_is_schema_not_found_a_records_fault(client, fake):
    registry = client()
    with pytest.raises(SchemaNotFound) as missing:
        registry.schema(404)
    assert isinstance(missing.value, DecodeError)  # a dead letter with its reason
    assert missing.value.reason == f"schema 404 is not in the schema registry ({registry.url})"
    with pytest.raises(SchemaNotFound):  # not kept: asked again
        registry.schema(404)
    assert len(fake.requests) == 2


def test_a_404_that_is_not_the_apis_points_at_the_url(fake):
    server, url = serve(fake)
    try:
        registry = SchemaRegistry(url + "/apis/wrong", timeout_s=2)
        said = r"HTTP 404 from .*/apis/wrong: is it the registry's Confluent-compatible API \(Apicurio: "
        with pytest.raises(RegistryRefused, match=said + r"\.\.\./apis/ccompat/v7\)\?"):
            registry.schema(1)
        assert fake.requests[0][1] == "/apis/wrong/schemas/ids/1"  # the URL's path is the base
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [500, 502, 503, 408, 429])
def test_a_failing_registry_is_unavailable_to_retry(client, fake, status):
    fake.answers["/schemas/ids/1"] = _json(status, {"error_code": status * 100, "message": "busy"})
    said = f"schema 1: the schema registry .* failed with HTTP {status}: busy"
    with pytest.raises(RegistryUnavailable, match=said):
        client().schema(1)


@pytest.mark.parametrize(("answer", "reason"), [
    ((200, {}, b"<html>hello</html>"), "is not JSON: is it the schema registry's API?"),
    ((200, {}, b'{"id": 1}'), "schema 1: the answer of .* is not a schema registry's"),
    ((302, {"Location": "http://elsewhere.invalid/"}, b""),
     r"answered with a redirect \(HTTP 302\), not followed"),
    ((418, {}, b""), "schema 1: the schema registry .* refused it with HTTP 418"),
])
def test_an_answer_that_is_not_the_apis_is_refused(client, fake, answer, reason):
    fake.answers["/schemas/ids/1"] = answer
    with pytest.raises(RegistryRefused, match=reason):
        client().schema(1)


def test_an_answer_over_max_schema_bytes_is_refused_before_it_is_read_whole(client, fake):
    big = json.dumps({"schema": "x" * 200_000}).encode()
    fake.answers["/schemas/ids/1"] = (200, {}, big)
    with pytest.raises(RegistryRefused, match="answered with more than 100,000 bytes"):
        client(max_schema_bytes=100_000).schema(1)
    # no Content-Length: counted as it is read
    fake.answers["/schemas/ids/1"] = (200, {"Transfer-Encoding": "chunked", "Content-Length": "x"},
                                      b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big))
    with pytest.raises(RegistryRefused, match="answered with more than 100,000 bytes"):
        client(max_schema_bytes=100_000).schema(1)


def test_a_stopped_registry_is_unavailable_at_once():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens once closed
    started = time.monotonic()
    with pytest.raises(RegistryUnavailable, match=r"did not answer: ConnectionRefusedError"):
        SchemaRegistry(f"http://127.0.0.1:{port}", timeout_s=5).schema(1)
    assert time.monotonic() - started < 1


def test_a_silent_registry_is_unavailable_after_the_timeout(client, fake):
    fake.stall_s = 3.0
    started = time.monotonic()
    with pytest.raises(RegistryUnavailable, match="did not answer: TimeoutError"):
        client(timeout_s=0.5).schema(1)
    assert 0.4 < time.monotonic() - started < 1.5


def test_a_listener_that_never_answers_a_tls_handshake_is_unavailable_after_the_timeout():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts (the backlog), says nothing
        started = time.monotonic()
        with pytest.raises(RegistryUnavailable, match="TimeoutError"):
            SchemaRegistry(f"https://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.5).schema(1)
        assert time.monotonic() - started < 1.5


# ---------------------------------------------------------------------------------- writing


def test_register_returns_the_id_and_sends_the_schema_and_its_type(client, fake):
    registry = client()
    assert registry.register("orders-value", SCHEMA) == 11
    method, path, headers, body = fake.requests[-1]
    assert (method, path) == ("POST", "/subjects/orders-value/versions")
    assert json.loads(body) == {"schema": SCHEMA, "schemaType": "AVRO"}
    assert headers["Content-Type"] == "application/vnd.schemaregistry.v1+json"
    assert registry.schema(11) == SCHEMA


def test_a_subject_is_one_path_segment(client, fake):
    client().set_compatibility("a/b c?", "BACKWARD")
    method, path, _, body = fake.requests[-1]
    assert (method, path, json.loads(body)) == ("PUT", "/config/a%2Fb%20c%3F", {"compatibility": "BACKWARD"})


@pytest.mark.parametrize(("status", "code", "message"), [
    (409, 409, "Incompatible artifact: orders-value [AVRO]"),
    (422, 42201, "Invalid schema"),
])
def test_a_schema_the_registry_does_not_take_is_refused_with_its_message(client, fake, status, code, message):
    fake.answers["/subjects/orders-value/versions"] = _json(status, {"error_code": code, "message": message})
    with pytest.raises(RegistryRefused, match=f"registering under 'orders-value': .* refused it with HTTP "
                                              rf"{status}: {message.replace('[', '.').replace(']', '.')}"):
        client().register("orders-value", SCHEMA)


# ------------------------------------------------------------------------ credentials and TLS


@pytest.mark.parametrize(("options", "sent"), [
    ({"username": "worker", "password": SecretStr(PASSWORD)},
     "Basic " + base64.b64encode(f"worker:{PASSWORD}".encode()).decode()),
    ({"token": SecretStr(TOKEN)}, f"Bearer {TOKEN}"),
    ({}, None),
])
def test_the_credentials_go_in_the_authorization_header_only(client, fake, options, sent):
    registry = client(**options)
    registry.schema(1)
    assert fake.requests[0][2].get("Authorization") == sent
    fake.answers["/schemas/ids/2"] = _json(401, {"error_code": 40101, "message": "Unauthorized"})
    with pytest.raises(RegistryRefused, match=r"refused the credentials \(HTTP 401; ") as refused:
        registry.schema(2)
    for text in (str(refused.value), repr(registry), str(vars(registry))):
        assert PASSWORD not in text and TOKEN not in text


def test_a_url_with_credentials_is_refused_without_saying_them():
    with pytest.raises(ValueError, match="holds credentials") as refused:
        SchemaRegistry(f"http://worker:{PASSWORD}@localhost:8081")
    assert PASSWORD not in str(refused.value)
    for url in ("ftp://host", "localhost:8081", "http://"):
        with pytest.raises(ValueError, match="URL is not an http:// or https:// URL with a host"):
            SchemaRegistry(url)
    with pytest.raises(ValueError, match="URL has a query or a fragment"):
        SchemaRegistry("http://registry/?x=1")
    with pytest.raises(ValueError, match="a username and its password, or a token"):
        SchemaRegistry("http://h", username="u", token=SecretStr(TOKEN))


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.apache_kafka import make_tls

    directory = tmp_path_factory.mktemp("tls")
    try:
        make_tls(directory, name="registry test CA")
    except Exception as exc:  # noqa: BLE001 - no openssl CLI
        pytest.skip(f"cannot make a test CA: {exc}")
    return directory


def test_an_https_registry_is_verified_with_the_ca_given(fake, tls_files):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_files / "server.pem", tls_files / "server.key")
    server, url = serve(fake, tls=context)
    try:
        assert SchemaRegistry(url, ssl_cafile=tls_files / "ca.pem", timeout_s=5).schema(1) == SCHEMA
        with pytest.raises(RegistryRefused, match=r"certificate \(https://localhost:\d+\) is not trusted: "
                                                  r".*\(SP_REGISTRY__SSL_CAFILE\)"):
            SchemaRegistry(url, timeout_s=5).schema(1)  # the system's CAs do not know it
    finally:
        server.shutdown()
        server.server_close()


def test_a_client_certificate_that_cannot_be_loaded_is_named(tmp_path):
    missing = tmp_path / "client.pem"
    with pytest.raises(RegistryRefused, match=f"the client certificate {missing} or its key cannot be"):
        SchemaRegistry("https://localhost:1", ssl_certfile=missing)


# ------------------------------------------------------------------------ settings, imports


def test_the_settings_make_the_client():
    settings = RegistrySettings(url="http://registry:8081/apis/ccompat/v7/", token=SecretStr(TOKEN),
                                timeout_s=3)
    registry = SchemaRegistry.from_settings(settings)
    assert (registry.url, registry.timeout_s) == ("http://registry:8081/apis/ccompat/v7", 3)
    with pytest.raises(SettingsError, match=r"registry.url is not set \(SP_REGISTRY__URL\)"):
        SchemaRegistry.from_settings(RegistrySettings())


def test_the_client_loads_no_kafka_client_no_numpy_and_no_codec():
    loaded = loaded_by(["stream_perceptron.kafka.registry"])
    assert not loaded & {"kafka", "confluent_kafka", "numpy", "fastavro"}
