"""Process crashes: ``kill -9`` at random moments, and crashes inside the checkpoint write.

The reference is the core: ``Perceptron().learn_many`` over the same rows, uninterrupted. A run
interrupted any number of times must end with bit-identical weights, the same mistake count, a
prediction for every offset, and re-emitted predictions identical to the first ones.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from stream_perceptron.errors import CheckpointError
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.state.stored import read
from tests.integration.conftest import BACKENDS
from tests.integration.helpers import (
    core_reference,
    encode_stream,
    noisy_stream,
    predictions_by_offset,
    send_all,
    topics_for,
)

from .support import (
    LogTail,
    checkpoint_offset,
    ckpt_files,
    committed,
    env_int,
    fault_settings,
    kill9,
    reap,
    run_until_caught_up,
    start_worker,
    stored,
    temp_files,
    wait_until,
)

pytestmark = pytest.mark.faults

def _valid(path: Path) -> bool:
    try:
        read(path)
    except CheckpointError:
        return False
    return True


KILLS = env_int("SP_FAULTS_KILLS", 20)
KILL_RECORDS = env_int("SP_FAULTS_KILL_RECORDS", 100_000)


def assert_exact(kafka: KafkaSettings, topics: dict[str, str], ckpt_dir: Path,
                 stream: list[Any], n: int) -> dict[str, int]:
    """The final checkpoint and the predictions equal the core's uninterrupted run."""
    model, ref = core_reference(stream, [y for _, y in stream])
    ckpt = stored(ckpt_dir, topics["input"])
    assert ckpt is not None
    assert ckpt.offsets == {topics["input"]: {0: n}}
    assert ckpt.model["weights"] == model.weights.tolist()  # bit-identical
    assert ckpt.model["intercept"] == model.intercept
    assert ckpt.model["mistakes"] == model.mistakes
    assert ckpt.stats["seen"] == ckpt.stats["labeled"] == n  # every record applied exactly once
    assert ckpt.stats["mistakes"] == model.mistakes

    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(0, o) for o in range(n)], "an offset has no prediction"
    duplicated = extra = 0
    for (_, offset), copies in preds.items():
        assert all(c == copies[0] for c in copies), f"re-emissions differ at offset {offset}"
        first = copies[0]
        assert first["score"] == ref.scores[offset]
        assert first["mistake"] == bool(ref.mistakes[offset])
        duplicated += len(copies) > 1
        extra += len(copies) - 1
    assert committed(kafka, topics["input"]) == {0: n}
    return {"duplicated_offsets": duplicated, "extra_predictions": extra,
            "mistakes": model.mistakes}


