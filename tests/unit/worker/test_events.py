"""The worker on events as systems write them (SP_INPUT__FORMAT=json): a feature spec makes them
examples; predictions carry their echo fields; bad events are dead letters naming the path; late
labels join through the spec; a state made with another spec is refused."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest
from river import preprocessing

from stream_perceptron import Perceptron
from stream_perceptron.errors import CheckpointMismatchError, SettingsError
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.settings import Settings, load_settings
from stream_perceptron.worker.loop import Worker
from tests.unit.worker.fakes import FakeEdge

SPEC = {
    "label": "outcome.fraud", "positive": [True], "negative": [False], "id": "payment.id",
    "echo": ["payment.id", "user.id"],
    "numeric": {"payment.amount": {"transform": "log1p", "standardize": True}, "user.age": {}},
    "categorical": ["payment.method", "user.segments"],
}
METHODS, SEGMENTS = ["card", "wallet", "transfer"], ["web", "app", "returning", "new"]


def _events(n: int, seed: int = 0, labels: str = "all") -> list[dict]:
    """Payments; fraud when large, by transfer, from new users (noisy)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        amount = float(np.round(rng.lognormal(4, 1), 2))
        method = METHODS[rng.integers(3)]
        segments = [SEGMENTS[j] for j in rng.choice(4, size=rng.integers(1, 3), replace=False)]
        fraud = bool(amount > 80 and method == "transfer" or "new" in segments and rng.random() < 0.3)
        event = {"payment": {"id": f"p{i}", "amount": amount, "method": method},
                 "user": {"id": int(rng.integers(1000)), "age": int(rng.integers(18, 90)),
                          "segments": segments}}
        if labels == "all" or (labels == "some" and i % 3):
            event["outcome"] = {"fraud": fraud}
        out.append(event)
    return out


def _settings(tmp_path, **sections) -> Settings:
    return Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                    input={"format": "json"}, features=SPEC, **sections)


def _batch(values: list[bytes], start: int = 0) -> Batch:
    return Batch.of([InRecord("in", 0, start + i, None, v, 1000 + start + i) for i, v in enumerate(values)])


def _reference(events: list[dict]) -> tuple[Perceptron, list[float], list[dict]]:
    """A plain loop of the update over the examples the spec defines, written here apart from the
    package's extraction: the features by hand, standardized by river's StandardScaler."""
    model, scaler, scores, xs = Perceptron(), preprocessing.StandardScaler(), [], []
    for e in events:
        raw = {"payment.amount": math.log1p(e["payment"]["amount"])}
        scaler.learn_one(raw)
        x = {"payment.amount": scaler.transform_one(raw)["payment.amount"],
             "user.age": float(e["user"]["age"]), f"payment.method={e['payment']['method']}": 1.0}
        for s in e["user"]["segments"]:
            x[f"user.segments={s}"] = x.get(f"user.segments={s}", 0.0) + 1.0
        scores.append(model.score_one(x))
        if "outcome" in e:
            model.learn_one(x, 1 if e["outcome"]["fraud"] else -1)
        xs.append(x)
    return model, scores, xs


def test_events_through_a_spec_learn_as_a_plain_loop_over_the_examples_it_defines(tmp_path):
    events = _events(300)
    edge = FakeEdge()
    worker = Worker(_settings(tmp_path), edge=edge)
    values = [orjson.dumps(e) for e in events]
    for a in range(0, 300, 70):
        worker.process(_batch(values[a:a + 70], a))
    model, scores, _ = _reference(events)
    learned = worker.learner.model
    assert learned.feature_names == model.feature_names
    assert learned.weights.tolist() == model.weights.tolist() and learned.intercept == model.intercept
    predictions = edge.records("predictions")
    assert [p["score"] for p in predictions] == scores
    assert predictions[5]["echo"] == {"payment.id": "p5", "user.id": events[5]["user"]["id"]}


