"""A K-class worker's batch path without a broker: class names decoded, one learner per
partition made K-class once, predictions, late labels, statistics and states."""

from __future__ import annotations

import numpy as np
import pytest

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.errors import CheckpointMismatchError
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.model.class_learner import MulticlassLearner
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from tests.unit.worker.class_rule import PlainLoop
from tests.unit.worker.test_batch import MemoryEdge

CLASSES = ["cat", "dog", 3, "owl", 0]


def _stream(n: int, seed: int = 1, k: int = 5, d: int = 4) -> list[tuple[list[float], object]]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(k, d)) * 3
    out = []
    for i in range(n):
        j = int(rng.integers(k))
        x = (centers[j] + rng.normal(size=d)).round(3).tolist()
        out.append((x, None if i % 7 == 3 else CLASSES[j]))
    return out


def _worker(tmp_path, **sections) -> tuple[Worker, MemoryEdge]:
    edge = MemoryEdge()
    model = sections.pop("model", {"multiclass": True})
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)}, model=model,
                        **sections)
    return Worker(settings, edge=edge), edge


def _records(rows, start=0):
    return [InRecord("in", 0, start + i, None, input_record(x, y, start + i), 0)
            for i, (x, y) in enumerate(rows)]


@pytest.mark.parametrize("cut", [1, 7, 100])
def test_k_classes_are_learned_as_the_plain_loop_for_any_cut(tmp_path, cut):
    rows = _stream(300)
    w, edge = _worker(tmp_path)
    records = _records(rows)
    for chunk in Batch.of(records).chunks(cut):
        w.process(chunk)
    ref = PlainLoop()
    expected, scores = [], []
    for x, y in rows:
        expected.append(ref.learn(x, y))
        scores.append(ref.score)
    learner = w.learner
    assert isinstance(learner, MulticlassLearner)
    assert list(learner.model.classes) == ref.classes
    assert learner.model.weights.tolist() == ref.weights()
    assert learner.model.intercept.tolist() == ref.b
    preds = [v for t, _, v in edge.sent if t == "predictions"]
    assert [p["prediction"] for p in preds] == [p for p, _ in expected]
    assert [p["score"] for p in preds[1:]] == scores[1:]  # the first record: no class, no score
    flags = [m if y is not None else None for (_, m), (_, y) in zip(expected, rows, strict=True)]
    assert [p["mistake"] for p in preds] == flags
    assert [p["label"] for p in preds] == [y for _, y in rows]
    for p in preds:  # the JSON types kept
        assert type(p["prediction"]) in (str, int, type(None))
        assert set(p) == {"topic", "partition", "offset", "key", "id", "prediction", "score", "runner_up",
                          "runner_up_score", "label", "mistake", "margin", "updates"}
    assert preds[-1]["updates"] == learner.model.updates == sum(m for _, m in expected)


def test_unknown_classes_and_bad_names_are_dead_letters_with_reasons(tmp_path):
    w, edge = _worker(tmp_path, model={"classes": ["a", "b", "c"], "unknown_class": "dead-letter"},
                      limits={"max_class_chars": 4})
    values = [b'{"x": [1], "y": "a"}', b'{"x": [1], "y": "zzz"}', b'{"x": [1], "y": true}',
              b'{"x": [1], "y": 2.0}', b'{"x": [1], "y": "abcde"}', b'{"x": [1], "y": "c"}', b'{"x": [1]}']
    w.process(Batch.of([InRecord("in", 0, i, None, v, 0) for i, v in enumerate(values)]))
    dead = {v["offset"]: v["error"] for t, _, v in edge.sent if t == "dead-letters"}
    assert dead == {
        1: "label 'zzz' is not one of the classes (SP_MODEL__CLASSES; SP_MODEL__UNKNOWN_CLASS=dead-letter)",
        2: "label True is a bool, not a class (a class is a string or an integer)",
        3: "label 2.0 is a float, not a class (a class is a string or an integer)",
        4: "label 'abcde' is 5 characters, over the limit of 4 (SP_LIMITS__MAX_CLASS_CHARS)",
    }
    preds = [v for t, _, v in edge.sent if t == "predictions"]
    assert [p["offset"] for p in preds] == [0, 5, 6]
    assert w.learner.model.classes == ("a", "b", "c")


