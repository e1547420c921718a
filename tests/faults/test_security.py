"""Security: TLS and SASL against the embedded broker binary, wrong credentials, and secrets that
must never reach a log line, a statistics record or a checkpoint.

The TLS and SASL round trips need a broker that serves them. The embedded tansu is probed at run
time (its options: ``broker --cert/--key`` for TLS, ``--authentication`` and ``tansu user create``
for SCRAM users, memory storage only); when the probe fails the test skips with what was measured.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from stream_perceptron.commands.broker import broker_binary, free_port
from stream_perceptron.commands.read import read_topic
from stream_perceptron.errors import BrokerError
from stream_perceptron.kafka.admin import ensure_topics
from stream_perceptron.settings import KafkaSettings
from tests.integration.helpers import (
    encode_stream,
    noisy_stream,
    predictions_by_offset,
    send_all,
    topics_for,
)

from .support import fault_settings, reap, run_until_caught_up, start_worker

pytestmark = pytest.mark.faults

PASSWORD = "s3cr3t-Pa55-7f1c9b"  # noqa: S105 - a test secret that must never be printed
SSL_KEY_PASSWORD = "k3y-Pa55-2e8d41"  # noqa: S105


def _tansu() -> str:
    try:
        return broker_binary()
    except BrokerError as exc:
        pytest.skip(f"no embedded broker binary: {exc}")


@contextlib.contextmanager
def tansu(*extra: str, port: int | None = None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A tansu broker with extra options; yields (process, port) once the port accepts, or
    (process, port) with the process already exited (the caller reads its output)."""
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    out = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [_tansu(), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/", *extra],
        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    proc.output = out  # type: ignore[attr-defined]
    try:
        deadline = time.monotonic() + 5
        while proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.02)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        out.close()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _plain(text: str, limit: int = 300) -> str:
    return " ".join(_ANSI.sub("", text).split())[:limit]


def _output(proc: subprocess.Popen[bytes]) -> str:
    out = proc.output  # type: ignore[attr-defined]
    out.seek(0)
    return _plain(out.read().decode(errors="replace"))


