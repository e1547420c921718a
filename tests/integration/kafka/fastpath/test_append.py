"""``kafka_append.append_many`` against ``KafkaProducer.send``, on the test broker (a
transactional producer's, on Apache Kafka: the embedded broker gives aborted records to
``read_committed`` readers).

Each test sends the same records both ways, to two new topics, and reads both back: the records,
their partitions and their order in each partition must be the same. Small batches
(``batch_size`` 1 KiB) make every call fill and open many batches, so the path through
``RecordAccumulator.append`` is exercised, not only the open batch; the sender's wake-ups have a
test of their own, with a linger of a minute.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import IllegalStateError
from kafka.partitioner import Partitioner

from stream_perceptron.commands.read import read_topic
from stream_perceptron.kafka.admin import client_config, ensure_topics
from stream_perceptron.kafka.fastpath.append import append_many, supports
from stream_perceptron.settings import KafkaSettings
from tests.apache_kafka import ApacheKafka
from tests.integration.helpers import started

Settings = Callable[..., KafkaSettings]
N = 3_000


@pytest.fixture
def producer(kafka_settings: Settings) -> Iterator[KafkaProducer]:
    made = KafkaProducer(**client_config(kafka_settings()), acks="all", linger_ms=5, batch_size=1024)
    yield made
    made.close()


def _records(n: int = N) -> tuple[list[bytes], list[bytes]]:
    keys = [b"k%d" % i for i in range(n)]
    values = [b'{"i":%d,"pad":"%s"}' % (i, b"x" * (i % 37)) for i in range(n)]
    return keys, values


def _ready(producer: KafkaProducer, topic: str) -> None:
    """Fetch ``topic``'s metadata, as the worker's producer has once it sent anything."""
    _ready_at(producer, topic, None)


def _ready_at(producer: KafkaProducer, topic: str, partition: int | None) -> None:
    future = producer.send(topic, value=b'{"i":-1}', key=b"first", partition=partition)
    producer.flush(timeout=30)  # at once, whatever the producer's linger
    future.get(timeout=0)


def _read(kafka: KafkaSettings, topic: str) -> list[tuple[int, bytes | None, Any]]:
    return [(partition, key, value) for partition, _, key, value in read_topic(kafka, topic)]


@pytest.mark.parametrize("partitions", [1, 3])
def test_append_many_writes_what_send_writes(
    kafka_settings: Settings, new_topic: Callable[..., str], producer: KafkaProducer, partitions: int
) -> None:
    """Keyed records: to partition 0 of a one-partition topic, or to the partition the producer's
    partitioner picks for each key (3 partitions). The futures resolve to consecutive offsets."""
    sent, appended = new_topic(partitions), new_topic(partitions)
    keys, values = _records()
    for topic in (sent, appended):
        _ready(producer, topic)
    partition = 0 if partitions == 1 else None
    for key, value in zip(keys, values, strict=True):
        producer.send(sent, value=value, key=key, partition=partition)
    futures: list[Any] = []
    for start in range(0, N, 1000):  # polls of 1,000, as the worker appends them
        chunk = append_many(
            producer, appended, partition, keys[start:start + 1000], values[start:start + 1000]
        )
        assert chunk is not None and len(chunk) == 1000
        futures += chunk
    producer.flush(timeout=30)

    metadata = [future.get(timeout=0) for future in futures]
    assert [m.topic for m in metadata] == [appended] * N
    by_partition: dict[int, list[int]] = {}
    for m in metadata:
        by_partition.setdefault(m.partition, []).append(m.offset)
    for offsets in by_partition.values():  # after the one record of _ready, if it went there
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    assert len(by_partition) == partitions
    kafka = kafka_settings()
    assert _read(kafka, appended) == _read(kafka, sent)


def test_append_many_declines_what_only_send_does_exactly(
    new_topic: Callable[..., str], producer: KafkaProducer
) -> None:
    """None, with nothing appended: send waits for an unknown topic's metadata, picks a sticky
    partition for records without a key, raises for a partition the topic does not have or a
    record over ``max_request_size``, and refuses once closed."""
    one, three = new_topic(1), new_topic(3)
    keys, values = _records(10)
    assert append_many(producer, "no-such-topic-yet", 0, keys, values) is None
    for topic in (one, three):
        _ready(producer, topic)
    assert append_many(producer, three, None, [*keys[:9], None], values) is None
    assert append_many(producer, one, 1, keys, values) is None
    too_large = b"x" * (producer.config["max_request_size"] + 1)
    assert append_many(producer, one, 0, keys, [*values[:9], too_large]) is None
    assert append_many(producer, one, 0, [], []) is None
    assert sum(len(dq) for dq in producer._accumulator._batches.values()) == 0  # nothing appended

    assert append_many(producer, three, None, keys, values) is not None  # the same, keyed
    producer.close()
    assert append_many(producer, one, 0, keys, values) is None
    with pytest.raises(IllegalStateError):  # what the edge then meets, from send
        producer.send(one, value=values[0], key=keys[0])


def test_a_partitioner_that_picks_a_partition_the_topic_lacks_is_left_to_send(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    """As when the metadata changes between the check and the partitioner: send raises for it."""

    class Beyond(Partitioner):
        def partition(self, topic: str, key: Any, serialized_key: Any, value: Any,
                      serialized_value: Any, cluster: Any) -> int:
            return 7

    three = new_topic(3)
    made = KafkaProducer(**client_config(kafka_settings()), acks="all", partitioner=Beyond())
    try:
        _ready_at(made, three, 0)
        keys, values = _records(10)
        assert append_many(made, three, None, keys, values) is None
        assert sum(len(dq) for dq in made._accumulator._batches.values()) == 0
    finally:
        made.close()


def test_a_full_batch_wakes_the_sender_whatever_the_linger(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    """With a linger of a minute, only a wake-up sends the batches that fill (as ``send`` wakes
    the sender): the first record is acknowledged within seconds, with no flush."""
    topic = new_topic(1)
    lingering = KafkaProducer(
        **client_config(kafka_settings()), acks="all", linger_ms=60_000, batch_size=1024
    )
    try:
        _ready(lingering, topic)
        keys, values = _records(500)
        futures = append_many(lingering, topic, 0, keys, values)
        assert futures is not None
        assert futures[0].get(timeout=10).offset == 1  # after the one record of _ready
    finally:
        lingering.close()


def test_every_appended_record_has_the_errback_and_a_refusal_partway_leaves_the_rest_to_send(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    """Each record's errback is on its future from the moment it is appended: a producer forced
    to close with records still in its batches fails each, and the errback hears of each. When the
    accumulator refuses a record partway (the producer closed meanwhile), the records before it
    keep their futures and the rest come back as None, for ``send``."""
    topic = new_topic(1)
    keys, values = _records(300)
    heard: list[tuple[str, bytes | None, bytes, str]] = []

    def errback(t: str, key: bytes | None, value: bytes, exc: Exception) -> None:
        heard.append((t, key, value, type(exc).__name__))

    kafka = kafka_settings()
    lingering = KafkaProducer(**client_config(kafka), acks="all", linger_ms=60_000, batch_size=1 << 20)
    try:
        _ready(lingering, topic)
        futures = append_many(lingering, topic, 0, keys, values, errback=errback)
        assert futures is not None and None not in futures
        # what close() does once its timeout has passed: the batch, never sent, is aborted
        lingering._sender.force_close()
        lingering._sender.join(timeout=10)
    finally:
        lingering.close()
    assert [(t, k, v) for t, k, v, _ in heard] == [(topic, k, v) for k, v in zip(keys, values, strict=True)]
    assert {name for *_, name in heard} == {"IllegalStateError"}

    small = KafkaProducer(**client_config(kafka), acks="all", linger_ms=5, batch_size=1024)
    try:
        _ready(small, topic)
        opened = small._accumulator.append

        def refuse_the_third_batch(*args: Any, **kwargs: Any) -> Any:
            refuse_the_third_batch.calls += 1  # type: ignore[attr-defined]
            if refuse_the_third_batch.calls == 3:  # type: ignore[attr-defined]
                raise IllegalStateError("RecordAccumulator is closed")
            return opened(*args, **kwargs)

        refuse_the_third_batch.calls = 0  # type: ignore[attr-defined]
        small._accumulator.append = refuse_the_third_batch
        futures = append_many(small, topic, 0, keys, values)
        assert futures is not None
        cut = futures.index(None)
        assert 0 < cut < len(values) and futures[cut:] == [None] * (len(values) - cut)
        small._accumulator.append = opened
        for key, value in zip(keys[cut:], values[cut:], strict=True):
            small.send(topic, value=value, key=key, partition=0)
        small.flush(timeout=30)
    finally:
        small.close()
    assert [value for _, key, value in _read(kafka, topic) if key != b"first"] == [
        json.loads(v) for v in values
    ]


def test_supports_the_installed_kafka_python_and_not_a_producer_without_its_internals(
    producer: KafkaProducer,
) -> None:
    """An upgrade of kafka-python that moves an internal fails here, not by slowing down."""
    assert supports(producer)

    class Partial:
        _closed = False
        config = {"max_request_size": 1}

    assert not supports(Partial())
    opened = producer._accumulator.append
    producer._accumulator.append = lambda tp, key, value: None  # another kafka-python's signature
    assert not supports(producer)
    producer._accumulator.append = opened
    assert supports(producer)
    producer.config["value_serializer"] = bytes  # send would call it; append_many would not
    assert not supports(producer)


@pytest.mark.parametrize("appended", [0, 200])
def test_edge_sends_one_by_one_what_append_many_did_not_append(
    kafka_settings: Settings, new_topic: Callable[..., str], monkeypatch: pytest.MonkeyPatch,
    appended: int,
) -> None:
    """The edge's other path, ``send`` per record, delivers every record append_many declined
    (all of them) or left unappended (after the first 200), in order after those appended."""
    import stream_perceptron.kafka.python_edge as kafka_io

    calls: list[int] = []

    def partly(producer: Any, topic: str, partition: Any, keys: Any, values: Any, errback: Any) -> Any:
        calls.append(len(values))
        if not appended:
            return None
        head = append_many(producer, topic, partition, keys[:appended], values[:appended], errback)
        return [*head, *[None] * (len(values) - appended)]

    monkeypatch.setattr(kafka_io, "append_many", partly)
    kafka, topic = kafka_settings(), new_topic(1)
    keys, values = _records(500)
    with started(kafka, new_topic(1)) as edge:
        # the producer learns the topic's metadata: at start on tansu (its metadata answers name
        # every topic), here on Apache Kafka; without it append_many declines the whole batch
        edge._producer.partitions_for(topic)  # type: ignore[attr-defined]
        edge.send_many(topic, keys, values)
        edge.flush()
    assert calls == [500]
    assert _read(kafka, topic) == [(0, k, json.loads(v)) for k, v in zip(keys, values, strict=True)]


def test_nothing_is_appended_once_the_accumulator_closes_partway(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    """If the producer is closed while a poll is being appended, no record goes into a batch after
    that: the rest come back as None, for ``send`` to refuse, as it refuses any record then."""
    topic = new_topic(1)
    keys, values = _records(300)
    # a long linger: the batch the second append() opens stays in the accumulator to be looked at
    small = KafkaProducer(**client_config(kafka_settings()), acks="all", linger_ms=60_000, batch_size=1024)
    try:
        _ready(small, topic)
        accumulator = small._accumulator
        opened = accumulator.append
        second: list[Any] = []

        def close_after_the_second_batch(*args: Any, **kwargs: Any) -> Any:
            result = opened(*args, **kwargs)
            close_after_the_second_batch.calls += 1  # type: ignore[attr-defined]
            if close_after_the_second_batch.calls == 2:  # type: ignore[attr-defined]
                # taken before the close: once closed, the sender may drain the batch at any time
                second.append(accumulator._batches[TopicPartition(topic, 0)][-1])
                accumulator._closed = True  # what close() sets, from another thread
            return result

        close_after_the_second_batch.calls = 0  # type: ignore[attr-defined]
        accumulator.append = close_after_the_second_batch
        futures = append_many(small, topic, 0, keys, values)
        assert futures is not None
        cut = futures.index(None)
        assert futures[cut:] == [None] * (len(values) - cut)
        assert len(second[0]._record_futures) == 1  # the batch the second append() opened took no more
    finally:
        accumulator._closed = False
        accumulator.append = opened
        small.close()


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, bytes | None, bytes]]:
    """Every (partition, key, value) a ``read_committed`` consumer is given, read to each end."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        found: list[tuple[int, bytes | None, bytes]] = []
        deadline = time.monotonic() + 30
        while not all((end := consumer.highwater(tp)) is not None and consumer.position(tp) >= end
                      for tp in tps):
            assert time.monotonic() < deadline, f"{topic}: not at the end within 30 s"
            for tp, records in consumer.poll(timeout_ms=200).items():
                found += [(tp.partition, r.key, r.value) for r in records]
        return sorted(found, key=lambda r: r[0])  # each partition's records stay in order
    finally:
        consumer.close()


