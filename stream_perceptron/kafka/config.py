"""What every client of either backend shares: secrets revealed for a client's configuration (and
nowhere else), one-line error descriptions, and the reachability check made before a client is
built. Loads no Kafka client library.
"""

from __future__ import annotations

import re
import socket
import ssl
from typing import Any

from stream_perceptron.errors import KafkaAuthError, KafkaEdgeError, SettingsError
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
    with TLS (``SSL``, ``SASL_SSL``), the server answers a TLS handshake within ``timeout_s``;
    raise :class:`KafkaAuthError` when every server that answers presents a certificate that the
    settings refuse (:func:`tls_context`: not signed by a CA of ``SP_KAFKA__SSL_CAFILE``, or not
    naming the host connected to).

    Checked before building clients: kafka-python 3.0 leaks its I/O thread and sockets
    when a client constructor cannot bootstrap, and neither client bounds a TLS handshake that
    is never answered (a plaintext listener reached with TLS, or one that accepts and says
    nothing): its constructor would wait for good, deaf to SIGTERM. A refused certificate is
    named here, in the time of one handshake: the clients retry it until their bootstrap
    timeout, and kafka-python names it only in a log line of its own.
    """
    tls = kafka.security_protocol in ("SSL", "SASL_SSL")
    context = tls_context(kafka) if tls else None
    problems = []
    refused: KafkaAuthError | None = None
    for server in servers(kafka):
        try:
            with socket.create_connection(_host_port(server), timeout_s) as sock:
                if context is not None:
                    _tls_answers(sock, context, kafka, server, timeout_s)
                return
        except KafkaAuthError as exc:
            refused = refused or exc
        except OSError as exc:
            problems.append(f"{server}: {describe(exc)}")
    if refused is not None:  # every server that answered was refused: a setting to fix
        raise refused
    raise KafkaEdgeError(f"cannot reach Kafka ({'; '.join(problems)})")


def tls_context(kafka: KafkaSettings) -> ssl.SSLContext:
    """The TLS client context kafka-python builds from the settings (TLS 1.2 or later; the CA
    file's certificates, else the system's; the host name checked unless
    ``SP_KAFKA__SSL_CHECK_HOSTNAME`` is false; the client certificate, if any). A file that
    cannot be loaded raises :class:`SettingsError` naming its setting."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = kafka.ssl_check_hostname
    try:
        if kafka.ssl_cafile is None:
            context.load_default_certs()
        else:
            context.load_verify_locations(str(kafka.ssl_cafile))
    except (OSError, ValueError) as exc:
        raise SettingsError(
            f"the CA file SP_KAFKA__SSL_CAFILE={kafka.ssl_cafile} cannot be loaded: {_ssl_text(exc)}"
        ) from None
    if kafka.ssl_certfile is not None:
        try:
            context.load_cert_chain(str(kafka.ssl_certfile), path_text(kafka.ssl_keyfile),
                                    reveal(kafka.ssl_password))
        except (OSError, ValueError) as exc:
            raise SettingsError(
                f"the client certificate SP_KAFKA__SSL_CERTFILE={kafka.ssl_certfile} (key"
                f" SP_KAFKA__SSL_KEYFILE={kafka.ssl_keyfile}) cannot be loaded: {_ssl_text(exc)}"
            ) from None
    return context


def _tls_answers(sock: socket.socket, context: ssl.SSLContext, kafka: KafkaSettings, server: str,
                 timeout_s: float) -> None:
    """Make a TLS handshake on ``sock`` with ``context``, naming the bootstrap host as the
    client does. :class:`TimeoutError` when nothing comes back within ``timeout_s``;
    :class:`KafkaAuthError` when the server's certificate is refused. Any other answer returns,
    a refusal too: the protocol, and what the server thinks of this client, are the client's
    to meet, with its own settings, and to name."""
    host = _host_port(server)[0].rstrip(".")
    sock.settimeout(timeout_s)
    try:
        # the TLS socket takes over sock's descriptor, and is closed on every path
        with context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False) as tls:
            tls.do_handshake()
    except ssl.SSLCertVerificationError as exc:
        raise KafkaAuthError(
            certificate_refused(kafka, server, exc.verify_message or _ssl_text(exc), host)
        ) from None
    except TimeoutError:
        raise TimeoutError(
            f"no answer to a TLS handshake within {timeout_s:g} s"
            " (SP_KAFKA__SECURITY_PROTOCOL asks for TLS: is this a TLS listener?)"
        ) from None
    except OSError:
        return  # refused or closed: an answer


# OpenSSL's words (X509_verify_cert_error_string; Python's for a name) for a certificate that
# does not name the host connected to, and for one whose chain ends at no CA trusted here
_NAME_MISMATCH = re.compile(r"(?:Hostname|IP address) mismatch, certificate is not valid for '([^']*)'")
_UNTRUSTED = re.compile(r"self[- ]signed certificate|unable to get (?:local )?issuer certificate"
                        r"|unable to verify the first certificate")


def certificate_refused(kafka: KafkaSettings, server: str, reason: str, host: str | None = None) -> str:
    """One line for a broker certificate that the settings refuse, from OpenSSL's ``reason``:
    TLS, the servers, what is wrong, the CA file and the host name checked (``host``, else the
    one ``reason`` names, else the bootstrap hosts of ``server``).

    >>> import textwrap
    >>> said = certificate_refused(KafkaSettings(security_protocol="SSL"), "vm:9093",
    ...                            "Hostname mismatch, certificate is not valid for 'vm'.")
    >>> print(textwrap.fill(said, 90))
    TLS with Kafka at vm:9093 failed: the name 'vm' is not in the broker's certificate
    (SP_KAFKA__SSL_CAFILE not set; host name checked: 'vm'): certificate verify failed:
    Hostname mismatch, certificate is not valid for 'vm'.
    """
    name = _NAME_MISMATCH.search(reason)
    if host is None:
        host = name.group(1) if name else ", ".join(_host_port(s.strip())[0] for s in server.split(","))
    if name:
        what = f"the name {name.group(1)!r} is not in the broker's certificate"
    elif _UNTRUSTED.search(reason):
        what = "the broker's certificate is not signed by a CA " + (
            "the system trusts" if kafka.ssl_cafile is None else "in the CA file")
    else:
        what = "the broker's certificate is refused"
    cafile = ("SP_KAFKA__SSL_CAFILE not set" if kafka.ssl_cafile is None
              else f"SP_KAFKA__SSL_CAFILE={kafka.ssl_cafile}")
    checked = repr(host) if kafka.ssl_check_hostname else "none, SP_KAFKA__SSL_CHECK_HOSTNAME=false"
    return (f"TLS with Kafka at {server} failed: {what} ({cafile}; host name checked: {checked}):"
            f" certificate verify failed: {reason}")


def _ssl_text(exc: BaseException) -> str:
    """An error's one line, without OpenSSL's source location (``(_ssl.c:1006)``).

    >>> _ssl_text(ssl.SSLError(9, "[X509] no certificate or crl found (_ssl.c:4149)"))
    '[X509] no certificate or crl found'
    """
    return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", describe(exc).split(": ", 1)[-1])


def _host_port(server: str) -> tuple[str, int]:
    """``host:port`` (port 9092 if absent, IPv6 in brackets).

    >>> _host_port("[::1]:9093"), _host_port("kafka")
    (('::1', 9093), ('kafka', 9092))
    """
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit() or host.count(":") and not host.startswith("["):
        host, port = server, "9092"
    return host.strip("[]"), int(port)