def _make_certs(d: Path) -> dict[str, Path]:
    """A self-signed CA and a server certificate for 127.0.0.1/localhost (openssl CLI)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to make a test CA")
    d.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=d, check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=stream-perceptron test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost")
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                               "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
    (d / "server-combined.pem").write_bytes((d / "server.pem").read_bytes()
                                            + (d / "server.key").read_bytes())
    return {"ca": d / "ca.pem", "cert": d / "server.pem", "key": d / "server.key",
            "combined": d / "server-combined.pem"}


def _tls_handshake(port: int, cafile: Path) -> str | None:
    """None when a verified TLS handshake succeeds, else what went wrong."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.version()
        return None
    except (OSError, ssl.SSLError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _probe_tls(certs: dict[str, Path]) -> tuple[list[str] | None, list[str]]:
    """The broker options that give a TLS listener, or None and what was measured."""
    measured = []
    for args in (["--cert", str(certs["cert"]), "--key", str(certs["key"])],
                 ["--cert", str(certs["combined"])],
                 ["--cert", str(certs["cert"])]):
        shown = " ".join(a if a.startswith("--") else Path(a).name for a in args)
        with tansu(*args) as (proc, port):
            if proc.poll() is not None:
                measured.append(f"`broker {shown}` exits {proc.returncode}: {_output(proc)}")
                continue
            problem = _tls_handshake(port, certs["ca"])
            if problem is None:
                return args, measured
            measured.append(f"`broker {shown}` listens in plaintext (TLS handshake: {problem})")
    return None, measured


# A secured cluster of one's own runs the success paths (tansu 0.6.0 cannot serve them):
#   SP_FAULTS_TLS_BOOTSTRAP=host:port SP_FAULTS_TLS_CAFILE=ca.pem
#   SP_FAULTS_SASL_BOOTSTRAP=host:port SP_FAULTS_SASL_MECHANISM=SCRAM-SHA-512
#   SP_FAULTS_SASL_USERNAME=... SP_FAULTS_SASL_PASSWORD=... [SP_FAULTS_SASL_PROTOCOL=SASL_SSL
#   SP_FAULTS_SASL_CAFILE=ca.pem]
# The cluster must let the user create topics; each run uses topics of its own.
_EXTERNAL = ("set SP_FAULTS_TLS_BOOTSTRAP and SP_FAULTS_TLS_CAFILE (or SP_FAULTS_SASL_*) to run it"
             " on a cluster")


@pytest.mark.timeout(120)
def test_worker_over_tls(tmp_path, group_id):
    if os.environ.get("SP_FAULTS_TLS_BOOTSTRAP"):
        kafka = KafkaSettings(
            bootstrap_servers=os.environ["SP_FAULTS_TLS_BOOTSTRAP"], group_id=group_id,
            security_protocol="SSL", ssl_cafile=os.environ["SP_FAULTS_TLS_CAFILE"])
        _round_trip(kafka, tmp_path)
        wrong = kafka.model_copy(update={"ssl_cafile": _make_certs(tmp_path / "other")["ca"]})
        _fails_clearly(wrong, tmp_path / "wrong-ca", ("certificate", "ssl", "tls"))
        return
    certs = _make_certs(tmp_path / "tls")
    args, measured = _probe_tls(certs)
    if args is None:
        pytest.skip("the embedded tansu cannot serve TLS: " + "; ".join(measured) + f"; {_EXTERNAL}")
    with tansu(*args) as (_, port):
        kafka = KafkaSettings(
            bootstrap_servers=f"localhost:{port}", group_id=group_id, session_timeout_ms=1000,
            heartbeat_interval_ms=200, security_protocol="SSL", ssl_cafile=certs["ca"])
        _round_trip(kafka, tmp_path)
        wrong = kafka.model_copy(update={"ssl_cafile": _make_certs(tmp_path / "other")["ca"]})
        _fails_clearly(wrong, tmp_path / "wrong-ca", ("certificate", "ssl", "tls"))


def _probe_sasl() -> tuple[str | None, list[str]]:
    """A SCRAM mechanism that authenticates against tansu, or None and what was measured."""
    measured = []
    for auth in (["--authentication"], []):
        with tansu(*auth) as (proc, port):
            if proc.poll() is not None:
                measured.append(f"`broker {' '.join(auth)}` exits: {_output(proc)}")
                continue
            made = subprocess.run(
                [_tansu(), "user", "create", "--broker", f"tcp://127.0.0.1:{port}",
                 "--mechanism", "scram512", "alice", PASSWORD],
                capture_output=True, text=True, timeout=20, check=False)
            where = "with --authentication" if auth else "without --authentication"
            if made.returncode != 0:
                said = _plain(made.stdout + made.stderr, 10_000)[-90:]
                broker_said = sorted(set(re.findall(r"err(?:or)?=(\S+)", _output(proc))))
                measured.append(f"`user create` {where} exits {made.returncode} (...{said}; "
                                f"the broker logs {broker_said})")
                continue
            for mechanism in ("SCRAM-SHA-512", "PLAIN"):
                try:
                    admin = KafkaAdminClient(
                        bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism=mechanism, sasl_plain_username="alice",
                        sasl_plain_password=PASSWORD, request_timeout_ms=2000,
                        bootstrap_timeout_ms=2000)
                except Exception as exc:  # noqa: BLE001 - kafka-python raises several kinds
                    measured.append(f"{where}, user created; {mechanism} login fails: "
                                    f"{type(exc).__name__}")
                else:
                    admin.close()
                    return mechanism, measured
    return None, measured


@pytest.mark.timeout(180)
def test_worker_with_sasl_scram_credentials(tmp_path, group_id):
    if os.environ.get("SP_FAULTS_SASL_BOOTSTRAP"):
        env = os.environ
        kafka = KafkaSettings(
            bootstrap_servers=env["SP_FAULTS_SASL_BOOTSTRAP"], group_id=group_id,
            security_protocol=env.get("SP_FAULTS_SASL_PROTOCOL", "SASL_PLAINTEXT"),
            sasl_mechanism=env["SP_FAULTS_SASL_MECHANISM"], sasl_username=env["SP_FAULTS_SASL_USERNAME"],
            sasl_password=env["SP_FAULTS_SASL_PASSWORD"], ssl_cafile=env.get("SP_FAULTS_SASL_CAFILE"))
        _round_trip(kafka, tmp_path, secret=env["SP_FAULTS_SASL_PASSWORD"])
        wrong = kafka.model_copy(update={"sasl_password": "not-the-password"})
        _fails_clearly(wrong, tmp_path / "wrong", ("sasl", "authentication"))
        return
    mechanism, measured = _probe_sasl()
    if mechanism is None:
        pytest.skip("the embedded tansu cannot authenticate a SASL client: " + "; ".join(measured)
                    + " (kafka-python's log shows the broker answering SaslHandshake with error "
                    f"33 UNSUPPORTED_SASL_MECHANISM while listing ['SCRAM-SHA-512']); {_EXTERNAL}")
    with tansu() as (_, port):
        subprocess.run([_tansu(), "user", "create", "--broker", f"tcp://127.0.0.1:{port}",
                        "alice", PASSWORD], check=True, capture_output=True, timeout=20)
        kafka = KafkaSettings(
            bootstrap_servers=f"127.0.0.1:{port}", group_id=group_id, session_timeout_ms=1000,
            heartbeat_interval_ms=200, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism, sasl_username="alice", sasl_password=PASSWORD)
        _round_trip(kafka, tmp_path)
        wrong = kafka.model_copy(update={"sasl_password": "not-the-password"})
        _fails_clearly(wrong, tmp_path / "wrong", ("sasl", "authentication"))


def _round_trip(kafka: KafkaSettings, tmp_path: Path, secret: str = PASSWORD) -> None:
    run = uuid.uuid4().hex[:8]  # topics of this run's own, on a cluster that keeps them
    topics = {"input": f"in-{run}", "predictions": f"pred-{run}", "stats": f"stats-{run}",
              "dead_letter": f"dead-{run}"}
    ensure_topics(kafka, dict.fromkeys(topics.values(), 1))
    send_all(kafka, topics["input"], encode_stream(noisy_stream(500)))
    log = tmp_path / "secure.log"
    proc = start_worker(fault_settings(kafka, topics, tmp_path / "ckpt", log_level="DEBUG"),
                        "--until-caught-up", log=log)
    try:
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        reap(proc)
    assert len(predictions_by_offset(kafka, topics["predictions"])) == 500
    assert secret not in log.read_text()


def _run_briefly(kafka: KafkaSettings, tmp_path: Path, seconds: float,
                 words: tuple[str, ...] = (), topics: dict[str, str] | None = None,
                 ) -> tuple[int | None, str]:
    """Run the worker with bad security settings (at DEBUG) for at most ``seconds``, or until
    one of its *own* warnings (``stream_perceptron.*`` at WARNING or ERROR, or a
    ``stream-perceptron:`` line) holds one of ``words``; then SIGTERM it. Returns (exit code,
    full output)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    topics = topics or {"input": "in", "predictions": "pred", "stats": "stats", "dead_letter": "dead"}
    log = tmp_path / "worker.log"
    settings = fault_settings(kafka.model_copy(update={"request_timeout_ms": 3000}), topics,
                              tmp_path / "ckpt", log_level="DEBUG")
    proc = start_worker(settings, log=log)
    try:
        deadline = time.monotonic() + seconds
        while proc.poll() is None and time.monotonic() < deadline:
            if words and _own_lines(log.read_text(errors="replace"), words):
                break
            time.sleep(0.1)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    finally:
        reap(proc)
    return code, log.read_text(errors="replace")


def _own_lines(text: str, words: tuple[str, ...]) -> list[str]:
    """The worker's own warnings (not kafka-python's, and not the INFO lines, which repeat the
    settings and the test's paths) that name one of ``words``."""
    return [ln for ln in text.splitlines()
            if (_OWN_WARNING.search(ln) or ln.startswith("stream-perceptron:"))
            and any(w in ln.lower() for w in words)]


_OWN_WARNING = re.compile(r" (WARNING|ERROR) +stream_perceptron\.")


def _fails_clearly(kafka: KafkaSettings, tmp_path: Path, words: tuple[str, ...]) -> str:
    """Bad credentials: the worker's own words name the problem, and no secret is printed."""
    code, text = _run_briefly(kafka, tmp_path, 10, words)
    assert PASSWORD not in text and SSL_KEY_PASSWORD not in text
    assert _own_lines(text, words), f"the worker never says {words}:\n{text[-3000:]}"
    assert "Traceback" not in text, text[-3000:]
    assert code in (0, 1, 2), (code, text[-3000:])
    return text


def _sasl_refused(fast_kafka) -> KafkaSettings:
    return fast_kafka(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                      sasl_username="alice", sasl_password=PASSWORD)


def _sasl_refused_run(fast_kafka, new_topic, tmp_path: Path, seconds: float,
                      words: tuple[str, ...] = ()) -> tuple[int | None, str]:
    """The worker with refused SASL credentials, on an input topic that exists and holds
    records: a worker that fell back to PLAINTEXT would start and process them."""
    topics = topics_for(new_topic)
    send_all(fast_kafka(), topics["input"], encode_stream(noisy_stream(10)))
    return _run_briefly(_sasl_refused(fast_kafka), tmp_path, seconds, words, topics)


_SASL_REFUSED = re.compile(
    r"^stream-perceptron: Kafka at \S+ refused the connection: SASL authentication failed"
    r" \(mechanism SCRAM-SHA-512, user alice\)"
)


@pytest.mark.timeout(60)
def test_sasl_login_refused_never_prints_the_password(fast_kafka, new_topic, tmp_path):
    """SASL credentials against a broker that cannot accept them (the embedded tansu answers
    UNSUPPORTED_SASL_MECHANISM; an Apache Kafka PLAINTEXT listener drops the handshake): at
    DEBUG, through the retries, the password is never printed and nothing is processed; the
    worker stops with one line and exit 2, a setting to fix."""
    code, text = _sasl_refused_run(fast_kafka, new_topic, tmp_path, 20)
    assert PASSWORD not in text
    assert not re.search(r"\bseen [1-9][0-9]*,", text) and "Traceback" not in text, text[-3000:]
    assert code == 2, (code, text[-2000:])
    ours = [ln for ln in text.splitlines() if ln.startswith("stream-perceptron:")]
    assert len(ours) == 1 and _SASL_REFUSED.match(ours[0]), text[-2000:]


@pytest.mark.timeout(60)
def test_sasl_login_refused_is_reported_as_an_authentication_failure(fast_kafka, new_topic, tmp_path):
    """Within 10 s the worker itself says that SASL authentication failed."""
    code, text = _sasl_refused_run(fast_kafka, new_topic, tmp_path, 10, ("sasl", "authentication"))
    assert PASSWORD not in text and "Traceback" not in text, text[-3000:]
    said = _own_lines(text, ("sasl", "authentication"))
    assert said, text[-3000:]
    assert "SASL authentication failed (mechanism SCRAM-SHA-512, user alice)" in said[0], said


@pytest.mark.timeout(60)
@pytest.mark.parametrize("producer_process", [False, True], ids=["one-process", "producer-process"])
def test_secrets_never_reach_logs_outputs_or_checkpoints(producer_process, fast_kafka, new_topic, tmp_path):
    """A PLAINTEXT worker configured with a SASL password and an SSL key password (unused, as an
    operator leaves them set): at DEBUG the full log, the statistics, predictions and dead
    letters and the checkpoint files hold neither secret; the settings line shows them masked.
    With a producer process, its log lines (the same stderr) hold neither."""
    kafka = fast_kafka(sasl_username="alice", sasl_password=PASSWORD,
                       ssl_password=SSL_KEY_PASSWORD, producer_process=producer_process)
    plain = fast_kafka()
    topics = topics_for(new_topic)
    values = encode_stream(noisy_stream(1000))
    values[10:10] = [b"{not json", b'{"x": [1], "y": 1}']  # two dead letters
    send_all(plain, topics["input"], values)
    log = tmp_path / "worker.log"
    settings = fault_settings(kafka, topics, tmp_path / "ckpt", log_level="DEBUG",
                              stats={"every_examples": 100, "every_seconds": 1})
    run_until_caught_up(settings, log)
    text = log.read_text(errors="replace")
    assert "**********" in text and "sasl_password" in text  # masked, not absent
    assert re.search(r" DEBUG +stream_perceptron\.worker: dead letter ", text)  # at DEBUG indeed
    assert ("producer process" in text) == producer_process
    outputs = b"".join(
        repr(v).encode() for name in ("stats", "predictions", "dead_letter")
        for _, _, _, v in read_topic(plain, topics[name]))
    checkpoints = b"".join(p.read_bytes() for p in (tmp_path / "ckpt").iterdir())
    for secret in (PASSWORD, SSL_KEY_PASSWORD):
        assert secret not in text
        assert secret.encode() not in outputs
        assert secret.encode() not in checkpoints
    assert b"client_id" in outputs  # the statistics records were read
