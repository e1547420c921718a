"""What only the kafka-python side of ``kafka_io`` does; the edge contract both backends share is
in test_edge.py.

* ``client_config`` is kafka-python's translation of the settings (confluent's is
  ``confluent_config``, in test_kafka_confluent.py).
* ``fetch_max_bytes`` bounds what one fetch brings (measured from the consumer's metrics).
* ``ensure_topics`` always uses kafka-python's admin client, whatever ``kafka.backend`` says,
  so it is tested once.
* The start line names the fast paths installed, or why kafka-python's own path is used.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import kafka as kafka_python
import pytest
from kafka import KafkaAdminClient, KafkaProducer
from pydantic import SecretStr

from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka.admin import client_config, ensure_topics
from stream_perceptron.kafka.fastpath import encode as kafka_encode
from stream_perceptron.kafka.fastpath import fetch as kafka_fetch
from stream_perceptron.kafka.fastpath import wake as kafka_wake
from stream_perceptron.settings import KafkaSettings
from tests.integration.conftest import PRODUCER_PROCESS, is_tansu
from tests.integration.helpers import poll_until, produce, started

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


def _start_line(caplog: pytest.LogCaptureFixture) -> str:
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("kafka edge started")]
    return line


@pytest.mark.parametrize("backend", ["kafka-python", PRODUCER_PROCESS])
def test_the_start_line_names_the_fast_paths_installed(
    backend: str, kafka_settings: Settings, new_topic: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    # with its producer in a second process, the edge reports that process's append
    caplog.set_level(logging.INFO, logger="stream_perceptron")
    kafka, topic = kafka_settings(backend=backend), new_topic(1)
    with started(kafka, topic) as edge:
        produce(edge, topic, 5)
        assert [r.offset for r in poll_until([edge], lambda got: len(got) >= 5)] == list(range(5))
    fast_paths = f"fast paths (kafka-python {kafka_python.__version__}): fetch on, wake on, append on"
    assert _start_line(caplog).endswith(f"; {fast_paths}")


def test_the_start_line_says_why_kafka_pythons_own_path_is_used(
    kafka_settings: Settings, new_topic: Callable[..., str], caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # as another kafka-python would: decoding that reads the live probe otherwise, a fetcher of
    # another shape, a batch encoding that writes the probe batch otherwise. The records go
    # through kafka-python's own paths all the same.
    keys_lost = lambda cls, fields: tuple.__new__(cls, (*fields[:6], None, *fields[7:]))  # noqa: E731
    monkeypatch.setattr(kafka_fetch, "_new", keys_lost)
    monkeypatch.setattr(kafka_wake, "_STOCK_PARAMETERS", ["self", "max_records", "timeout_ms"])
    monkeypatch.setattr(kafka_encode, "_ZERO", b"\x02")  # bytes that try_append does not write
    caplog.set_level(logging.INFO, logger="stream_perceptron")
    kafka, topic = kafka_settings(), new_topic(1)
    with started(kafka, topic) as edge:
        produce(edge, topic, 5)
        records = poll_until([edge], lambda got: len(got) >= 5)
        assert [r.value for r in records] == [b"v%d" % i for i in range(5)]
        consumer = edge._consumer  # type: ignore[attr-defined]
        assert not kafka_fetch.installed(consumer) and not kafka_wake.installed(consumer)
    own = "off (kafka-python's own path; "
    assert _start_line(caplog).split("): ", 1)[1] == (
        f"fetch {own}probe: the probe batches read otherwise than by kafka-python), "
        f"wake {own}shape: Fetcher.fetch_records takes other arguments), "
        f"append {own}encode: probe: append_run wrote the probe batch otherwise than try_append)"
    )
