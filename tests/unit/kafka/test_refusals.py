"""A broker certificate the settings refuse and a login the broker refuses, each named by one line
that says which settings are involved, without a broker: ``check_reachable`` against TLS
listeners with test certificates, and the kafka-python lines a refused connection leaves
(``admin.explained``; as kafka-python 3.0.12 wrote them against Apache Kafka 4.1.1). The same
refusals on Apache Kafka itself, both backends, are rows 9a–9c (tests/faults/test_security.py)."""

from __future__ import annotations

import logging
import re
import time

import pytest
from confluent_kafka import KafkaError

from stream_perceptron.errors import KafkaAuthError, KafkaEdgeError, SettingsError
from stream_perceptron.kafka.admin import explained
from stream_perceptron.kafka.config import check_reachable
from stream_perceptron.kafka.confluent_edge import ConfluentEdge
from stream_perceptron.settings import KafkaSettings
from tests.unit.kafka.listeners import certificates, tls_listener


@pytest.fixture(scope="module")
def localhost(tmp_path_factory):
    """A certificate for localhost and 127.0.0.1, and another CA's file."""
    root = tmp_path_factory.mktemp("tls")
    return certificates(root / "localhost", ("localhost", "127.0.0.1")), certificates(
        root / "other", ("localhost",), ca_name="another CA").ca_file


def _tls(port: int, host: str = "localhost", **settings) -> KafkaSettings:
    return KafkaSettings(**{"bootstrap_servers": f"{host}:{port}", "security_protocol": "SSL", **settings})


def test_a_certificate_signed_by_the_ca_file_and_naming_the_host_passes(localhost):
    certs, _ = localhost
    with tls_listener(certs) as port:
        check_reachable(_tls(port, ssl_cafile=certs.ca_file), 2.0)
        check_reachable(_tls(port, host="127.0.0.1", ssl_cafile=certs.ca_file), 2.0)


def test_a_certificate_of_another_ca_is_refused_at_once_naming_tls_the_ca_file_and_the_host(localhost):
    certs, other_ca = localhost
    with tls_listener(certs) as port:
        started = time.monotonic()
        with pytest.raises(KafkaAuthError) as refused:
            check_reachable(_tls(port, ssl_cafile=other_ca, request_timeout_ms=30_000), 30.0)
        assert time.monotonic() - started < 2  # one handshake, not a client's bootstrap timeout
    assert str(refused.value) == (
        f"TLS with Kafka at localhost:{port} failed: the broker's certificate is not signed by a CA"
        f" in the CA file (SP_KAFKA__SSL_CAFILE={other_ca}; host name checked: 'localhost'):"
        " certificate verify failed: unable to get local issuer certificate")


def test_without_a_ca_file_the_system_s_cas_are_named(localhost):
    certs, _ = localhost
    with tls_listener(certs) as port, pytest.raises(KafkaAuthError) as refused:
        check_reachable(_tls(port), 2.0)
    assert "is not signed by a CA the system trusts (SP_KAFKA__SSL_CAFILE not set;" in str(refused.value)


