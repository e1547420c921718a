"""The probes of the review that found the HTTP servers unbounded, replayed against both: the
worker's metrics server (``Observer``) and the dashboard (``DashboardServer``), over real sockets
on 127.0.0.1. Large headers, 200 connections held idle or fed a byte a second, unknown methods,
``HEAD``, path traversal, the token; the main path (``/metrics``, ``/api/state``) answers
throughout, and no connection gets a thread. The memory rows run each server alone in a child
process (``bench/bench_http.py``) and read its resident memory from /proc."""

from __future__ import annotations

import base64
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from bench.bench_http import get, large_headers, served
from stream_perceptron.commands.dashboard import DashboardServer, page_file
from stream_perceptron.commands.stats_view import StatsView
from stream_perceptron.http_server import Limits
from stream_perceptron.worker.observe import Observer
from tests.http_raw import assert_secure, closed_by_server, parse, read_all, request, wait_until

TOKEN = "probe-token-0123456789abcdef"
KINDS = ("metrics", "dashboard")
STATIC = {"/": "index.html", "/dashboard.js": "dashboard.js", "/dashboard.css": "dashboard.css"}


@dataclass(frozen=True)
class Target:
    """A server under probe: its port, its main path, every path it answers ``GET`` on, and the
    paths that stay open with a token."""

    port: int
    main: str
    paths: tuple[str, ...]
    open_paths: tuple[str, ...]


@pytest.fixture
def start() -> Iterator[Callable[..., Target]]:
    """Start a server of a kind (``metrics`` or ``dashboard``) with the given limits and token;
    stop them all afterwards."""
    stops: list[Callable[[], None]] = []

    def start(kind: str, limits: Limits | None = None, token: str | None = None) -> Target:
        if kind == "metrics":
            observer = Observer(host="127.0.0.1", port=0, limits=limits, token=token)
            observer.start()
            stops.append(observer.stop)
            return Target(observer.port, "/metrics", ("/metrics", "/healthz", "/readyz"),
                          open_paths=("/healthz", "/readyz"))
        server = DashboardServer("127.0.0.1", 0, StatsView(), limits=limits, token=token)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(5)

        stops.append(stop)
        return Target(server.server_address[1], "/api/state", (*STATIC, "/api/state"), open_paths=())

    yield start
    for stop in stops:
        stop()


def answers_quickly(target: Target) -> None:
    """The main path answers 200, within a second."""
    started = time.monotonic()
    answer = request(target.port, "GET", target.main)
    assert answer.status == 200 and time.monotonic() - started < 1.0
    assert_secure(answer)


def started_since(before: set[threading.Thread]) -> set[threading.Thread]:
    """The threads alive now that were not in ``before``: a server holds no thread per connection
    (a thread of an earlier test that ends meanwhile is none of them)."""
    return set(threading.enumerate()) - before


# ------------------------------------------------------------------------------ large headers


@pytest.mark.parametrize("kind", KINDS)
def test_a_head_of_64_kib_lines_is_refused_431_and_closed_at_once(start, kind):
    target = start(kind)
    before = set(threading.enumerate())
    line = b"X-Big: " + b"a" * 65520 + b"\r\n"
    with socket.create_connection(("127.0.0.1", target.port), timeout=5) as sock:
        started = time.monotonic()
        try:
            sock.sendall(b"GET " + target.main.encode() + b" HTTP/1.1\r\n" + line * 99)  # no end
        except OSError:
            pass  # the server closed the connection first
        answer = parse(read_all(sock))
        closed_after = time.monotonic() - started
    assert answer.status == 431 and answer.headers["connection"] == "close"
    assert_secure(answer)
    assert closed_after < 5 and not started_since(before)
    answers_quickly(target)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("connections", [60, 200])
def test_held_connections_with_large_headers_cost_little_memory_and_no_thread(kind, connections):
    # the review's probe: each connection sends 99 header lines of 64 KiB, never ends its head, and
    # is held open; the server alone in a child process, its resident memory read from /proc
    with served(kind) as server:
        assert get(server.port, "/healthz" if kind == "metrics" else "/api/state")[0] in (200, 503)  # warm
        run = large_headers(server, connections, path="/metrics" if kind == "metrics" else "/api/state",
                            seconds=15)
    growth_mb = (run["rss_peak_kb"] - run["rss_before_kb"]) / 1024
    assert growth_mb < 30, run  # before this change: over 1 GB and 60 threads for 60
    assert run["threads_peak"] == run["threads_before"], run
    assert run["closed_by_server"] == connections, run  # each refused (431) and closed, none held
    assert run["answer_status"] == 200 and run["answer_s"] < 1.0, run


# ------------------------------------------------------------------------------ held connections


