"""K classes through a real broker, on each backend: late labels naming classes and a drift alarm
on the K-class mistake stream, both at the offsets the model's own run raises them; the
statistics record's classes, per-class counts and confusion matrix."""

from __future__ import annotations

import numpy as np
import orjson

from stream_perceptron.commands.read import read_topic
from stream_perceptron.model.class_learner import MulticlassLearner
from stream_perceptron.model.class_stats import MulticlassStats
from stream_perceptron.model.drift import DriftWatch
from stream_perceptron.model.multiclass import MulticlassPerceptron
from stream_perceptron.state.directory import DirectoryStore
from tests.integration.helpers import run_until_caught_up, send_all, topics_for, worker_settings

CLASSES = ["cat", "dog", 3, "owl", 0]


def shifted(n: int, flip: int, seed: int = 12) -> tuple[np.ndarray, list[object]]:
    """Five well-apart clusters, each its own class until ``flip``; from there on each record's
    class is another cluster's, drawn at random: the mistake rate leaps."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(5, 4)) * 6
    which = rng.integers(5, size=n)
    X = (centers[which] + rng.normal(size=(n, 4)) * 0.3).round(4)
    shift = np.where(np.arange(n) >= flip, rng.integers(1, 5, size=n), 0)
    return X, [CLASSES[(j + s) % 5] for j, s in zip(which.tolist(), shift.tolist(), strict=True)]


def test_late_labels_and_a_drift_alarm_with_k_classes(kafka_settings, new_topic, tmp_path, backend):
    n, flip = 1000, 500
    X, names = shifted(n, flip)
    reference = MulticlassLearner(MulticlassPerceptron(), MulticlassStats(), DriftWatch("adwin"))
    step = reference.step(X, names)  # the joins learn the events in label order: here, the events'
    assert step.alarms and flip <= step.alarms[0].row
    values = []  # each event unlabeled, its label right after it
    for i, (x, label) in enumerate(zip(X, names, strict=True)):
        values += [orjson.dumps({"x": x.tolist(), "id": i}), orjson.dumps({"id": i, "y": label})]
    kafka = kafka_settings(backend=backend, max_poll_records=300)
    topics = {**topics_for(new_topic), "outcomes": new_topic()}
    send_all(kafka, topics["input"], values, keys=[str(i // 2).encode() for i in range(len(values))])
    settings = worker_settings(kafka, topics, tmp_path, labels={"pending_max": 10_000},
                               model={"multiclass": True}, output={"scores": "all"})
    run_until_caught_up(settings, len(values), timeout_s=60)

    events = [v for _, _, _, v in read_topic(kafka, topics["stats"]) if v.get("event") == "drift"]
    assert [(e["offset"], e["labeled"], e["rate_after"]) for e in events] == [
        (2 * a.row + 1, a.labeled, a.rate_after) for a in step.alarms]
    outcomes = [v for _, _, _, v in read_topic(kafka, topics["outcomes"])]
    assert [o["label"] for o in outcomes] == names  # the JSON types kept: 3 and 0 are integers
    assert [o["mistake"] for o in outcomes] == step.result.mistakes.tolist()
    assert all(o["correct"] == (o["prediction"] == o["label"]) for o in outcomes)
    predictions = [v for _, _, _, v in read_topic(kafka, topics["predictions"])]
    assert len(predictions) == n and all(p["label"] is None for p in predictions)
    assert [o["prediction"] for o in outcomes] == [p["prediction"] for p in predictions]
    assert all(set(p["scores"]) <= {str(c) for c in CLASSES} for p in predictions)

    state = DirectoryStore(tmp_path).load(topics["input"], 0)
    assert state.model["classes"] == list(reference.model.classes)
    assert state.model["weights"] == reference.model.weights.tolist()
    stats = [v for _, _, _, v in read_topic(kafka, topics["stats"]) if "event" not in v][-1]
    assert stats["classes"] == list(reference.model.classes)
    assert stats["confusion"] == reference.stats.snapshot(reference.model.classes)["confusion"]
    assert [c["labeled"] for c in stats["per_class"]] == [names.count(c) for c in stats["classes"]]
    assert stats["drifts"] == len(step.alarms) and stats["intercept"] is None
