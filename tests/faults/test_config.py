"""Configuration mistakes, as an operator makes them: ``python -m stream_perceptron.cli run``
with SP_* environment variables, in a child process."""

from __future__ import annotations

import ast
import re
import signal
import time

import pytest
from kafka import KafkaConsumer

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.commands.broker import free_port
from stream_perceptron.kafka.admin import client_config
from stream_perceptron.settings import KafkaSettings
from tests.integration.helpers import (
    encode_stream,
    noisy_stream,
    predictions_by_offset,
    send_all,
    topics_for,
    worker_env,
)

from .support import (
    LogTail,
    checkpoint_offset,
    fault_settings,
    reap,
    run_cli,
    start_worker,
    trouble_lines,
    wait_until,
)

pytestmark = pytest.mark.faults


def _prefixed(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("stream-perceptron:")]


@pytest.mark.timeout(60)
def test_wrong_bootstrap_retries_with_backoff_and_says_so(fast_kafka, new_topic, tmp_path):
    """Nothing listening there, or a name that does not resolve: the daemon keeps retrying
    (right for a daemon: the broker may be late) and every retry is a WARNING naming the
    address; SIGTERM stops it at once. Both variants run side by side."""
    topics = topics_for(new_topic)
    wrong = {"refused": f"127.0.0.1:{free_port()}", "unresolvable": "no-such-host.invalid:9092"}
    procs, logs = {}, {}
    try:
        for name, address in wrong.items():
            s = fault_settings(fast_kafka(bootstrap_servers=address), topics, tmp_path / name)
            logs[name] = tmp_path / f"{name}.log"
            procs[name] = start_worker(s, log=logs[name])
        def retries(name: str) -> list[str]:
            return [ln for ln in logs[name].read_text().splitlines()
                    if " WARNING " in ln and wrong[name] in ln]

        for name in wrong:  # the retries at 0.5, 1 and 2 s: 3 lines within ~2 s of the start
            wait_until(lambda n=name: len(retries(n)) >= 3, 20, f"{name}: three retry lines",
                       alive=procs[name], log=logs[name])
            assert "Traceback" not in logs[name].read_text()
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for name, proc in procs.items():
            assert proc.wait(timeout=10) == 0, logs[name].read_text()[-2000:]
    finally:
        for proc in procs.values():
            reap(proc)
    print("\n" + "\n".join(f"{n}: {LogTail(p).lines('WARNING')[0][24:]}" for n, p in logs.items()))


@pytest.mark.timeout(60)
def test_missing_input_topic_is_reported_and_not_created(fast_kafka, new_topic, tmp_path):
    """SP_TOPICS__INPUT names a topic that does not exist. The worker must say so clearly (an
    ERROR/WARNING naming it), and must not quietly create it with the broker's defaults (the
    README: 'the input topic is yours to create with the partitions you want')."""
    kafka = fast_kafka()
    topics = {**topics_for(new_topic), "input": f"missing-{tmp_path.name}"[-60:]}
    s = fault_settings(kafka, topics, tmp_path / "ckpt")
    log = tmp_path / "worker.log"
    proc = start_worker(s, log=log)
    try:
        tail = LogTail(log)
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and proc.poll() is None:
            if trouble_lines(tail.poll().text.decode(errors="replace"), topics["input"]):
                break
            time.sleep(0.1)
        text = log.read_text()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
    finally:
        reap(proc)
    consumer = KafkaConsumer(**client_config(kafka))
    try:
        existing = consumer.topics()
    finally:
        consumer.close()
    exited_with_one_line = proc.returncode not in (0, -signal.SIGTERM) and any(
        topics["input"] in ln for ln in _prefixed(text))
    warned = trouble_lines(text, topics["input"])
    assert exited_with_one_line or warned, f"nothing says the topic is missing:\n{text[-2500:]}"
    assert topics["input"] not in existing, "the worker created the missing input topic"


def _states(ckpt_dir) -> dict[str, bytes]:
    """Every checkpoint file under ``ckpt_dir`` (the seed's and the partitions' states), by path."""
    return {str(p.relative_to(ckpt_dir)): p.read_bytes() for p in ckpt_dir.rglob("ckpt-*.json")}


def _learned(settings, log) -> dict[str, bytes]:
    """Run a worker until it has caught up with its input; the checkpoint files it left."""
    first = start_worker(settings, "--until-caught-up", log=log)
    try:
        assert first.wait(timeout=30) == 0, log.read_text()[-2000:]
    finally:
        reap(first)
    return _states(settings.checkpoint.dir)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mistake", ["fit_intercept", "n_features"])
