"""The confluent-kafka edge against a real broker: the behaviours test_kafka_io.py checks for the
kafka-python edge (order, keys, commits, seeks in callbacks, high-water marks, groups, outages).

Join and rebalance times are printed (``pytest -s``) and bounded loosely.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from kafka import KafkaProducer
from pydantic import SecretStr

pytest.importorskip("confluent_kafka")

from stream_perceptron.broker import EmbeddedBroker  # noqa: E402
from stream_perceptron.errors import BrokerError, KafkaEdgeError  # noqa: E402
from stream_perceptron.kafka_confluent import ConfluentEdge, confluent_config  # noqa: E402
from stream_perceptron.kafka_io import (  # noqa: E402
    InRecord,
    Partition,
    Retry,
    client_config,
    ensure_topics,
)
from stream_perceptron.settings import KafkaSettings  # noqa: E402

Settings = Callable[..., KafkaSettings]
JOIN_TIMEOUT_S = 30.0


class Recorder:
    """Rebalance callbacks that record what they saw (and can act inside the callback)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, list[Partition]]] = []
        self.times: list[float] = []
        self.on_assigned_action: Callable[[list[Partition]], None] | None = None
        self.on_revoked_action: Callable[[list[Partition]], None] | None = None

    def on_assigned(self, partitions: list[Partition]) -> None:
        self.events.append(("assigned", partitions))
        self.times.append(time.monotonic())
        if self.on_assigned_action is not None:
            self.on_assigned_action(partitions)

    def on_revoked(self, partitions: list[Partition]) -> None:
        self.events.append(("revoked", partitions))
        self.times.append(time.monotonic())
        if self.on_revoked_action is not None:
            self.on_revoked_action(partitions)


@contextmanager
def started(
    settings: KafkaSettings, topic: str, recorder: Recorder | None = None, **kwargs: Retry
) -> Iterator[ConfluentEdge]:
    rec = recorder or Recorder()
    edge = ConfluentEdge(settings, topic, rec.on_assigned, rec.on_revoked, **kwargs)
    edge.start()
    try:
        yield edge
    finally:
        edge.close()


def confluent(kafka_settings: Settings, **overrides: object) -> KafkaSettings:
    return kafka_settings(backend="confluent-kafka", **overrides)


