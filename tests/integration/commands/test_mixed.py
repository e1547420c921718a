"""``stream-perceptron mixed`` over a broker: a worker mixes three partitions; the command prints
each partition's newest mix, which is the last adoption the model topic logs for it and, where
the partition's last labeled record was a mixing point, its stored weights; its scores are a
perceptron's with those weights, bit for bit; ``--follow`` prints the mixes a second run makes,
as they come, and exits 0 on SIGTERM; a missing topic is one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import uuid

import numpy as np
from click.testing import CliRunner

from stream_perceptron import Perceptron
from stream_perceptron.cli import main
from stream_perceptron.worker.stores import open_store
from tests.integration.helpers import (
    encode_stream,
    mixing_records,
    noisy_stream,
    run_until_caught_up,
    send_all,
    topics_for,
    wait_for,
    worker_env,
    worker_settings,
)

PARTS, HALF, EVERY, D = 3, 60, 20, 4  # each run: HALF labeled records a partition, 3 mixing points
ROWS = [[0.5, -1.0, 0.25, 2.0], [-0.1, 0.2, 0.3, -0.4]]


def _last_logged(kafka, model_topic: str, topic: str) -> dict[int, dict]:
    """Each partition's last adoption, as its newest model-topic record logs it."""
    newest = {r["partition"]: r for r in mixing_records(kafka, model_topic) if r["topic"] == topic}
    return {p: r["log"][-1] for p, r in newest.items()}


def _check(lines: list[dict], settings, model_topic: str, topic: str, offset: int) -> None:
    """Each partition's line is its last logged adoption (at ``offset``) and its stored state."""
    kafka = settings.kafka
    assert [(x["topic"], x["partition"]) for x in lines] == [(topic, p) for p in range(PARTS)]
    logged = _last_logged(kafka, model_topic, topic)
    states = open_store(settings, partitions=None)
    try:
        stored = {p: states.load(topic, p) for p in range(PARTS)}
    finally:
        states.close()
    for x in lines:
        p, entry = x["partition"], logged[x["partition"]]
        assert (x["epoch"], x["offset"]) == (entry["epoch"], entry["offset"]) == (offset // EVERY, offset)
        for field in ("weights", "intercept", "partitions", "mu"):
            assert x[field] == entry["mix"][field]
        # the partition's last labeled record was its mixing point: it holds the mix, bit for bit
        state = stored[p]
        assert state is not None and state.offsets == {topic: {p: offset}}
        assert (x["weights"], x["intercept"]) == (state.model["weights"], state.model["intercept"])
        model = Perceptron()
        model.set_state({"weights": np.array(state.model["weights"]), "intercept": state.model["intercept"],
                         "mistakes": 0})
        assert x["scores"] == [model.score_one(np.array(r)) for r in ROWS]
        assert x["predictions"] == [1 if s > 0 else -1 for s in x["scores"]]
    assert any(len(x["partitions"]) > 1 for x in lines)  # partitions were mixed


def test_mixed_prints_each_partitions_newest_mix_and_follows_new_ones(fast_kafka, new_topic, tmp_path):
    kafka = fast_kafka(max_poll_records=50)
    topics = topics_for(new_topic, partitions=PARTS)
    model_topic = new_topic()
    settings = worker_settings(kafka, topics, tmp_path / "states", mix={"every_examples": EVERY,
                                                                        "topic": model_topic})
    stream = noisy_stream(PARTS * 2 * HALF, d=D, noise=0.1, seed=5)
    values = {p: encode_stream(stream[p * 2 * HALF:(p + 1) * 2 * HALF]) for p in range(PARTS)}
    for p in range(PARTS):
        send_all(kafka, topics["input"], values[p][:HALF], partition=p)
    run_until_caught_up(settings, PARTS * HALF, timeout_s=30)

    env = worker_env(settings)
    score = [arg for r in ROWS for arg in ("--score", json.dumps(r))]
    res = CliRunner().invoke(main, ["mixed", *score], env=env)
    assert res.exit_code == 0, res.output
    _check([json.loads(x) for x in res.stdout.splitlines()], settings, model_topic, topics["input"], HALF)

    follow = subprocess.Popen([sys.executable, "-m", "stream_perceptron.cli", "mixed", "--follow", *score],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[dict] = []
    reader = threading.Thread(target=lambda: lines.extend(json.loads(x) for x in follow.stdout), daemon=True)
    reader.start()
    try:
        wait_for(lambda: len(lines) >= PARTS, 20, "the newest mixes", every_s=0.1)
        for p in range(PARTS):
            send_all(kafka, topics["input"], values[p][HALF:], partition=p)
        run_until_caught_up(settings, PARTS * HALF, timeout_s=30)
        wait_for(lambda: len(lines) >= PARTS + PARTS * HALF // EVERY, 10, "every new mix", every_s=0.1)
    finally:
        follow.send_signal(signal.SIGTERM)
        code = follow.wait(timeout=10)
        reader.join(5)
        err = follow.stderr.read()
        follow.stdout.close()
        follow.stderr.close()
    assert code == 0, err
    # the mixes of the first run, then each of the second's as it came: versions 4, 5, 6
    assert [x["epoch"] for x in lines[:PARTS]] == [HALF // EVERY] * PARTS
    new = lines[PARTS:]
    assert sorted((x["partition"], x["epoch"]) for x in new) == [
        (p, e) for p in range(PARTS) for e in range(HALF // EVERY + 1, 2 * HALF // EVERY + 1)]
    assert all(x["offset"] == x["epoch"] * EVERY for x in new)
    _check([next(x for x in reversed(new) if x["partition"] == p) for p in range(PARTS)], settings,
           model_topic, topics["input"], 2 * HALF)


def test_mixed_on_a_missing_model_topic_is_one_line(kafka_bootstrap):
    missing = f"test-model-{uuid.uuid4().hex[:12]}"
    env = {"SP_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap, "SP_MIX__TOPIC": missing}
    for follow in ([], ["--follow"]):
        res = CliRunner().invoke(main, ["mixed", *follow], env=env)
        assert res.exit_code == 1 and res.stdout == ""
        assert res.stderr == (f"stream-perceptron: the model topic {missing} does not exist (SP_MIX__TOPIC):"
                              " a worker creates it when it starts with SP_MIX__EVERY_EXAMPLES > 0\n")