def test_a_host_name_not_in_the_certificate_is_refused_saying_so(tmp_path):
    certs = certificates(tmp_path, ("broker.example",))
    with tls_listener(certs) as port:
        with pytest.raises(KafkaAuthError) as refused:
            check_reachable(_tls(port, ssl_cafile=certs.ca_file, security_protocol="SASL_SSL",
                                 sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p"), 2.0)
        # without the check the same certificate passes: the name was the only fault
        check_reachable(_tls(port, ssl_cafile=certs.ca_file, ssl_check_hostname=False), 2.0)
    said = str(refused.value)
    assert said == (
        f"TLS with Kafka at localhost:{port} failed: the name 'localhost' is not in the broker's"
        f" certificate (SP_KAFKA__SSL_CAFILE={certs.ca_file}; host name checked: 'localhost'):"
        " certificate verify failed: Hostname mismatch, certificate is not valid for 'localhost'.")
    assert "SASL" not in said


def test_a_server_refused_among_the_bootstrap_servers_is_passed_over(localhost, tmp_path):
    certs, _ = localhost
    stranger = certificates(tmp_path, ("broker.example",))
    with tls_listener(stranger) as wrong, tls_listener(certs) as right:
        check_reachable(KafkaSettings(bootstrap_servers=f"localhost:{wrong},localhost:{right}",
                                      security_protocol="SSL", ssl_cafile=certs.ca_file), 2.0)


def test_a_ca_file_that_holds_no_certificate_is_a_setting_to_fix(tmp_path):
    bogus = tmp_path / "ca.pem"
    bogus.write_text("not a certificate\n")
    with pytest.raises(SettingsError, match=rf"^the CA file SP_KAFKA__SSL_CAFILE={re.escape(str(bogus))}"
                                            r" cannot be loaded: "):
        check_reachable(KafkaSettings(bootstrap_servers="127.0.0.1:1", security_protocol="SSL",
                                      ssl_cafile=bogus), 1.0)


# kafka-python's ERROR lines after a wrong password (SCRAM-SHA-512 and PLAIN on Apache Kafka
# 4.1.1's SASL_SSL listener): the broker's reason first, then the connection's close
_SCRAM_REFUSED = [
    "<KafkaSSLTransport [127.0.0.1:58899<-44100]>: Abort ([Error 58] SaslAuthenticationFailedError:"
    " SaslAuthenticationFailedError: Authentication failed during authentication due to invalid"
    " credentials with SASL mechanism SCRAM-SHA-512)",
    "<KafkaConnection node_id=bootstrap-0 broker_version=(4, 1) (disconnected)>: Connection lost:"
    " [Error 58] SaslAuthenticationFailedError: SaslAuthenticationFailedError: Authentication failed"
    " during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
    "<KafkaSSLTransport [127.0.0.1:58899<-57058]>: Abort (KafkaConnectionError: socket disconnected)",
    "Bootstrap failed: KafkaTimeoutError: Unable to bootstrap from ['localhost:58899']",
]
_PLAIN_REFUSED = [
    "<KafkaSSLTransport [127.0.0.1:58899<-49382]>: Abort ([Error 58] SaslAuthenticationFailedError:"
    " SaslAuthenticationFailedError: Authentication failed: Invalid username or password)",
    "<KafkaSSLTransport [127.0.0.1:58899<-38562]>: Abort (KafkaConnectionError: socket disconnected)",
]
# ... and, as often under load, a wrong PLAIN password where kafka-python read the broker's
# answer and its close at once and dropped the answer
_PLAIN_CLOSED = [
    "<KafkaSSLTransport [127.0.0.1:54549<-37008]>: socket disconnected",
    "<KafkaSSLTransport [127.0.0.1:54549<-37008]>: Abort (KafkaConnectionError: socket disconnected)",
    "<KafkaConnection node_id=bootstrap-0 broker_version=(4, 1) (disconnected)>: Connection lost:"
    " KafkaConnectionError: socket disconnected",
    "Bootstrap failed: KafkaTimeoutError: Unable to bootstrap from ['localhost:58899']",
]
# ... and after a certificate that does not name the bootstrap host (SASL_SSL)
_NAME_REFUSED = [
    "Connection failed: KafkaConnectionError: Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED]"
    " certificate verify failed: Hostname mismatch, certificate is not valid for 'vm'. (_ssl.c:1006)",
    "<KafkaConnection node_id=bootstrap-0 broker_version=unknown (disconnected)>: Connection lost:"
    " KafkaConnectionError: Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify"
    " failed: Hostname mismatch, certificate is not valid for 'vm'. (_ssl.c:1006)",
    "Bootstrap failed: KafkaTimeoutError: Unable to bootstrap from ['vm:58899']",
]


def _explained(kafka: KafkaSettings, lines: list[str]) -> str:
    """What ``explained`` makes of a client that logged ``lines`` at ERROR, then failed."""
    with pytest.raises(KafkaEdgeError) as failed, explained(kafka):
        for line in lines:
            logging.getLogger("kafka.net.connection").error("%s", line)
        raise KafkaEdgeError(f"cannot reach Kafka at {kafka.bootstrap_servers}: KafkaTimeoutError: …")
    return str(failed.value)


def _sasl_ssl(mechanism: str, user: str, servers: str = "localhost:58899", **settings) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers=servers, security_protocol="SASL_SSL", sasl_mechanism=mechanism,
                         sasl_username=user, sasl_password="not-the-password", **settings)


@pytest.mark.parametrize(("mechanism", "user", "lines", "reason"), [
    ("SCRAM-SHA-512", "scram-user", _SCRAM_REFUSED, "Authentication failed during authentication due to"
     " invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ("PLAIN", "plain-user", _PLAIN_REFUSED, "Authentication failed: Invalid username or password"),
])
def test_a_wrong_password_is_named_by_the_broker_s_reason_not_by_the_close_after_it(mechanism, user, lines,
                                                                                      reason):
    said = _explained(_sasl_ssl(mechanism, user), lines)
    assert said == (f"Kafka at localhost:58899 refused the connection: SASL authentication failed"
                    f" (mechanism {mechanism}, user {user}): {reason}")
    assert "not-the-password" not in said


def test_a_connection_closed_during_the_login_with_no_reason_read_is_a_refused_login():
    said = _explained(_sasl_ssl("PLAIN", "plain-user"), _PLAIN_CLOSED)
    assert said == ("Kafka at localhost:58899 refused the connection: SASL authentication failed"
                    " (mechanism PLAIN, user plain-user): the broker closed the connection during the"
                    " login, its reason unread by the client")


def test_a_connection_closed_before_the_broker_s_version_is_known_is_not_taken_for_a_login():
    lines = [line.replace("broker_version=(4, 1)", "broker_version=unknown") for line in _PLAIN_CLOSED]
    assert _explained(_sasl_ssl("PLAIN", "plain-user"), lines).startswith("cannot reach Kafka at ")
    tls_only = KafkaSettings(bootstrap_servers="localhost:58899", security_protocol="SSL")
    assert _explained(tls_only, _PLAIN_CLOSED).startswith("cannot reach Kafka at ")  # no login: no guess


def test_a_tls_failure_other_than_a_certificate_is_named_as_tls():
    said = _explained(KafkaSettings(bootstrap_servers="localhost:9092", security_protocol="SSL"), [
        "Connection failed: KafkaConnectionError: Handshake failed: [SSL: WRONG_VERSION_NUMBER] wrong"
        " version number (_ssl.c:1006)"])
    assert said == ("TLS with Kafka at localhost:9092 failed: the handshake failed:"
                    " [SSL: WRONG_VERSION_NUMBER] wrong version number")


def test_a_certificate_refused_by_the_client_is_tls_not_a_sasl_failure():
    kafka = _sasl_ssl("SCRAM-SHA-512", "scram-user", servers="vm:58899", ssl_cafile=__file__)
    said = _explained(kafka, _NAME_REFUSED)
    assert said == (
        f"TLS with Kafka at vm:58899 failed: the name 'vm' is not in the broker's certificate"
        f" (SP_KAFKA__SSL_CAFILE={__file__}; host name checked: 'vm'): certificate verify failed:"
        " Hostname mismatch, certificate is not valid for 'vm'.")


def test_a_failure_with_no_security_cause_is_left_as_it_was():
    said = _explained(_sasl_ssl("PLAIN", "u"), [
        "<KafkaSSLTransport [127.0.0.1:58899<-38562]>: Abort (KafkaConnectionError: socket disconnected)"])
    assert said.startswith("cannot reach Kafka at localhost:58899")


def test_the_confluent_edge_names_the_settings_of_a_refused_certificate_or_login(caplog):
    kafka = _sasl_ssl("SCRAM-SHA-512", "scram-user", ssl_cafile=__file__)
    edge = ConfluentEdge(kafka, "in", print, print)
    with caplog.at_level(logging.WARNING, logger="stream_perceptron.kafka.confluent_edge"):
        edge._on_consumer_error(KafkaError(KafkaError._SSL, "sasl_ssl://vm:58899/bootstrap: SSL handshake"
                                           " failed: certificate verify failed: broker certificate could"
                                           " not be verified"))
        edge._on_producer_error(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error:"
                                           " Authentication failed during authentication due to invalid"
                                           " credentials with SASL mechanism SCRAM-SHA-512"))
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert said == [
        ("ERROR", f"Kafka consumer: TLS failed (SP_KAFKA__SSL_CAFILE={__file__}; host name checked: the"
                  " broker's): _SSL: sasl_ssl://vm:58899/bootstrap: SSL handshake failed: certificate"
                  " verify failed: broker certificate could not be verified"),
        ("ERROR", "Kafka producer: SASL authentication failed (mechanism SCRAM-SHA-512, user scram-user):"
                  " _AUTHENTICATION: SASL authentication error: Authentication failed during authentication"
                  " due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ]
