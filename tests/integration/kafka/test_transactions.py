"""The exactly-once mode of the edge (``transactional=True``), once per backend, on Apache Kafka:
a committed transaction carries records and input offsets together; an aborted one leaves
neither; a member that lost its partitions (frozen past its session, or across a revocation it
did not end its transaction in) cannot commit; a transaction committed in ``on_revoked`` hands
the partitions over with their offsets.

Every test uses ``apache_kafka``, a node from the Maven jars (``tests/apache_kafka``): the
embedded tansu broker delivers aborted records to ``read_committed`` consumers (its 0.6.0), so
none of this can be verified there, and these tests skip saying so where Apache Kafka cannot run.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from stream_perceptron.errors import KafkaEdgeError, TransactionAbortedError, TransactionFencedError
from stream_perceptron.kafka.admin import client_config, ensure_topics
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.kafka.factory import open_edge
from stream_perceptron.settings import KafkaSettings
from tests.apache_kafka import ApacheKafka
from tests.integration.conftest import EDGES, PRODUCER_PROCESS, group_timeouts, wait_for_leaders
from tests.integration.helpers import (
    JOIN_TIMEOUT_S,
    Recorder,
    fill_partitions,
    poll_until,
    polling,
    wait_for,
)

pytestmark = pytest.mark.timeout(180)

Settings = Callable[..., KafkaSettings]


@pytest.fixture
def eos_kafka(apache_kafka: ApacheKafka, backend: str) -> Settings:
    """Settings for ``backend`` on the Apache Kafka node, a fresh group; overrides by keyword."""
    group = f"eos-{uuid.uuid4().hex[:12]}"

    def make(**overrides: Any) -> KafkaSettings:
        fields: dict[str, Any] = {
            "backend": backend, "bootstrap_servers": apache_kafka.bootstrap, "group_id": group,
            "client_id": "sp-eos", "request_timeout_ms": 10_000, "linger_ms": 5,
            **group_timeouts(apache_kafka.bootstrap),
        }
        if backend == PRODUCER_PROCESS:  # the factory keeps an exactly-once producer in-process
            fields.update(backend="kafka-python", producer_process=True)
        return KafkaSettings(**{**fields, **overrides})

    return make


@pytest.fixture
def eos_topic(eos_kafka: Settings) -> Callable[[int], str]:
    """``eos_topic(partitions) -> name``: a fresh topic on the Apache Kafka node."""

    def make(partitions: int = 1) -> str:
        name = f"eos-{uuid.uuid4().hex[:12]}"
        ensure_topics(eos_kafka(), {name: partitions})
        wait_for_leaders(eos_kafka(), name, partitions)
        return name

    return make


@contextmanager
def transactional(kafka: KafkaSettings, topic: str, recorder: Recorder | None = None) -> Iterator[Edge]:
    """A started transactional edge of ``kafka.backend`` (as the worker gets it), closed after."""
    rec = recorder or Recorder()
    edge = open_edge(kafka, topic, rec.on_assigned, rec.on_revoked, transactional=True)
    edge.start()
    try:
        yield edge
    finally:
        edge.close()


def read_all(kafka: KafkaSettings, topic: str, isolation: str) -> list[tuple[int, bytes | None, bytes]]:
    """Every ``(partition, key, value)`` of ``topic`` a consumer of ``isolation`` is given, read
    from the start until its position reaches the end of each partition (past the markers)."""
    consumer = KafkaConsumer(**client_config(kafka), isolation_level=isolation, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        found: list[tuple[int, bytes | None, bytes]] = []
        deadline = time.monotonic() + 30
        while True:
            for tp, records in consumer.poll(timeout_ms=200).items():
                found += [(tp.partition, r.key, r.value) for r in records]
            ends = {tp: consumer.highwater(tp) for tp in tps}
            if all(end is not None and consumer.position(tp) >= end for tp, end in ends.items()):
                return found
            assert time.monotonic() < deadline, f"{topic}: not at the end within 30 s ({len(found)} read)"
    finally:
        consumer.close()


def committed(kafka: KafkaSettings, topic: str, partition: int) -> int | None:
    """The group's committed offset, as a fresh consumer of the group asks for it."""
    consumer = KafkaConsumer(**client_config(kafka), group_id=kafka.group_id, enable_auto_commit=False)
    try:
        value: int | None = consumer.committed(TopicPartition(topic, partition))
        return value
    finally:
        consumer.close()


def values(found: list[tuple[int, bytes | None, bytes]]) -> list[bytes]:
    return [value for _, _, value in found]


