"""Rows 10a/10b: a partition leader killed mid-stream on a three-node Apache Kafka cluster.

``kafka_trio``: three KRaft nodes from the Maven jars (``tests/apache_kafka``), one quorum. The
worker's topics are replicated on all three with ``min.insync.replicas=2``; the test's producer
and the worker's use ``acks=all``. While a paced producer sends 16,000 records, the leader of
the input partition (10a) or of the predictions partition (10b) is killed with SIGKILL once the
worker has seen 4,000, and started again on its storage once the worker has seen 10,000. The
worker runs through it; at the end every offset of the input has a prediction, every copy of a
re-emitted prediction is identical, and the final checkpoint equals the core over the input
(bit-identical weights, ``seen`` = records: nothing learned twice).
"""

from __future__ import annotations

import re
import signal
import time
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from stream_perceptron.settings import KafkaSettings
from tests.apache_kafka import ApacheKafka
from tests.integration.conftest import BACKENDS, collect_garbage_except
from tests.integration.helpers import encode_stream, noisy_stream

from .support import LogTail, fault_settings, reap, start_worker, wait_until
from .test_broker import PacedProducer, assert_exact_against_input

# kafka-python 3.0.12 leaks the socket of a connect that fails (``KafkaNetSocket.sock_connect`` in
# ``kafka/net/inet.py`` raises on ECONNREFUSED without closing it): every client here tries the
# killed node. Such a socket, never connected, is let through, during the test (a collection may
# come at any moment) and in its teardown, which collects what is left; any other unclosed
# resource fails the test.
_REFUSED = r"unclosed <socket\.socket [^>]*laddr=\('0\.0\.0\.0', \d+\)>$"
_REFUSED_SOCKET = re.compile(_REFUSED)
pytestmark = [pytest.mark.faults, pytest.mark.filterwarnings(f"ignore:{_REFUSED}:ResourceWarning")]


@pytest.fixture(autouse=True)
def _refused_sockets_finalized(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    yield
    collect_garbage_except(_REFUSED_SOCKET, caplog)


RECORDS = 16_000
RATE = 2_000  # records/s: 8 s of input, the kill and the restart in between
KILL_AT, RESTART_AT = 4_000, 10_000


def _replicated_topics(cluster: ApacheKafka) -> dict[str, str]:
    run = uuid.uuid4().hex[:8]
    topics = {"input": f"in-{run}", "predictions": f"pred-{run}", "stats": f"stats-{run}",
              "dead_letter": f"dead-{run}"}
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(name, 1, 3, topic_configs={"min.insync.replicas": "2"})
                             for name in topics.values()], timeout_ms=20_000)
    finally:
        admin.close()
    return topics


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("victim", ["input", "predictions"])
def test_a_partition_leader_killed_mid_stream_loses_nothing(victim, backend, kafka_trio, tmp_path):
    topics = _replicated_topics(kafka_trio)
    kafka = KafkaSettings(
        bootstrap_servers=kafka_trio.bootstrap, group_id=f"failover-{uuid.uuid4().hex[:8]}",
        client_id="sp-failover", backend=backend, session_timeout_ms=6_000,
        heartbeat_interval_ms=1_000, request_timeout_ms=10_000, linger_ms=5, max_poll_records=500)
    ckpt_dir = tmp_path / "ckpt"
    settings = fault_settings(kafka, topics, ckpt_dir,
                              checkpoint={"every_examples": 1000, "every_seconds": 1},
                              stats={"every_examples": 500, "every_seconds": 1})
    values = encode_stream(noisy_stream(RECORDS, d=8, noise=0.1, seed=31))
    producer = PacedProducer(kafka.model_copy(update={"backend": "kafka-python"}), values, RATE,
                             topic=topics["input"])
    log = tmp_path / "worker.log"
    proc = start_worker(settings, log=log)
    tail = LogTail(log)
    leader: int | None = None
    try:
        producer.start()
        wait_until(lambda: tail.poll().seen >= KILL_AT, 90, f"{KILL_AT} records seen", alive=proc, log=log)
        leader = kafka_trio.leader(topics[victim])
        kafka_trio.kill(leader)
        killed_at = time.monotonic()
        new_leader = kafka_trio.leader(topics[victim], other_than=leader)
        elected_s = time.monotonic() - killed_at
        wait_until(lambda: tail.poll().seen >= RESTART_AT, 120, f"{RESTART_AT} records seen",
                   alive=proc, log=log)
        kafka_trio.restart(leader)
        down_s = time.monotonic() - killed_at
        producer.join(timeout=120)
        assert not producer.is_alive() and producer.error is None, producer.error
        wait_until(lambda: tail.poll().seen >= RECORDS, 120, "every record", alive=proc, log=log)
        kafka_trio.wait_ready()  # the restarted node back in the cluster
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        reap(proc)
        if leader is not None and not kafka_trio.nodes[leader - 1].running:  # the test failed
            kafka_trio.restart(leader)
            kafka_trio.wait_ready()
    figures = assert_exact_against_input(kafka, ckpt_dir, RECORDS, topics)
    print(f"\n{victim} leader {leader} killed ({backend}): node {new_leader} led after {elected_s:.1f} s; "
          f"down {down_s:.1f} s; {figures}; losses 0, double applications 0")