def test_checkpoint_from_another_configuration(mistake, fast_kafka, new_topic, tmp_path):
    """A checkpoint written with fit_intercept=true (8 features), restarted with
    SP_MODEL__FIT_INTERCEPT=false (or SP_MODEL__N_FEATURES=3): one clear line, non-zero exit,
    the checkpoint untouched."""
    kafka = fast_kafka()
    topics = topics_for(new_topic)
    send_all(kafka, topics["input"], encode_stream(noisy_stream(500, d=8)))
    ckpt_dir = tmp_path / "ckpt"
    before = _learned(fault_settings(kafka, topics, ckpt_dir), tmp_path / "first.log")
    model = {"fit_intercept": False} if mistake == "fit_intercept" else {"n_features": 3}
    env = worker_env(fault_settings(kafka, topics, ckpt_dir, model=model))
    done = run_cli(["run"], env, timeout_s=30)
    assert done.returncode not in (0, None), done.stderr[-2000:]
    lines = _prefixed(done.stderr)
    assert len(lines) == 1, done.stderr[-2000:]
    assert "another model configuration" in lines[0] and mistake in lines[0], lines[0]
    assert "Traceback" not in done.stderr
    assert _states(ckpt_dir) == before
    print(f"\nexit {done.returncode}: {lines[0]}")


def _send_to(kafka, topic: str, partition: int, stream, start: int) -> None:
    """``stream`` as input records to ``topic[partition]``, ids from ``start`` on."""
    send_all(kafka, topic, [input_record(x, y, start + i) for i, (x, y) in enumerate(stream)],
             partition=partition)


def _holding(log) -> set[str]:
    """The partitions a worker holds by its log: each ``assigned T[p]: starting at`` line adds
    one, each ``revoked [(T, p), …]`` line takes those away (a rebalance may come twice)."""
    held: set[str] = set()
    for line in LogTail(log).lines(" INFO "):
        if (m := re.search(r"assigned (\S+\[\d+\]): starting at ", line)) is not None:
            held.add(m.group(1))
        elif (m := re.search(r"revoked (\[.*?\]):", line)) is not None:
            held -= {f"{t}[{p}]" for t, p in ast.literal_eval(m.group(1))}
    return held


def _offsets(kafka, topic: str) -> set[tuple[int, int]]:
    """The (partition, offset) of the input records that ``topic`` (an output) answers."""
    return set(predictions_by_offset(kafka, topic))


@pytest.mark.timeout(150)
def test_a_record_of_another_width_than_the_restored_state_is_a_dead_letter_not_a_stop(
        fast_kafka, new_topic, tmp_path):
    """The reported sequence: a worker restored from states of 8 features meets a 7-feature
    record at each partition's first record since the restore, with 100 good records behind it.
    That record is a dead letter with its reason and one WARNING; the good ones are predicted;
    the worker keeps running. Then again after a rebalance: a second worker joins the group,
    the partitions are restored by their new owners, and each meets another 7-feature record
    first: the same, on both workers."""
    kafka = fast_kafka()
    topics = topics_for(new_topic, partitions=2)
    eight, seven = noisy_stream(400, d=8, seed=3), noisy_stream(4, d=7, seed=4)
    for p in (0, 1):
        _send_to(kafka, topics["input"], p, eight[p * 100:(p + 1) * 100], 0)
    ckpt_dir = tmp_path / "ckpt"
    settings = fault_settings(kafka, topics, ckpt_dir)
    _learned(settings, tmp_path / "first.log")  # each partition's state: 8 features, next offset 100
    assert {checkpoint_offset(ckpt_dir, topics["input"], p) for p in (0, 1)} == {100}

    # a restart: each partition's first record since its restore is 7 wide, 100 good ones behind
    for p in (0, 1):
        _send_to(kafka, topics["input"], p, seven[p:p + 1] + eight[200 + p * 100:300 + p * 100], 100)
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    procs = [start_worker(settings, log=logs[0])]
    try:
        want_predicted = {(p, o) for p in (0, 1) for o in [*range(100), *range(101, 201)]}
        wait_until(lambda: _offsets(kafka, topics["predictions"]) >= want_predicted, 60,
                   "the good records behind the bad ones predicted", alive=procs[0], log=logs[0])
        dead = predictions_by_offset(kafka, topics["dead_letter"])
        assert sorted(dead) == [(0, 100), (1, 100)]
        assert {recs[0]["error"] for recs in dead.values()} == {"x has 7 features, the model has 8"}
        warned = [ln for ln in LogTail(logs[0]).lines(" WARNING ") if "went to the dead-letter topic" in ln]
        assert len(warned) == 2 and all("the model's 8 features (said once)" in ln for ln in warned), warned

        # a rebalance: a second worker joins; each partition is restored by its new owner
        procs.append(start_worker(settings, log=logs[1]))
        names = {f"{topics['input']}[{p}]" for p in (0, 1)}
        wait_until(lambda: len(one := _holding(logs[0])) == 1 and len(two := _holding(logs[1])) == 1
                   and one | two == names, 60, "each worker restoring one partition",
                   alive=procs[1], log=logs[1])
        for p in (0, 1):
            _send_to(kafka, topics["input"], p, seven[2 + p:3 + p] + eight[p * 100:p * 100 + 100], 201)
        want_predicted |= {(p, o) for p in (0, 1) for o in range(202, 302)}
        wait_until(lambda: _offsets(kafka, topics["predictions"]) >= want_predicted, 60,
                   "the good records after the rebalance predicted", alive=procs[1], log=logs[1])
        assert sorted(predictions_by_offset(kafka, topics["dead_letter"])) == [
            (0, 100), (0, 201), (1, 100), (1, 201)]
        assert all(proc.poll() is None for proc in procs), "a worker stopped"
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc, log in zip(procs, logs, strict=True):
            assert proc.wait(timeout=30) == 0, log.read_text()[-2000:]
    finally:
        for proc in procs:
            reap(proc)
    assert {checkpoint_offset(ckpt_dir, topics["input"], p) for p in (0, 1)} == {302}
    for log in logs:
        assert "Traceback" not in log.read_text()