@pytest.mark.parametrize("backend", EDGES, indirect=True)
def test_a_committed_transaction_carries_its_records_and_the_input_offsets(
    eos_kafka: Settings, eos_topic: Callable[[int], str], backend: str
) -> None:
    """Records of two input partitions, read by a transactional edge, are answered in one
    transaction with a state record sent to partition 2 of a three-partition topic, then
    committed with the input offsets: a ``read_committed`` reader gets every record, the state
    record on partition 2, and the group's offsets are those of the transaction; a new member
    of the group resumes there, and (the lifecycle) a second transaction moves them on."""
    kafka, source, out, state = eos_kafka(), eos_topic(2), eos_topic(1), eos_topic(3)
    fill_partitions(kafka, source, {0: 6, 1: 4})
    with transactional(kafka, source) as edge:
        assert edge.transactional
        records = poll_until([edge], lambda got: len(got) >= 10)
        with pytest.raises(KafkaEdgeError, match="only inside a transaction"):
            edge.send(out, None, b"outside")
        with pytest.raises(KafkaEdgeError, match="commit_transaction"):
            edge.commit({(source, 0): 6})
        edge.begin_transaction()
        with pytest.raises(KafkaEdgeError, match="open already"):
            edge.begin_transaction()
        edge.send_many(out, [r.key for r in records], [b"out-" + (r.value or b"") for r in records])
        edge.send(state, b"in:0", b"state", partition=2)
        edge.commit_transaction({(source, 0): 6, (source, 1): 4})
        with pytest.raises(KafkaEdgeError, match="no transaction is open"):
            edge.commit_transaction({})
    assert sorted(values(read_all(kafka, out, "read_committed"))) == sorted(
        [f"out-p0-{i}".encode() for i in range(6)] + [f"out-p1-{i}".encode() for i in range(4)])
    assert read_all(kafka, state, "read_committed") == [(2, b"in:0", b"state")]
    assert [committed(kafka, source, p) for p in (0, 1)] == [6, 4]

    fill_partitions(kafka, source, {0: 2})  # two more records, at offsets 6 and 7
    with transactional(kafka, source) as edge:
        again = poll_until([edge], lambda got: len(got) >= 2)
        assert [(r.partition, r.offset) for r in again] == [(0, 6), (0, 7)]
        edge.begin_transaction()
        edge.send(out, None, b"second")
        edge.commit_transaction({(source, 0): 8})
    assert [committed(kafka, source, p) for p in (0, 1)] == [8, 4]
    assert values(read_all(kafka, out, "read_committed")).count(b"second") == 1


def test_an_aborted_transaction_leaves_neither_records_nor_offsets(
    eos_kafka: Settings, eos_topic: Callable[[int], str], backend: str
) -> None:
    """After a committed transaction (offset 5), one aborted after its records reached the log,
    and one refused at commit for a partition the member does not hold (its offsets never
    leave): ``read_committed`` gives only the committed records, ``read_uncommitted`` shows the
    others were written, and the group's offset stays 5. The edge goes on: a fourth commits.
    A transactional edge reading that topic is given the committed records only."""
    kafka, source, out = eos_kafka(), eos_topic(1), eos_topic(1)
    fill_partitions(kafka, source, {0: 10})
    with transactional(kafka, source) as edge:
        poll_until([edge], lambda got: len(got) >= 10)
        edge.begin_transaction()
        edge.send(out, None, b"committed-1")
        edge.commit_transaction({(source, 0): 5})

        edge.begin_transaction()
        edge.send(out, None, b"aborted")
        edge.flush()  # in the log, then aborted
        edge.abort_transaction()
        edge.abort_transaction()  # none open: nothing to do

        edge.begin_transaction()
        edge.send(out, None, b"refused")
        edge.flush()
        with pytest.raises(TransactionFencedError, match=r"partitions \[\('.*', 7\)\] are not assigned"):
            edge.commit_transaction({(source, 0): 9, (source, 7): 1})

        assert committed(kafka, source, 0) == 5
        edge.begin_transaction()
        edge.send(out, None, b"committed-2")
        edge.commit_transaction({(source, 0): 10})
    assert values(read_all(kafka, out, "read_committed")) == [b"committed-1", b"committed-2"]
    assert sorted(values(read_all(kafka, out, "read_uncommitted"))) == sorted(
        [b"committed-1", b"aborted", b"refused", b"committed-2"])
    assert committed(kafka, source, 0) == 10
    # the edge's own consumer reads read_committed: the aborted records, between, never come
    other_group = kafka.model_copy(update={"group_id": f"reader-{uuid.uuid4().hex[:8]}"})
    with transactional(other_group, out) as reader:
        assert [r.value for r in poll_until([reader], lambda got: len(got) >= 2)] == [
            b"committed-1", b"committed-2"]


