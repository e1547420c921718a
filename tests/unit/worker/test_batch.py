"""The worker's batch path without a broker: an in-memory edge records what it would publish."""

from __future__ import annotations

import numpy as np
import orjson

import stream_perceptron.model.learner as learner_module
from stream_perceptron import Perceptron
from stream_perceptron.codec.inputs import input_record
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from tests.unit.model.exactness import learned


class MemoryEdge:
    """An edge that records what it would publish; at-least-once."""

    transactional = False  # the at-least-once mode
    in_transaction = False

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, dict]] = []

    def send(self, topic, key, value):
        self.sent.append((topic, key, orjson.loads(value)))

    def send_many(self, topic, keys, values):
        for key, value in zip(keys, values, strict=True):
            self.send(topic, key, value)

    def assignment(self):
        return []

    def highwater(self, topic, partition):
        return None

    def flush(self):
        pass  # everything sent is delivered at once

    def commit(self, offsets):
        pass

    def committed(self, topic, partition):
        return None

    def seek(self, topic, partition, offset):
        pass


def _worker(tmp_path) -> tuple[Worker, MemoryEdge]:
    edge = MemoryEdge()
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)})
    return Worker(settings, edge=edge), edge


def test_named_features_are_learned_exactly_in_any_chunks(tmp_path):
    rng = np.random.default_rng(5)
    names = [f"f{i}" for i in range(400)]
    rows = []
    for _ in range(300):
        picked = rng.choice(len(names), size=8, replace=False)
        x = {names[j]: float(rng.normal()) for j in picked}
        y = 1 if x.get("f1", 0.0) + sum(x.values()) > 0 else -1
        rows.append((x, y))
    records = [InRecord("in", 0, i, None, input_record(x, y, i), 0) for i, (x, y) in enumerate(rows)]
    records.insert(10, InRecord("in", 0, 999, None, b'{"x": {"a": "b"}}', 0))
    w, edge = _worker(tmp_path)
    for start in range(0, len(records), 100):
        for chunk in Batch.of(records[start : start + 100]).chunks(37):  # as run() cuts a poll batch
            w.process(chunk)
    ref = Perceptron()
    flags = [learned(ref, x, y) for x, y in rows]
    model = w.learner.model
    assert model.mistakes == ref.mistakes == sum(flags)
    assert model.feature_names == ref.feature_names
    assert np.array_equal(model.weights, ref.weights)
    preds = [v for t, _, v in edge.sent if t == "predictions"]
    assert [p["mistake"] for p in preds] == flags
    assert [p["offset"] for p in preds] == list(range(300))
    dead = [v for t, _, v in edge.sent if t == "dead-letters"]
    assert len(dead) == 1 and dead[0]["offset"] == 999 and "not a number" in dead[0]["error"]
    assert w.offsets == {"in": {0: 300}}  # the last record of the last batch, offset 299, + 1


def test_names_past_the_bound_and_overlong_names_are_dead_letters_and_index_nothing(tmp_path):
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        limits={"max_names": 5, "max_name_chars": 8})
    edge = MemoryEdge()
    w = Worker(settings, edge=edge)
    xs = [{"a": 1.0, "b": 1.0}, {"c": 1.0, "d": 1.0, "e": 1.0, "f": 1.0},  # 6 names: refused
          {"c": -1.0, "a": 2.0}, {"n" * 9: 1.0}, {"d": 1.0, "e": 1.0, "b": 0.5},  # 5 in all
          {"g": 1.0}]  # a sixth name: refused
    w.process(Batch.of([InRecord("in", 0, i, None, input_record(x, 1, i), 0) for i, x in enumerate(xs)]))
    predicted = [v["offset"] for t, _, v in edge.sent if t == settings.topics.predictions]
    dead = {v["offset"]: v["error"] for t, _, v in edge.sent if t == settings.topics.dead_letter}
    assert predicted == [0, 2, 4]
    assert dead == {
        1: "x brings 4 new feature names; the model allows 5 in all (SP_LIMITS__MAX_NAMES)",
        3: "x has a feature name of 9 characters, over the limit of 8 (SP_LIMITS__MAX_NAME_CHARS)",
        5: "x brings 1 new feature names; the model allows 5 in all (SP_LIMITS__MAX_NAMES)",
    }
    assert w.learner.model.feature_names == ["a", "b", "c", "d", "e"]
    assert w.learner.model.dim == 5  # the bound is not a width: nothing allocated ahead


