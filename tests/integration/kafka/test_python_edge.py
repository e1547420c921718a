"""What only the kafka-python side of ``kafka_io`` does; the edge contract both backends share is
in test_edge.py.

* ``client_config`` is kafka-python's translation of the settings (confluent's is
  ``confluent_config``, in test_kafka_confluent.py).
* ``fetch_max_bytes`` bounds what one fetch brings (measured from the consumer's metrics).
* ``ensure_topics`` always uses kafka-python's admin client, whatever ``kafka.backend`` says,
  so it is tested once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from pydantic import SecretStr

from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka.admin import client_config, ensure_topics
from stream_perceptron.settings import KafkaSettings
from tests.integration.conftest import is_tansu
from tests.integration.helpers import poll_until, started

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


@pytest.mark.parametrize("fetch_max_bytes", [1_048_576, 8_388_608])
def test_fetch_max_bytes_bounds_each_fetch_response(
    kafka_settings: Settings, new_topic: Callable[..., str], fetch_max_bytes: int
) -> None:
    # 30,000 records of 160 bytes (4.8 MB) in producer batches of at most 64 kB: the embedded
    # broker ignores the per-partition limit, so only fetch_max_bytes keeps a response small
    kafka = kafka_settings(fetch_max_bytes=fetch_max_bytes)
    topic = new_topic()
    producer = KafkaProducer(**client_config(kafka), acks="all", linger_ms=20, batch_size=65_536)
    try:
        for i in range(30_000):
            producer.send(topic, value=b"%08d" % i + bytes(152))
        producer.flush()
    finally:
        producer.close()
    with started(kafka, topic) as edge:
        poll_until([edge], lambda records: len(records) >= 30_000)
        edge.poll(timeout_ms=200, max_records=500)  # the last fetch's size is counted once drained
        fetched = edge._consumer.metrics()["consumer-fetch-manager-metrics"]  # type: ignore[attr-defined]
    largest = fetched["fetch-size-max"]
    if fetch_max_bytes > 1_048_576 and is_tansu(kafka.bootstrap_servers or ""):
        assert largest > 2 * 1_048_576, fetched  # a wider bound: several MB at a time
    else:  # 1 MiB, by this bound or by Kafka's own max_partition_fetch_bytes: one batch over at most
        assert 500_000 < largest <= 1_048_576 + 65_536 + 1_024, fetched
