"""Probes of what Apache Kafka itself guarantees, which the state store (a compacted topic) and
the exactly-once mode (transactions) will rely on. None of it holds on the embedded tansu 0.6.0
(it never compacts, and it delivers aborted records under ``read_committed``), so every test
here uses ``apache_kafka``: a node from the Maven jars (``tests/apache_kafka``).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.protocol.consumer.offsets import ListOffsetsRequest

from tests.apache_kafka import ApacheKafka
from tests.integration.conftest import BACKENDS

ABORTED, COMMITTED = 40, 25


def _topic(kafka: ApacheKafka, configs: dict[str, str] | None = None) -> str:
    name = f"probe-{uuid.uuid4().hex[:12]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1, topic_configs=configs or {})], timeout_ms=10_000)
    finally:
        admin.close()
    return name


def _transact_kafka_python(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"tx-{uuid.uuid4().hex}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(ABORTED):
            producer.send(topic, key=b"k", value=f"aborted-{i}".encode())
        producer.flush()  # written to the log, then aborted
        producer.abort_transaction()
        producer.begin_transaction()
        for i in range(COMMITTED):
            producer.send(topic, key=b"k", value=f"committed-{i}".encode())
        producer.commit_transaction()
    finally:
        producer.close()


def _transact_confluent(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(ABORTED):
        producer.produce(topic, key=b"k", value=f"aborted-{i}".encode())
    assert producer.flush(30) == 0
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(COMMITTED):
        producer.produce(topic, key=b"k", value=f"committed-{i}".encode())
    producer.commit_transaction(30)


def _read_kafka_python(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value delivered from offset 0 until the consumer's position reaches the end of the
    log (the high watermark, past the transaction markers)."""
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                             enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                values += [r.value for r in records]
            end = consumer.highwater(tp)
            if end is not None and consumer.position(tp) >= end:
                return values
        raise AssertionError(f"not at the end within 30 s: {len(values)} values read")
    finally:
        consumer.close()


def _read_confluent(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    try:
        consumer.assign([CTopicPartition(topic, 0, 0)])
        _, high = consumer.get_watermark_offsets(CTopicPartition(topic, 0), timeout=10)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
            position = consumer.position([CTopicPartition(topic, 0)])[0].offset
            if position >= high:
                return values
        raise AssertionError(f"not at the end ({high}) within 30 s: {len(values)} values read")
    finally:
        consumer.close()


TRANSACT = {"kafka-python": _transact_kafka_python, "confluent-kafka": _transact_confluent}
READ = {"kafka-python": _read_kafka_python, "confluent-kafka": _read_confluent}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("library", BACKENDS)
def test_an_aborted_transaction_is_invisible_to_a_read_committed_consumer(library, apache_kafka):
    """Each client library writes a transaction that it aborts (40 records, flushed to the log
    first) and one that it commits (25). Its ``read_committed`` consumer gets exactly the 25;
    its ``read_uncommitted`` one gets all 65, so the aborted records were really in the log."""
    topic = _topic(apache_kafka)
    TRANSACT[library](apache_kafka.bootstrap, topic)
    committed = READ[library](apache_kafka.bootstrap, topic, "read_committed")
    assert committed == [f"committed-{i}".encode() for i in range(COMMITTED)]
    everything = READ[library](apache_kafka.bootstrap, topic, "read_uncommitted")
    assert sorted(everything) == sorted(
        [f"aborted-{i}".encode() for i in range(ABORTED)] + committed)


def _list_offsets_versions(caplog: pytest.LogCaptureFixture) -> list[int]:
    """The versions of the ListOffsets requests sent (kafka-python's connection logs each
    request, its version chosen, at DEBUG)."""
    return [r.args[2].API_VERSION for r in caplog.records
            if r.name == "kafka.net.connection" and isinstance(r.args, tuple) and len(r.args) == 3
            and isinstance(r.args[2], ListOffsetsRequest)]


@pytest.mark.timeout(120)
def test_kafka_python_list_offsets_on_kafka_4(apache_kafka, caplog):
    """kafka-python's ListOffsets against Apache Kafka 4.x, which dropped ListOffsets v0
    (KIP-896; kafka-python issue #2679 saw "unsupported version 0" with 2.2.15): 3.0.12 takes
    the highest version both sides speak, and gets correct answers, ``read_committed`` included:
    with a transaction open, the end offset is the last stable offset, before its records."""
    topic = _topic(apache_kafka)
    tp = TopicPartition(topic, 0)
    plain = KafkaProducer(bootstrap_servers=apache_kafka.bootstrap)
    for i in range(10):
        plain.send(topic, value=str(i).encode())
    plain.flush()
    plain.close()
    open_tx = KafkaProducer(bootstrap_servers=apache_kafka.bootstrap,
                            transactional_id=f"tx-{uuid.uuid4().hex}")
    try:
        open_tx.init_transactions()
        open_tx.begin_transaction()
        for i in range(5):
            open_tx.send(topic, value=f"pending-{i}".encode())
        open_tx.flush()
        caplog.set_level(logging.DEBUG, logger="kafka.net.connection")
        found: dict[str, Any] = {}
        for isolation in ("read_uncommitted", "read_committed"):
            consumer = KafkaConsumer(bootstrap_servers=apache_kafka.bootstrap, isolation_level=isolation)
            try:
                found[isolation] = (consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp],
                                    consumer.offsets_for_times({tp: 0})[tp].offset)
            finally:
                consumer.close()
        open_tx.abort_transaction()
    finally:
        open_tx.close()
    assert found["read_uncommitted"] == (0, 15, 0)  # the open transaction's 5 records count
    assert found["read_committed"] == (0, 10, 0)  # the last stable offset: before them
    versions = _list_offsets_versions(caplog)
    assert len(versions) >= 6 and min(versions) >= 2, versions  # never v0 (gone in 4.0)
    print(f"\nkafka-python ListOffsets versions sent to Apache Kafka: {sorted(set(versions))}; {found}")


@pytest.mark.timeout(120)
def test_a_compacted_topic_drops_older_values_per_key(apache_kafka):
    """A topic with ``cleanup.policy=compact`` and segments rolled every 100 ms: 30 values for
    each of 8 keys, then one more record to roll the segment; within 60 s the log cleaner has
    removed every older value, and each key's last value is the one kept."""
    topic = _topic(apache_kafka, {
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "100"})
    producer = KafkaProducer(bootstrap_servers=apache_kafka.bootstrap, acks="all")
    try:
        for version in range(30):
            for key in range(8):
                producer.send(topic, key=f"key-{key}".encode(), value=f"{key}:{version}".encode())
        producer.flush()
        time.sleep(0.2)  # past segment.ms: the next append rolls the segment
        producer.send(topic, key=b"roll", value=b"roll").get(timeout=10)
    finally:
        producer.close()
    deadline = time.monotonic() + 60
    while True:
        values = _read_kafka_python(apache_kafka.bootstrap, topic, "read_uncommitted")
        if len(values) == 9 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(values) == sorted([f"{key}:29".encode() for key in range(8)] + [b"roll"]), (
        f"{len(values)} records left of 241")
