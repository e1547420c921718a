"""The one HTTP server of the worker's endpoints and the dashboard, over real sockets on 127.0.0.1:
what it answers, the bounds it keeps against a client, the room it makes for a new connection,
its token, and its start and stop."""

from __future__ import annotations

import base64
import http.client
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from stream_perceptron.http_server import HTTPServer, Limits, Request, Response
from tests.http_raw import (
    Answer,
    assert_secure,
    closed_by_server,
    exchange,
    parse,
    read_all,
    request,
    wait_until,
)

TOKEN = "a-token-of-24-characters"
BIG = b"x" * (8 << 20)  # more than a client that does not read leaves room for in the kernel


def hello(req: Request) -> Response:
    return Response(200, f"hello {req.query}\n".encode())


def broken(req: Request) -> Response:
    raise RuntimeError("a defect in a route")


ROUTES = {"/a": hello, "/big": lambda req: Response(200, BIG, "application/octet-stream"), "/broken": broken,
          "/open": hello}


@pytest.fixture
def serve() -> Iterator[Callable[..., HTTPServer]]:
    """Serve ROUTES in a thread with the given limits and token; stop every server afterwards."""
    started: list[tuple[HTTPServer, threading.Thread]] = []

    def serve(limits: Limits | None = None, token: str | None = None) -> HTTPServer:
        server = HTTPServer(("127.0.0.1", 0), ROUTES, token=token, open_paths=("/open",), limits=limits)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        started.append((server, thread))
        return server

    yield serve
    for server, thread in started:
        server.shutdown()
        server.server_close()
        thread.join(5)


def port_of(server: HTTPServer) -> int:
    return server.server_address[1]


def send_head(port: int, head: str) -> Answer:
    return exchange(port, head.replace("\n", "\r\n").encode("latin-1"))


# ------------------------------------------------------------------------------ what it answers


def test_get_and_head_get_the_same_head_and_only_get_a_body(serve):
    port = port_of(serve())
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/a?x=1")
        got = conn.getresponse()
        body = got.read()
        conn.request("HEAD", "/a?x=1")  # the same connection: kept alive
        head = conn.getresponse()
        assert head.read() == b""
    finally:
        conn.close()
    assert (got.status, body) == (200, b"hello x=1\n")
    assert head.status == 200 and dict(head.getheaders()) == dict(got.getheaders())
    assert head.getheader("Content-Length") == str(len(body))


def test_every_answer_carries_the_security_headers_and_errors_close_the_connection(serve):
    port = port_of(serve(Limits(request_line_bytes=100, head_bytes=400, header_lines=4), token=TOKEN))
    bearer = f"Authorization: Bearer {TOKEN}"
    answers = {
        200: request(port, "GET", "/open"),
        401: request(port, "GET", "/a"),
        404: request(port, "GET", "/nowhere", bearer),
        405: request(port, "DELETE", "/a", bearer),
        400: send_head(port, "GET /a\n\n"),
        414: send_head(port, f"GET /{'a' * 100} HTTP/1.1\n\n"),
        431: send_head(port, "GET /a HTTP/1.1\n" + "X: y\n" * 5 + "\n"),
        505: send_head(port, "GET /a HTTP/2.0\n\n"),
        500: request(port, "GET", "/broken", bearer),
    }
    for status, answer in answers.items():
        assert answer.status == status, (status, answer.raw[:200])
        assert_secure(answer)
    for status in (400, 414, 431, 505, 405, 500):
        assert answers[status].headers["connection"] == "close"
    assert answers[405].headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT",
                                    "PROPFIND", "get", "BREW"])
def test_methods_other_than_get_and_head_are_405(serve, method):
    answer = request(port_of(serve()), method, "/a")
    assert answer.status == 405 and answer.headers["allow"] == "GET, HEAD"
    assert b"hello" not in answer.body


@pytest.mark.parametrize("head", [
    "GET /a\n\n",  # no version
    "GET /a HTTP/1.1 more\n\n",
    "GET  /a HTTP/1.1\n\n",
    "GET /a HTTX/1.1\n\n",
    "GET a HTTP/1.1\n\n",  # neither origin nor absolute form
    "GET * HTTP/1.1\n\n",
    "GET /a HTTP/1.1\nno colon\n\n",
    "GET /a HTTP/1.1\nHost : x\n\n",  # a space before the colon
    "GET /a HTTP/1.1\nX: y\n folded\n\n",
    "GET /a HTTP/1.1\nContent-Length: 0\nContent-Length: 0\n\n",
    "GET /a HTTP/1.1\nX: y\rz\n\n",  # a bare CR in a value
    "GET /a HTTP/1.1\nContent-Length: 5\n\nhello",  # a body
    "GET /a HTTP/1.1\nTransfer-Encoding: chunked\n\n0\n\n",
])
def test_heads_that_do_not_parse_and_bodies_are_400(serve, head):
    answer = send_head(port_of(serve()), head)
    assert answer.status == 400, answer.raw[:200]
    assert b"hello" not in answer.body