def test_wide_dense_rows_are_learned_in_chunks_exactly(tmp_path, monkeypatch):
    monkeypatch.setattr(learner_module, "MATRIX_BYTES", 8 * 50 * 7)  # matrices of 7 rows at most
    rng = np.random.default_rng(6)
    X = np.round(rng.normal(size=(120, 50)), 2)
    y = np.where(X[:, :5].sum(axis=1) > 0, 1, -1)
    records = [InRecord("in", 0, i, None, input_record(X[i].tolist(), int(y[i]), i), 0) for i in range(120)]
    w, edge = _worker(tmp_path)
    w.process(Batch.of(records))
    ref = Perceptron()
    flags = [learned(ref, X[i].tolist(), int(y[i])) for i in range(120)]
    assert np.array_equal(w.learner.model.weights, ref.weights) and w.learner.model.mistakes == sum(flags)
    preds = [v for t, _, v in edge.sent if t == "predictions"]
    assert [p["mistake"] for p in preds] == flags and len(preds) == 120


def test_a_stream_mixing_named_and_dense_rows_learns_the_same_whatever_the_cuts(tmp_path):
    # Named rows are summed over their own features, dense rows over every column; a record must
    # be summed the same way whichever rows share its batch, or a replay could differ in the bits.
    rng = np.random.default_rng(9)
    names = ["c", "a", "e", "b", "d"]
    values = rng.normal(size=(240, 5)) * 10
    records = []
    for i, v in enumerate(values):
        y = 1 if v[0] - v[3] + 0.5 * v[4] > 0 else -1
        x = {names[j]: float(v[j]) for j in range(5)}
        if i % 3 == 1:
            x = dict(reversed(list(x.items())))  # the same features in another order
        if i % 4 == 3 and i > 8:  # positional rows in the model's column order (c, a, e, b, d)
            x = [float(v[j]) for j in range(5)]
        records.append(InRecord("in", 0, i, None, input_record(x, y, i), 0))
    results = []
    for cut in (1, 7, 240):
        w, edge = _worker(tmp_path / f"cut{cut}")
        for start in range(0, len(records), cut):
            w.process(Batch.of(records[start : start + cut]))
        preds = [v for t, _, v in edge.sent if t == "predictions"]
        assert len(preds) == 240
        results.append((w.learner.model.weights.tolist(), w.learner.model.intercept,
                        [(p["score"], p["mistake"]) for p in preds]))
    assert results[0] == results[1] == results[2]  # bit-identical


def _readme_section(start: str, end: str | None) -> str:
    """A section of the record formats' page, docs/records.md (to its end with ``end`` None)."""
    from pathlib import Path

    readme = (Path(__file__).parents[3] / "docs" / "records.md").read_text()
    return readme[readme.index(start) : readme.index(end) if end else None]


def test_the_readme_names_every_field_of_every_output_record(tmp_path):
    w, edge = _worker(tmp_path)
    records = [
        InRecord("in", 0, 0, b"k", input_record([1.0, 2.0], 1, 0), 0),
        InRecord("in", 0, 1, None, input_record([0.5, -1.0], None, None), 0),
        InRecord("in", 0, 2, b"k", b'{"x": "nope"}', 0),
    ]
    w.process(Batch.of(records))
    w.publish_stats()
    settings = w.settings.topics
    fields = {topic: set() for topic in (settings.predictions, settings.stats, settings.dead_letter)}
    for topic, _, value in edge.sent:
        fields[topic] |= set(value)
    sections = {
        settings.predictions: _readme_section("## Prediction", "## Statistics"),
        settings.stats: _readme_section("## Statistics", "## Dead letter"),
        settings.dead_letter: _readme_section("## Dead letter", None),
    }
    for topic, names in fields.items():
        assert names, f"nothing was sent to {topic}"
        text = sections[topic]
        missing = [n for n in sorted(names) if f"`{n}`" not in text and f'"{n}"' not in text]
        assert not missing, f"README does not describe {missing} of the {topic} records"


