"""TCP listeners that are not Kafka, for the checks that must tell (no broker needed): silent or
answering bytes, and TLS with test certificates."""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


@contextmanager
def _serving(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """A TCP listener on a free port of 127.0.0.1 that hands each connection to ``handle``, on
    its own thread; yields the port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        done.set()
        thread.join()
        server.close()


@contextmanager
def listener(answer: bytes | None) -> Iterator[int]:
    """A TCP listener on a free port that accepts, then writes ``answer`` and closes, or (None)
    says nothing and keeps the connection open; yields the port."""
    held: list[socket.socket] = []

    def handle(conn: socket.socket) -> None:
        if answer is None:
            held.append(conn)
        else:
            conn.sendall(answer)
            conn.close()

    try:
        with _serving(handle) as port:
            yield port
    finally:
        for conn in held:
            conn.close()


@dataclass(frozen=True)
class Certificates:
    """A CA's file and a server certificate it signed (with its key), for ``names``."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def certificates(directory: Path, names: tuple[str, ...], ca_name: str = "test CA") -> Certificates:
    """A fresh CA and a server certificate for ``names`` (its subject alternative names: DNS
    names, or IP addresses), made by the ``openssl`` command line; the test skips without it."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no `openssl` on PATH to make test certificates")
    directory.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=directory, check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", f"/CN={ca_name}")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", f"/CN={names[0]}")
    alt = ",".join(f"IP:{n}" if n.replace(".", "").isdigit() else f"DNS:{n}" for n in names)
    (directory / "ext.cnf").write_text(f"subjectAltName={alt}\nextendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
    return Certificates(directory / "ca.pem", directory / "server.pem", directory / "server.key")


@contextmanager
def tls_listener(certs: Certificates) -> Iterator[int]:
    """A TLS listener on a free port of 127.0.0.1 presenting ``certs``' server certificate: it
    makes the handshake (whatever the client then thinks of it) and closes; yields the port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.cert_file, certs.key_file)

    def handle(conn: socket.socket) -> None:
        conn.settimeout(2)
        with contextlib.suppress(OSError), context.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1)  # until the client closes
        conn.close()

    with _serving(handle) as port:
        yield port