def test_a_name_of_another_class_s_text_and_a_class_past_the_bound_are_dead_letters(tmp_path):
    w, edge = _worker(tmp_path, limits={"max_classes": 3})
    ys = [3, "3", "a", "b", "c", "a", 3]
    w.process(Batch.of(_records([([float(i)], y) for i, y in enumerate(ys)])))
    dead = {v["offset"]: v["error"] for t, _, v in edge.sent if t == "dead-letters"}
    assert set(dead) == {1, 4}
    assert dead[1] == "label '3' is no class: the class 3 (the integer) has that name"
    assert "max_classes=3" in dead[4] and "SP_LIMITS__MAX_CLASSES" in dead[4]
    assert w.learner.model.classes == (3, "a", "b")
    ref = PlainLoop()
    for i, y in enumerate(ys):
        if i not in dead:
            ref.learn([float(i)], y)
    assert w.learner.model.weights.tolist() == ref.weights()


def test_scores_all_and_the_statistics_record(tmp_path):
    w, edge = _worker(tmp_path, model={"classes": ["cat", "dog", 3]}, output={"scores": "all"})
    rows = [([1.0, 0.0], "cat"), ([0.0, 1.0], "dog"), ([1.0, 1.0], 3), ([2.0, 0.0], None),
            ([0.0, 2.0], "dog")]
    w.process(Batch.of(_records(rows)))
    preds = [v for t, _, v in edge.sent if t == "predictions"]
    assert all(set(p["scores"]) == {"cat", "dog", "3"} for p in preds)
    assert preds[0]["scores"] == {"cat": 0.0, "dog": 0.0, "3": 0.0} and preds[0]["prediction"] == "cat"
    st = w.partitions.state("in", 0)
    record = st.statistics(client_id="c", started=0.0, lag=None)
    assert record["classes"] == ["cat", "dog", 3]
    assert record["intercept"] is None and len(record["intercepts"]) == 3
    assert [c["labeled"] for c in record["per_class"]] == [1, 2, 1]
    assert sum(map(sum, record["confusion"])) == 4
    assert [c["predicted"] for c in record["per_class"]] == [sum(p["prediction"] == c for p in preds)
                                                             for c in ("cat", "dog", 3)]


def test_a_k_class_state_resumes_exactly_and_a_binary_worker_refuses_it(tmp_path):
    rows = _stream(120, seed=3)
    w, _ = _worker(tmp_path)
    w.process(Batch.of(_records(rows[:60])))
    state = w.partitions.state("in", 0).state()
    w2, edge2 = _worker(tmp_path)
    st2 = w2.partitions.state("in", 0)
    st2.adopt(state, w2.settings, own=True)
    w2.process(Batch.of(_records(rows[60:], 60)))
    ref = PlainLoop()
    for x, y in rows:
        ref.learn(x, y)
    assert w2.learner.model.weights.tolist() == ref.weights()
    assert list(w2.learner.model.classes) == ref.classes
    binary, _ = _worker(tmp_path, model={})
    with pytest.raises(CheckpointMismatchError, match="a binary model here"):
        binary.partitions.state("in", 0).adopt(state, binary.settings, own=True)


def test_a_binary_state_converts_to_two_classes_and_decides_as_the_binary_model(tmp_path):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(160, 3)).round(3)
    ys = [1 if x @ [1.0, -2.0, 0.5] + 0.3 > 0 else -1 for x in X]
    rows = [(x.tolist(), y) for x, y in zip(X, ys, strict=True)]
    binary, bedge = _worker(tmp_path, model={})
    binary.process(Batch.of(_records(rows[:80])))
    state = binary.partitions.state("in", 0).state()
    theta, theta0 = binary.learner.model.weights.copy(), binary.learner.model.intercept
    k, kedge = _worker(tmp_path)
    k.partitions.state("in", 0).adopt(state, k.settings, own=True)
    assert k.learner.model.classes == (-1, 1)
    assert k.learner.model.weights.tolist() == [(0.0 - theta).tolist(), theta.tolist()]
    assert k.learner.model.intercept.tolist() == [0.0 - theta0, theta0]
    bedge.sent.clear()
    binary.process(Batch.of(_records(rows[80:], 80)))
    k.process(Batch.of(_records(rows[80:], 80)))
    b_preds = [v for t, _, v in bedge.sent if t == "predictions"]
    k_preds = [v for t, _, v in kedge.sent if t == "predictions"]
    assert [p["prediction"] for p in k_preds] == [p["prediction"] for p in b_preds]
    assert [p["mistake"] for p in k_preds] == [p["mistake"] for p in b_preds]
    assert k.learner.model.weights[1].tolist() == binary.learner.model.weights.tolist()


