"""What only the kafka-python side of ``kafka_io`` does; the edge contract both backends share is
in test_edge.py.

* ``client_config`` is kafka-python's translation of the settings (confluent's is
  ``confluent_config``, in test_kafka_confluent.py).
* ``ensure_topics`` always uses kafka-python's admin client, whatever ``kafka.backend`` says,
  so it is tested once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from kafka import KafkaAdminClient
from pydantic import SecretStr

from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka_io import client_config, ensure_topics
from stream_perceptron.settings import KafkaSettings

Settings = Callable[..., KafkaSettings]


def test_client_config_reveals_secrets_only_in_the_kwargs() -> None:
    kafka = KafkaSettings(
        bootstrap_servers="a:1,b:2",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password=SecretStr("hunter2"),
    )
    cfg = client_config(kafka)
    assert cfg["bootstrap_servers"] == ["a:1", "b:2"]
    assert cfg["sasl_plain_password"] == "hunter2" and cfg["sasl_plain_username"] == "u"
    assert "ssl_cafile" not in cfg and "ssl_password" not in cfg
    assert "hunter2" not in repr(kafka)
    with pytest.raises(KafkaEdgeError, match="bootstrap_servers"):
        client_config(KafkaSettings())


def test_ensure_topics_is_idempotent(kafka_settings: Settings) -> None:
    kafka = kafka_settings()
    name = f"test-ensure-{time.monotonic_ns()}"
    ensure_topics(kafka, {name: 3})
    ensure_topics(kafka, {name: 3})  # exists already: no error
    ensure_topics(kafka, {})
    admin = KafkaAdminClient(**client_config(kafka))
    try:
        (topic,) = admin.describe_topics([name])
    finally:
        admin.close()
    assert topic["error_code"] == 0 and len(topic["partitions"]) == 3
