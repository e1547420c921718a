"""The Kafka edge against a real broker: topics, produce/consume, groups, offsets, outages."""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from pydantic import SecretStr

from stream_perceptron.broker import EmbeddedBroker
from stream_perceptron.errors import BrokerError, KafkaEdgeError
from stream_perceptron.kafka_io import (
    InRecord,
    KafkaEdge,
    Partition,
    Retry,
    client_config,
    ensure_topics,
)
from stream_perceptron.settings import KafkaSettings

Settings = Callable[..., KafkaSettings]
JOIN_TIMEOUT_S = 30.0


class Recorder:
    """Rebalance callbacks that record what they saw (and can act inside the callback)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, list[Partition]]] = []
        self.on_assigned_action: Callable[[list[Partition]], None] | None = None
        self.on_revoked_action: Callable[[list[Partition]], None] | None = None

    def on_assigned(self, partitions: list[Partition]) -> None:
        self.events.append(("assigned", partitions))
        if self.on_assigned_action is not None:
            self.on_assigned_action(partitions)

    def on_revoked(self, partitions: list[Partition]) -> None:
        self.events.append(("revoked", partitions))
        if self.on_revoked_action is not None:
            self.on_revoked_action(partitions)


@contextmanager
def started(
    settings: KafkaSettings, topic: str, recorder: Recorder | None = None, **kwargs: Retry
) -> Iterator[KafkaEdge]:
    rec = recorder or Recorder()
    edge = KafkaEdge(settings, topic, rec.on_assigned, rec.on_revoked, **kwargs)
    edge.start()
    try:
        yield edge
    finally:
        edge.close()


def poll_until(
    edges: list[KafkaEdge],
    done: Callable[[list[InRecord]], bool],
    timeout_s: float = JOIN_TIMEOUT_S,
) -> list[InRecord]:
    """Poll every edge in turn until ``done(records so far)`` or the deadline."""
    records: list[InRecord] = []
    deadline = time.monotonic() + timeout_s
    while not done(records):
        assert time.monotonic() < deadline, f"timed out; got {len(records)} records"
        for edge in edges:
            for batch in edge.poll(timeout_ms=200, max_records=500):
                records.extend(batch)
    return records


def wait_until(condition: Callable[[], bool], timeout_s: float = JOIN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@contextmanager
def polling(edge: KafkaEdge) -> Iterator[None]:
    """Poll ``edge`` on a background thread for the duration of the block."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def loop() -> None:
        try:
            while not stop.is_set():
                edge.poll(timeout_ms=100, max_records=500)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=loop, name="test-poller", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=JOIN_TIMEOUT_S)
    assert not thread.is_alive() and not errors, errors


