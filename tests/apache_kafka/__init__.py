"""Apache Kafka from its Maven jars, no Docker: for the tests and ``make kafka``.

The pinned version is in ``pom.xml`` beside this file. :func:`fetch_jars` copies
``org.apache.kafka:kafka_2.13`` and its dependencies with Maven into a cache outside the repo
(``$SP_KAFKA_CACHE``, default ``~/.cache/stream-perceptron/apache-kafka-<version>``; Maven's own
cache is ``~/.m2``) once, under a file lock, and reuses them after that.

:class:`ApacheKafka` runs one or three KRaft nodes (each a combined broker and controller, all in
one quorum) on free loopback ports, storage formatted at start in a temporary directory that is
removed at the end. Each node has the listeners

* ``PLAINTEXT`` (``bootstrap``);
* with ``secure=True``: ``SSL`` (``ssl_bootstrap``) with a CA and a server certificate for
  ``localhost``/``127.0.0.1`` made at run time by the ``openssl`` CLI (``ca_file``), and
  ``SASL_SSL`` (``sasl_bootstrap``) with SCRAM-SHA-512 (user ``scram-user``, created at format
  time) and PLAIN (user ``plain-user``, from the listener's JAAS configuration); the passwords
  are random per cluster (``passwords``).

The brokers allow 1 s group sessions (``group.min.session.timeout.ms``), as the embedded broker
does, hold a new group's first join for 0.5 s (``group.initial.rebalance.delay.ms``; 3 s by
default), take records up to 8 MiB, and their log cleaner looks for work every 200 ms. Each
node's log is kept in its directory and :meth:`ApacheKafka.log_tail` returns its end, for a
failed test's report. A node can be killed (SIGKILL) and restarted on the same ports and storage
(:meth:`ApacheKafka.kill`, :meth:`ApacheKafka.restart`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from stream_perceptron.commands.broker import _die_with_parent_hook, free_port

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
KAFKA_VERSION = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text()).group(1)  # type: ignore[union-attr]
START_TIMEOUT_S = 60.0
FETCH_TIMEOUT_S = 600.0
JAVA_OPTIONS = ("-Xms256m", "-Xmx768m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                "-Djava.awt.headless=true")
SCRAM_USER = "scram-user"
PLAIN_USER = "plain-user"


# The clusters started and not stopped yet in this process: a failed test's report shows the end of
# their logs, and a broker of one of these allows 1 s group sessions.
RUNNING: list[ApacheKafka] = []


def launched_here(bootstrap: str) -> ApacheKafka | None:
    """The running cluster of this process one of whose PLAINTEXT addresses is in ``bootstrap``."""
    given = set(bootstrap.split(","))
    return next((k for k in RUNNING if given & set(k.bootstrap.split(","))), None)


class KafkaUnavailable(RuntimeError):
    """Apache Kafka cannot run here (no Java 17+, no Maven, a fetch or start that failed)."""


def cache_dir() -> Path:
    configured = os.environ.get("SP_KAFKA_CACHE")
    base = Path(configured) if configured else Path.home() / ".cache" / "stream-perceptron"
    return base / f"apache-kafka-{KAFKA_VERSION}"


def java_version(java: str) -> int | None:
    """The major version of ``java`` (``java -version`` prints it on stderr), or None."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def why_not() -> str | None:
    """None when Apache Kafka can run from its jars here, else why not (one line)."""
    java = shutil.which("java")
    if java is None:
        return "no `java` on PATH (Apache Kafka 4.x needs Java 17 or later)"
    major = java_version(java)
    if major is None or major < 17:
        return f"`java` is version {major}, Apache Kafka 4.x needs 17 or later"
    if not (cache_dir() / "jars" / ".complete").exists() and shutil.which("mvn") is None:
        return "no `mvn` on PATH to fetch Apache Kafka's jars (and none cached)"
    if shutil.which("openssl") is None:
        return "no `openssl` on PATH to make the test CA"
    return None


def fetch_jars() -> Path:
    """The directory of Apache Kafka's jars, fetched with Maven on first use."""
    return fetched_once(cache_dir() / "jars", _copy_jars, KAFKA_VERSION)


