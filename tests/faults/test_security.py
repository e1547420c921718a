"""Security: TLS and SASL_SSL end to end, wrong credentials, and secrets that must never reach a
log line, a statistics record or a checkpoint.

The TLS and SASL round trips (rows 9a, 9b) run on Apache Kafka (``apache_kafka``: a node from its
Maven jars with SSL and SASL_SSL listeners, a CA made at run time, SCRAM-SHA-512 and PLAIN users);
the embedded tansu 0.6.0 serves neither (its ``--cert`` listener stays plaintext and it answers
SaslHandshake with UNSUPPORTED_SASL_MECHANISM). The other tests run on the session's broker.
"""

from __future__ import annotations

import re
import signal
import time
import uuid
from pathlib import Path

import pytest
from pydantic import SecretStr

from stream_perceptron.commands.read import read_topic
from stream_perceptron.kafka.admin import ensure_topics
from stream_perceptron.settings import KafkaSettings
from tests.apache_kafka import PLAIN_USER, SCRAM_USER, ApacheKafka, make_tls
from tests.integration.conftest import BACKENDS
from tests.integration.helpers import (
    encode_stream,
    noisy_stream,
    predictions_by_offset,
    send_all,
    topics_for,
)
from tests.integration.test_secured_walkthrough import _loopback_alias

from .support import fault_settings, reap, run_until_caught_up, start_worker

pytestmark = pytest.mark.faults

PASSWORD = "s3cr3t-Pa55-7f1c9b"  # noqa: S105 - a test secret that must never be printed
SSL_KEY_PASSWORD = "k3y-Pa55-2e8d41"  # noqa: S105


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", BACKENDS)
def test_worker_over_tls(backend, apache_kafka, tmp_path, group_id):
    """Row 9a: the worker over SSL with the CA's file, end to end; with another CA's file it
    stops within seconds (not a request timeout, 30 s here) with one line that says TLS, the
    CA file and the host name checked."""
    kafka = KafkaSettings(
        bootstrap_servers=apache_kafka.ssl_bootstrap, group_id=group_id, backend=backend,
        session_timeout_ms=6000, heartbeat_interval_ms=1000, security_protocol="SSL",
        ssl_cafile=apache_kafka.ca_file)
    _round_trip(kafka, tmp_path, secrets=())
    other = make_tls(tmp_path / "other", name="another CA")
    wrong = kafka.model_copy(update={"ssl_cafile": other.ca_file})
    said, took = _fails_with_one_line(wrong, tmp_path / "wrong-ca", ("tls",), secrets=(),
                                      request_timeout_ms=30_000)
    assert said == (
        f"stream-perceptron: TLS with Kafka at {apache_kafka.ssl_bootstrap} failed: the broker's"
        f" certificate is not signed by a CA in the CA file (SP_KAFKA__SSL_CAFILE={other.ca_file};"
        " host name checked: 'localhost'): certificate verify failed: self-signed certificate in"
        " certificate chain"), said
    assert took < _SECONDS, took
    print(f"\n{backend}, wrong CA, {took:.1f} s: {said}")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_a_bootstrap_name_not_in_the_certificate_is_named_as_such(protocol, backend, apache_kafka, tmp_path,
                                                                   group_id):
    """Row 9a: a name of this machine that the broker's certificate does not hold (the
    certificate names localhost and 127.0.0.1): within seconds, one line saying TLS, that the
    name is not in the certificate, and the CA file; never a SASL failure."""
    alias = _loopback_alias()
    if alias is None:
        pytest.skip("no name of this machine reaches 127.0.0.1 but localhost, to connect with")
    listener = apache_kafka.ssl_bootstrap if protocol == "SSL" else apache_kafka.sasl_bootstrap
    server = f"{alias}:{listener.rsplit(':', 1)[1]}"
    kafka = KafkaSettings(
        bootstrap_servers=server, group_id=group_id, backend=backend, security_protocol=protocol,
        ssl_cafile=apache_kafka.ca_file, **(_scram(apache_kafka) if protocol == "SASL_SSL" else {}))
    secrets = tuple(apache_kafka.passwords.values())
    said, took = _fails_with_one_line(kafka, tmp_path, ("tls",), secrets, request_timeout_ms=30_000)
    assert said == (
        f"stream-perceptron: TLS with Kafka at {server} failed: the name '{alias}' is not in the"
        f" broker's certificate (SP_KAFKA__SSL_CAFILE={apache_kafka.ca_file}; host name checked:"
        f" '{alias}'): certificate verify failed: Hostname mismatch, certificate is not valid for"
        f" '{alias}'."), said
    assert took < _SECONDS, took
    print(f"\n{backend}, {protocol}, {server}, {took:.1f} s: {said}")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_worker_with_sasl_ssl_credentials(mechanism, backend, apache_kafka, tmp_path, group_id):
    """Row 9b: SASL_SSL with SCRAM-SHA-512 (a user made at format time) and with PLAIN (a user of
    the listener's JAAS configuration): end to end at DEBUG, the password in no log line, no
    statistics record, prediction or checkpoint; a wrong password stops the worker with one
    line, the password (right or wrong) printed nowhere."""
    user = SCRAM_USER if mechanism == "SCRAM-SHA-512" else PLAIN_USER
    secret = apache_kafka.passwords[user]
    kafka = KafkaSettings(
        bootstrap_servers=apache_kafka.sasl_bootstrap, group_id=group_id, backend=backend,
        session_timeout_ms=6000, heartbeat_interval_ms=1000, security_protocol="SASL_SSL",
        ssl_cafile=apache_kafka.ca_file, sasl_mechanism=mechanism, sasl_username=user,
        sasl_password=secret)
    _round_trip(kafka, tmp_path, secrets=(secret,))
    wrong_password = f"not-the-password-{secret[:4]}"
    wrong = kafka.model_copy(update={"sasl_password": SecretStr(wrong_password)})
    said, took = _fails_with_one_line(wrong, tmp_path / "wrong", ("authentication failed",),
                                      secrets=(secret, wrong_password))
    broker_s = {"SCRAM-SHA-512": "Authentication failed during authentication due to invalid credentials"
                                 " with SASL mechanism SCRAM-SHA-512",
                "PLAIN": "Authentication failed: Invalid username or password"}[mechanism]
    # the broker's reason, or, where kafka-python read the broker's answer and its close at once
    # and dropped the answer (seen under load), the close during the login
    closed = "the broker closed the connection during the login, its reason unread by the client"
    assert said in (f"stream-perceptron: Kafka at {apache_kafka.sasl_bootstrap} refused the connection:"
                    f" SASL authentication failed (mechanism {mechanism}, user {user}): {reason}"
                    for reason in (broker_s, closed)), said
    print(f"\n{backend}, {mechanism}, wrong password, {took:.1f} s: {said}")


