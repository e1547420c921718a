"""The daemon as a process, once per Kafka backend: SIGTERM, kill -9 at random moments, two workers
in one group, a second interrupt."""

from __future__ import annotations

import logging
import random
import re
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from kafka import KafkaConsumer, TopicPartition

from stream_perceptron.kafka.admin import client_config
from stream_perceptron.state.directory import DirectoryStore
from tests.integration.conftest import EDGES
from tests.integration.helpers import (
    EDGE_STARTED,
    ThreadedWorker,
    core_reference,
    encode_stream,
    noisy_stream,
    predictions_by_offset,
    send_all,
    start_process,
    topics_for,
    wait_for,
    worker_settings,
)


def _checkpoint_offset(ckpt_dir, topic) -> int:
    ckpt = DirectoryStore(ckpt_dir).load(topic, 0)
    return 0 if ckpt is None else ckpt.offsets.get(topic, {}).get(0, 0)


def _committed(kafka, topic) -> int | None:
    consumer = KafkaConsumer(**client_config(kafka), group_id=kafka.group_id, enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close()


@pytest.mark.parametrize("backend", EDGES, indirect=True)
def test_sigterm_checkpoints_commits_and_a_restart_relearns_nothing(
    backend, fast_kafka, new_topic, tmp_path
):
    kafka = fast_kafka(backend=backend)
    topics = topics_for(new_topic)
    n = 4000
    send_all(kafka, topics["input"], encode_stream(noisy_stream(n)))
    ckpt_dir = tmp_path / "ckpt"
    # no checkpoint falls due while running: the one we find is the shutdown checkpoint
    settings = worker_settings(kafka, topics, ckpt_dir,
                               checkpoint={"every_examples": 10**9, "every_seconds": 3600})
    proc = start_process(settings, log=tmp_path / "worker.log")
    try:
        wait_for(lambda: len(predictions_by_offset(kafka, topics["predictions"])) == n, 60,
                 "all predictions")
        assert DirectoryStore(ckpt_dir).load(topics["input"], 0) is None
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, (tmp_path / "worker.log").read_text()
        took = time.monotonic() - sent
    finally:
        proc.kill()
    assert took < 10
    ckpt = DirectoryStore(ckpt_dir).load(topics["input"], 0)
    assert ckpt.offsets == {topics["input"]: {0: n}}
    assert _committed(kafka, topics["input"]) == n
    log = (tmp_path / "worker.log").read_text()
    assert "SIGTERM" in log and "stopped:" in log

    # restart: resumes at the checkpoint; nothing is predicted or learned again
    restart = start_process(settings, "--until-caught-up", log=tmp_path / "restart.log")
    assert restart.wait(timeout=60) == 0, (tmp_path / "restart.log").read_text()
    again = DirectoryStore(ckpt_dir).load(topics["input"], 0)
    assert again.model == ckpt.model and again.stats["seen"] == n
    assert all(len(v) == 1 for v in predictions_by_offset(kafka, topics["predictions"]).values())


_SEEN = re.compile(rb"seen (\d+), labeled")


def _seen(log: Path) -> int:
    """The examples the worker reported (its statistics log line, every 500) before now."""
    found = _SEEN.findall(log.read_bytes())
    return int(found[-1]) if found else 0


@pytest.mark.parametrize("backend", EDGES, indirect=True)
def test_kill_9_at_random_moments_ends_exactly_like_an_uninterrupted_run(
    backend, fast_kafka, new_topic, tmp_path
):
    # short group sessions: each restart after a kill -9 waits for the dead member's to expire
    kafka = fast_kafka(backend=backend, max_poll_records=250)
    topics = topics_for(new_topic)
    n = 40_000
    stream = noisy_stream(n, d=8, noise=0.1, seed=11)
    values, sent = encode_stream(stream), [0]

    def send_to(end: int) -> None:
        send_all(kafka, topics["input"], values[sent[0]:end])
        sent[0] = max(sent[0], end)

    ckpt_dir = tmp_path / "ckpt"
    # The worker learns up to ~80k examples/s here (librdkafka's), in bursts: a checkpoint every
    # 4000 examples leaves windows of ~50 ms, and each kill waits until the worker has gone 1000
    # examples past its checkpoint, so the outputs of those are out and are re-emitted later.
    settings = worker_settings(
        kafka, topics, ckpt_dir,
        checkpoint={"every_examples": 4000, "every_seconds": 60},
    )
    rng = random.Random(20261121)
    kills = 3
    for k in range(1, kills + 1):
        log = tmp_path / f"run-{k}.log"
        proc = start_process(settings, log=log)
        try:
            target = k * n // (kills + 1) + rng.randrange(0, n // 12)
            # the input ends 5,000 past the target, short of n, so the worker cannot run to the
            # end between two looks of a test slowed by its machine; its checkpoint past the
            # target may fall at that end (a batch's), so 1,500 more records follow it
            send_to(target + 5_000)
            wait_for(lambda t=target: _checkpoint_offset(ckpt_dir, topics["input"]) >= t, 90,
                     f"checkpoint past offset {target}", every_s=0.01)
            past = _checkpoint_offset(ckpt_dir, topics["input"]) + 1000
            send_to(past + 500)
            wait_for(lambda p=past, f=log: _seen(f) >= p, 10, f"the worker past offset {past}", every_s=0.005)
            time.sleep(rng.uniform(0.005, 0.02))  # land between checkpoints
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        assert _checkpoint_offset(ckpt_dir, topics["input"]) < n  # killed mid-stream
    log_text = (tmp_path / "run-1.log").read_text()
    assert EDGE_STARTED[backend] in log_text, log_text[-2000:]  # the edge that ran is the backend's
    send_to(n)
    final = start_process(settings, "--until-caught-up", log=tmp_path / "final.log")
    assert final.wait(timeout=120) == 0, (tmp_path / "final.log").read_text()

    model, ref = core_reference(stream, [y for _, y in stream])
    ckpt = DirectoryStore(ckpt_dir).load(topics["input"], 0)
    assert ckpt.offsets == {topics["input"]: {0: n}}
    assert ckpt.model["weights"] == model.weights.tolist()  # bit-identical
    assert ckpt.model["intercept"] == model.intercept
    assert ckpt.model["mistakes"] == model.mistakes

    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(0, o) for o in range(n)]  # every offset predicted
    duplicated = 0
    for (_, offset), copies in preds.items():
        assert all(c == copies[0] for c in copies), offset  # re-emissions are identical
        assert copies[0]["mistake"] == bool(ref.mistakes[offset])
        duplicated += len(copies) > 1
    assert duplicated > 0  # the kills really made the worker reprocess


