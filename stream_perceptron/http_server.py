"""One small HTTP/1.1 server for the worker's endpoints and the dashboard, bounded against hostile clients.

:class:`HTTPServer` answers ``GET`` and ``HEAD`` on a fixed set of paths, each a function from a
:class:`Request` to a :class:`Response`; it knows no model and no Kafka. The worker's ``/metrics``,
``/healthz`` and ``/readyz`` (:mod:`stream_perceptron.worker.observe`) and the dashboard
(:mod:`stream_perceptron.commands.dashboard`) are served by it.

**One event loop, not a thread per connection.** The server runs an :mod:`asyncio` loop in the one
thread that calls :meth:`HTTPServer.serve_forever`. A connection costs a socket and one buffer of
``head_bytes + 1`` bytes, which is all it ever reads its request into (reading pauses while it is
full), never a thread: a client that holds connections open holds neither threads nor their
stacks, however much it sends, and a scrape is answered while hundreds of connections wait. A
bounded pool of threads would be taken whole by as many slow clients as it has threads, and a
scrape would wait behind them. The answers are computed on the loop: every route here is quick
and waits on nothing but a lock held briefly.

**What a client may take** (:class:`Limits`, per server):

* a request line of at most ``request_line_bytes`` (else 414), a head (request line and header
  lines) of at most ``head_bytes`` in all (else 431) and ``header_lines`` header lines (else 431);
  a refused head is answered and the connection closed;
* ``read_timeout_s`` for the whole head, counted from the connection (or from the end of the
  previous answer on a kept-alive connection), however slowly the bytes come: a client that sends
  a byte a second is closed when it runs out, without an answer;
* ``write_timeout_s`` for an answer to be taken by the client, else the connection is dropped;
* ``connections`` open at once. A connection past the bound takes the place of the one that has
  waited longest for its request head (a kept-alive connection between requests included), which
  is closed; when every connection is being answered, the newcomer is answered 503 and closed.
  So a scrape gets through however many connections others hold open, at the cost of their oldest;
* a listen backlog of ``backlog``.

**What it answers.** ``GET`` and ``HEAD`` (the same head, no body) on the paths it was given, each
matched exactly (no decoding, no file system: ``/../x`` or ``/%2e%2e/x`` is simply not a path
here, 404); any other method is 405 with ``Allow: GET, HEAD``; a request with a body (a
``Content-Length`` other than 0, a ``Transfer-Encoding``) is 400, and so is a head that does not
parse; a version other than ``HTTP/1.x`` is 505. Every answer carries :data:`SECURITY_HEADERS`. With a
``token``, every path but the ``open_paths`` asks for it (:func:`authorized`), else 401 with a
challenge a browser answers by asking for a user name and password.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import re
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    # nothing from elsewhere: a page, its script and its style come from this server only, and no
    # other site may frame it
    ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"),
    ("Referrer-Policy", "no-referrer"),
)
"""Sent with every answer of every :class:`HTTPServer`, whatever its status."""

METHODS = ("GET", "HEAD")
"""The methods answered; any other is 405."""


@dataclass(frozen=True)
class Limits:
    """What one client may take of a :class:`HTTPServer` (see the module's docstring)."""

    request_line_bytes: int = 4096
    head_bytes: int = 8192
    header_lines: int = 32
    read_timeout_s: float = 10.0
    write_timeout_s: float = 10.0
    connections: int = 64
    backlog: int = 128
    linger_s: float = 1.0
    """After a refused head, what the client still sends is read and dropped for this long (at
    most ``linger_bytes``), so that it reads the answer rather than a reset connection."""
    linger_bytes: int = 65536

    def __post_init__(self) -> None:
        if min(self.request_line_bytes, self.head_bytes, self.header_lines, self.connections,
               self.backlog) < 1 or min(self.read_timeout_s, self.write_timeout_s) <= 0:
            raise ValueError(f"every limit must be positive: {self}")
        if self.request_line_bytes > self.head_bytes:
            raise ValueError("request_line_bytes must be at most head_bytes")


@dataclass(frozen=True)
class Request:
    """A request as a route sees it: ``GET`` or ``HEAD``, the path and the query (undecoded), and
    the header fields (names in lower case, values as sent)."""

    method: str
    path: str
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Response:
    """What a route answers. A ``HEAD`` request gets the same status and head, without the body."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()


Route = Callable[[Request], Response]
"""A path's answer to a request."""


def authorized(header: str | None, token: bytes) -> bool:
    """Whether an ``Authorization`` header value carries ``token``: ``Bearer <token>``, or
    ``Basic`` credentials whose password is the token (the user name is not checked). Compared in
    constant time (the digests of both, so not even the length is told).

    >>> token = b"s3cret-token-0123456789"
    >>> authorized("Bearer s3cret-token-0123456789", token), authorized("Bearer nope", token)
    (True, False)
    >>> authorized("Basic " + base64.b64encode(b"me:s3cret-token-0123456789").decode(), token)
    True
    >>> authorized(None, token), authorized("Basic !!", token), authorized("Digest x", token)
    (False, False, False)
    """
    if header is None:
        return False
    scheme, _, credentials = header.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "bearer":
        given = credentials.encode("latin-1", errors="replace")
    elif scheme.lower() == "basic":
        try:
            given = base64.b64decode(credentials, validate=True).partition(b":")[2]
        except (binascii.Error, ValueError):
            return False
    else:
        return False
    return hmac.compare_digest(hashlib.sha256(given).digest(), hashlib.sha256(token).digest())


class _Refused(Exception):
    """A request answered with an error, after which the connection is closed."""

    def __init__(self, status: HTTPStatus, why: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(why)
        self.response = Response(status, f"{why}\n".encode(), headers=headers)


# a header field's name: an RFC 9110 token
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VERSION = re.compile(r"HTTP/(\d)\.(\d)")
# a header field of which one copy only is taken
_SINGLE = frozenset({"authorization", "content-length", "transfer-encoding", "host", "connection"})


class _Connection(asyncio.BufferedProtocol):
    """One connection. What the client sends is read into a buffer of ``head_bytes + 1`` made once
    (reading pauses while it is full), so a connection never holds more of its request than
    that, however much is sent; after a refusal, what still comes is read into the server's one
    scratch buffer and dropped. ``waiting_since``: since when it waits for a request head (None
    while it is answered; minus infinity once refused, the first to give way)."""

    def __init__(self, server: HTTPServer) -> None:
        self._server = server
        self._limits = server.limits
        self._buffer = bytearray(self._limits.head_bytes + 1)
        self._filled = 0
        self._dropping = False  # lingering: what comes is dropped
        self._dropped = 0
        self._reading_paused = False
        self._writing_paused = False
        self._eof = False
        self._lost = False
        self._data: asyncio.Future[None] | None = None  # woken by data, the end of it, or a loss
        self._writable: asyncio.Future[None] | None = None  # woken when writing may go on
        self._gone: asyncio.Future[None] | None = None  # woken when the connection is lost
        self.transport: asyncio.Transport | None = None
        self.waiting_since: float | None = None
        self.peer = "?"

    # ------------------------------------------------------------------ asyncio's calls
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.waiting_since = asyncio.get_running_loop().time()
        self._server._opened(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._dropping:
            return self._server._scratch
        return memoryview(self._buffer)[self._filled:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._dropping:
            self._dropped += nbytes
            if self._dropped >= self._limits.linger_bytes:
                self._pause_reading()
        else:
            self._filled += nbytes
            if self._filled == len(self._buffer):
                self._pause_reading()
        _wake(self._data)

    def eof_received(self) -> bool:
        self._eof = True
        _wake(self._data)
        return True  # the answer may still be written; the connection is closed after it

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = self._lost = True
        for waiter in (self._data, self._writable, self._gone):
            _wake(waiter)
        self._server._closed(self)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        _wake(self._writable)

    # ------------------------------------------------------------------ what the conversation awaits
    async def head(self) -> list[bytes] | None:
        """The next request's head as lines, their line ends removed (the request line first), or
        None when the client closed before sending one; raises :class:`_Refused` past a bound."""
        limits = self._limits
        while True:
            self._skip_empty_lines()
            buffer, filled = self._buffer, self._filled
            first = buffer.find(b"\n", 0, filled)
            if first >= limits.request_line_bytes or (first == -1 and filled > limits.request_line_bytes):
                raise _Refused(HTTPStatus.REQUEST_URI_TOO_LONG,
                               f"request line too long: at most {limits.request_line_bytes} bytes")
            end = _head_end(buffer, filled)
            if end > limits.head_bytes or (end == -1 and filled > limits.head_bytes):
                raise _Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                               f"request header fields too large: at most {limits.head_bytes} bytes in all")
            lines = buffer.count(b"\n", 0, filled if end == -1 else end - 1)
            if lines > limits.header_lines + 1:
                raise _Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                               f"request header fields too large: at most {limits.header_lines} lines")
            if end != -1:
                head = bytes(buffer[:end])
                self._consume(end)
                return [line.removesuffix(b"\r") for line in head.split(b"\n")[:-2]]
            if self._eof:
                return None
            await self._wait_for_data()

    async def write(self, data: bytes) -> None:
        """Write ``data``; wait while the client does not take it, at most ``write_timeout_s``
        (then :class:`TimeoutError`)."""
        assert self.transport is not None
        if self._lost:
            raise ConnectionResetError("the client went away")
        self.transport.write(data)
        if self._writing_paused and not self._lost:
            self._writable = asyncio.get_running_loop().create_future()
            await asyncio.wait_for(self._writable, self._limits.write_timeout_s)

    async def close(self) -> None:
        """Close once what was written is sent, at most ``write_timeout_s`` (then :class:`TimeoutError`)."""
        assert self.transport is not None
        self.transport.close()
        if not self._lost:
            self._gone = asyncio.get_running_loop().create_future()
            await asyncio.wait_for(self._gone, self._limits.write_timeout_s)

    async def linger(self) -> None:
        """End what is written, then read and drop what the client still sends, for at most
        ``linger_s`` and ``linger_bytes``, so that it reads the answer rather than a reset."""
        assert self.transport is not None
        self.waiting_since = float("-inf")
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._dropping, self._filled = True, 0
        self._resume_reading()

        async def until_done() -> None:
            while not self._eof and self._dropped < self._limits.linger_bytes:
                await self._wait_for_data()

        try:
            await asyncio.wait_for(until_done(), self._limits.linger_s)
        except TimeoutError:
            pass

    def abort(self) -> None:
        """Close at once, dropping what is not sent."""
        if self.transport is not None:
            self.transport.abort()

    # ------------------------------------------------------------------ helpers
    async def _wait_for_data(self) -> None:
        self._data = asyncio.get_running_loop().create_future()
        await self._data

    def _skip_empty_lines(self) -> None:
        """Drop the empty lines before a request line (RFC 9112, 2.2)."""
        buffer, skip = self._buffer, 0
        while skip < self._filled:
            if buffer[skip] == 0x0A:
                skip += 1
            elif buffer[skip] == 0x0D and skip + 1 < self._filled and buffer[skip + 1] == 0x0A:
                skip += 2
            else:
                break
        if skip:
            self._consume(skip)

    def _consume(self, n: int) -> None:
        """Drop the first ``n`` bytes read; what follows moves to the front."""
        rest = self._filled - n
        self._buffer[:rest] = self._buffer[n:self._filled]  # the same length: the buffer keeps its size
        self._filled = rest
        self._resume_reading()

    def _pause_reading(self) -> None:
        if not self._reading_paused and self.transport is not None and not self._lost:
            self._reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self.transport is not None and not self._lost:
            self._reading_paused = False
            self.transport.resume_reading()


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _head_end(buffer: bytearray, filled: int) -> int:
    """Where the head in ``buffer[:filled]`` ends (after its empty line), or -1 before its end.

    >>> _head_end(bytearray(b"GET / HTTP/1.1\\r\\nA: b\\r\\n\\r\\nnext"), 28)
    24
    >>> _head_end(bytearray(b"GET /\\n\\n"), 7), _head_end(bytearray(b"GET / HTTP/1.1\\r\\n"), 16)
    (7, -1)
    """
    ends = [i + len(end) for end in (b"\n\r\n", b"\n\n") if (i := buffer.find(end, 0, filled)) != -1]
    return min(ends, default=-1)


class HTTPServer:
    """``routes`` served on ``address`` (host, port; port 0 takes a free one) within ``limits``.

    Bound at construction (raises :class:`OSError` when the address cannot be bound), served by
    :meth:`serve_forever` in the calling thread until :meth:`shutdown` (from another thread);
    :meth:`server_close` frees the port. ``token``: every path but ``open_paths`` asks for it.
    ``name`` goes in the ``Server`` header.
    """

    def __init__(
        self,
        address: tuple[str, int],
        routes: Mapping[str, Route],
        *,
        token: str | None = None,
        open_paths: Iterable[str] = (),
        limits: Limits | None = None,
        name: str = "stream-perceptron",
    ) -> None:
        self.routes = dict(routes)
        self.limits = limits or Limits()
        self.name = name
        self._token = None if token is None else token.encode("utf-8")
        self._open_paths = frozenset(open_paths)
        self._not_found = f"not found; try {', '.join(sorted(self.routes))}"
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart rebinds at once
            sock.bind((host, port))
            sock.listen(self.limits.backlog)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self.socket = sock
        self.server_address: tuple[str, int] = sock.getsockname()[:2]
        self._scratch = memoryview(bytearray(self.limits.head_bytes))  # where dropped bytes are read
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Future[None] | None = None
        self._shut = False
        self._idle = threading.Event()  # set while serve_forever is not running
        self._idle.set()
        self._connections: set[_Connection] = set()  # open, counted against the bound
        self._tasks: set[asyncio.Task[None]] = set()  # their conversations, until each ends

    # ------------------------------------------------------------------ serving
    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown`; at once returns if shut down before."""
        with self._lock:
            if self._shut:
                return
            if self._loop is not None:
                raise RuntimeError("already serving")
            loop = self._loop = asyncio.new_event_loop()
            self._stopping = loop.create_future()
            self._idle.clear()
        try:
            loop.run_until_complete(self._serve())
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                with self._lock:
                    self._loop = None
                self._idle.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait until it has returned, its connections closed."""
        with self._lock:
            self._shut = True
            loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            try:
                loop.call_soon_threadsafe(_wake, stopping)
            except RuntimeError:  # the loop has closed already
                pass
        self._idle.wait()

    def server_close(self) -> None:
        """Free the port (idempotent)."""
        self.socket.close()

    async def _serve(self) -> None:
        assert self._stopping is not None
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _Connection(self), sock=self.socket,
                                          backlog=self.limits.backlog)
        try:
            await self._stopping
        finally:
            server.close()
            for connection in list(self._connections):  # one opened from now on closes as it opens
                connection.abort()
            if self._tasks:
                _, pending = await asyncio.wait(set(self._tasks), timeout=2.0)
                for task in pending:
                    task.cancel()
                if pending:
                    await asyncio.wait(pending, timeout=2.0)
            await server.wait_closed()

    # ------------------------------------------------------------------ connections
    def _opened(self, connection: _Connection) -> None:
        """A new connection: refused when the server stops, or when at the bound and every open
        connection is being answered; else it makes room if need be, and is conversed with."""
        if self._stopping is None or self._stopping.done():
            connection.abort()
            return
        if len(self._connections) >= self.limits.connections and not self._make_room():
            log.debug("%s refused: %d connections open", connection.peer, len(self._connections))
            assert connection.transport is not None
            connection.transport.write(self._head(HTTPStatus.SERVICE_UNAVAILABLE, "text/plain; charset=utf-8",
                                                  5, (), keep_alive=False) + b"busy\n")
            connection.abort()
            return
        self._connections.add(connection)
        task = asyncio.get_running_loop().create_task(self._converse(connection))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _closed(self, connection: _Connection) -> None:
        """A connection lost: it leaves the count at once (its task ends soon after)."""
        self._connections.discard(connection)

    def _make_room(self) -> bool:
        """Close the connection that has waited longest for its request head; False when none waits."""
        waiting = [c for c in self._connections if c.waiting_since is not None]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c.waiting_since if c.waiting_since is not None else 0.0)
        log.debug("%s closed to make room for a new connection", oldest.peer)
        self._connections.discard(oldest)
        oldest.abort()
        return True

    async def _converse(self, connection: _Connection) -> None:
        """Answer the connection's requests until it closes, is refused, or waits too long."""
        loop = asyncio.get_running_loop()
        limits = self.limits
        try:
            while True:
                connection.waiting_since = loop.time()
                try:
                    head = await asyncio.wait_for(connection.head(), limits.read_timeout_s)
                    if head is None:
                        return  # the client closed it
                    connection.waiting_since = None
                    method, response, keep_alive = self._answer(head)
                except TimeoutError:
                    log.debug("%s: no complete request within %g s; closed", connection.peer,
                              limits.read_timeout_s)
                    return
                except _Refused as refused:
                    log.debug("%s: refused, %s", connection.peer, refused)
                    await connection.write(self._answer_bytes("GET", refused.response, keep_alive=False))
                    await connection.linger()
                    return
                log.debug("%s %r %d", connection.peer, head[0][:200], response.status)
                await connection.write(self._answer_bytes(method, response, keep_alive=keep_alive))
                if not keep_alive:
                    await connection.close()
                    return
        except (ConnectionError, TimeoutError):
            pass  # the client went away, or would not take its answer
        except Exception:
            log.exception("error answering %s", connection.peer)
        finally:
            self._connections.discard(connection)
            connection.abort()  # its buffers freed now, whatever is left in them

    def _answer(self, head: list[bytes]) -> tuple[str, Response, bool]:
        """(method, response, keep the connection open) for a request head; raises :class:`_Refused`
        for a request after which the connection must close."""
        parts = head[0].decode("latin-1").split(" ")
        if len(parts) != 3:
            raise _Refused(HTTPStatus.BAD_REQUEST, "bad request line")
        method, target, version = parts
        match = _VERSION.fullmatch(version)
        if match is None:
            raise _Refused(HTTPStatus.BAD_REQUEST, "bad request line")
        if match[1] != "1":
            raise _Refused(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "HTTP/1.0 and HTTP/1.1 only")
        headers = _header_fields(head[1:])
        if method not in METHODS:
            raise _Refused(HTTPStatus.METHOD_NOT_ALLOWED, f"method not allowed: {', '.join(METHODS)} only",
                           (("Allow", ", ".join(METHODS)),))
        if headers.get("content-length", "0").strip() != "0" or "transfer-encoding" in headers:
            raise _Refused(HTTPStatus.BAD_REQUEST, "a request body is not accepted")
        path, query = _path_and_query(target)
        keep_alive = match[2] != "0" and "close" not in headers.get("connection", "").lower()
        request = Request(method, path, query, headers)
        if self._token is not None and path not in self._open_paths and not authorized(
                headers.get("authorization"), self._token):
            return method, Response(HTTPStatus.UNAUTHORIZED, b"the token is needed\n", headers=(
                ("WWW-Authenticate", 'Bearer realm="stream-perceptron"'),
                ("WWW-Authenticate", 'Basic realm="stream-perceptron", charset="UTF-8"'))), keep_alive
        route = self.routes.get(path)
        if route is None:
            return method, Response(HTTPStatus.NOT_FOUND, f"{self._not_found}\n".encode()), keep_alive
        try:
            return method, route(request), keep_alive
        except Exception:
            log.exception("error answering %s %s", method, path)
            return method, Response(HTTPStatus.INTERNAL_SERVER_ERROR, b"internal error\n"), False

    def _head(self, status: int, content_type: str, length: int, extra: Iterable[tuple[str, str]], *,
              keep_alive: bool) -> bytes:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        fields = [("Server", self.name), ("Content-Type", content_type), ("Content-Length", str(length)),
                  *SECURITY_HEADERS, *extra]
        if not keep_alive:
            fields.append(("Connection", "close"))
        lines = [f"HTTP/1.1 {int(status)} {phrase}", *(f"{name}: {value}" for name, value in fields), "", ""]
        return "\r\n".join(lines).encode("latin-1")

    def _answer_bytes(self, method: str, response: Response, *, keep_alive: bool) -> bytes:
        """The answer as sent: its head, and its body unless the request is ``HEAD``."""
        head = self._head(response.status, response.content_type, len(response.body), response.headers,
                          keep_alive=keep_alive)
        return head if method == "HEAD" else head + response.body


def _header_fields(lines: list[bytes]) -> dict[str, str]:
    """The header fields of a head (names in lower case); raises :class:`_Refused` for one that
    does not parse, a folded line, or a second copy of a field that must come once."""
    fields: dict[str, str] = {}
    for raw in lines:
        line = raw.decode("latin-1")
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.fullmatch(name) or "\r" in value:
            raise _Refused(HTTPStatus.BAD_REQUEST, "bad header line")
        name = name.lower()
        if name in fields and name in _SINGLE:
            raise _Refused(HTTPStatus.BAD_REQUEST, f"header field {name} sent twice")
        fields[name] = value.strip(" \t")
    return fields


def _path_and_query(target: str) -> tuple[str, str]:
    """The path and the query of a request target, undecoded: origin form (``/path?query``) or
    absolute form (``http://host/path?query``); raises :class:`_Refused` for another.

    >>> _path_and_query("/api/state?since=3"), _path_and_query("http://h:1/metrics")
    (('/api/state', 'since=3'), ('/metrics', ''))
    """
    if target.startswith("/"):
        path, _, query = target.partition("?")
        return path, query
    if target.lower().startswith(("http://", "https://")):
        parts = urlsplit(target)
        return parts.path or "/", parts.query
    raise _Refused(HTTPStatus.BAD_REQUEST, "bad request target")


__all__ = ["METHODS", "SECURITY_HEADERS", "HTTPServer", "Limits", "Request", "Response", "Route",
           "authorized"]
