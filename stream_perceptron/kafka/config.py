"""What every client of either backend shares: secrets revealed for a client's configuration (and
nowhere else), one-line error descriptions, and the reachability check made before a client is
built. Loads no Kafka client library.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.settings import KafkaSettings


def servers(kafka: KafkaSettings) -> list[str]:
    """The bootstrap servers, or :class:`KafkaEdgeError` naming the setting when none is set."""
    if not kafka.bootstrap_servers:
        raise KafkaEdgeError("kafka.bootstrap_servers is not set (SP_KAFKA__BOOTSTRAP_SERVERS)")
    return kafka.servers


def reveal(secret: Any) -> str | None:
    """A secret's text, for a client's configuration only: never log what holds it."""
    return None if secret is None else str(secret.get_secret_value())


def path_text(path: Any) -> str | None:
    """A configured file path as text (None stays None)."""
    return None if path is None else str(path)


def describe(exc: BaseException) -> str:
    """One line naming the error; kafka-python messages carry no secrets."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def transactional_id(kafka: KafkaSettings) -> str:
    """The producer's ``transactional.id`` in the exactly-once mode: the group, the client id and
    the host's name, ``<group_id>:<client_id>:<host>``.

    Stable for one worker: a worker restarted on its host (a container restarted in its pod, a
    service restarted by systemd) takes the id back, and its ``init_transactions`` at once aborts
    the transaction its killed predecessor left open, which would otherwise hold back every
    ``read_committed`` reader of the partitions it wrote until the broker's transaction timeout.
    Distinct for workers on different hosts (each pod of a Deployment has its own host name), so
    replicas sharing one configuration do not fence each other. Two workers of one group on one
    host need distinct ``SP_KAFKA__CLIENT_ID`` values: with one id, each would fence the other's
    producer at every start. Zombie workers are fenced by the group membership sent with the
    offsets (KIP-447), not by this id, so it need not name the partitions.

    >>> transactional_id(KafkaSettings(group_id="g", client_id="c")).startswith("g:c:")
    True
    """
    return f"{kafka.group_id}:{kafka.client_id}:{socket.gethostname()}"


def servers_text(kafka: KafkaSettings) -> str:
    """The bootstrap servers as configured, for messages."""
    return kafka.bootstrap_servers or "(unset)"


def check_reachable(kafka: KafkaSettings, timeout_s: float) -> None:
    """Raise :class:`KafkaEdgeError` unless a TCP connection to a bootstrap server opens and,
    with TLS (``SSL``, ``SASL_SSL``), the server answers a TLS handshake within ``timeout_s``.

    Checked before building clients: kafka-python 3.0 leaks its I/O thread and sockets
    when a client constructor cannot bootstrap, and neither client bounds a TLS handshake that
    is never answered (a plaintext listener reached with TLS, or one that accepts and says
    nothing): its constructor would wait for good, deaf to SIGTERM.
    """
    tls = kafka.security_protocol in ("SSL", "SASL_SSL")
    problems = []
    for server in servers(kafka):
        try:
            with socket.create_connection(_host_port(server), timeout_s) as sock:
                if tls:
                    _tls_answers(sock, timeout_s)
                return
        except OSError as exc:
            problems.append(f"{server}: {describe(exc)}")
    raise KafkaEdgeError(f"cannot reach Kafka ({'; '.join(problems)})")


def _tls_answers(sock: socket.socket, timeout_s: float) -> None:
    """Start a TLS handshake on ``sock``; :class:`TimeoutError` when nothing comes back within
    ``timeout_s``. Any answer returns, a refusal too: certificates and protocol are the client's
    to check, with its own settings, and to name."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # only: does it answer?
    sock.settimeout(timeout_s)
    try:
        with context.wrap_socket(sock, do_handshake_on_connect=False) as tls:
            tls.do_handshake()
    except TimeoutError:
        raise TimeoutError(
            f"no answer to a TLS handshake within {timeout_s:g} s"
            " (SP_KAFKA__SECURITY_PROTOCOL asks for TLS: is this a TLS listener?)"
        ) from None
    except OSError:
        return  # refused or closed: an answer


def _host_port(server: str) -> tuple[str, int]:
    """``host:port`` (port 9092 if absent, IPv6 in brackets).

    >>> _host_port("[::1]:9093"), _host_port("kafka")
    (('::1', 9093), ('kafka', 9092))
    """
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit() or host.count(":") and not host.startswith("["):
        host, port = server, "9092"
    return host.strip("[]"), int(port)