def test_a_transactional_producers_records_are_appended_into_its_transaction(
    apache_kafka: ApacheKafka,
) -> None:
    """A transactional producer (the exactly-once mode): records appended to 3 partitions in a
    committed transaction are what ``send`` gives a ``read_committed`` reader in one; records
    appended in an aborted one are not given at all; outside a transaction append_many appends
    nothing and leaves the records to ``send``, which refuses them as it refuses any then."""
    bootstrap = apache_kafka.bootstrap
    sent, appended = (f"append-tx-{uuid.uuid4().hex[:12]}" for _ in range(2))
    ensure_topics(KafkaSettings(bootstrap_servers=bootstrap), {sent: 3, appended: 3})
    keys, values = _records(1_500)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"tx-{uuid.uuid4().hex}",
                             linger_ms=5, batch_size=1024)
    try:
        assert supports(producer)
        producer.init_transactions()
        for topic in (sent, appended):  # the metadata, as a worker's producer has it
            producer.partitions_for(topic)
        producer.begin_transaction()
        for key, value in zip(keys, values, strict=True):
            producer.send(sent, value=value, key=key)
        for start in range(0, len(values), 500):
            chunk = slice(start, start + 500)
            futures = append_many(producer, appended, None, keys[chunk], values[chunk])
            assert futures is not None and None not in futures
        producer.commit_transaction()

        producer.begin_transaction()
        assert append_many(producer, appended, None, keys[:50], [b'{"aborted":1}'] * 50) is not None
        producer.flush()  # in the log, then aborted
        producer.abort_transaction()

        futures = append_many(producer, appended, None, keys[:5], values[:5])  # no transaction open
        assert futures == [None] * 5
        with pytest.raises(IllegalStateError):
            producer.send(appended, value=values[0], key=keys[0])
    finally:
        producer.close()
    assert _read_committed(bootstrap, appended, 3) == _read_committed(bootstrap, sent, 3)
    assert len(_read_committed(bootstrap, appended, 3)) == len(values)