def test_bad_events_are_dead_letters_naming_the_path_and_good_ones_are_predicted(tmp_path):
    edge = FakeEdge()
    worker = Worker(_settings(tmp_path), edge=edge)
    good = _events(3)
    bad = [
        ({**good[0], "payment": {**good[0]["payment"], "amount": "lots"}},
         'payment.amount: expected a number or a boolean, got string "lots"'),
        ({**good[0], "outcome": {"fraud": "perhaps"}},
         'outcome.fraud: "perhaps" is neither a positive (true) nor a negative (false) value'),
        ({**good[0], "user": {**good[0]["user"], "segments": [{"a": 1}]}},
         "user.segments: a category is a string, an integer or a boolean, got object"),
    ]
    values = [orjson.dumps(good[0]), *(orjson.dumps(e) for e, _ in bad), b"[1, 2]", b"{not json",
              orjson.dumps(good[1])]
    worker.process(_batch(values))
    dead = {d["offset"]: d["error"] for d in edge.records("dead-letters")}
    assert [o for o in dead] == [1, 2, 3, 4, 5]
    for offset, (_, reason) in enumerate(bad, start=1):
        assert dead[offset].startswith(reason), dead[offset]
    assert dead[4] == "record must be a JSON object, got array" and dead[5].startswith("not valid JSON")
    assert [p["offset"] for p in edge.records("predictions")] == [0, 6]


def test_late_labels_join_events_found_through_the_spec(tmp_path):
    events = _events(40, labels="none")
    edge = FakeEdge()
    worker = Worker(_settings(tmp_path, labels={"pending_max": 100}), edge=edge)
    labels = [{"payment": {"id": e["payment"]["id"]}, "outcome": {"fraud": i % 4 == 0}}
              for i, e in enumerate(events)]
    worker.process(_batch([orjson.dumps(e) for e in events]))
    worker.process(_batch([orjson.dumps(label) for label in reversed(labels)], 40))
    outcomes = edge.records("outcomes")
    assert [o["id"] for o in outcomes] == [f"p{i}" for i in reversed(range(40))]
    assert worker.learner.stats.labeled == 40 and not edge.records("dead-letters")


def test_a_state_made_with_another_spec_is_refused_with_one_line(tmp_path):
    worker = Worker(_settings(tmp_path), edge=FakeEdge())
    worker.process(_batch([orjson.dumps(e) for e in _events(5)]))
    assert worker.checkpoint("test")
    other = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                     input={"format": "json"},
                     features={**SPEC, "numeric": {"payment.amount": {"transform": "log1p"}}})
    with pytest.raises(CheckpointMismatchError,
                       match=r"features=\w{16} there, \w{16} here \(the feature spec"):
        Worker(other, edge=FakeEdge()).restore()
    again = Worker(_settings(tmp_path), edge=FakeEdge())  # the same spec: restored, standardization too
    again.restore()
    state = again.partitions.open("in", 0)
    assert state.standardizer.get_state() == worker.partitions.assigned[("in", 0)].standardizer.get_state()


def test_the_spec_and_the_format_go_together(tmp_path, monkeypatch):
    monkeypatch.setenv("SP_INPUT__FORMAT", "json")
    with pytest.raises(SettingsError, match="SP_INPUT__FORMAT=json needs a feature spec"):
        load_settings()
    spec = tmp_path / "spec.toml"
    spec.write_text('[features]\nlabel = "ok"\nnumeric = ["n"]\n')
    monkeypatch.setenv("SP_FEATURES__SPEC", str(spec))
    assert load_settings().features.feature_spec().paths[0].text == "n"
    spec.write_text('[features]\nnumeric = {n = {transform = "sqrt"}}\n')
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert str(caught.value).count("\n") == 0 and "features.numeric.n.transform: 'sqrt'" in str(caught.value)
    monkeypatch.setenv("SP_INPUT__FORMAT", "envelope")
    spec.write_text('[features]\nnumeric = ["n"]\n')
    with pytest.raises(SettingsError, match="a feature spec .SP_FEATURES__\\*. reads events"):
        load_settings()