def test_a_late_label_names_a_class_new_at_the_join(tmp_path):
    w, edge = _worker(tmp_path, labels={"pending_max": 10})
    values = [b'{"x": [1.0, 0.0], "y": "cat"}', b'{"x": [0.0, 1.0], "y": "dog"}',
              b'{"x": [1.0, 1.0], "id": "e1"}', b'{"id": "e1", "y": 7}', b'{"id": "e9", "y": 7}',
              b'{"x": [1.0, 1.0], "y": 7}']
    w.process(Batch.of([InRecord("in", 0, i, None, v, 0) for i, v in enumerate(values)]))
    outcomes = [v for t, _, v in edge.sent if t == w.settings.topics.outcomes]
    assert len(outcomes) == 1
    out = outcomes[0]
    assert out["label"] == 7 and out["prediction"] in ("cat", "dog") and out["correct"] is False
    assert out["mistake"] is True
    dead = {v["offset"]: v["error"] for t, _, v in edge.sent if t == "dead-letters"}
    assert list(dead) == [4] and "unknown id" in dead[4]
    ref = PlainLoop()
    for x, y in [([1.0, 0.0], "cat"), ([0.0, 1.0], "dog"), ([1.0, 1.0], None), ([1.0, 1.0], 7),
                 ([1.0, 1.0], 7)]:
        ref.learn(x, y)
    assert w.learner.model.classes == ("cat", "dog", 7)
    assert w.learner.model.weights.tolist() == ref.weights()
    state = w.partitions.state("in", 0).state()
    assert state.stats["classes"]["labeled"] == [1, 1, 2]


def test_checkpoint_show_prints_a_k_class_state(tmp_path):
    import json

    from click.testing import CliRunner

    from stream_perceptron.cli import main
    from stream_perceptron.state.directory import DirectoryStore

    w, _ = _worker(tmp_path / "w")
    w.process(Batch.of(_records(_stream(80, seed=6))))
    state = w.partitions.state("in", 0).state()
    store = DirectoryStore(tmp_path / "ck")
    store.save(state, store.claim("in", 0))
    res = CliRunner().invoke(main, ["checkpoint", "show", str(tmp_path / "ck")], env={},
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    shown = json.loads(res.stdout)
    model = w.learner.model
    assert shown["classes"] == list(model.classes) and shown["config"]["multiclass"] is True
    assert shown["weights"] == model.weights.tolist() and shown["intercept"] == model.intercept.tolist()
    stats = shown["stats"]
    assert stats["classes"] == list(model.classes)
    assert stats["confusion"] == w.learner.stats.snapshot(model.classes)["confusion"]
    assert stats["bound"] == w.learner.stats.snapshot()["bound"]


def test_the_docs_name_every_field_of_a_k_class_prediction_and_statistics_record(tmp_path):
    from tests.unit.worker.test_batch import _readme_section

    w, edge = _worker(tmp_path, output={"scores": "all"}, labels={"pending_max": 5})
    values = [b'{"x": [1.0], "y": "a"}', b'{"x": [2.0], "y": 3}', b'{"x": [1.5], "id": 1}',
              b'{"id": 1, "y": "a"}', b'{"x": [1.0], "y": 1.5}']
    w.process(Batch.of([InRecord("in", 0, i, b"k", v, 0) for i, v in enumerate(values)]))
    w.publish_stats()
    topics = w.settings.topics
    sections = {topics.predictions: _readme_section("## Prediction", "## Statistics"),
                topics.outcomes: _readme_section("## Outcome", "## Statistics"),
                topics.stats: _readme_section("## Statistics", "## Dead letter")}
    for topic, text in sections.items():
        names = set().union(*(set(v) for t, _, v in edge.sent if t == topic))
        assert names, f"nothing was sent to {topic}"
        missing = [n for n in sorted(names) if f"`{n}`" not in text and f'"{n}"' not in text]
        assert not missing, f"docs/records.md does not describe {missing} of the {topic} records"


def test_two_classes_named_make_the_binary_worker_with_those_names(tmp_path):
    w, edge = _worker(tmp_path, model={"classes": ["ham", "spam"]})
    values = [b'{"x": [1.0], "y": "spam"}', b'{"x": [-1.0], "y": "ham"}', b'{"x": [2.0], "y": "eggs"}']
    w.process(Batch.of([InRecord("in", 0, i, None, v, 0) for i, v in enumerate(values)]))
    assert not isinstance(w.learner, MulticlassLearner)
    preds = [v for t, _, v in edge.sent if t == "predictions"]
    assert [p["label"] for p in preds] == [1, -1]
    assert [p["class"] for p in preds] == [{1: "spam", -1: "ham"}[p["prediction"]] for p in preds]
    dead = [v["error"] for t, _, v in edge.sent if t == "dead-letters"]
    assert dead == ["unknown label 'eggs': expected 'spam' (SP_LIMITS__POSITIVE_CLASS) or 'ham'"
                    " (SP_LIMITS__NEGATIVE_CLASS)"]
