"""The batch plan: its two replay-critical rules as properties of the pure function, and a random
stream of events, late labels and mixing points processed through plans (batches cut anywhere)
giving the outputs and states of the record-by-record references."""

from __future__ import annotations

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron import Perceptron
from stream_perceptron.codec.inputs import input_record
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from stream_perceptron.worker.plan import Join, Learn, Mix, join_points, mix_points, plan
from tests.unit.model.exactness import learned
from tests.unit.worker.fakes import FakeEdge, MemoryModelTopic

# -- the pure function ------------------------------------------------------------------------


@st.composite
def batches(draw):
    """A batch's layout: each position a learnable row (labeled or not) or a label record; where
    runs vectorized apart begin; the mixing interval and the labeled examples still due."""
    kinds = draw(st.lists(st.sampled_from(["labeled", "unlabeled", "label"]), max_size=40))
    rows = [i for i, k in enumerate(kinds) if k != "label"]
    labeled = [kinds[i] == "labeled" for i in rows]
    labels = [i for i, k in enumerate(kinds) if k == "label"]
    breaks = draw(st.sets(st.integers(0, max(len(rows), 1)))) if rows else set()
    every = draw(st.integers(0, 6))
    remaining = draw(st.integers(1, every)) if every else 0
    return rows, labeled, labels, sorted(breaks), every, remaining


def _trace(segments):
    """The plan as a sequence of events: ("row", k), ("join", i), ("mix", k)."""
    out = []
    for seg in segments:
        if isinstance(seg, Learn):
            assert seg.start < seg.stop
            out += [("row", k) for k in range(seg.start, seg.stop)]
        elif isinstance(seg, Join):
            out.append(("join", seg.position))
        else:
            assert isinstance(seg, Mix)
            out.append(("mix", seg.after))
    return out


def _reference(rows, labeled, labels, every, remaining):
    """The record-by-record order: each batch position in turn; a mixing point right after the
    E-th labeled row since the last."""
    out, due, k, kinds = [], remaining, 0, dict.fromkeys(labels, "label")
    for i in range(max([*rows, *labels], default=-1) + 1):
        if kinds.get(i) == "label":
            out.append(("join", i))
        elif k < len(rows) and rows[k] == i:
            out.append(("row", k))
            if every and labeled[k]:
                due -= 1
                if due == 0:
                    out.append(("mix", k))
                    due = every
            k += 1
    return out


@settings(max_examples=300, deadline=None)
@given(batches())
def test_a_plan_is_the_record_by_record_order(layout):
    rows, labeled, labels, breaks, every, remaining = layout
    segments = plan(rows, labeled, labels, breaks=breaks, every=every, remaining=remaining)
    assert _trace(segments) == _reference(rows, labeled, labels, every, remaining)


@settings(max_examples=300, deadline=None)
@given(batches())
def test_no_run_of_learned_rows_crosses_a_break_a_label_or_a_mixing_point(layout):
    rows, labeled, labels, breaks, every, remaining = layout
    segments = plan(rows, labeled, labels, breaks=breaks, every=every, remaining=remaining)
    cuts = set(breaks) | {k for k, _ in join_points(rows, labels)}
    cuts |= {k + 1 for k in mix_points(labeled, every, remaining)}
    for seg in segments:
        if isinstance(seg, Learn):
            assert not any(seg.start < c < seg.stop for c in cuts), (seg, cuts)


@given(st.lists(st.booleans(), max_size=60), st.integers(1, 7), st.data())
def test_a_mixing_point_follows_every_e_th_labeled_row(labeled, every, data):
    remaining = data.draw(st.integers(1, every))
    points = mix_points(labeled, every, remaining)
    counts = np.cumsum(labeled)
    assert points == [k for k, flag in enumerate(labeled)
                      if flag and (counts[k] - remaining) % every == 0 and counts[k] >= remaining]


# -- through the worker ----------------------------------------------------------------------


@st.composite
def streams(draw):
    """One partition's records: events (dense, 3 features; labeled, unlabeled, or unlabeled with
    an id), label records for ids seen (or not), and bad records; and where polls cut it."""
    n = draw(st.integers(5, 60))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    values, ids = [], []
    for i in range(n):
        kind = draw(st.sampled_from(["labeled", "labeled", "unlabeled", "event", "label", "bad"]))
        x = np.round(rng.normal(size=3), 2).tolist()
        y = 1 if x[0] - x[1] + 0.3 > 0 else -1
        if kind == "labeled":
            values.append(input_record(x, y, i))
        elif kind == "unlabeled":
            values.append(input_record(x, None, None))
        elif kind == "event":
            values.append(input_record(x, None, i))
            ids.append((i, y))
        elif kind == "label" and ids:
            rid, label = ids.pop(draw(st.integers(0, len(ids) - 1)))
            values.append(orjson.dumps({"id": rid, "y": label}))
        else:
            values.append(b'{"x": [1.0, "two", 3.0], "y": 1}')
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=8)))
    return values, cuts


def _worker(tmp_path, every: int) -> tuple[Worker, FakeEdge, MemoryModelTopic]:
    edge, topic = FakeEdge(), MemoryModelTopic()
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        labels={"pending_max": 1000}, mix={"every_examples": every})
    return Worker(settings, edge=edge, model_topic=topic), edge, topic


def _run(tmp_path, values, cuts, every):
    worker, edge, topic = _worker(tmp_path, every)
    records = [InRecord("in", 0, i, str(i).encode(), v, 1000 + i) for i, v in enumerate(values)]
    for a, b in zip([0, *cuts], [*cuts, len(records)], strict=True):
        worker.process(Batch.of(records[a:b]))
    outputs = {t: edge.records(t) for t in ("predictions", "outcomes", "dead-letters")}
    outputs["model"] = topic.written()
    for record in outputs["model"]:
        record.pop("ts")
    model_state, stats_state = worker.learner.state()
    return outputs, model_state, {k: v for k, v in stats_state.items() if k != "drift"}


@settings(max_examples=40, deadline=None)
@given(streams(), st.sampled_from([0, 2, 5]))
def test_batches_cut_anywhere_give_what_one_record_per_batch_gives(tmp_path_factory, stream, every):
    values, cuts = stream
    planned = _run(tmp_path_factory.mktemp("planned"), values, cuts, every)
    one_by_one = _run(tmp_path_factory.mktemp("one"), values, list(range(1, len(values))), every)
    assert planned == one_by_one


@settings(max_examples=40, deadline=None)
@given(streams())
def test_the_plans_give_a_plain_loop_of_the_update_over_events_and_late_labels(tmp_path_factory, stream):
    values, cuts = stream
    (outputs, model_state, _) = _run(tmp_path_factory.mktemp("planned"), values, cuts, 0)
    model, kept, scores, joined = Perceptron(), {}, [], []
    for value in values:
        record = orjson.loads(value)
        x = record.get("x")
        if isinstance(x, list) and all(isinstance(v, float) for v in x):
            scores.append(model.score_one(x))
            if record.get("y") is not None:
                model.learn_one(x, record["y"])
            elif record.get("id") is not None:
                kept[record["id"]] = x
        elif "x" not in record:  # a label record: learns its event's features now
            joined.append(learned(model, kept.pop(record["id"]), record["y"]))
    assert [p["score"] for p in outputs["predictions"]] == scores
    assert [o["mistake"] for o in outputs["outcomes"]] == joined
    assert model_state["weights"] == model.weights.tolist()
    assert model_state["intercept"] == model.intercept and model_state["mistakes"] == model.mistakes