def _line(child: subprocess.Popen[str], timeout_s: float) -> str:
    """The child's next line of output, within ``timeout_s``."""
    assert child.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise AssertionError(f"the member exited ({child.returncode}) without a line")
        ready, _, _ = select.select([child.stdout], [], [], 0.2)
        if ready:
            return child.stdout.readline().strip()
    raise AssertionError(f"no line from the member within {timeout_s} s")


def test_a_member_frozen_past_its_session_cannot_commit_once_another_holds_its_partition(
    eos_kafka: Settings, eos_topic: Callable[[int], str], backend: str
) -> None:
    """Member A (a process of its own) reads the input's 12 records, opens a transaction, writes
    its answers to the log, and is frozen (SIGSTOP) past its 1 s session. Member B of the same
    group gets the partition, answers the same records and commits them with offset 12. A,
    resumed, commits: the group coordinator refuses A's offsets (KIP-447: A's generation is
    gone), A's commit raises ``TransactionFencedError``, and a ``read_committed`` reader sees
    B's answers only, each once, though A's were in the log."""
    kafka, source, out = eos_kafka(), eos_topic(1), eos_topic(1)
    fill_partitions(kafka, source, {0: 12})
    with subprocess.Popen(
        [sys.executable, "-m", "tests.integration.kafka.transactional_member",
         kafka.model_copy(update={"client_id": "member-a"}).model_dump_json(), source, out],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    ) as child:
        try:
            assert _line(child, 60) == "ready 12"
            os.kill(child.pid, signal.SIGSTOP)
            try:
                with transactional(kafka.model_copy(update={"client_id": "member-b"}), source) as b:
                    records = poll_until([b], lambda got: len(got) >= 12, timeout_s=JOIN_TIMEOUT_S)
                    b.begin_transaction()
                    b.send_many(out, [None] * 12, [b"B-" + (r.value or b"") for r in records])
                    b.commit_transaction({(source, 0): 12})
            finally:
                os.kill(child.pid, signal.SIGCONT)
            assert child.stdin is not None
            child.stdin.write("commit\n")
            child.stdin.flush()
            outcome = _line(child, 60)
            assert child.wait(30) == 0
        finally:
            if child.poll() is None:
                child.kill()
    print(f"\n{backend}: member A's commit: {outcome}")
    assert outcome.startswith("fenced ") and "refused this member's offsets" in outcome, outcome
    answers = [f"p0-{i}".encode() for i in range(12)]
    assert values(read_all(kafka, out, "read_committed")) == [b"B-" + v for v in answers]
    assert sorted(values(read_all(kafka, out, "read_uncommitted"))) == sorted(
        [b"A-" + v for v in answers] + [b"B-" + v for v in answers])
    assert committed(kafka, source, 0) == 12


def test_a_transaction_left_open_across_a_revocation_cannot_commit(
    eos_kafka: Settings, eos_topic: Callable[[int], str], backend: str
) -> None:
    """A holds both partitions with a transaction open; B joins and A's poll revokes them
    without A ending its transaction there: A's commit is refused (``TransactionFencedError``,
    the transaction aborted) whatever it is given, and nothing of it is visible."""
    kafka, source, out = eos_kafka(), eos_topic(2), eos_topic(1)
    fill_partitions(kafka, source, {0: 3, 1: 3})
    first = Recorder()
    with transactional(kafka, source, first) as a:
        poll_until([a], lambda got: len(got) >= 6)
        a.begin_transaction()
        a.send(out, None, b"from-a")
        with transactional(kafka.model_copy(update={"client_id": "member-b"}), source) as b:
            with polling(a), polling(b):
                wait_for(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1,
                         JOIN_TIMEOUT_S, "the partitions to be split", every_s=0.05)
            kept = a.assignment()
            with pytest.raises(TransactionFencedError, match="were revoked while it was open"):
                a.commit_transaction({kept[0]: 3})
            a.begin_transaction()  # the next one is fine
            a.abort_transaction()
    assert ("revoked", [(source, 0), (source, 1)]) in first.events
    assert read_all(kafka, out, "read_committed") == []
    assert [committed(kafka, source, p) for p in (0, 1)] == [None, None]


