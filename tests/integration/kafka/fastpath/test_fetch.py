"""``kafka_fetch`` on the test broker: a consumer that decodes fetched batches in one loop polls
what kafka-python's own consumer polls, and the worker's kafka-python edge is such a consumer
(and one with ``kafka_wake``, whose race is tested in ``test_kafka_wake.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.serializer import Deserializer

from stream_perceptron.kafka.admin import client_config, consumer_config
from stream_perceptron.kafka.fastpath import fetch as kafka_fetch
from stream_perceptron.kafka.fastpath import wake as kafka_wake
from stream_perceptron.settings import KafkaSettings
from tests.integration.helpers import poll_until, started

Settings = Callable[..., KafkaSettings]
N = 4_000


def _fill(kafka: KafkaSettings, topic: str) -> None:
    """N records over 3 partitions in small producer batches: keys, headers, tombstones, and
    values of 0 to 9,000 bytes (varints of one, two and three bytes)."""
    producer = KafkaProducer(**client_config(kafka), acks="all", linger_ms=5, batch_size=16_384)
    try:
        for i in range(N):
            producer.send(
                topic,
                partition=i % 3,
                key=None if i % 5 == 0 and i % 11 else b"k%d" % i,  # a tombstone has a key
                value=None if i % 11 == 0 else bytes([65 + i % 26]) * (i * 37 % 9_000),
                headers=[("trace", b"%d" % i), ("empty", b"")] if i % 4 == 0 else None,
            )
        producer.flush()
    finally:
        producer.close()


def _poll_all(kafka: KafkaSettings, topic: str, decode: bool) -> dict[int, list[Any]]:
    # a small fetch bound and small polls: each fetch ends mid-batch, each batch is taken in pieces
    consumer = KafkaConsumer(**consumer_config(kafka.model_copy(update={"fetch_max_bytes": 50_000})))
    if decode:
        assert kafka_fetch.install(consumer)
    tps = [TopicPartition(topic, p) for p in range(3)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    got: dict[int, list[Any]] = {0: [], 1: [], 2: []}
    try:
        for _ in range(2_000):
            for tp, records in consumer.poll(timeout_ms=500, max_records=97).items():
                got[tp.partition].extend(records)
            if sum(map(len, got.values())) >= N:
                break
        assert consumer.position(tps[0]) == len(got[0])
    finally:
        consumer.close()
    return got


def test_a_decoding_consumer_polls_what_kafka_python_polls(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    kafka = kafka_settings()
    topic = new_topic(3)
    _fill(kafka, topic)
    stock, decoded = _poll_all(kafka, topic, False), _poll_all(kafka, topic, True)
    assert sum(map(len, stock.values())) == N
    assert decoded == stock  # every field: offsets, timestamps, keys, values, headers, sizes
    assert [r.offset for r in decoded[1]] == list(range(len(decoded[1])))


def test_supports_the_installed_kafka_python_consumer_but_not_one_with_a_deserialiser(
    kafka_settings: Settings,
) -> None:
    kafka = kafka_settings()
    class Text(Deserializer):  # type: ignore[misc]
        def deserialize(self, topic: str, headers: Any, data: bytes) -> str:
            return data.decode()

    for config, expected in (({}, True), ({"value_deserializer": Text()}, False)):
        consumer = KafkaConsumer(**consumer_config(kafka), **config)
        try:
            assert kafka_fetch.supports(consumer) is expected
        finally:
            consumer.close()


@pytest.mark.parametrize("backend", ["kafka-python", "kafka-python+process"], indirect=True)
def test_the_kafka_python_edge_decodes_its_fetches_in_one_loop_and_wakes_mid_poll(
    kafka_settings: Settings, new_topic: Callable[..., str], backend: str
) -> None:
    kafka = kafka_settings(backend=backend)
    topic = new_topic()
    with started(kafka, topic) as edge:
        assert kafka_fetch.installed(edge._consumer)  # type: ignore[attr-defined]
        assert kafka_wake.installed(edge._consumer)  # type: ignore[attr-defined]
        edge.send_many(topic, [None, b"k"], [b"v0", b"v1"])
        edge.flush()
        got = poll_until([edge], lambda records: len(records) >= 2)
    assert [(r.offset, r.key, r.value) for r in got] == [(0, None, b"v0"), (1, b"k", b"v1")]