class _LaggingEdge(MemoryEdge):
    """Holds partitions 0 and 1 of ``in``; the fetch high-water mark of 0 is 500, of 1 unknown."""

    def assignment(self):
        return [("in", 0), ("in", 1)]

    def highwater(self, topic, partition):
        return 500 if (topic, partition) == ("in", 0) else None


def test_lag_is_the_high_water_mark_less_the_next_offset_per_known_partition(tmp_path):
    edge = _LaggingEdge()
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)})
    w = Worker(settings, edge=edge)
    w._on_assigned([("in", 0)])
    assert w.stats_record()["lag"] == {"in:0": 500}  # nothing processed: all of it
    w.process(Batch.of([InRecord("in", 0, i, None, input_record([1.0, -1.0], 1, i), 0) for i in range(300)]))
    assert w.publisher.lag() == {("in", 0): 200}
    assert w.stats_record()["lag"] == {"in:0": 200}  # partition 1: high-water mark unknown, left out
    (published,) = w.publish_stats()
    assert published["lag"] == {"in:0": 200}
    assert [v["lag"] for t, _, v in edge.sent if t == settings.topics.stats] == [{"in:0": 200}]


class _CommittedEdge(MemoryEdge):
    """Holds partition 0 of ``in``, whose group commit and high-water mark are both 200."""

    def assignment(self):
        return [("in", 0)]

    def highwater(self, topic, partition):
        return 200

    def committed(self, topic, partition):
        return 200

    def seek(self, topic, partition, offset):
        self.sought = (topic, partition, offset)


def test_a_partition_started_at_the_group_commit_has_no_lag_before_its_first_record(tmp_path):
    # a worker with a fresh checkpoint directory, given a partition another worker had processed
    edge = _CommittedEdge()
    w = Worker(Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)}), edge=edge)
    w._on_assigned([("in", 0)])
    assert edge.sought == ("in", 0, 200)
    assert w.publisher.lag() == {("in", 0): 0} and w.caught_up()
    assert w.offsets == {}  # nothing processed, so nothing to checkpoint for it
    w._on_revoked([("in", 0)])
    assert w.publisher.lag() == {("in", 0): 200}  # back to counting from 0: the start is forgotten


def test_the_first_rate_after_a_restore_counts_only_new_examples(tmp_path):
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)})
    first = Worker(settings, edge=MemoryEdge())
    records = [InRecord("in", 0, i, None, input_record([1.0, -1.0], 1, i), 0) for i in range(3000)]
    first.process(Batch.of(records))
    assert first.checkpoint("test")
    again = Worker(settings, edge=MemoryEdge())
    again.restore()
    again._on_assigned([("in", 0)])
    assert again.learner.stats.seen == 3000
    assert again.stats_record()["examples_per_s"] == 0.0  # not 3,000 over the time since start


def test_the_model_id_is_kept_across_restarts_and_new_for_a_new_model(tmp_path):
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path / "a")})
    first = Worker(settings, edge=MemoryEdge())
    first.restore()  # no checkpoint: a model that begins now
    records = [InRecord("in", 0, i, None, input_record([1.0, -1.0], 1, i), 0) for i in range(10)]
    first.process(Batch.of(records))
    assert first.checkpoint("test")
    model_id = first.stats_record()["model_id"]
    again = Worker(settings, edge=MemoryEdge())
    again.restore()
    again._on_assigned([("in", 0)])
    assert again.stats_record()["model_id"] == model_id
    elsewhere = Worker(settings.model_copy(update={"checkpoint": settings.checkpoint.model_copy(
        update={"dir": str(tmp_path / "b")})}), edge=MemoryEdge())
    elsewhere.restore()
    elsewhere._on_assigned([("in", 0)])
    assert elsewhere.stats_record()["model_id"] != model_id
