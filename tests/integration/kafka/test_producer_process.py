"""What only the kafka-python edge with its producer in a second process (``SplitKafkaEdge``) does:
a loss in the child is reported and sticks, and the child never outlives the worker. The edge
contract, end to end, SIGTERM and kill -9 run for it as ``[kafka-python+process]`` in
test_edge.py, test_worker.py and test_worker_process.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from stream_perceptron.commands.read import read_topic
from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka.admin import client_config
from stream_perceptron.kafka.producer_process import SplitKafkaEdge
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.worker.loop import Worker
from tests.integration.conftest import PRODUCER_PROCESS
from tests.integration.helpers import (
    encode_stream,
    noisy_stream,
    send_all,
    start_process,
    started,
    topics_for,
    wait_for,
    worker_env,
    worker_settings,
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited; only its parent has not reaped it yet
        return Path(f"/proc/{pid}/status").read_text().find("\nState:\tZ") < 0
    except FileNotFoundError:
        return False


def _raw(kafka, topic: str) -> list[tuple[bytes | None, bytes]]:
    """(key, value) of every record of partition 0 of ``topic``, in offset order."""
    consumer = KafkaConsumer(**client_config(kafka), group_id=None, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    out: list[tuple[bytes | None, bytes]] = []
    try:
        while batch := consumer.poll(timeout_ms=2000).get(tp, []):
            out += [(r.key, r.value) for r in batch]
    finally:
        consumer.close()
    return out


def test_records_go_through_the_child_in_order_and_its_secrets_come_by_pipe(kafka_settings, new_topic,
                                                                             monkeypatch):
    monkeypatch.setenv("SP_KAFKA__SASL_PASSWORD", "hunter2")  # as the documented deployments do
    kafka = kafka_settings(backend=PRODUCER_PROCESS)
    topic, out = new_topic(1), new_topic(1)
    with started(kafka, topic) as edge:
        assert isinstance(edge, SplitKafkaEdge)
        pid = edge.producer_pid
        assert pid is not None and pid != os.getpid()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"stream_perceptron.kafka.producer_process" in cmdline
        assert not any(b"bootstrap" in arg or b"sasl" in arg for arg in cmdline)
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert environ and not any(var.startswith(b"SP_") or b"hunter2" in var for var in environ)
        # signals are the worker's: a group of its own (Ctrl+C), SIGINT and SIGTERM ignored
        assert os.getpgid(pid) == pid != os.getpgid(0)
        ignored = int(re.search(r"\nSigIgn:\s*([0-9a-f]+)", Path(f"/proc/{pid}/status").read_text())[1], 16)
        assert ignored >> (signal.SIGINT - 1) & 1 and ignored >> (signal.SIGTERM - 1) & 1
        for start in range(0, 3000, 500):
            keys = [f"k{i}".encode() for i in range(start, start + 500)]
            edge.send_many(out, keys, [f"v{i}".encode() for i in range(start, start + 500)])
        edge.flush()
        assert _raw(kafka, out) == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(3000)]
    assert not _alive(pid)  # close() ended the child


def test_a_record_the_child_cannot_send_fails_the_flush_and_every_later_call(kafka_settings, new_topic):
    kafka = kafka_settings(backend=PRODUCER_PROCESS)
    topic, out = new_topic(1), new_topic(1)
    with started(kafka, topic) as edge:
        edge.send_many(out, [b"a"], [b"fits"])
        edge.flush()
        edge.send_many(out, [b"b"], [b"x" * (2 << 20)])  # over the producer's max_request_size
        with pytest.raises(KafkaEdgeError, match="MessageSizeTooLarge"):
            edge.flush()
        # nothing sent after a lost record may be acknowledged: a checkpoint would skip it
        with pytest.raises(KafkaEdgeError, match="MessageSizeTooLarge"):
            edge.send_many(out, [b"c"], [b"after"])
        with pytest.raises(KafkaEdgeError, match="MessageSizeTooLarge"):
            edge.flush()
    assert _raw(kafka, out) == [(b"a", b"fits")]


def test_a_dead_child_stops_the_worker_before_a_checkpoint_passes_it(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings(backend=PRODUCER_PROCESS, max_poll_records=100)
    topics = topics_for(new_topic)
    # a stream long enough that the first checkpoint settles mid-stream even under load (it
    # settles beside the loop, which goes on learning meanwhile)
    n = 20_000
    send_all(kafka, topics["input"], encode_stream(noisy_stream(n, d=4, seed=3)))
    ckpt_dir = tmp_path / "ckpt"
    every = {"every_examples": 500, "every_seconds": 60}
    worker = Worker(worker_settings(kafka, topics, ckpt_dir, checkpoint=every))
    killed: list[int] = []
    errors: list[BaseException] = []

    def until(w: Worker) -> bool:
        edge = w.edge
        if not killed and w.counters.checkpoints >= 1:  # after the first checkpoint, mid-stream
            assert isinstance(edge, SplitKafkaEdge) and edge._child is not None
            edge._child.kill()
            edge._child.wait(10)
            killed.append(w.counters.records)
        return bool(killed) and w.caught_up()

    def run() -> None:
        try:
            worker.run(until=until)
        except BaseException as exc:  # noqa: BLE001 - what the test looks at
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(90)
    assert not thread.is_alive(), "the worker did not stop"
    assert killed and killed[0] < n
    # the worker stops with the error rather than checkpoint past outputs that were lost
    assert len(errors) == 1 and isinstance(errors[0], KafkaEdgeError), errors
    assert "the producer process is gone (exit code -9)" in str(errors[0])  # the cause, named
    ckpt = DirectoryStore(ckpt_dir).load(topics["input"], 0)
    assert ckpt is not None
    claimed = ckpt.offsets[topics["input"]][0]
    assert claimed <= killed[0]
    delivered = {rec["offset"] for _, _, _, rec in read_topic(kafka, topics["predictions"])}
    assert set(range(claimed)) <= delivered  # every offset the checkpoint claims has its prediction


_STARTED = re.compile(rb"producer process (\d+) started")


def test_the_child_exits_when_the_worker_is_killed(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings(backend=PRODUCER_PROCESS)
    topics = topics_for(new_topic)
    send_all(kafka, topics["input"], encode_stream(noisy_stream(500, d=4, seed=5)))
    log = tmp_path / "worker.log"
    proc = start_process(worker_settings(kafka, topics, tmp_path / "ckpt"), log=log)
    try:
        wait_for(lambda: _STARTED.search(log.read_bytes()) is not None, 60, "the producer process")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    match = _STARTED.search(log.read_bytes())
    assert match is not None
    child = int(match.group(1))
    took = wait_for(lambda: not _alive(child), 10, f"producer process {child} to exit")
    print(f"\nproducer process exited {took:.2f} s after the worker's SIGKILL")


def test_a_child_that_stops_reading_is_killed_and_the_worker_told(kafka_settings, new_topic, monkeypatch):
    import stream_perceptron.kafka.producer_process as split

    monkeypatch.setattr(split, "REPLY_MARGIN_S", 1.0)  # a write waits 1 s + request_timeout_ms
    kafka = kafka_settings(backend=PRODUCER_PROCESS, request_timeout_ms=2_000)
    topic, out = new_topic(1), new_topic(1)
    with started(kafka, topic) as edge:
        assert isinstance(edge, SplitKafkaEdge) and edge._child is not None
        child = edge._child
        os.kill(child.pid, signal.SIGSTOP)  # alive, but reading nothing
        started_at = time.monotonic()
        with pytest.raises(KafkaEdgeError, match=r"^sending: the producer process read nothing for 3 s;"
                                                 r" killed it$"):
            for _ in range(1000):  # until the pipe's buffers are full
                edge.send_many(out, [None] * 10, [b"v" * 10_000] * 10)
        assert time.monotonic() - started_at < 30
        assert child.wait(10) == -signal.SIGKILL
        with pytest.raises(KafkaEdgeError, match="read nothing"):  # and it sticks
            edge.flush()


def test_the_child_starts_under_a_log_level_of_the_applications_own(kafka_settings, new_topic):
    import logging

    logging.addLevelName(5, "TRACE")
    root = logging.getLogger()
    level = root.level
    root.setLevel(5)
    try:
        kafka = kafka_settings(backend=PRODUCER_PROCESS)
        with started(kafka, new_topic(1)) as edge:
            assert edge.producer_pid is not None
    finally:
        root.setLevel(level)


def test_ctrl_c_at_a_terminal_drains_the_worker_through_its_producer(kafka_settings, new_topic, tmp_path):
    # a terminal sends SIGINT to the whole foreground process group: the child must not die of it
    kafka = kafka_settings(backend=PRODUCER_PROCESS, max_poll_records=100)
    topics = topics_for(new_topic)
    send_all(kafka, topics["input"], encode_stream(noisy_stream(3000, d=4, seed=7)))
    log = tmp_path / "worker.log"
    ckpt_dir = tmp_path / "ckpt"
    settings = worker_settings(kafka, topics, ckpt_dir)  # a checkpoint every 1,000 examples
    with open(log, "ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "stream_perceptron.cli", "run"],
                                env=worker_env(settings), stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)  # a group of its own, as a shell gives a job
    try:
        wait_for(lambda: DirectoryStore(ckpt_dir).load(topics["input"], 0) is not None, 60,
                 "a first checkpoint")
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    text = log.read_text()
    assert code == 0, text
    assert "SIGINT: finishing the batch" in text and "stopped:" in text and "Traceback" not in text
    assert "checkpoints (0 failed)" in text, text  # its statistics and checkpoint, through the child