@pytest.mark.parametrize("version", ["HTTP/2.0", "HTTP/0.9", "HTTP/3.0"])
def test_versions_other_than_1_x_are_505(serve, version):
    assert send_head(port_of(serve()), f"GET /a {version}\n\n").status == 505


def test_line_ends_without_cr_absolute_targets_and_empty_lines_first_are_taken(serve):
    port = port_of(serve())
    assert exchange(port, b"GET /a?lf HTTP/1.0\n\n").body == b"hello lf\n"
    assert exchange(port, b"GET http://127.0.0.1/a?abs HTTP/1.0\r\n\r\n").body == b"hello abs\n"
    assert exchange(port, b"\r\n\r\n\nGET /a?late HTTP/1.0\r\n\r\n").body == b"hello late\n"


def test_pipelined_requests_are_answered_in_order_and_http_1_0_closes(serve):
    port = port_of(serve())
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /a?1 HTTP/1.1\r\n\r\nHEAD /a?2 HTTP/1.1\r\n\r\nGET /a?3 HTTP/1.0\r\n\r\n")
        raw = read_all(sock)  # the third, HTTP/1.0, closes the connection
    first, second, third = raw.split(b"HTTP/1.1 200 OK")[1:]
    assert first.endswith(b"hello 1\n") and second.endswith(b"\r\n\r\n") and third.endswith(b"hello 3\n")
    assert b"Connection: close" in third and b"Connection" not in first


def test_a_route_that_raises_is_500_and_logged(serve, caplog):
    with caplog.at_level(logging.ERROR, logger="stream_perceptron.http_server"):
        answer = request(port_of(serve()), "GET", "/broken")
    assert answer.status == 500 and answer.body == b"internal error\n"
    assert "RuntimeError: a defect in a route" in caplog.text


def test_unknown_paths_are_404_and_name_the_known_ones(serve):
    answer = request(port_of(serve()), "GET", "/../a")
    assert answer.status == 404 and answer.body == b"not found; try /a, /big, /broken, /open\n"


# ------------------------------------------------------------------------------ the bounds


def test_the_request_line_head_and_header_lines_are_bounded_exactly(serve):
    port = port_of(serve(Limits(request_line_bytes=64, head_bytes=246, header_lines=3)))
    request_line = b"GET /a?" + b"q" * 46 + b" HTTP/1.0\r\n"  # 1.0: closed after the answer
    line = b"X: " + b"y" * 55 + b"\r\n"
    exact = request_line + line * 3 + b"\r\n"
    assert (len(request_line), len(line), len(exact)) == (64, 60, 246)
    assert exchange(port, exact).status == 200
    assert exchange(port, b"GET /a?" + b"q" * 47 + b" HTTP/1.0\r\n\r\n").status == 414
    assert exchange(port, request_line + b"X: y\r\n" * 4 + b"\r\n").status == 431  # a fourth line
    assert exchange(port, request_line + line * 2 + b"X: " + b"y" * 56 + b"\r\n\r\n").status == 431  # 247
    assert exchange(port, b"GET /a HTTP/1.1\r\nX: " + b"y" * 300 + b"\r\n\r\n").status == 431


def test_a_head_that_comes_a_byte_at_a_time_is_closed_at_the_read_timeout(serve):
    port = port_of(serve(Limits(read_timeout_s=1.0)))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        started = time.monotonic()
        sent = 0
        for byte in b"GET /a HTTP/1.1\r\nX-Slow: " + b"z" * 100:
            try:
                sock.send(bytes([byte]))
            except OSError:
                break
            sent += 1
            if closed_by_server(sock):
                break
            sock.setblocking(True)
            time.sleep(0.1)  # ten bytes a second: each arrives well within any per-read timeout
        closed_after = time.monotonic() - started
    assert 0.9 < closed_after < 3.0 and sent < 40


def test_an_idle_connection_kept_alive_is_closed_at_the_read_timeout(serve):
    port = port_of(serve(Limits(read_timeout_s=0.5)))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /a HTTP/1.1\r\n\r\n")
        answered = time.monotonic()
        assert parse(read_all(sock)).status == 200  # then closed, 0.5 s after the answer
        assert 0.4 < time.monotonic() - answered < 3.0