def _kill_at_random(settings: Any, tmp_path: Path, ckpt_dir: Path, topic: str, n: int,
                    n_kills: int) -> tuple[list[dict[str, Any]], set[int]]:
    """Start a worker and ``kill -9`` it, ``n_kills`` times: some during start-up, the others at
    a random point of the stream. Returns each kill's record and which were at start-up."""
    rng = random.Random(20261121)
    startup_kills = set(rng.sample(range(n_kills), k=max(1, n_kills // 7)))
    targets = iter(sorted(rng.sample(range(n // 50, n - n // 20), n_kills - len(startup_kills))))
    kills: list[dict[str, Any]] = []
    for k in range(n_kills):
        log = tmp_path / f"run-{k:02d}.log"
        proc = start_worker(settings, log=log)
        tail = LogTail(log)
        try:
            if k in startup_kills:
                time.sleep(rng.uniform(0.05, 1.2))  # deliberate fault timing: during start-up
                where = "start-up"
            else:
                target = next(targets)
                wait_until(lambda t=target, lt=tail: lt.poll().seen >= t, 60,
                           f"kill {k}: progress to {target}", every_s=0.01, alive=proc, log=log)
                time.sleep(rng.uniform(0.0, 0.15))  # deliberate fault timing
                where = f"after {target}"
        finally:
            reap(proc)  # SIGKILL (the fault itself), or cleanup if the wait failed
        assert proc.returncode == -9, log.read_text()[-2000:]
        kills.append({"k": k, "where": where, "seen": tail.poll().seen,
                      "ckpt": checkpoint_offset(ckpt_dir, topic)})
        assert kills[-1]["ckpt"] < n, "killed after the end: not a mid-stream kill"
    return kills, startup_kills


@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", BACKENDS)
def test_kill_9_at_20_random_moments_ends_exactly_like_an_uninterrupted_run(
    fast_kafka, new_topic, tmp_path, backend
):
    """KILLS x ``kill -9`` over a KILL_RECORDS-record single-partition stream with 10% label noise.

    Most kills land at a random point of the stream (a random progress target, then a random
    0-150 ms more, so they fall anywhere between, before or inside checkpoints); some land
    during start-up (restore, group join). Checkpoints every 3,000 records, 500 records a poll.
    """
    n = KILL_RECORDS
    kafka = fast_kafka(max_poll_records=500, backend=backend)
    topics = topics_for(new_topic)
    stream = noisy_stream(n, d=8, noise=0.1, seed=11)
    send_all(kafka, topics["input"], encode_stream(stream))
    ckpt_dir = tmp_path / "ckpt"
    settings = fault_settings(kafka, topics, ckpt_dir,
                              checkpoint={"every_examples": 3000, "every_seconds": 60})
    started = time.monotonic()
    kills, startup_kills = _kill_at_random(settings, tmp_path, ckpt_dir, topics["input"], n, KILLS)
    killed_for = time.monotonic() - started
    run_until_caught_up(settings, tmp_path / "final.log", timeout_s=120)
    assert len(kills) == KILLS
    assert sum(k["where"] == "start-up" for k in kills) == len(startup_kills)
    progress = [k["ckpt"] for k in kills]
    assert progress == sorted(progress)  # the checkpoint never went backwards
    figures = assert_exact(kafka, topics, ckpt_dir, stream, n)
    assert figures["duplicated_offsets"] > 0  # the kills really made the worker reprocess
    print(f"\n{backend}: {KILLS} kills over {n} records in {killed_for:.1f} s; {figures}; kills: {kills}")


@pytest.mark.timeout(600)
def test_an_averaged_model_killed_at_random_moments_ends_exactly_like_an_uninterrupted_run(
    fast_kafka, new_topic, tmp_path
):
    """SP_MODEL__AVERAGE=true: θ, the averaging sums and the served scores replay bit for bit."""
    n, n_kills = KILL_RECORDS // 4, max(3, KILLS // 4)
    kafka = fast_kafka(max_poll_records=500)
    topics = topics_for(new_topic)
    stream = noisy_stream(n, d=8, noise=0.1, seed=12)
    send_all(kafka, topics["input"], encode_stream(stream))
    ckpt_dir = tmp_path / "ckpt"
    settings = fault_settings(kafka, topics, ckpt_dir, model={"average": True},
                              checkpoint={"every_examples": 2000, "every_seconds": 60})
    kills, _ = _kill_at_random(settings, tmp_path, ckpt_dir, topics["input"], n, n_kills)
    run_until_caught_up(settings, tmp_path / "final.log", timeout_s=120)
    model, ref = core_reference(stream, [y for _, y in stream], average=True)
    ckpt = stored(ckpt_dir, topics["input"])
    assert ckpt is not None and ckpt.offsets == {topics["input"]: {0: n}}
    assert ckpt.model == model.get_state()  # θ, θ0, u, u0 and T, bit-identical
    assert ckpt.config["average"] is True
    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(0, o) for o in range(n)], "an offset has no prediction"
    for (_, offset), copies in preds.items():
        assert all(c == copies[0] for c in copies), f"re-emissions differ at offset {offset}"
        assert copies[0]["score"] == ref.served_scores[offset]  # the averaged model's score
        assert copies[0]["mistake"] == bool(ref.mistakes[offset])  # the learning θ's mistake
    assert sum(len(c) > 1 for c in preds.values()) > 0  # the kills made the worker reprocess
    print(f"\naveraged: {n_kills} kills over {n} records; kills: {kills}")


@pytest.mark.timeout(180)
def test_crash_between_temp_file_and_rename_then_truncated_newest_checkpoint(
    fast_kafka, new_topic, tmp_path
):
    """A crash inside the checkpoint write leaves ``.ckpt-*.json.tmp``; later the newest
    ``ckpt-*.json`` is truncated (a torn write). Each restart loads the newest valid checkpoint
    and the run still ends exactly like an uninterrupted one."""
    n = 20_000
    kafka = fast_kafka(max_poll_records=500)
    topics = topics_for(new_topic)
    stream = noisy_stream(n, d=8, noise=0.1, seed=5)
    send_all(kafka, topics["input"], encode_stream(stream))
    ckpt_dir = tmp_path / "ckpt"
    settings = fault_settings(kafka, topics, ckpt_dir,
                              checkpoint={"every_examples": 2000, "every_seconds": 60, "keep": 3})

    # 1. the 4th checkpoint write dies between fsync(temp) and rename
    log1 = tmp_path / "crash.log"
    proc = start_worker(settings, log=log1, module="tests.faults.crash_worker",
                        extra_env={"FAULT_CRASH_AT_RENAME": "4"})
    try:
        assert proc.wait(timeout=60) == -9, log1.read_text()[-3000:]
    finally:
        reap(proc)
    assert [p.name for p in temp_files(ckpt_dir)] == [".ckpt-000000000004.json.tmp"]
    assert [p.name for p in ckpt_files(ckpt_dir)] == [
        f"ckpt-{i:012d}.json" for i in (1, 2, 3)]
    before = stored(ckpt_dir, topics["input"])
    assert before is not None and before.seq == 3

    # 2. restart: resumes from ckpt 3 (the temp file is not a checkpoint); kill -9 it after
    #    two more checkpoints, then truncate the newest file as a torn write would
    log2 = tmp_path / "second.log"
    proc = start_worker(settings, log=log2)
    try:
        wait_until(lambda: len(ckpt_files(ckpt_dir)) == 3 and ckpt_files(ckpt_dir)[-1].name
                   >= "ckpt-000000000005.json", 60, "two new checkpoints", every_s=0.01,
                   alive=proc, log=log2)
        kill9(proc)
    finally:
        reap(proc)
    assert f"restored {ckpt_files(ckpt_dir)[0].parent}/ckpt-000000000003.json" in log2.read_text()
    newest = ckpt_files(ckpt_dir)[-1]
    previous = ckpt_files(ckpt_dir)[-2]
    raw = newest.read_bytes()
    newest.write_bytes(raw[: len(raw) // 2])
    assert checkpoint_offset(ckpt_dir, topics["input"]) < n

    # 3. restart: skips the truncated file with a warning, restores the one before, ends exact
    log3 = tmp_path / "final.log"
    run_until_caught_up(settings, log3)
    text = log3.read_text()
    assert f"skipping checkpoint {newest}: truncated" in text, text[-3000:]
    assert f"restored {previous}" in text
    assert_exact(kafka, topics, ckpt_dir, stream, n)
    assert temp_files(ckpt_dir) == []  # no temp file left behind


@pytest.mark.timeout(120)
def test_all_checkpoints_corrupt_does_not_silently_restart_from_zero(
    fast_kafka, new_topic, tmp_path
):
    """Every checkpoint file corrupt (e.g. a bad disk): the worker must not quietly restart from
    zero weights at the committed offset. It should refuse to start with one clear line (or
    replay from the beginning); either way the final state must not silently differ."""
    n = 6000
    kafka = fast_kafka(max_poll_records=500)
    topics = topics_for(new_topic)
    stream = noisy_stream(n, d=8, noise=0.1, seed=3)
    send_all(kafka, topics["input"], encode_stream(stream[: n // 2]))
    ckpt_dir = tmp_path / "ckpt"
    settings = fault_settings(kafka, topics, ckpt_dir,
                              checkpoint={"every_examples": 1000, "every_seconds": 60})
    run_until_caught_up(settings, tmp_path / "first.log")
    assert committed(kafka, topics["input"]) == {0: n // 2}
    for path in ckpt_files(ckpt_dir):
        raw = bytearray(path.read_bytes())
        raw[-10] ^= 0xFF  # one flipped byte: checksum mismatch
        path.write_bytes(bytes(raw))
    assert not any(_valid(path) for path in ckpt_files(ckpt_dir))

    send_all(kafka, topics["input"], encode_stream(stream)[n // 2:])
    log2 = tmp_path / "second.log"
    proc = start_worker(settings, "--until-caught-up", log=log2)
    try:
        code = proc.wait(timeout=60)
    finally:
        reap(proc)
    if code != 0:  # refused to start: must say so in one line and touch nothing
        lines = [ln for ln in log2.read_text().splitlines() if ln.startswith("stream-perceptron:")]
        assert len(lines) == 1 and "checkpoint" in lines[0], log2.read_text()[-3000:]
        assert "Traceback" not in log2.read_text()
        assert committed(kafka, topics["input"]) == {0: n // 2}
    else:  # carried on: then it must have replayed everything, ending exactly like the core
        assert_exact(kafka, topics, ckpt_dir, stream, n)
