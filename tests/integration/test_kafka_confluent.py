"""What only the confluent-kafka side does: ``confluent_config``, librdkafka's translation of the
settings (kafka-python's is ``client_config``, in test_kafka_io.py). The edge contract both
backends share, ``ConfluentEdge`` included, is in test_edge.py."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

pytest.importorskip("confluent_kafka")

from stream_perceptron.errors import KafkaEdgeError  # noqa: E402
from stream_perceptron.kafka_confluent import confluent_config  # noqa: E402
from stream_perceptron.settings import KafkaSettings  # noqa: E402


def test_confluent_config_maps_the_security_settings() -> None:
    kafka = KafkaSettings(
        bootstrap_servers="a:1, b:2",
        client_id="me",
        request_timeout_ms=7_000,
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password=SecretStr("hunter2"),
        ssl_cafile="/ca.pem",
        ssl_certfile="/cert.pem",
        ssl_keyfile="/key.pem",
        ssl_password=SecretStr("keypass"),
        ssl_check_hostname=False,
    )
    assert confluent_config(kafka) == {
        "bootstrap.servers": "a:1,b:2",
        "client.id": "me",
        "security.protocol": "SASL_SSL",
        "socket.timeout.ms": 7_000,
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "hunter2",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/cert.pem",
        "ssl.key.location": "/key.pem",
        "ssl.key.password": "keypass",
        "ssl.endpoint.identification.algorithm": "none",
    }
    plain = confluent_config(KafkaSettings(bootstrap_servers="a:1"))
    assert not any(k.startswith(("sasl.", "ssl.")) for k in plain)  # librdkafka defaults apply
    with pytest.raises(KafkaEdgeError, match="bootstrap_servers"):
        confluent_config(KafkaSettings())
