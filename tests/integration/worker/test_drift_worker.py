"""Drift alarms through a real broker: a worker on a stream whose concept flips publishes a drift
event with the agreed fields at the offset the model raises it, and a worker restarted from a
stored state taken before the flip replays the same alarms at the same offsets; a late label
whose join raises an alarm publishes it at the label record's offset."""

from __future__ import annotations

import shutil

import numpy as np
import orjson

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.commands.read import read_topic
from stream_perceptron.model.drift import DriftWatch
from stream_perceptron.model.learner import Learner
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.model.stats import RunningStats
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.worker.loop import Worker
from tests.integration.helpers import run_until_caught_up, send_all, topics_for, worker_settings

N, FLIP, FIRST = 3000, 1500, 1000


def flipped(n: int = N, flip: int = FLIP, d: int = 4, seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    """Rows separable with margin 0.2 by a hyperplane whose labels all turn at ``flip``."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    X = rng.normal(size=(n, d))
    s = X @ w
    X += np.outer(np.where(np.abs(s) < 0.2, np.where(s < 0, -0.2, 0.2) - s, 0.0), w)
    y = np.where(X @ w > 0, 1, -1).astype(np.int8)
    y[flip:] = -y[flip:]
    return X, y


def drift_events(kafka, topic: str) -> list[dict]:
    return [v for _, _, _, v in read_topic(kafka, topic) if v.get("event") == "drift"]


def test_a_concept_flip_raises_a_drift_event_and_a_restart_replays_it(kafka_settings, new_topic, tmp_path):
    X, y = flipped()
    reference = Learner(Perceptron(), RunningStats(), DriftWatch("adwin"))
    step = reference.step(X, y)
    expected = [(a.row, a.rate_before, a.rate_after, a.labeled) for a in step.alarms]
    assert expected and FLIP <= expected[0][0] < FLIP + 200  # the model's own alarm, after the flip

    kafka = kafka_settings(max_poll_records=250)
    topics = topics_for(new_topic)
    values = [input_record(x.tolist(), int(label), i) for i, (x, label) in enumerate(zip(X, y, strict=True))]
    send_all(kafka, topics["input"], values[:FIRST])
    settings = worker_settings(kafka, topics, tmp_path / "a", checkpoint={"every_examples": 100_000})
    run_until_caught_up(settings, FIRST, timeout_s=30)  # stops with a state at offset FIRST
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    send_all(kafka, topics["input"], values[FIRST:])
    worker = run_until_caught_up(settings, N - FIRST, timeout_s=30)

    events = drift_events(kafka, topics["stats"])
    assert [(e["offset"], e["rate_before"], e["rate_after"], e["labeled"]) for e in events] == expected
    first = events[0]
    assert set(first) == {"event", "topic", "partition", "offset", "detector", "stream", "rate_before",
                          "rate_after", "drifts", "labeled", "model_id", "client_id", "ts"}
    assert (first["topic"], first["partition"], first["detector"], first["stream"], first["drifts"]) == (
        topics["input"], 0, "adwin", "mistakes", 1)
    assert first["rate_after"] > first["rate_before"]
    assert first["model_id"] == worker.held[(topics["input"], 0)].model_id
    stats = [v for _, _, _, v in read_topic(kafka, topics["stats"]) if "event" not in v]
    assert stats[-1]["drifts"] == len(expected) and stats[-1]["last_drift_offset"] == expected[-1][0]
    stored = DirectoryStore(tmp_path / "a").load(topics["input"], 0)
    assert stored.stats["drift"]["drifts"] == len(expected)

    # the copy of the state at offset FIRST, restored by another worker: the same alarms again
    replay_topics = {**topics, "stats": new_topic()}
    replay = worker_settings(kafka, replay_topics, tmp_path / "b", checkpoint={"every_examples": 100_000})
    assert isinstance(run_until_caught_up(replay, N - FIRST, timeout_s=30), Worker)
    again = drift_events(kafka, replay_topics["stats"])
    assert [(e["offset"], e["rate_before"], e["rate_after"], e["drifts"]) for e in again] == [
        (e["offset"], e["rate_before"], e["rate_after"], e["drifts"]) for e in events]


def test_a_late_label_that_raises_an_alarm_publishes_it_at_the_label_records_offset(
        kafka_settings, new_topic, tmp_path):
    n, flip = 1200, 600
    X, y = flipped(n, flip)
    reference = Learner(Perceptron(), RunningStats(), DriftWatch("adwin"))
    step = reference.step(X, y)  # the joins learn the events in label order: here, the events' order
    assert step.alarms
    values = []  # each event unlabeled, its label right after it
    for i, (x, label) in enumerate(zip(X, y, strict=True)):
        values += [orjson.dumps({"x": x.tolist(), "id": i}), orjson.dumps({"id": i, "y": int(label)})]
    kafka = kafka_settings()
    topics = topics_for(new_topic)
    send_all(kafka, topics["input"], values, keys=[str(i // 2).encode() for i in range(len(values))])
    settings = worker_settings(kafka, topics, tmp_path, labels={"pending_max": 10_000})  # late labels on
    run_until_caught_up(settings, len(values), timeout_s=30)
    events = drift_events(kafka, topics["stats"])
    assert [(e["offset"], e["labeled"], e["rate_after"]) for e in events] == [
        (2 * a.row + 1, a.labeled, a.rate_after) for a in step.alarms]