def poll_until(
    edges: list[ConfluentEdge],
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


def wait_until(condition: Callable[[], bool], timeout_s: float = JOIN_TIMEOUT_S) -> float:
    """Wait for ``condition``; returns the seconds it took."""
    t0 = time.monotonic()
    while not condition():
        assert time.monotonic() - t0 < timeout_s, "timed out"
        time.sleep(0.05)
    return time.monotonic() - t0


@contextmanager
def polling(edge: ConfluentEdge) -> Iterator[None]:
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


def produce(edge: ConfluentEdge, topic: str, n: int, start: int = 0) -> None:
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


def test_records_arrive_in_order_then_commit_resumes_the_group(
    kafka_settings: Settings, new_topic: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # a password that must never reach a log line (SASL is not used on PLAINTEXT)
    kafka, topic = confluent(kafka_settings, sasl_password=SecretStr("hunter2")), new_topic(1)
    recorder = Recorder()
    t0 = time.monotonic()
    with started(kafka, topic, recorder) as edge:
        for start in (0, 10, 20):  # three batches: ListOffsets(latest) on tansu would say 21
            produce(edge, topic, 10, start)
        records = poll_until([edge], lambda got: len(got) >= 30)
        print(f"\nconfluent edge: first assignment {recorder.times[0] - t0:.2f} s after start()")
        assert recorder.times[0] - t0 < 15
        assert [r.offset for r in records] == list(range(30))
        assert [(r.key, r.value) for r in records[:2]] == [(b"k0", b"v0"), (b"k1", b"v1")]
        assert all(r.topic == topic and r.partition == 0 and r.timestamp_ms > 0 for r in records)
        assert edge.assignment() == [(topic, 0)]
        assert edge.highwater(topic, 0) == 30
        assert edge.highwater(topic, 7) is None  # not assigned
        assert edge.committed(topic, 0) is None
        edge.commit({(topic, 0): 20, (topic, 5): 1})  # the unassigned partition is skipped
        assert edge.committed(topic, 0) == 20
        with pytest.raises(KafkaEdgeError, match="not assigned"):
            edge.seek(topic, 5, 0)
        # a lone record comes back as soon as it is fetched, not when max_records are there
        produce(edge, topic, 1, 30)
        t = time.monotonic()
        assert [[r.offset for r in b] for b in edge.poll(timeout_ms=5_000, max_records=500)] == [[30]]
        assert time.monotonic() - t < 2.5
    # close() revoked the partition without committing anything else
    assert recorder.events == [("assigned", [(topic, 0)]), ("revoked", [(topic, 0)])]

    t1 = time.monotonic()
    with started(kafka, topic) as edge:
        records = poll_until([edge], lambda got: len(got) >= 11)
        assert [r.offset for r in records] == list(range(20, 31))
        print(f"confluent edge: rejoin and resume {time.monotonic() - t1:.2f} s")
    assert "hunter2" not in caplog.text
    with pytest.raises(KafkaEdgeError, match="not started"):
        edge.poll(0, 1)


def test_seek_and_commit_inside_the_rebalance_callbacks(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    kafka, topic = confluent(kafka_settings), new_topic(2)
    produce_to_partitions(kafka, topic, {0: 10, 1: 10})
    recorder = Recorder()
    seen_committed: list[int | None] = []
    seen_assignment: list[list[Partition]] = []
    holder: list[ConfluentEdge] = []

    def seek_to_seven(partitions: list[Partition]) -> None:
        edge = holder[0]
        with pytest.raises(KafkaEdgeError, match="rebalance callback"):
            edge.poll(0, 1)  # would consume inside librdkafka's rebalance: refused
        with pytest.raises(KafkaEdgeError, match="rebalance callback"):
            edge.close()
        seen_assignment.append(edge.assignment())
        edge.commit({(topic, 1): 2})  # synchronous, in the new generation
        for t, p in partitions:
            seen_committed.append(edge.committed(t, p))
            edge.seek(t, p, 7)

    def commit_on_revoke(partitions: list[Partition]) -> None:
        holder[0].commit({tp: 9 for tp in partitions})

    recorder.on_assigned_action = seek_to_seven
    recorder.on_revoked_action = commit_on_revoke
    edge = ConfluentEdge(kafka, topic, recorder.on_assigned, recorder.on_revoked)
    holder.append(edge)
    edge.start()
    try:
        records = poll_until([edge], lambda got: len(got) >= 6)
        by_partition = {p: [r.offset for r in records if r.partition == p] for p in (0, 1)}
        assert by_partition == {0: [7, 8, 9], 1: [7, 8, 9]}
        assert records[0].value == b"p0-7"
        assert seen_assignment == [[(topic, 0), (topic, 1)]]
        assert seen_committed == [None, 2]  # the commit made in the callback is visible
        assert edge.highwater(topic, 0) == 10
    finally:
        edge.close()
    # the commit made inside on_revoked (during close) reached the broker
    with started(kafka, topic) as other:
        assert [other.committed(topic, p) for p in (0, 1)] == [9, 9]


def test_an_exception_in_a_callback_comes_out_of_poll_and_skips_no_record(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    kafka, topic = confluent(kafka_settings), new_topic(1)
    produce_to_partitions(kafka, topic, {0: 20})
    recorder = Recorder()
    failures: list[int] = []

    def fail_once(partitions: list[Partition]) -> None:
        if not failures:
            failures.append(1)
            raise ValueError(f"cannot restore {partitions}")

    recorder.on_assigned_action = fail_once
    with started(kafka, topic, recorder) as edge:
        with pytest.raises(ValueError, match="restore"):
            poll_until([edge], lambda _: False)
        # the partition is assigned all the same; records the failed poll fetched come again
        assert edge.assignment() == [(topic, 0)]
        records = poll_until([edge], lambda got: len(got) >= 20)
        assert [r.offset for r in records] == list(range(20))


def test_two_members_split_the_partitions_then_one_takes_all(
    kafka_settings: Settings, new_topic: Callable[..., str]
) -> None:
    # Each member polls on its own thread, as separate worker processes would.
    kafka, topic = confluent(kafka_settings), new_topic(2)
    produce_to_partitions(kafka, topic, {0: 5, 1: 5})
    first, second = Recorder(), Recorder()
    in_callback: list[dict[Partition, int | None]] = []
    holder: list[ConfluentEdge] = []
    first.on_assigned_action = lambda parts: in_callback.append({p: holder[0].highwater(*p) for p in parts})
    with started(kafka, topic, first) as a:
        holder.append(a)
        poll_until([a], lambda got: len(got) >= 10)  # a alone: both partitions, fetched to 5
        assert [a.highwater(topic, p) for p in (0, 1)] == [5, 5]
        with started(kafka, topic, second) as b:
            with polling(a), polling(b):
                split = wait_until(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1)
                assert sorted(a.assignment() + b.assignment()) == [(topic, 0), (topic, 1)]
                produce_to_partitions(kafka, topic, {0: 5, 1: 5})
                wait_until(lambda: [e.highwater(*e.assignment()[0]) for e in (a, b)] == [10, 10])
            with polling(a):
                b.close()
                takeover = wait_until(lambda: len(a.assignment()) == 2)
        print(f"\nconfluent edge: two members split in {split:.2f} s; takeover after close {takeover:.2f} s")
        # librdkafka cached 5 for the partition a gave away; the edge does not report it stale
        assert in_callback[-1] == {(topic, 0): None, (topic, 1): None}
        poll_until([a], lambda _: [a.highwater(topic, p) for p in (0, 1)] == [10, 10])
    assert ("revoked", [(topic, 0), (topic, 1)]) in first.events
    assert second.events[-1][0] == "revoked" and len(second.events[-1][1]) == 1


def test_an_unreachable_broker_does_not_crash_the_edge() -> None:
    try:
        broker = EmbeddedBroker()
        broker.start()
    except BrokerError as exc:
        pytest.skip(f"needs the embedded broker: {exc}")
    # a short session: one commit attempt waits for the coordinator that long
    kafka = KafkaSettings(
        backend="confluent-kafka",
        bootstrap_servers=broker.bootstrap,
        group_id="outage",
        session_timeout_ms=3_000,
        heartbeat_interval_ms=500,
        request_timeout_ms=1_000,
    )
    retry = Retry(attempts=2, backoff_s=0.05)
    try:
        ensure_topics(kafka, {"in": 1, "out": 1})
        with started(kafka, "in", retry=retry) as edge:
            produce(edge, "in", 3)
            produce(edge, "out", 1)
            poll_until([edge], lambda got: len(got) >= 3)
            broker.stop()

            t0 = time.monotonic()
            assert edge.poll(timeout_ms=300, max_records=10) == []
            edge.send("out", None, b"queued while the broker is away")
            with pytest.raises(KafkaEdgeError, match="flush failed after 2 attempts"):
                edge.flush()
            with pytest.raises(KafkaEdgeError, match="committing offsets failed"):
                edge.commit({("in", 0): 3})
            with pytest.raises(KafkaEdgeError, match="fetching the committed offset"):
                edge.committed("in", 0)
            assert edge.poll(timeout_ms=300, max_records=10) == []
            took = time.monotonic() - t0
            print(f"\nconfluent edge: outage calls failed within {took:.1f} s")
            assert took < 20
        # close() dropped the unacknowledged record and returned
    finally:
        broker.stop()
    with pytest.raises(KafkaEdgeError, match="cannot reach Kafka"):
        ConfluentEdge(kafka, "in", print, print).start()
