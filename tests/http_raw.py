"""HTTP over raw sockets for the tests of the servers: requests as bytes (well formed or not),
answers parsed by hand, and whether the server closed a connection."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from stream_perceptron.http_server import SECURITY_HEADERS


@dataclass(frozen=True)
class Answer:
    """One answer: its status, header fields (names in lower case; repeated ones joined by ``\\n``),
    body, and everything read."""

    status: int
    headers: dict[str, str]
    body: bytes
    raw: bytes


def parse(raw: bytes) -> Answer:
    """The first answer in ``raw`` (its body as long as its ``Content-Length`` says, when read)."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}\n{value.strip()}" if key in headers else value.strip()
    length = int(headers.get("content-length", len(rest)))
    return Answer(int(status_line.split(" ")[1]), headers, rest[:length], raw)


def read_all(sock: socket.socket, timeout_s: float = 5.0) -> bytes:
    """What the server sends until it closes the connection (a reset ends it too)."""
    sock.settimeout(timeout_s)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def exchange(port: int, data: bytes, timeout_s: float = 5.0) -> Answer:
    """Send ``data`` on a new connection and parse what comes back until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(data)
        return parse(read_all(sock, timeout_s))


def request(port: int, method: str, path: str, *headers: str, timeout_s: float = 5.0) -> Answer:
    """``method path`` over HTTP/1.1 with ``Connection: close`` and the given header lines."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", *headers, "", ""]
    return exchange(port, "\r\n".join(lines).encode("latin-1"), timeout_s)


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock`` (an end of stream or a reset waits there); any
    answer it sent before is dropped."""
    sock.setblocking(False)
    try:
        while chunk := sock.recv(65536):
            del chunk
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Wait (checking every 20 ms) for ``condition``; the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"not within {timeout_s} s: {what}")
        time.sleep(0.02)
    return time.monotonic() - started


def assert_secure(answer: Answer) -> None:
    """The answer carries every security header the servers send, as they send them."""
    for name, value in SECURITY_HEADERS:
        assert answer.headers.get(name.lower()) == value, (answer.status, name, answer.headers)