@pytest.mark.parametrize("kind", KINDS)
def test_200_idle_connections_hold_no_thread_and_the_main_path_answers_throughout(start, kind):
    target = start(kind, Limits(read_timeout_s=2.0))
    before = set(threading.enumerate())
    held = [socket.create_connection(("127.0.0.1", target.port), timeout=5) for _ in range(200)]
    try:
        opened = time.monotonic()
        for _ in range(5):
            answers_quickly(target)
            assert not started_since(before)
        # past the bound (64) the oldest gave way at once; the others at the read timeout
        wait_until(lambda: all(closed_by_server(s) for s in held), 8, "every idle connection closed")
        assert time.monotonic() - opened < 8
        answers_quickly(target)
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize("kind", KINDS)
def test_200_connections_sending_a_byte_a_second_are_closed_at_the_read_timeout_unanswered(start, kind):
    target = start(kind, Limits(read_timeout_s=2.0))
    before = set(threading.enumerate())
    held = [socket.create_connection(("127.0.0.1", target.port), timeout=5) for _ in range(200)]
    received = dict.fromkeys(held, b"")
    try:
        for sock in held:
            sock.sendall(b"GET " + target.main.encode() + b" HTTP/1.1\r\nX-Slow: ")
        started = time.monotonic()
        for second in range(4):  # a byte a second on every connection the server keeps
            for sock in held:
                try:
                    sock.send(b"z")
                except OSError:
                    pass  # closed by the server
            answers_quickly(target)
            assert not started_since(before)
            time.sleep(max(0.0, started + second + 1 - time.monotonic()))

        def all_closed() -> bool:
            for sock in held:
                sock.setblocking(False)
                try:
                    while chunk := sock.recv(65536):
                        received[sock] += chunk
                except BlockingIOError:
                    return False
                except OSError:
                    pass
            return True

        wait_until(all_closed, 5, "every slow connection closed")
        assert time.monotonic() - started < 9
        assert set(received.values()) == {b""}  # none was answered
        answers_quickly(target)
    finally:
        for sock in held:
            sock.close()


# ------------------------------------------------------------------------------ methods, HEAD, paths


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "FOO"])
def test_methods_other_than_get_and_head_are_405(start, kind, method):
    target = start(kind)
    for path in target.paths:
        answer = request(target.port, method, path)
        assert answer.status == 405 and answer.headers["allow"] == "GET, HEAD", (method, path)
        assert_secure(answer)


@pytest.mark.parametrize("kind", KINDS)
def test_head_is_answered_on_every_get_path_with_the_head_of_get(start, kind):
    target = start(kind)
    for path in target.paths:
        got, head = request(target.port, "GET", path), request(target.port, "HEAD", path)
        assert head.status == got.status and head.status in (200, 503), path  # /readyz: not ready
        assert head.body == b"" and head.raw.endswith(b"\r\n\r\n"), path
        assert head.headers["content-type"] == got.headers["content-type"], path
        assert_secure(head)
        if path in STATIC:  # the others say the time, or how long since the start
            assert head.headers["content-length"] == str(len(got.body)) == str(len(page_file(STATIC[path])))
        else:
            assert int(head.headers["content-length"]) > 0


TRAVERSALS = [
    "/../../../../etc/passwd", "/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/..%2f..%2f..%2fetc%2fpasswd",
    "/%252e%252e/etc/passwd", "/....//....//etc/passwd", "//etc/passwd", "/.%00./etc/passwd",
    "/dashboard_page/index.html", "/dashboard.js/../../settings.py", "/./dashboard.js",
    "/dashboard.js%00.txt",
    "/..\\..\\..\\etc\\passwd", "/index.html", "/metrics/../../etc/passwd", "/api/state/../../etc/passwd",
    "http://127.0.0.1/../../etc/passwd", "../../etc/passwd", "\\..\\..\\etc\\passwd",
]


@pytest.mark.parametrize("kind", KINDS)
def test_path_traversal_finds_nothing(start, kind):
    target = start(kind)
    for path in TRAVERSALS:
        answer = request(target.port, "GET", path)
        assert answer.status in (400, 404), (path, answer.status)  # 400: not a request target
        assert b"root:" not in answer.raw and b"import" not in answer.raw, path
        assert_secure(answer)


# ------------------------------------------------------------------------------ the token


@pytest.mark.parametrize("kind", KINDS)
def test_with_a_token_every_path_but_the_probes_asks_for_it(start, kind):
    target = start(kind, token=TOKEN)
    basic = base64.b64encode(f"me:{TOKEN}".encode()).decode()
    for path in target.paths:
        if path in target.open_paths:
            assert request(target.port, "GET", path).status in (200, 503), path  # a probe needs no token
            continue
        for method in ("GET", "HEAD"):
            answer = request(target.port, method, path)
            assert answer.status == 401 and "Basic" in answer.headers["www-authenticate"], (method, path)
            assert_secure(answer)
        assert request(target.port, "GET", path, "Authorization: Bearer wrong-token-0123456789").status == 401
        assert request(target.port, "GET", path, f"Authorization: Bearer {TOKEN}").status == 200, path
        assert request(target.port, "GET", path, f"Authorization: Basic {basic}").status == 200, path
