"""TCP listeners that are not Kafka, for the checks that must tell (no broker needed)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def listener(answer: bytes | None) -> Iterator[int]:
    """A TCP listener on a free port that accepts, then writes ``answer`` and closes, or (None)
    says nothing and keeps the connection open; yields the port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    held: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            if answer is None:
                held.append(conn)
            else:
                conn.sendall(answer)
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        done.set()
        thread.join()
        server.close()
        for conn in held:
            conn.close()