def test_a_transaction_committed_in_on_revoked_hands_the_offsets_over(
    eos_kafka: Settings, eos_topic: Callable[[int], str], backend: str
) -> None:
    """A commits its open transaction inside ``on_revoked`` (as the worker does) when B joins:
    the commit is accepted (A's generation is still the group's there), its records are
    visible, and B starts each partition where A's transaction left it."""
    kafka, source, out = eos_kafka(), eos_topic(2), eos_topic(1)
    fill_partitions(kafka, source, {0: 4, 1: 4})
    first = Recorder()
    holder: list[Edge] = []
    outcome: list[str] = []

    def commit_on_revoke(partitions: list[Partition]) -> None:
        edge = holder[0]
        try:
            edge.commit_transaction({p: 4 for p in partitions})
            outcome.append("committed")
        except TransactionAbortedError as exc:
            outcome.append(f"refused: {exc}")

    first.on_revoked_action = commit_on_revoke
    with transactional(kafka, source, first) as a:
        holder.append(a)
        poll_until([a], lambda got: len(got) >= 8)
        a.begin_transaction()
        a.send(out, None, b"from-a")
        fill_partitions(kafka, source, {0: 2, 1: 2})  # two more each (offsets 4 and 5), for B
        with transactional(kafka.model_copy(update={"client_id": "member-b"}), source) as b:
            with polling(a):
                got = poll_until([b], lambda got: len(got) >= 2)
            assert outcome == ["committed"]
            assert {(r.partition, r.offset) for r in got} <= {(p, o) for p in (0, 1) for o in (4, 5)}
            assert min(r.offset for r in got) == 4
    assert values(read_all(kafka, out, "read_committed")) == [b"from-a"]
    assert [committed(kafka, source, p) for p in (0, 1)] == [4, 4]


def test_a_record_the_broker_refuses_aborts_its_transaction_and_the_next_one_commits(
    eos_kafka: Settings, eos_topic: Callable[[int], str], backend: str
) -> None:
    """A record over the output topic's ``max.message.bytes`` (1,000) is refused by the broker:
    the flush aborts the transaction and raises ``TransactionAbortedError``; the records sent
    with it are not visible and the offsets stay; the next transaction commits."""
    kafka, source = eos_kafka(), eos_topic(1)
    out = f"eos-{uuid.uuid4().hex[:12]}"
    admin = KafkaAdminClient(**client_config(kafka))
    try:
        admin.create_topics([NewTopic(out, 1, 1, topic_configs={"max.message.bytes": "1000"})])
    finally:
        admin.close()
    wait_for_leaders(kafka, out, 1)
    fill_partitions(kafka, source, {0: 4})
    with transactional(kafka, source) as edge:
        poll_until([edge], lambda got: len(got) >= 4)
        edge.begin_transaction()
        edge.send(out, None, b"fits")
        edge.send(out, None, b"x" * 5_000)
        with pytest.raises(TransactionAbortedError, match="transaction were not delivered") as refused:
            edge.commit_transaction({(source, 0): 4})
        assert not isinstance(refused.value, TransactionFencedError)
        assert committed(kafka, source, 0) is None
        edge.begin_transaction()
        edge.send(out, None, b"next")
        edge.commit_transaction({(source, 0): 4})
    assert values(read_all(kafka, out, "read_committed")) == [b"next"]
    assert committed(kafka, source, 0) == 4


def test_a_producer_fenced_by_its_transactional_id_raises_and_its_edge_takes_the_id_back(
    eos_kafka: Settings, eos_topic: Callable[[int], str], backend: str
) -> None:
    """Two edges with one transactional id (same group, client id and host): starting the second
    fences the first's producer, whose commit then raises ``TransactionFencedError`` naming the
    id; its next transaction starts a fresh producer under the id (fencing the second in turn)
    and commits. Only that transaction is visible."""
    kafka, source, out = eos_kafka(), eos_topic(1), eos_topic(1)
    with transactional(kafka, source) as first:
        first.begin_transaction()
        first.send(out, None, b"first-fenced")
        first.flush()
        with transactional(kafka, source) as second:
            second.begin_transaction()
            second.send(out, None, b"second")
            with pytest.raises(TransactionFencedError, match="the producer was fenced") as fenced:
                first.commit_transaction({})
            assert f"transactional id '{kafka.group_id}:sp-eos:" in str(fenced.value)
            first.begin_transaction()
            first.send(out, None, b"first-again")
            first.commit_transaction({})
            with pytest.raises(TransactionFencedError, match="the producer was fenced"):
                second.commit_transaction({})
    assert values(read_all(kafka, out, "read_committed")) == [b"first-again"]