def test_past_the_bound_the_connection_that_waited_longest_gives_way(serve):
    port = port_of(serve(Limits(connections=4)))
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=5) for _ in range(4)]
    try:
        for conn in conns:  # each kept alive after its answer, in this order
            conn.request("GET", "/a")
            assert conn.getresponse().read() == b"hello \n"
        socks = [conn.sock for conn in conns]
        assert not any(closed_by_server(s) for s in socks)
        assert request(port, "GET", "/a?new").body == b"hello new\n"  # a fifth
        wait_until(lambda: closed_by_server(socks[0]), 5, "the first connection closed")
        assert not any(closed_by_server(s) for s in socks[1:])
    finally:
        for conn in conns:
            conn.close()


def test_when_every_connection_is_being_answered_a_new_one_gets_503_until_the_write_timeout(serve):
    port = port_of(serve(Limits(connections=2, write_timeout_s=1.5)))
    stuck = []
    for _ in range(2):  # each asks for 8 MB and reads none of it: its answer waits to be written
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        sock.sendall(b"GET /big HTTP/1.1\r\n\r\n")
        assert sock.recv(1) == b"H"  # its answer has begun
        stuck.append(sock)
    answered = time.monotonic()

    def status() -> int:
        try:
            return request(port, "GET", "/a").status
        except (OSError, IndexError):  # reset before the answer was read
            return 0

    try:
        answer = request(port, "GET", "/a")
        assert answer.status == 503 and answer.body == b"busy\n"
        assert_secure(answer)
        wait_until(lambda: status() == 200, 5, "room again once the stuck answers are dropped")
        assert 1.4 < time.monotonic() - answered < 5
    finally:
        for sock in stuck:
            sock.close()


def test_a_head_of_many_64_kib_lines_is_refused_after_its_first_8_kib(serve):
    port = port_of(serve())
    line = b"X-Big: " + b"a" * 65520 + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        started = time.monotonic()
        try:
            sock.sendall(b"GET /a HTTP/1.1\r\n" + line * 99)  # the head never ends
        except OSError:
            pass  # the server closed the connection first
        answer = parse(read_all(sock))  # and then closes it, after its linger (1 s)
    assert answer.status == 431 and b"at most 8192 bytes" in answer.body
    assert time.monotonic() - started < 5


# ------------------------------------------------------------------------------ the token


def test_a_token_is_asked_for_on_every_path_but_the_open_ones(serve):
    port = port_of(serve(token=TOKEN))
    basic = base64.b64encode(f"anyone:{TOKEN}".encode()).decode()
    wrong = base64.b64encode(b"anyone:" + TOKEN.encode()[:-1] + b"!").decode()
    assert request(port, "GET", "/open").status == 200
    for path in ("/a", "/nowhere"):  # which paths exist is not told without the token
        answer = request(port, "GET", path)
        assert answer.status == 401 and b"hello" not in answer.body
        assert answer.headers["www-authenticate"].split("\n") == [
            'Bearer realm="stream-perceptron"', 'Basic realm="stream-perceptron", charset="UTF-8"']
    assert request(port, "HEAD", "/a").status == 401
    for bad in (f"Bearer {TOKEN[:-1]}", f"Basic {wrong}", TOKEN, f"Token {TOKEN}", "Basic ***", "Bearer"):
        assert request(port, "GET", "/a", f"Authorization: {bad}").status == 401, bad
    for good in (f"Bearer {TOKEN}", f"bearer {TOKEN}", f"Basic {basic}"):
        assert request(port, "GET", "/a", f"Authorization: {good}").status == 200, good
    assert request(port, "GET", "/nowhere", f"Authorization: Bearer {TOKEN}").status == 404


# ------------------------------------------------------------------------------ start and stop


def test_the_limits_are_checked():
    with pytest.raises(ValueError, match="positive"):
        Limits(connections=0)
    with pytest.raises(ValueError, match="positive"):
        Limits(read_timeout_s=0)
    with pytest.raises(ValueError, match="at most head_bytes"):
        Limits(request_line_bytes=9000)


def test_shut_down_before_serving_it_never_serves():
    server = HTTPServer(("127.0.0.1", 0), ROUTES)
    server.shutdown()  # returns at once
    server.serve_forever()  # returns at once
    server.server_close()
    server.server_close()  # idempotent


def test_shutdown_closes_the_connections_and_server_close_frees_the_port():
    server = HTTPServer(("127.0.0.1", 0), ROUTES)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = port_of(server)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as idle:
        assert request(port, "GET", "/a").status == 200
        with pytest.raises(RuntimeError, match="already serving"):
            server.serve_forever()
        server.shutdown()
        thread.join(5)
        assert not thread.is_alive()
        wait_until(lambda: closed_by_server(idle), 5, "the idle connection closed")
    server.server_close()
    again = HTTPServer(("127.0.0.1", port), ROUTES)  # the port is free at once
    again.server_close()


def test_an_address_in_use_is_an_os_error(serve):
    port = port_of(serve())
    with pytest.raises(OSError):
        HTTPServer(("127.0.0.1", port), ROUTES)