def _stop(*workers: ThreadedWorker | None) -> None:
    """Stop every worker started; each must exit 0."""
    for worker in workers:
        if worker is not None:
            assert worker.stop() == 0


def test_two_workers_in_one_group_split_partitions_and_miss_no_offset(
    backend, kafka_settings, new_topic, tmp_path
):
    kafka = kafka_settings(backend=backend)
    topics = topics_for(new_topic, partitions=2)
    shared = tmp_path / "shared"  # one directory for the group (a shared volume)
    a = ThreadedWorker(worker_settings(kafka_settings(backend=backend, client_id="worker-a"), topics,
                                       shared)).start()
    b = None
    try:
        wait_for(lambda: len(a.assignment()) == 2, 30, "worker a to own both partitions")
        b = ThreadedWorker(worker_settings(kafka_settings(backend=backend, client_id="worker-b"), topics,
                                           shared)).start()
        wait_for(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1,
                 30, "the partitions to be split")
        assert set(a.assignment()) | set(b.assignment()) == {
            (topics["input"], 0), (topics["input"], 1)}
        n = 2000
        stream = noisy_stream(n)
        values = encode_stream(stream)
        send_all(kafka, topics["input"], values[: n // 2], partition=0)
        send_all(kafka, topics["input"], values[n // 2 :], partition=1)
        wait_for(lambda: len(predictions_by_offset(kafka, topics["predictions"])) == n, 60,
                 "a prediction for every offset")
    finally:
        _stop(a, b)
    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(p, o) for p in (0, 1) for o in range(n // 2)]
    # each partition learned its own records: a model per partition, whichever worker held it
    c0, c1 = (DirectoryStore(shared).load(topics["input"], p) for p in (0, 1))
    assert c0.stats["seen"] == c1.stats["seen"] == n // 2
    assert c0.offsets == {topics["input"]: {0: n // 2}} and c1.offsets == {topics["input"]: {1: n // 2}}
    assert np.isfinite(c0.model["weights"]).all()


def test_a_revoked_partition_is_handed_over_where_its_worker_stopped(
    backend, kafka_settings, new_topic, tmp_path, caplog
):
    # Only a revocation or a shutdown checkpoints here, so only the revocation commits what A
    # learned before B joins: B must start exactly there, and no offset is predicted twice.
    kafka = kafka_settings(backend=backend)
    topics = topics_for(new_topic, partitions=2)
    n = 1000
    values = encode_stream(noisy_stream(n))
    send_all(kafka, topics["input"], values[: n // 2], partition=0)
    send_all(kafka, topics["input"], values[n // 2 :], partition=1)
    rare = {"every_examples": 10**9, "every_seconds": 3600}
    shared = tmp_path / "shared"  # one directory for the group (a shared volume)
    a = ThreadedWorker(worker_settings(kafka_settings(backend=backend, client_id="worker-a"), topics,
                                       shared, checkpoint=rare)).start()
    b = None
    try:
        wait_for(lambda: len(predictions_by_offset(kafka, topics["predictions"])) == n, 60,
                 "worker a to predict every offset")
        assert all(DirectoryStore(shared).load(topics["input"], p) is None for p in (0, 1))  # none yet
        caplog.set_level(logging.INFO, logger="stream_perceptron.worker")
        b = ThreadedWorker(worker_settings(kafka_settings(backend=backend, client_id="worker-b"), topics,
                                           shared, checkpoint=rare)).start()
        wait_for(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1, 30,
                 "the partitions to be split")
    finally:
        _stop(a, b)
    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(p, o) for p in (0, 1) for o in range(n // 2)]
    assert all(len(copies) == 1 for copies in preds.values())  # B replayed nothing A had done
    assert re.search(rf"assigned {topics['input']}\[[01]\]: starting at {n // 2} \(stored state\)",
                     caplog.text), caplog.text[-3000:]
    for p in (0, 1):  # each partition's model learned its records once, whoever held it
        assert DirectoryStore(shared).load(topics["input"], p).stats["seen"] == n // 2


def test_a_second_interrupt_exits_at_once(backend, kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings(backend=backend)
    topics = topics_for(new_topic)
    send_all(kafka, topics["input"], encode_stream(noisy_stream(100)))
    log = tmp_path / "worker.log"
    proc = start_process(worker_settings(kafka, topics, tmp_path / "ckpt"), log=log)
    try:
        wait_for(lambda: EDGE_STARTED[backend] in log.read_text(), 30, "the worker to connect")
        proc.send_signal(signal.SIGINT)
        # signals sent back to back coalesce: send the second once the first was handled, while
        # the worker still drains its first poll (a group join takes seconds on the test broker)
        wait_for(lambda: "SIGINT: finishing the batch" in log.read_text(), 10, "the first interrupt")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130, log.read_text()[-2000:]
    finally:
        proc.kill()
        proc.wait()
    assert "second interrupt: exiting at once" in log.read_text()
