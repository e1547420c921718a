"""With SP_LIMITS__POSITIVE_CLASS / NEGATIVE_CLASS set, each prediction names its class: labels
in, labels out. ``prediction`` and ``label`` stay the seeds' signs."""

from __future__ import annotations

import orjson

from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from tests.unit.worker.test_batch import MemoryEdge

ROWS = [([1.0, 2.0], "spam"), ([-1.0, 0.5], "ham"), ([2.0, -1.0], None), ([-2.0, -2.0], "ham"),
        ([0.5, 3.0], None), ([3.0, 1.0], "spam")]


def _predictions(tmp_path, **limits) -> list[dict]:
    edge = MemoryEdge()
    w = Worker(Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        limits=limits), edge=edge)
    values = [orjson.dumps({"x": x, **({} if y is None else {"y": y})}) for x, y in ROWS]
    w.process(Batch.of([InRecord("in", 0, i, None, v, 0) for i, v in enumerate(values)]))
    return [v for t, _, v in edge.sent if t == "predictions"]


def test_each_prediction_names_its_class_when_the_classes_are_named(tmp_path):
    preds = _predictions(tmp_path, positive_class="spam", negative_class="ham")
    assert len(preds) == len(ROWS)
    assert [p["class"] for p in preds] == ["spam" if p["prediction"] == 1 else "ham" for p in preds]
    assert {p["class"] for p in preds} == {"spam", "ham"}  # both classes are predicted here
    assert [p["label"] for p in preds] == [{"spam": 1, "ham": -1}.get(y) for _, y in ROWS]


def test_a_class_without_a_name_is_null_and_no_names_means_no_field(tmp_path):
    named = _predictions(tmp_path / "a", positive_class="spam")
    assert [p["class"] for p in named] == ["spam" if p["prediction"] == 1 else None for p in named]
    plain = _predictions(tmp_path / "b")
    assert all("class" not in p for p in plain)