INVALID = {
    "SP_KAFKA__MAX_POLL_RECORDS": "lots",
    "SP_KAFKA__SECURITY_PROTOCOL": "TLS",
    "SP_CHECKPOINT__EVERY_SECONDS": "-1",
    "SP_LIMITS__MAX_RECORD_BYTES": "1e99999",
    "SP_LOG_LEVEL": "LOUD",
    "SP_OBSERVE__PORT": "70000",
    "SP_OUTPUT__PREDICTIONS": "some",
    "SP_MODEL__FIT_INTERCEPT": "perhaps",
    "SP_KAFKA__BOOTSTRAP_SERVER": "127.0.0.1:9092",  # typo: SERVER for SERVERS
    # these once passed validation: a traceback, gigabytes built to size an output, or a
    # worker retrying for ever
    "SP_LIMITS__MAX_ABS_VALUE": "inf",
    "SP_LIMITS__MAX_ID_CHARS": "300000000",
    "SP_KAFKA__SSL_CAFILE": "/nonexistent/kafka-ca.pem",
    "SP_KAFKA__BOOTSTRAP_SERVERS": " , ",
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_setting_is_one_line_naming_it_and_exit_2(name, tmp_path):
    env = worker_env(fault_settings(
        KafkaSettings(
            bootstrap_servers="127.0.0.1:1"),
        {"input": "i", "predictions": "p", "stats": "s", "dead_letter": "d"},
        tmp_path / "ckpt"))
    env[name] = INVALID[name]
    done = run_cli(["run"], env, timeout_s=20)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert name in lines[0], lines[0]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "ckpt").exists()


@pytest.mark.timeout(30)
def test_invalid_secret_setting_does_not_echo_the_secret(tmp_path):
    """A bad value next to a secret: the line names the problem, never the password."""
    env = worker_env(fault_settings(
        KafkaSettings(
            bootstrap_servers="127.0.0.1:1"),
        {"input": "i", "predictions": "p", "stats": "s", "dead_letter": "d"}, tmp_path / "c"))
    env["SP_KAFKA__SASL_PASSWORD"] = "hunter2-do-not-print"
    env["SP_KAFKA__SASL_MECHANISM"] = "GSSAPI"
    done = run_cli(["run"], env, timeout_s=20)
    assert done.returncode == 2, done.stderr
    assert "SP_KAFKA__SASL_MECHANISM" in done.stderr
    assert "hunter2-do-not-print" not in done.stdout + done.stderr
    # an error on the whole section (a check across its settings) carries the section's values
    del env["SP_KAFKA__SASL_MECHANISM"]
    env["SP_KAFKA__HEARTBEAT_INTERVAL_MS"] = "60000"
    done = run_cli(["run"], env, timeout_s=20)
    assert done.returncode == 2, done.stderr
    assert "SP_KAFKA__HEARTBEAT_INTERVAL_MS" in done.stderr and done.stderr.count("\n") == 1
    assert "hunter2-do-not-print" not in done.stdout + done.stderr