def _round_trip(kafka: KafkaSettings, tmp_path: Path, secrets: tuple[str, ...]) -> None:
    """500 records through a worker at DEBUG over ``kafka``: 500 predictions; no secret in its
    log, its statistics, predictions or dead letters, or its checkpoint files."""
    run = uuid.uuid4().hex[:8]
    topics = {"input": f"in-{run}", "predictions": f"pred-{run}", "stats": f"stats-{run}",
              "dead_letter": f"dead-{run}"}
    ensure_topics(kafka, dict.fromkeys(topics.values(), 1))
    send_all(kafka, topics["input"], encode_stream(noisy_stream(500)))
    log = tmp_path / "secure.log"
    settings = fault_settings(kafka, topics, tmp_path / "ckpt", log_level="DEBUG",
                              stats={"every_examples": 100, "every_seconds": 1})
    proc = start_worker(settings, "--until-caught-up", log=log)
    try:
        assert proc.wait(timeout=90) == 0, log.read_text()[-3000:]
    finally:
        reap(proc)
    assert len(predictions_by_offset(kafka, topics["predictions"])) == 500
    text = log.read_text(errors="replace")
    assert re.search(r" DEBUG +", text)  # at DEBUG indeed
    outputs = b"".join(repr(v).encode() for name in ("stats", "predictions", "dead_letter")
                       for _, _, _, v in read_topic(kafka, topics[name]))
    assert b"client_id" in outputs  # the statistics records were read
    checkpoints = b"".join(p.read_bytes() for p in (tmp_path / "ckpt").rglob("*") if p.is_file())
    assert checkpoints
    for secret in secrets:
        assert secret not in text
        assert secret.encode() not in outputs and secret.encode() not in checkpoints


# How soon a refused certificate stops the worker, at most: its start (a second or two) and one
# TLS handshake, on a loaded 2-core machine; a client's bootstrap timeout is 30 s by default
_SECONDS = 15


def _scram(apache_kafka: ApacheKafka) -> dict[str, str]:
    return {"sasl_mechanism": "SCRAM-SHA-512", "sasl_username": SCRAM_USER,
            "sasl_password": apache_kafka.passwords[SCRAM_USER]}


def _fails_with_one_line(kafka: KafkaSettings, tmp_path: Path, words: tuple[str, ...],
                         secrets: tuple[str, ...], request_timeout_ms: int = 3000) -> tuple[str, float]:
    """A refused connection: the worker stops (exit 2) with one line of its own naming the
    problem (one of ``words``), no traceback, and no secret anywhere in its output. Returns the
    line and the seconds from the worker's start to its exit."""
    started = time.monotonic()
    code, text = _run_briefly(kafka, tmp_path, 30, request_timeout_ms=request_timeout_ms)
    took = time.monotonic() - started
    for secret in (*secrets, PASSWORD, SSL_KEY_PASSWORD):
        assert secret not in text
    assert "Traceback" not in text, text[-3000:]
    ours = [ln for ln in text.splitlines() if ln.startswith("stream-perceptron:")]
    assert len(ours) == 1, text[-3000:]
    assert any(w in ours[0].lower() for w in words), ours
    assert code == 2, (code, text[-3000:])
    return ours[0], took


def _run_briefly(kafka: KafkaSettings, tmp_path: Path, seconds: float,
                 words: tuple[str, ...] = (), topics: dict[str, str] | None = None,
                 request_timeout_ms: int = 3000) -> tuple[int | None, str]:
    """Run the worker with bad security settings (at DEBUG) for at most ``seconds``, or until
    one of its *own* warnings (``stream_perceptron.*`` at WARNING or ERROR, or a
    ``stream-perceptron:`` line) holds one of ``words``; then SIGTERM it. Returns (exit code,
    full output)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    topics = topics or {"input": "in", "predictions": "pred", "stats": "stats", "dead_letter": "dead"}
    log = tmp_path / "worker.log"
    settings = fault_settings(kafka.model_copy(update={"request_timeout_ms": request_timeout_ms}), topics,
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
    checkpoints = b"".join(p.read_bytes() for p in (tmp_path / "ckpt").rglob("*") if p.is_file())
    for secret in (PASSWORD, SSL_KEY_PASSWORD):
        assert secret not in text
        assert secret.encode() not in outputs
        assert secret.encode() not in checkpoints
    assert b"client_id" in outputs  # the statistics records were read