def produce(edge: KafkaEdge, topic: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        edge.send(topic, f"k{i}".encode(), f"v{i}".encode())
    edge.flush()


def produce_to_partitions(kafka: KafkaSettings, topic: str, counts: dict[int, int]) -> None:
    producer = KafkaProducer(**client_config(kafka))
    try:
        for partition, n in counts.items():
            for i in range(n):
                producer.send(topic, value=f"p{partition}-{i}".encode(), partition=partition)
        producer.flush(timeout=10)
    finally:
        producer.close(timeout=10)


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


def test_records_arrive_in_order_then_commit_resumes_the_group(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    kafka, topic = kafka_settings(), new_topic(1)
    recorder = Recorder()
    with started(kafka, topic, recorder) as edge:
        produce(edge, topic, 30)
        records = poll_until([edge], lambda got: len(got) >= 30)
        assert [r.offset for r in records] == list(range(30))
        assert [(r.key, r.value) for r in records[:2]] == [(b"k0", b"v0"), (b"k1", b"v1")]
        assert all(r.topic == topic and r.partition == 0 and r.timestamp_ms > 0 for r in records)
        assert edge.assignment() == [(topic, 0)]
        assert edge.highwater(topic, 0) == 30
        assert edge.highwater(topic, 7) is None  # not assigned
        assert edge.committed(topic, 0) is None
        edge.commit({(topic, 0): 20, (topic, 5): 1})  # the unassigned partition is skipped
        assert edge.committed(topic, 0) == 20
    # close() revoked the partition without committing anything else
    assert recorder.events == [("assigned", [(topic, 0)]), ("revoked", [(topic, 0)])]

    with started(kafka, topic) as edge:
        records = poll_until([edge], lambda got: len(got) >= 10)
        assert [r.offset for r in records] == list(range(20, 30))


def test_seek_and_commit_inside_the_rebalance_callbacks(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    kafka, topic = kafka_settings(), new_topic(2)
    produce_to_partitions(kafka, topic, {0: 10, 1: 10})
    recorder = Recorder()
    seen_committed: list[int | None] = []
    holder: list[KafkaEdge] = []

    def seek_to_seven(partitions: list[Partition]) -> None:
        edge = holder[0]
        with pytest.raises(KafkaEdgeError, match="rebalance callback"):
            edge.poll(0, 1)  # runs on kafka-python's I/O thread: refused
        for t, p in partitions:
            seen_committed.append(edge.committed(t, p))
            edge.seek(t, p, 7)

    def commit_on_revoke(partitions: list[Partition]) -> None:
        holder[0].commit({tp: 9 for tp in partitions})

    recorder.on_assigned_action = seek_to_seven
    recorder.on_revoked_action = commit_on_revoke
    edge = KafkaEdge(kafka, topic, recorder.on_assigned, recorder.on_revoked)
    holder.append(edge)
    edge.start()
    try:
        records = poll_until([edge], lambda got: len(got) >= 6)
        by_partition = {p: [r.offset for r in records if r.partition == p] for p in (0, 1)}
        assert by_partition == {0: [7, 8, 9], 1: [7, 8, 9]}
        assert records[0].value == b"p0-7"
        assert seen_committed == [None, None]
    finally:
        edge.close()
    # the commit made inside on_revoked (during close) reached the broker
    with started(kafka, topic) as other:
        assert [other.committed(topic, p) for p in (0, 1)] == [9, 9]


def test_an_exception_in_a_callback_comes_out_of_poll(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    kafka, topic = kafka_settings(), new_topic(1)
    recorder = Recorder()

    def fail(partitions: list[Partition]) -> None:
        raise ValueError(f"cannot restore {partitions}")

    recorder.on_assigned_action = fail
    with started(kafka, topic, recorder) as edge, pytest.raises(ValueError, match="restore"):
        poll_until([edge], lambda _: False)


def test_two_members_split_the_partitions_then_one_takes_all(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    # Each member polls on its own thread, as separate worker processes would: a member
    # waits in poll() for a join that completes only when the other member rejoins too.
    kafka, topic = kafka_settings(), new_topic(2)
    first, second = Recorder(), Recorder()
    with started(kafka, topic, first) as a, started(kafka, topic, second) as b:
        with polling(a), polling(b):
            wait_until(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1)
        assert sorted(a.assignment() + b.assignment()) == [(topic, 0), (topic, 1)]
        with polling(a):
            b.close()
            wait_until(lambda: len(a.assignment()) == 2)
    assert ("revoked", [(topic, 0), (topic, 1)]) in first.events
    assert second.events[-1][0] == "revoked" and len(second.events[-1][1]) == 1


@pytest.fixture
def leaky_sockets(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """kafka-python 3.0.12 does not close a socket whose connect() is refused. Finalize
    them in teardown, where the test's ResourceWarning filter still applies; kafka-python's
    error log records (which pytest keeps) would hold them, so they are not recorded."""
    caplog.set_level(logging.CRITICAL, logger="kafka")
    yield
    gc.collect()


@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
@pytest.mark.usefixtures("leaky_sockets")
def test_an_unreachable_broker_does_not_crash_the_edge() -> None:
    try:
        broker = EmbeddedBroker()
        broker.start()
    except BrokerError as exc:
        pytest.skip(f"needs the embedded broker: {exc}")
    kafka = KafkaSettings(
        bootstrap_servers=broker.bootstrap,
        group_id="outage",
        session_timeout_ms=6_000,
        heartbeat_interval_ms=1_000,
        request_timeout_ms=1_000,
    )
    retry = Retry(attempts=2, backoff_s=0.05)
    try:
        ensure_topics(kafka, {"in": 1, "out": 1})
        with started(kafka, "in", retry=retry) as edge:
            produce(edge, "in", 3)
            produce(edge, "out", 1)  # the producer knows the topic before the outage
            poll_until([edge], lambda got: len(got) >= 3)
            broker.stop()

            t0 = time.monotonic()
            assert edge.poll(timeout_ms=300, max_records=10) == []
            edge.send("out", None, b"queued while the broker is away")
            with pytest.raises(KafkaEdgeError, match="flush failed after 2 attempts"):
                edge.flush()
            with pytest.raises(KafkaEdgeError, match="committing offsets failed"):
                edge.commit({("in", 0): 3})
            assert edge.poll(timeout_ms=300, max_records=10) == []
            assert time.monotonic() - t0 < 20
    finally:
        broker.stop()
    with pytest.raises(KafkaEdgeError, match="cannot reach Kafka"):
        KafkaEdge(kafka, "in", print, print).start()
    with pytest.raises(KafkaEdgeError, match="cannot reach Kafka"):
        ensure_topics(kafka, {"in": 1}, timeout_s=1)