def _copy_jars(staging: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailable("no `mvn` on PATH to fetch Apache Kafka's jars")
    done = subprocess.run(
        [mvn, "--batch-mode", "--quiet", "-f", str(POM), "dependency:copy-dependencies",
         "-DincludeScope=runtime", f"-DoutputDirectory={staging}"],
        capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False)
    if done.returncode != 0:
        said = " ".join((done.stdout + done.stderr).split())[-600:]
        raise KafkaUnavailable(f"mvn could not fetch Apache Kafka {KAFKA_VERSION}: {said}")


def fetched_once(target: Path, fill: Callable[[Path], None], stamp: str) -> Path:
    """``target``, a cache directory filled once by ``fill(staging)`` and reused after that.

    It is filled under a file lock (another pytest-xdist process may be filling it) in a staging
    directory beside it, renamed to ``target`` and marked complete only once ``fill`` returns; a
    ``fill`` that raises leaves nothing behind.
    """
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return target
        staging = Path(tempfile.mkdtemp(prefix=f"{target.name}-", dir=target.parent))
        try:
            fill(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        (staging / ".complete").write_text(stamp + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target


@dataclass
class Tls:
    """A CA and a server certificate for localhost/127.0.0.1, the server's as PKCS#12."""

    ca_file: Path
    keystore: Path
    password: str


def make_tls(directory: Path, name: str = "stream-perceptron test CA") -> Tls:
    """A fresh CA and server keystore in ``directory`` (openssl CLI)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise KafkaUnavailable("no `openssl` on PATH to make the test CA")
    directory.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=directory, check=True, capture_output=True, timeout=60)

    password = secrets.token_hex(12)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", f"/CN={name}")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost")
    (directory / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                       "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
    run("pkcs12", "-export", "-in", "server.pem", "-inkey", "server.key", "-certfile", "ca.pem",
        "-name", "localhost", "-out", "server.p12", "-passout", f"pass:{password}")
    return Tls(directory / "ca.pem", directory / "server.p12", password)


@dataclass
class Node:
    """One KRaft node (broker and controller) of a cluster."""

    node_id: int
    directory: Path
    ports: dict[str, int]
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class ApacheKafka:
    """A local Apache Kafka cluster of ``nodes`` KRaft nodes; a context manager
    (``with ApacheKafka(secure=True) as kafka: ... kafka.bootstrap``)."""

    def __init__(self, nodes: int = 1, secure: bool = False, root: Path | None = None) -> None:
        if nodes not in (1, 3):
            raise ValueError("a cluster of 1 or 3 nodes")
        self.size = nodes
        self.secure = secure
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="apache-kafka-")) if root is None else root
        self.cluster_id = _cluster_id()
        self.passwords = {SCRAM_USER: secrets.token_urlsafe(12), PLAIN_USER: secrets.token_urlsafe(12)}
        self.tls: Tls | None = None
        names = ["PLAINTEXT", "CONTROLLER"] + (["SSL", "SASL_SSL"] if secure else [])
        self.nodes = [Node(i, self.root / f"node-{i}", {n: free_port() for n in names})
                      for i in range(1, nodes + 1)]

    # -- addresses ---------------------------------------------------------------------
    def _addresses(self, listener: str, host: str = "127.0.0.1") -> str:
        return ",".join(f"{host}:{n.ports[listener]}" for n in self.nodes)

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the PLAINTEXT listeners."""
        return self._addresses("PLAINTEXT")

    @property
    def ssl_bootstrap(self) -> str:
        """The SSL listeners (the certificate names ``localhost``)."""
        return self._addresses("SSL", "localhost")

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_SSL listeners (SCRAM-SHA-512 and PLAIN)."""
        return self._addresses("SASL_SSL", "localhost")

    @property
    def ca_file(self) -> Path:
        if self.tls is None:
            raise RuntimeError("a cluster started with secure=True has a CA")
        return self.tls.ca_file

    # -- life cycle --------------------------------------------------------------------
    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Fetch the jars if need be, make the certificates, format and launch every node and
        wait until the cluster takes a topic replicated on all of them."""
        RUNNING.append(self)
        jars = fetch_jars()
        java = shutil.which("java") or "java"
        if self.secure:
            self.tls = make_tls(self.root / "tls")
        (self.root / "log4j2.properties").write_text(_LOG4J)
        try:
            for node in self.nodes:
                node.directory.mkdir(parents=True, exist_ok=True)
                config = node.directory / "server.properties"
                config.write_text(self._config(node))
                self._format(java, jars, node, config)
            for node in self.nodes:
                self._launch(java, jars, node)
            self.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _classpath(self, jars: Path) -> str:
        return str(jars / "*")

    def _format(self, java: str, jars: Path, node: Node, config: Path) -> None:
        scram = []
        if self.secure:
            scram = ["--add-scram",
                     f"SCRAM-SHA-512=[name={SCRAM_USER},password={self.passwords[SCRAM_USER]}]"]
        done = subprocess.run(
            [java, *JAVA_OPTIONS, f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
             "-cp", self._classpath(jars), "kafka.tools.StorageTool", "format",
             f"--cluster-id={self.cluster_id}", "--config", str(config), *scram],
            capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            said = " ".join((done.stdout + done.stderr).split())[-800:]
            raise KafkaUnavailable(f"formatting node {node.node_id}'s storage failed: {said}")

    def _launch(self, java: str, jars: Path, node: Node) -> None:
        node.log = open(node.log_path, "ab")  # noqa: SIM115 - closed in stop()/kill()
        node.process = subprocess.Popen(
            [java, *JAVA_OPTIONS, f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
             "-cp", self._classpath(jars), "kafka.Kafka", str(node.directory / "server.properties")],
            stdin=subprocess.DEVNULL, stdout=node.log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent_hook())

    def _config(self, node: Node) -> str:
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.ports['CONTROLLER']}" for n in self.nodes)
        listeners = [f"{name}://127.0.0.1:{port}" for name, port in node.ports.items()]
        advertised = [f"PLAINTEXT://127.0.0.1:{node.ports['PLAINTEXT']}"]
        protocols = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
        replicas = min(self.size, 3)
        lines = [
            "process.roles=broker,controller",
            f"node.id={node.node_id}",
            f"controller.quorum.voters={voters}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            f"log.dirs={node.directory / 'data'}",
            f"offsets.topic.replication.factor={replicas}",
            "offsets.topic.num.partitions=10",
            f"transaction.state.log.replication.factor={replicas}",
            f"transaction.state.log.min.isr={min(replicas, 2)}",
            "transaction.state.log.num.partitions=10",
            f"default.replication.factor={replicas}",
            # a new group's first join waits 0.5 s (Apache Kafka's default: 3 s). With 0, a
            # kafka-python member may join before its metadata names the topic: it is assigned
            # nothing, then rebalances once the metadata arrives
            "group.initial.rebalance.delay.ms=500",
            "group.min.session.timeout.ms=1000",
            "log.cleaner.backoff.ms=200",
            "log.retention.check.interval.ms=1000",
            "num.partitions=1",
            # records up to 8 MiB (default 1 MiB), as the embedded broker takes: the tests of the
            # worker's own record limits send 1.5 MB records
            "message.max.bytes=8388608",
            "replica.fetch.max.bytes=8388608",
            "num.network.threads=2",
            "num.io.threads=4",
            "auto.create.topics.enable=true",
            "unclean.leader.election.enable=false",
            # a killed node is noticed quickly (the failover tests kill one)
            "broker.session.timeout.ms=3000",
            "broker.heartbeat.interval.ms=500",
            "controller.quorum.fetch.timeout.ms=2000",
            "controller.quorum.election.timeout.ms=1000",
            "replica.lag.time.max.ms=5000",
        ]
        if self.tls is not None:
            listeners_ssl = {"SSL": "SSL", "SASL_SSL": "SASL_SSL"}
            for name in listeners_ssl:
                advertised.append(f"{name}://localhost:{node.ports[name]}")
                protocols.append(f"{name}:{name}")
            plain = self.passwords[PLAIN_USER]
            lines += [
                "ssl.keystore.type=PKCS12",
                f"ssl.keystore.location={self.tls.keystore}",
                f"ssl.keystore.password={self.tls.password}",
                f"ssl.key.password={self.tls.password}",
                "ssl.client.auth=none",
                "sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "listener.name.sasl_ssl.plain.sasl.jaas.config="
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_{PLAIN_USER}="{plain}";',
            ]
        lines += [f"listeners={','.join(listeners)}", f"advertised.listeners={','.join(advertised)}",
                  f"listener.security.protocol.map={','.join(protocols)}"]
        return "\n".join(lines) + "\n"

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every running node is registered and a topic can be created with every node."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        deadline = time.monotonic() + timeout_s
        problem = "no answer"
        while time.monotonic() < deadline:
            dead = [n.node_id for n in self.nodes if n.process is not None and not n.running]
            if dead:
                raise KafkaUnavailable(f"Apache Kafka node {dead[0]} exited at start: "
                                       f"{self.log_tail(dead[0], 1500)}")
            if not all(port_open(n.ports["PLAINTEXT"]) for n in self.nodes if n.running):
                problem = "not listening yet"
                time.sleep(0.1)
                continue
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=5000,
                                         bootstrap_timeout_ms=3000, client_id="sp-kafka-ready")
            except Exception as exc:  # noqa: BLE001 - not listening yet, in several ways
                problem = f"{type(exc).__name__}: {exc}"
                time.sleep(0.2)
                continue
            try:
                brokers = {int(b["broker_id"]) for b in admin.describe_cluster()["brokers"]}
                want = {n.node_id for n in self.nodes if n.running}
                if brokers >= want:
                    name = f"sp-ready-{uuid.uuid4().hex[:8]}"
                    admin.create_topics([NewTopic(name, 1, len(want))], timeout_ms=10_000)
                    admin.delete_topics([name], timeout_ms=10_000)
                    return
                problem = f"brokers registered: {sorted(brokers)}"
            except Exception as exc:  # noqa: BLE001
                problem = f"{type(exc).__name__}: {exc}"
            finally:
                admin.close()
            time.sleep(0.2)
        raise KafkaUnavailable(f"Apache Kafka not ready within {timeout_s:g} s ({problem}); "
                               f"node 1's log ends: {self.log_tail(1, 1500)}")

    def kill(self, node_id: int) -> None:
        """SIGKILL one node (its storage stays, for :meth:`restart`)."""
        node = self.nodes[node_id - 1]
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGKILL)
            node.process.wait(timeout=30)
        if node.log is not None:
            node.log.close()
            node.log = None

    def restart(self, node_id: int) -> None:
        """Start a killed node again on its ports and storage (does not wait)."""
        node = self.nodes[node_id - 1]
        if node.running:
            return
        self._launch(shutil.which("java") or "java", fetch_jars(), node)

    def stop(self) -> None:
        """Kill every node (SIGKILL: its storage is removed next, so a clean shutdown, which
        takes a 3-node cluster ~40 s, buys nothing) and remove the directory made for it."""
        for node in self.nodes:
            self.kill(node.node_id)
        if self in RUNNING:
            RUNNING.remove(self)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, node_id: int = 1, chars: int = 4000) -> str:
        """The end of one node's log (an empty string once the cluster is removed)."""
        return file_tail(self.nodes[node_id - 1].log_path, chars)

    def leader(self, topic: str, partition: int = 0, timeout_s: float = 30.0,
               other_than: int | None = None) -> int:
        """The node id leading ``topic``'s ``partition`` now (a fresh metadata request to a
        running node; asked again while there is none, or it is ``other_than``, for at most
        ``timeout_s``)."""
        from kafka import KafkaAdminClient

        deadline = time.monotonic() + timeout_s
        while True:
            running = ",".join(f"127.0.0.1:{n.ports['PLAINTEXT']}" for n in self.nodes if n.running)
            try:
                admin = KafkaAdminClient(bootstrap_servers=running, request_timeout_ms=3000,
                                         bootstrap_timeout_ms=3000)
                try:
                    for described in admin.describe_topics([topic]):
                        for p in described["partitions"]:
                            if (p["partition_index"] == partition and p["leader_id"] >= 0
                                    and p["leader_id"] != other_than):
                                return int(p["leader_id"])
                finally:
                    admin.close()
            except Exception:  # noqa: BLE001, S110 - a node going away; asked again below
                pass
            if time.monotonic() >= deadline:
                raise LookupError(f"no leader for {topic}[{partition}] within {timeout_s:g} s")
            time.sleep(0.2)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def file_tail(path: Path, chars: int) -> str:
    """The last ``chars`` bytes of a log file as text (an empty string when it is gone)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - chars))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
        return True
    return False
