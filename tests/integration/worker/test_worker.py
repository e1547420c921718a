"""The worker end to end on a real broker: predictions, learning, statistics, dead letters.

The end-to-end test runs once per Kafka backend (``SP_KAFKA__BACKEND``). The settings tests
after it exercise the worker's decoding and output choices, which do not depend on the edge:
they run on the default backend (kafka-python).
"""

from __future__ import annotations

import base64
import time

import numpy as np
import pytest

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.commands.read import read_topic
from stream_perceptron.state.directory import DirectoryStore
from tests.integration.conftest import EDGES
from tests.integration.helpers import (
    core_reference,
    edge_class,
    encode_stream,
    noisy_stream,
    predictions_by_offset,
    run_until_caught_up,
    send_all,
    topics_for,
    worker_settings,
)

BAD_RECORDS = [
    (b"{not json", "not valid JSON"),
    (b'{"y": 1}', "no 'x'"),
    (b'{"x": ["a", 1, 2, 3, 4, 5], "y": 1}', "x[0] is not a number"),
    (b'{"x": [1e13, 1, 2, 3, 4, 5], "y": 1}', "over the limit of 1e+12"),
    (b'{"x": [1e999, 1, 2, 3, 4, 5], "y": 1}', "not valid JSON"),
    (b'{"x": [1, 2, 3], "y": 1}', "x has 3 features, the model has 6"),
    (b'{"x": [1, 2, 3, 4, 5, 6], "y": "maybe"}', "unknown label 'maybe'"),
    (b'{"x": [1, 2, 3, 4, 5, 6], "y": 1, "pad": "' + b"z" * 5000 + b'"}', "over the limit of 4096"),
    (b"[1, 2, 3]", "must be a JSON object"),
]


@pytest.mark.parametrize("backend", EDGES, indirect=True)
def test_end_to_end_predictions_learning_statistics_and_dead_letters(
    backend, kafka_settings, new_topic, tmp_path
):
    kafka = kafka_settings(backend=backend)
    topics = topics_for(new_topic)
    stream = noisy_stream(3000)
    values = encode_stream(stream, unlabeled_every=10)
    labels = [0 if i % 10 == 0 else y for i, (_, y) in enumerate(stream)]
    # malformed records of every kind, spread through the stream (after the first valid one)
    bad_at = {}
    for j, (raw, reason) in enumerate(BAD_RECORDS):
        pos = 5 + j * 300
        values.insert(pos, raw)
        bad_at[pos] = reason
    valid_offsets = [i for i in range(len(values)) if i not in bad_at]
    send_all(kafka, topics["input"], values)

    settings = worker_settings(kafka, topics, tmp_path / "ckpt", limits={"max_record_bytes": 4096})
    assert backend.startswith(settings.kafka.backend)
    started = time.monotonic()
    worker = run_until_caught_up(settings, len(values))
    print(f"\n{backend} worker: {len(values)} records caught up in {time.monotonic() - started:.1f} s"
          " (including the group join)")
    assert isinstance(worker.edge, edge_class(backend))  # the edge that ran is the backend's

    # every valid offset has exactly one prediction; it equals the core's result on the same rows
    model, ref = core_reference(stream, labels)
    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(0, o) for o in valid_offsets]
    for row, offset in enumerate(valid_offsets):
        (p,) = preds[(0, offset)]
        assert p["score"] == ref.scores[row]
        assert p["prediction"] == ref.predictions[row]
        if labels[row] == 0:
            assert p["label"] is None and p["mistake"] is None and p["margin"] is None
        else:
            assert p["label"] == labels[row] and p["mistake"] == bool(ref.mistakes[row])
        assert p["id"] == row and p["key"] == str(offset)
    assert preds[(0, valid_offsets[-1])][0]["updates"] == model.mistakes

    # unlabeled records were predicted but not learned: the core (which skips them) agrees
    ckpt = DirectoryStore(tmp_path / "ckpt").load(topics["input"], 0)
    assert ckpt.model["weights"] == model.weights.tolist()
    assert ckpt.model["intercept"] == model.intercept
    assert ckpt.model["mistakes"] == model.mistakes == worker.learner.model.mistakes
    assert ckpt.offsets == {topics["input"]: {0: len(values)}}
    assert ckpt.stats["labeled"] == sum(1 for v in labels if v != 0)

    # the last statistics record agrees with the checkpoint
    stats = [v for _, _, _, v in read_topic(kafka, topics["stats"]) if "event" not in v]  # no drift events
    last = max(stats, key=lambda r: r["seen"])
    assert last["mistakes"] == ckpt.model["mistakes"] == ckpt.stats["mistakes"]
    assert last["seen"] == ckpt.stats["seen"] == len(valid_offsets)
    assert last["labeled"] == ckpt.stats["labeled"]
    assert last["offsets"] == {topics["input"]: {"0": len(values)}}
    assert last["dead_letters"] == len(BAD_RECORDS)
    assert last["mistake_rate"] == last["mistakes"] / last["labeled"]
    for key in ("window_mistake_rate", "ewma_mistake_rate", "margin_min", "margin_mean", "R"):
        assert last[key] is not None

    # every malformed record is in the dead-letter topic with its reason, offset and bytes
    dead = {v["offset"]: v for _, _, _, v in read_topic(kafka, topics["dead_letter"])}
    assert sorted(dead) == sorted(bad_at)
    for offset, reason in bad_at.items():
        assert reason in dead[offset]["error"], (offset, dead[offset]["error"])
        assert base64.b64decode(dead[offset]["value"]) == values[offset]
        assert dead[offset]["topic"] == topics["input"] and dead[offset]["partition"] == 0


def test_prediction_output_setting_unlabeled_only(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topics = topics_for(new_topic)
    stream = noisy_stream(200)
    send_all(kafka, topics["input"], encode_stream(stream, unlabeled_every=4))
    settings = worker_settings(kafka, topics, tmp_path, output={"predictions": "unlabeled"})
    worker = run_until_caught_up(settings, 200)
    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(o for _, o in preds) == list(range(0, 200, 4))
    assert worker.learner.stats.labeled == 150


def test_named_features_and_class_names(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topics = topics_for(new_topic)
    rng = np.random.default_rng(0)
    values, rows = [], []
    for i in range(300):
        x = {"a": float(rng.normal()), "b": float(rng.normal())}
        if i % 3 == 0:
            x["c"] = 1.0
        y = "spam" if x["a"] - x["b"] > 0 else "ham"
        values.append(input_record(x, y, i))  # type: ignore[arg-type]
        rows.append((x, 1 if y == "spam" else -1))
    send_all(kafka, topics["input"], values)
    settings = worker_settings(kafka, topics, tmp_path,
                               limits={"positive_class": "spam", "negative_class": "ham"})
    worker = run_until_caught_up(settings, 300)
    from stream_perceptron import Perceptron
    ref = Perceptron()
    for x, y in rows:
        ref.learn_one(x, y)
    assert worker.learner.model.feature_names == ["a", "b", "c"]
    assert worker.learner.model.weights.tolist() == ref.weights.tolist()
    assert worker.learner.model.mistakes == ref.mistakes
