"""What only the confluent-kafka side does: ``confluent_config``, librdkafka's translation of the
settings (kafka-python's is ``client_config``, in test_kafka_io.py); ``drop_and_close``, which
closes a producer without waiting on a broker; ``ConfluentEdge.send_many``'s slow path, which
waits out a full local queue (kafka-python's ``send`` blocks instead); and a producer that creates
no topic it sends to (the embedded broker creates one for kafka-python's producer all the same).
The edge contract both backends share, ``ConfluentEdge`` included, is in test_edge.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import SecretStr

pytest.importorskip("confluent_kafka")

from confluent_kafka import KafkaError, KafkaException, Producer  # noqa: E402

from stream_perceptron.errors import KafkaEdgeError  # noqa: E402
from stream_perceptron.kafka.admin import missing_topics  # noqa: E402
from stream_perceptron.kafka.confluent_edge import ConfluentEdge, confluent_config, drop_and_close  # noqa: E402
from stream_perceptron.settings import KafkaSettings  # noqa: E402
from tests.integration.helpers import poll_until, started  # noqa: E402


def test_confluent_config_maps_the_security_settings(tmp_path) -> None:
    files = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "key")}
    for path in files.values():
        path.write_text("")  # the settings check that the files are there
    kafka = KafkaSettings(
        bootstrap_servers="a:1, b:2",
        client_id="me",
        request_timeout_ms=7_000,
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="u",
        sasl_password=SecretStr("hunter2"),
        ssl_cafile=files["ca"],
        ssl_certfile=files["cert"],
        ssl_keyfile=files["key"],
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
        "ssl.ca.location": str(files["ca"]),
        "ssl.certificate.location": str(files["cert"]),
        "ssl.key.location": str(files["key"]),
        "ssl.key.password": "keypass",
        "ssl.endpoint.identification.algorithm": "none",
    }
    plain = confluent_config(KafkaSettings(bootstrap_servers="a:1"))
    assert not any(k.startswith(("sasl.", "ssl.")) for k in plain)  # librdkafka defaults apply
    with pytest.raises(KafkaEdgeError, match="bootstrap_servers"):
        confluent_config(KafkaSettings())


# No broker answers here: the records stay queued, as they do when the broker has gone. close()
# waits for queued records up to message.timeout.ms (five minutes by default), hence the purge;
# the short timeout keeps the failed-purge case quick.
_NOWHERE = {"bootstrap.servers": "127.0.0.1:9", "log_level": 0, "message.timeout.ms": 1000}


class _RecordingProducer(Producer):
    """A real producer that notes its ``close()`` and can be told to fail its purge."""

    def __init__(self, config: dict[str, object], *, fail_purge: bool = False) -> None:
        super().__init__(config)
        self.fail_purge = fail_purge
        self.closed = 0

    def purge(self, *args: object, **kwargs: object) -> None:
        if self.fail_purge:
            raise KafkaException(KafkaError(KafkaError._STATE))
        super().purge(*args, **kwargs)

    def close(self) -> None:
        self.closed += 1
        super().close()


def test_drop_and_close_purges_the_queue_serves_its_reports_and_closes() -> None:
    reports: list[int] = []
    producer = _RecordingProducer(_NOWHERE)
    for i in range(3):
        producer.produce("t", b"v%d" % i, on_delivery=lambda err, _msg: reports.append(err.code()))
    drop_and_close(producer)
    assert reports == [KafkaError._PURGE_QUEUE] * 3  # served before the close, not lost
    assert producer.closed == 1


def test_drop_and_close_closes_even_when_the_purge_fails() -> None:
    producer = _RecordingProducer(_NOWHERE, fail_purge=True)
    producer.produce("t", b"v")
    with pytest.raises(KafkaException, match="Erroneous state"):
        drop_and_close(producer)
    assert producer.closed == 1


def test_a_full_producer_queue_is_waited_out_and_every_record_arrives_in_order(
    kafka_settings: Any, new_topic: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a local queue of one record: every produce() after the first finds it full until the
    # record before is delivered (linger.ms and the broker's ack), so send_many takes the slow path
    config = ConfluentEdge._producer_config
    monkeypatch.setattr(
        ConfluentEdge, "_producer_config", lambda self: {**config(self), "queue.buffering.max.messages": 1}
    )
    slow: list[bytes | None] = []
    retrying = ConfluentEdge._send_retrying

    def counted(self: ConfluentEdge, producer: Producer, topic: str, key: bytes | None, value: bytes) -> None:
        slow.append(key)
        retrying(self, producer, topic, key, value)

    monkeypatch.setattr(ConfluentEdge, "_send_retrying", counted)
    topic = new_topic(1)
    keys, values = [b"k%d" % i for i in range(5)], [b"v%d" % i for i in range(5)]
    with started(kafka_settings(backend="confluent-kafka"), topic) as edge:
        edge.send_many(topic, keys, values)
        edge.flush()
        records = poll_until([edge], lambda got: len(got) >= 5)
    assert slow == keys[1:]
    assert [(r.offset, r.key, r.value) for r in records] == [(i, keys[i], values[i]) for i in range(5)]


def test_the_producer_does_not_create_a_topic_it_sends_to(
    kafka_settings: Any, new_topic: Any
) -> None:
    # The worker creates its output topics at start. One missing later (deleted since) must not
    # come back with the broker's defaults: its records wait, and flush reports them.
    kafka = kafka_settings(backend="confluent-kafka", request_timeout_ms=2_000)
    missing = new_topic(1) + "-never-created"
    with started(kafka, new_topic(1)) as edge:
        edge.send_many(missing, [None], [b"v"])
        time.sleep(2)  # librdkafka asks for the topic's metadata at once, then every second
        assert missing_topics(kafka, [missing], timeout_s=10) == [missing]
