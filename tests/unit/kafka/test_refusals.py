"""A broker certificate the settings refuse, named by one line that says which settings are
involved, without a broker: ``check_reachable`` against TLS listeners with test certificates.
The same refusals on Apache Kafka itself, both backends, are row 9a
(tests/faults/test_security.py)."""

from __future__ import annotations

import re
import time

import pytest

from stream_perceptron.errors import KafkaAuthError, SettingsError
from stream_perceptron.kafka.config import check_reachable
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
