"""The broker tests' collection of the sockets kafka-python leaks
(``tests/integration/conftest.py::collect_garbage_except``), without a broker: a socket held by
a logged error is finalized in the teardown of the test that leaked it, though pytest keeps the
test's log records until that teardown is over."""

from __future__ import annotations

import logging
import re
import socket
import weakref

from tests.integration.conftest import collect_garbage_except


def _refused_connect_logged() -> weakref.ref[socket.socket]:
    """What kafka-python 3.0.12 does on a refused connect: the socket is left open, and the
    error, whose traceback holds the frame that holds the socket, is logged as an argument."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]  # nobody listens there once it is closed
    sock = socket.socket()
    try:
        sock.connect(("127.0.0.1", port))
    except OSError as exc:
        error = exc  # the frame holds the error and the error's traceback the frame: a cycle
    logging.getLogger("kafka.net.manager").error("Connection failed: %s", error)
    return weakref.ref(sock)


def test_a_socket_held_by_a_logged_error_is_finalized_in_its_own_test_s_teardown(caplog):
    leaked = _refused_connect_logged()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("Connection failed: "), said
    collect_garbage_except(re.compile(r"unclosed <socket\.socket "), caplog)
    assert leaked() is None
    assert [r.getMessage() for r in caplog.records] == said  # the record kept, as text
