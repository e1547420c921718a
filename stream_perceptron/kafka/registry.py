"""A schema registry client over the Confluent-compatible REST API, on the standard library.

An Avro record in the Confluent wire format names its writer's schema by id; :meth:`SchemaRegistry.schema`
fetches the schema's JSON text (``GET /schemas/ids/{id}``) and keeps it for good, since an id
never changes meaning in a registry. :meth:`~SchemaRegistry.register` and
:meth:`~SchemaRegistry.set_compatibility` serve producers, tests and benchmarks. It speaks to
Confluent Schema Registry, to Apicurio Registry's ``/apis/ccompat/v7`` and to Karapace alike, and
needs neither librdkafka nor an HTTP library: ``http.client`` and ``ssl`` are enough for three
requests, so a worker on kafka-python needs no confluent-kafka for Avro.

Errors (``stream_perceptron/errors.py``), so the worker can tell a fault from bad input:

* :class:`~stream_perceptron.errors.RegistryUnavailable`: no answer (refused, unreachable, or
  silent for ``timeout_s``: connecting takes at most that long, and each later wait, for the TLS
  handshake, the request and each read of the answer, at most what is left of it) or a failure
  (HTTP 5xx, 408, 429). Retry later: the client itself does not retry.
* :class:`~stream_perceptron.errors.SchemaNotFound`: no schema of this id (HTTP 404 with error
  code 40403). A record naming it is bad input (the error is also a ``DecodeError``).
* :class:`~stream_perceptron.errors.RegistryRefused`: the credentials refused (401, 403), a schema
  not taken (409, 422), a certificate not trusted, a redirect (never followed: it would carry the
  credentials elsewhere), an answer over ``max_schema_bytes`` or not the API's JSON (another 404:
  is the URL the registry's API?).

No secret reaches a message or a log: credentials are refused in the URL, the password and the
token are :class:`~pydantic.SecretStr` read only into the request's ``Authorization`` header,
and an error says what failed, never what was sent. The client logs nothing.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote, urlsplit

from pydantic import SecretStr

from stream_perceptron.errors import RegistryRefused, RegistryUnavailable, SchemaNotFound, SettingsError
from stream_perceptron.settings import RegistrySettings, registry_url_problem

MAX_SCHEMA_BYTES = 1_048_576
"""The most bytes an answer of the registry may hold (a schema's JSON text is within it)."""

MAX_CACHED = 10_000
"""Schemas a client keeps (ids never change meaning: one evicted is only fetched again)."""

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_NOT_FOUND = 40403  # Confluent's "Schema not found" (Apicurio's ccompat API says the same)
_RETRYABLE = {408, 429}


class RegisteredSchema(NamedTuple):
    """A schema as the registry gives it for an id."""

    text: str
    """The schema's text (for Avro, its JSON)."""
    schema_type: str
    """``AVRO`` (what the API means when it names none), ``PROTOBUF`` or ``JSON``."""
    references: tuple[dict[str, Any], ...]
    """The schemas it refers to (``name``, ``subject``, ``version``): none for a self-contained one."""


class SchemaRegistry:
    """A client of one schema registry's Confluent-compatible REST API.

    ``url`` is the API's base (``http://host:8081``, Apicurio's ``http://host:8080/apis/ccompat/v7``);
    HTTP basic authentication with ``username`` and ``password``, or a bearer ``token``; an
    ``https`` registry is verified with ``ssl_cafile`` (else the system's CAs), and
    ``ssl_certfile`` (with ``ssl_keyfile``, unless the key is in it) is shown when it asks for a
    client certificate. Each request takes at most ``timeout_s``, and each answer at most
    ``max_schema_bytes``. Safe to share between threads.
    """

    def __init__(
        self,
        url: str,
        *,
        username: str | None = None,
        password: SecretStr | None = None,
        token: SecretStr | None = None,
        ssl_cafile: str | Path | None = None,
        ssl_certfile: str | Path | None = None,
        ssl_keyfile: str | Path | None = None,
        timeout_s: float = 10.0,
        max_schema_bytes: int = MAX_SCHEMA_BYTES,
        max_cached: int = MAX_CACHED,
    ) -> None:
        problem = registry_url_problem(url)
        if problem is not None:
            raise ValueError(f"the schema registry's URL {problem}")
        parts = urlsplit(url.strip())
        if (username is None) != (password is None) or (token is not None and username is not None):
            raise ValueError("log in with a username and its password, or a token, or neither")
        if timeout_s <= 0 or max_schema_bytes < 1 or max_cached < 1:
            raise ValueError("timeout_s, max_schema_bytes and max_cached must be positive")
        self.url = url.strip().rstrip("/")
        self.timeout_s = timeout_s
        self.max_schema_bytes = max_schema_bytes
        self.max_cached = max_cached
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""  # a host: checked above
        self._port = parts.port or (443 if self._https else 80)
        self._base_path = parts.path.rstrip("/")
        self._username = username
        self._password = password
        self._token = token
        self._tls = _tls_context(ssl_cafile, ssl_certfile, ssl_keyfile) if self._https else None
        self._schemas: OrderedDict[int, RegisteredSchema] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: RegistrySettings) -> SchemaRegistry:
        """The client the ``SP_REGISTRY__*`` settings describe; :class:`SettingsError` when no
        URL is set."""
        if settings.url is None:
            raise SettingsError("registry.url is not set (SP_REGISTRY__URL)")
        return cls(settings.url, username=settings.username, password=settings.password,
                   token=settings.token, ssl_cafile=settings.ssl_cafile, ssl_certfile=settings.ssl_certfile,
                   ssl_keyfile=settings.ssl_keyfile, timeout_s=settings.timeout_s)

    def __repr__(self) -> str:
        return f"SchemaRegistry({self.url!r})"

    # ---------------------------------------------------------------------------- reading

    def schema(self, schema_id: int) -> str:
        """The text of the schema of ``schema_id`` (for Avro, the writer's schema's JSON)."""
        return self.lookup(schema_id).text

    def lookup(self, schema_id: int) -> RegisteredSchema:
        """The schema of ``schema_id``: fetched once, then kept (at most ``max_cached``, the least
        recently used dropped)."""
        if isinstance(schema_id, bool) or not isinstance(schema_id, int) or schema_id < 0:
            raise ValueError(f"a schema id is a number from 0, not {schema_id!r}")
        with self._lock:
            kept = self._schemas.get(schema_id)
            if kept is not None:
                self._schemas.move_to_end(schema_id)
                return kept
        found = self._fetch(schema_id)
        with self._lock:
            self._schemas[schema_id] = found
            if len(self._schemas) > self.max_cached:
                self._schemas.popitem(last=False)
        return found

    def cached(self) -> int:
        """How many schemas are kept."""
        with self._lock:
            return len(self._schemas)

    def _fetch(self, schema_id: int) -> RegisteredSchema:
        status, answer = self._request("GET", f"/schemas/ids/{schema_id}")
        if status == 404 and answer.get("error_code") == _NOT_FOUND:
            raise SchemaNotFound(f"schema {schema_id} is not in the schema registry ({self.url})")
        self._check(status, answer, f"schema {schema_id}")
        text = answer.get("schema")
        references = answer.get("references") or []
        if not isinstance(text, str) or not isinstance(references, list):
            raise RegistryRefused(f"schema {schema_id}: the answer of {self.url} is not a schema registry's "
                                  "(no schema text in it)")
        schema_type = answer.get("schemaType") or "AVRO"
        return RegisteredSchema(text, str(schema_type), tuple(r for r in references if isinstance(r, dict)))

    # ---------------------------------------------------------------------------- writing

    def register(self, subject: str, schema_text: str, schema_type: str = "AVRO") -> int:
        """Register ``schema_text`` under ``subject`` (a new version, or the version it already
        is) and return its id; :class:`RegistryRefused` when the subject's compatibility level
        refuses it (409) or it is not a valid schema (422)."""
        status, answer = self._request("POST", f"/subjects/{_segment(subject)}/versions",
                                       {"schema": schema_text, "schemaType": schema_type})
        self._check(status, answer, f"registering under {subject!r}")
        schema_id = answer.get("id")
        if isinstance(schema_id, bool) or not isinstance(schema_id, int):
            raise RegistryRefused(f"registering under {subject!r}: the answer of {self.url} holds no id")
        return schema_id

    def set_compatibility(self, subject: str, level: str) -> None:
        """Set ``subject``'s compatibility level (``BACKWARD``, ``FORWARD``, ``FULL``, their
        ``_TRANSITIVE`` forms, or ``NONE``); :class:`RegistryRefused` for a level it does not know."""
        status, answer = self._request("PUT", f"/config/{_segment(subject)}", {"compatibility": level})
        self._check(status, answer, f"setting the compatibility of {subject!r} to {level!r}")

    # ---------------------------------------------------------------------------- HTTP

    def _check(self, status: int, answer: dict[str, Any], what: str) -> None:
        """Return for a 2xx answer, else raise the error its status means."""
        if 200 <= status < 300:
            return
        said = " ".join(str(answer.get("message") or "").split())[:300]
        said = f": {said}" if said else ""
        if status >= 500 or status in _RETRYABLE:
            raise RegistryUnavailable(f"{what}: the schema registry ({self.url}) failed with HTTP "
                                      f"{status}{said}")
        if status in (401, 403):
            raise RegistryRefused(f"{what}: the schema registry ({self.url}) refused the credentials (HTTP "
                                  f"{status}; SP_REGISTRY__USERNAME and PASSWORD, or TOKEN){said}")
        if 300 <= status < 400:
            raise RegistryRefused(f"{what}: the schema registry ({self.url}) answered with a redirect (HTTP "
                                  f"{status}), not followed: set the URL it points to")
        if status == 404:
            raise RegistryRefused(f"{what}: HTTP 404 from {self.url}{said}: is it the registry's "
                                  "Confluent-compatible API (Apicurio: .../apis/ccompat/v7)?")
        raise RegistryRefused(f"{what}: the schema registry ({self.url}) refused it with HTTP {status}{said}")

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None
                 ) -> tuple[int, dict[str, Any]]:
        """One request; the status and the answer's JSON object (empty when it has none)."""
        deadline = time.monotonic() + self.timeout_s
        headers = {"Accept": f"{_CONTENT_TYPE}, application/json", "User-Agent": "stream-perceptron"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = _CONTENT_TYPE
        authorization = self._authorization()
        if authorization is not None:
            headers["Authorization"] = authorization
        connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
        try:
            connection.connect()
            if self._tls is not None:  # the handshake within what is left of the deadline
                _until(connection, deadline)
                connection.sock = self._tls.wrap_socket(connection.sock, server_hostname=self._host)
            _until(connection, deadline)
            connection.request(method, self._base_path + path, body=data, headers=headers)
            _until(connection, deadline)
            response = connection.getresponse()
            raw = self._read(response, connection, deadline)
            status = response.status
        except ssl.SSLCertVerificationError as exc:
            raise RegistryRefused(f"the schema registry's certificate ({self.url}) is not trusted: "
                                  f"{exc.verify_message} (SP_REGISTRY__SSL_CAFILE)") from None
        except (OSError, http.client.HTTPException) as exc:
            raise RegistryUnavailable(f"the schema registry ({self.url}) did not answer: "
                                      f"{_describe(exc)}") from None
        finally:
            connection.close()
        return status, self._json(raw, status)

    def _read(self, response: http.client.HTTPResponse, connection: http.client.HTTPConnection,
              deadline: float) -> bytes:
        declared = response.getheader("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_schema_bytes:
            raise self._too_large()
        chunks: list[bytes] = []
        size = 0
        while True:
            _until(connection, deadline)
            chunk = response.read1(65_536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self.max_schema_bytes:
                raise self._too_large()
            chunks.append(chunk)

    def _too_large(self) -> RegistryRefused:
        return RegistryRefused(f"the schema registry ({self.url}) answered with more than "
                               f"{self.max_schema_bytes:,} bytes (max_schema_bytes)")

    def _json(self, raw: bytes, status: int) -> dict[str, Any]:
        if not raw.strip():
            return {}
        try:
            answer = json.loads(raw)
        except ValueError:
            if 200 <= status < 300:
                raise RegistryRefused(f"the answer of {self.url} is not JSON: is it the schema registry's "
                                      "API?") from None
            return {}  # an error page: its status says enough
        return answer if isinstance(answer, dict) else {}

    def _authorization(self) -> str | None:
        if self._token is not None:
            return f"Bearer {self._token.get_secret_value()}"
        if self._username is not None and self._password is not None:
            pair = f"{self._username}:{self._password.get_secret_value()}".encode()
            return f"Basic {base64.b64encode(pair).decode()}"
        return None


def _tls_context(cafile: str | Path | None, certfile: str | Path | None,
                 keyfile: str | Path | None) -> ssl.SSLContext:
    """The TLS context of an https registry; :class:`RegistryRefused` naming the file it cannot load."""
    try:
        context = ssl.create_default_context(cafile=None if cafile is None else str(cafile))
    except (OSError, ssl.SSLError) as exc:
        raise RegistryRefused(f"the schema registry's CA file {cafile} cannot be loaded "
                              f"(SP_REGISTRY__SSL_CAFILE): {_describe(exc)}") from None
    if certfile is not None:
        try:
            context.load_cert_chain(str(certfile), None if keyfile is None else str(keyfile))
        except (OSError, ssl.SSLError) as exc:
            raise RegistryRefused(f"the client certificate {certfile} or its key cannot be loaded "
                                  f"(SP_REGISTRY__SSL_CERTFILE, SP_REGISTRY__SSL_KEYFILE): {_describe(exc)}"
                                  ) from None
    return context


def _until(connection: http.client.HTTPConnection, deadline: float) -> None:
    """What is left of the request's time, as the socket's timeout; TimeoutError when none is."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out")
    if connection.sock is not None:
        connection.sock.settimeout(left)


def _segment(name: str) -> str:
    """A subject as one path segment (``/`` and every other reserved character escaped)."""
    return quote(name, safe="")


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
