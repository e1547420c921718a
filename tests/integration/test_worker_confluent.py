"""The worker with SP_KAFKA__BACKEND=confluent-kafka, end to end on a real broker: predictions,
learning and dead letters in a thread; kill -9 at random moments and an exact replay as processes."""

from __future__ import annotations

import base64
import random
import re
import signal
import time
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")

from stream_perceptron.checkpoint import CheckpointStore  # noqa: E402
from stream_perceptron.kafka_confluent import ConfluentEdge  # noqa: E402
from stream_perceptron.reader import read_topic  # noqa: E402

from .helpers import (  # noqa: E402
    core_reference,
    encode_stream,
    noisy_stream,
    predictions_by_offset,
    run_until_caught_up,
    send_all,
    start_process,
    topics_for,
    wait_for,
    worker_settings,
)

BAD_RECORDS = [
    (b"{not json", "not valid JSON"),
    (b'{"y": 1}', "no 'x'"),
    (b'{"x": ["a", 1, 2, 3, 4, 5], "y": 1}', "x[0] is not a number"),
    (b'{"x": [1, 2, 3], "y": 1}', "x has 3 features, the model has 6"),
    (b'{"x": [1, 2, 3, 4, 5, 6], "y": "maybe"}', "unknown label 'maybe'"),
    (b"[1, 2, 3]", "must be a JSON object"),
]


def test_end_to_end_predictions_learning_and_dead_letters(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings(backend="confluent-kafka")
    topics = topics_for(new_topic)
    stream = noisy_stream(3000)
    values = encode_stream(stream, unlabeled_every=10)
    labels = [0 if i % 10 == 0 else y for i, (_, y) in enumerate(stream)]
    bad_at = {}
    for j, (raw, reason) in enumerate(BAD_RECORDS):
        pos = 5 + j * 450
        values.insert(pos, raw)
        bad_at[pos] = reason
    valid_offsets = [i for i in range(len(values)) if i not in bad_at]
    send_all(kafka, topics["input"], values)

    settings = worker_settings(kafka, topics, tmp_path / "ckpt")
    assert settings.kafka.backend == "confluent-kafka"
    started = time.monotonic()
    worker = run_until_caught_up(settings, len(values))
    print(f"\nconfluent worker: {len(values)} records caught up in {time.monotonic() - started:.1f} s"
          " (including the group join)")
    assert isinstance(worker.edge, ConfluentEdge)

    # every valid offset has exactly one prediction, equal to the core's on the same rows
    model, ref = core_reference(stream, labels)
    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(0, o) for o in valid_offsets]
    for row, offset in enumerate(valid_offsets):
        (p,) = preds[(0, offset)]
        assert p["score"] == ref.scores[row]
        assert p["prediction"] == ref.predictions[row]
        if labels[row] == 0:
            assert p["label"] is None and p["mistake"] is None
        else:
            assert p["label"] == labels[row] and p["mistake"] == bool(ref.mistakes[row])
        assert p["id"] == row and p["key"] == str(offset)

    # final weights equal the core's; offsets checkpointed and committed through the edge
    ckpt = CheckpointStore(tmp_path / "ckpt").load()
    assert ckpt.model["weights"] == model.weights.tolist()
    assert ckpt.model["intercept"] == model.intercept
    assert ckpt.model["mistakes"] == model.mistakes == worker.learner.model.mistakes
    assert ckpt.offsets == {topics["input"]: {0: len(values)}}

    # every malformed record is in the dead-letter topic with its reason, offset and bytes
    dead = {v["offset"]: v for _, _, _, v in read_topic(kafka, topics["dead_letter"])}
    assert sorted(dead) == sorted(bad_at)
    for offset, reason in bad_at.items():
        assert reason in dead[offset]["error"], (offset, dead[offset]["error"])
        assert base64.b64decode(dead[offset]["value"]) == values[offset]

    stats = [v for _, _, _, v in read_topic(kafka, topics["stats"])]
    assert max(s["seen"] for s in stats) == len(valid_offsets)


def _checkpoint_offset(ckpt_dir, topic) -> int:
    ckpt = CheckpointStore(ckpt_dir).load()
    return 0 if ckpt is None else ckpt.offsets.get(topic, {}).get(0, 0)


_SEEN = re.compile(rb"seen (\d+), labeled")


def _seen(log: Path) -> int:
    """The examples the worker reported (its statistics log line, every 500) before now."""
    found = _SEEN.findall(log.read_bytes())
    return int(found[-1]) if found else 0


def test_kill_9_at_random_moments_ends_exactly_like_an_uninterrupted_run(
    kafka_settings, new_topic, tmp_path
):
    kafka = kafka_settings(backend="confluent-kafka", max_poll_records=250)
    topics = topics_for(new_topic)
    n = 30_000
    stream = noisy_stream(n, d=8, noise=0.1, seed=11)
    send_all(kafka, topics["input"], encode_stream(stream))
    ckpt_dir = tmp_path / "ckpt"
    # The librdkafka worker learns ~80k examples/s here, in bursts: a checkpoint every 4000
    # examples leaves windows of ~50 ms, and each kill waits until the worker has gone 1000
    # examples past its checkpoint, so the outputs of those are out and are re-emitted later.
    settings = worker_settings(
        kafka, topics, ckpt_dir,
        checkpoint={"every_examples": 4000, "every_seconds": 60},
    )
    rng = random.Random(20261122)
    kills = 2
    for k in range(1, kills + 1):
        log = tmp_path / f"run-{k}.log"
        proc = start_process(settings, log=log)
        try:
            target = k * n // (kills + 1) + rng.randrange(0, n // 12)
            wait_for(lambda t=target: _checkpoint_offset(ckpt_dir, topics["input"]) >= t, 60,
                     f"checkpoint past offset {target}", every_s=0.01)
            past = _checkpoint_offset(ckpt_dir, topics["input"]) + 1000
            wait_for(lambda p=past, f=log: _seen(f) >= p, 10, f"the worker past offset {past}", every_s=0.005)
            time.sleep(rng.uniform(0.005, 0.02))  # land between checkpoints
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        assert _checkpoint_offset(ckpt_dir, topics["input"]) < n  # killed mid-stream
    log = (tmp_path / "run-1.log").read_text()
    assert "confluent-kafka" in log, log[-2000:]  # the edge that ran was the librdkafka one
    final = start_process(settings, "--until-caught-up", log=tmp_path / "final.log")
    assert final.wait(timeout=60) == 0, (tmp_path / "final.log").read_text()

    model, ref = core_reference(stream, [y for _, y in stream])
    ckpt = CheckpointStore(ckpt_dir).load()
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
