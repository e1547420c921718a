"""A stream of events whose labels arrive late, and what a worker must make of it, computed
independently of the worker: the seeds' perceptron (``y(θ·x+θ0) ≤ 0`` → ``θ += y·x``,
``θ0 += y``) applied in stream order to the ordinary labeled records and, at each label record,
to the features its event was predicted with; the pending store's rules as the README states
them (count, age by record timestamps; the oldest dropped first; a finished id remembered among
the last ``SP_LABELS__PENDING_MAX``).

Features are small integers, so every score is an exact float64 and the worker's weights must
equal these bit for bit, whatever its summation order.
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import orjson
from kafka import KafkaProducer

from stream_perceptron.kafka.admin import client_config
from stream_perceptron.settings import KafkaSettings

D = 4
# an hour ago, to the second: Apache Kafka deletes records older than the topic's retention (7
# days) by their timestamps, and refuses ones too far in the future
BASE_MS = (int(time.time()) - 3_600) * 1_000
STEP_MS = 10


@dataclass
class Record:
    key: bytes
    value: dict[str, Any]
    ts: int


def late_stream(n_events: int, flood: int, *, ttl_ms: int, seed: int = 0) -> list[Record]:
    """``n_events`` events (id, x, no y) whose labels come later in shuffled order, ordinary
    labeled and unlabeled records between them; a label for an id never sent and one for an id
    already labeled; a jump of the timestamps past ``ttl_ms`` (the events still waiting expire)
    and labels for two of them; then ``flood`` events never labeled, labels for one forgotten,
    one expired and one still kept among them, and a last ordinary record."""
    rng = random.Random(seed)
    w = [rng.choice([-2, -1, 1, 2]) for _ in range(D)]

    def features() -> list[int]:
        return [rng.randint(-3, 3) for _ in range(D)]

    def label(v: list[int]) -> int:
        return 1 if sum(a * b for a, b in zip(w, v, strict=True)) + 1 > 0 else -1

    values: list[dict[str, Any]] = []
    kept: dict[str, list[int]] = {}
    waiting: list[str] = []
    last = ""
    for i in range(n_events):
        rid = f"e{i}"
        kept[rid] = features()
        values.append({"id": rid, "x": kept[rid]})
        waiting.append(rid)
        if i % 4 == 0:
            v = features()
            values.append({"x": v, "y": label(v), "id": i})  # labeled at once: learned as today
        if i % 9 == 0:
            values.append({"x": features()})  # no id, no label: predicted only
        while waiting and rng.random() < 0.45:
            rid = waiting.pop(rng.randrange(len(waiting)))
            values.append({"id": rid, "y": label(kept[rid])})
            last = rid
    values.append({"id": "never-sent", "y": 1})
    values.append({"id": last, "y": 1})  # its second label
    jump = len(values)
    values.append({"x": features(), "y": 1})  # its timestamp jumps past the TTL
    for rid in waiting[:2]:
        values.append({"id": rid, "y": label(kept[rid])})
    for j in range(flood):
        values.append({"id": f"f{j}", "x": features()})
    if flood:
        for j in (0, flood - 150, flood - 1):
            values.append({"id": f"f{j}", "y": 1})
    values.append({"x": features(), "y": -1})
    out, ts = [], BASE_MS
    for k, value in enumerate(values):
        ts += ttl_ms + 1_000 if k == jump else STEP_MS
        rid = value.get("id")
        out.append(Record(str(rid if rid is not None else k).encode(), value, ts))
    return out


def send_stream(kafka: KafkaSettings, topic: str, records: list[Record]) -> None:
    """Send ``records`` in order to partition 0 of ``topic``, each with its own timestamp."""
    producer = KafkaProducer(**client_config(kafka), acks="all", linger_ms=5)
    try:
        for r in records:
            producer.send(topic, value=orjson.dumps(r.value), key=r.key, partition=0, timestamp_ms=r.ts)
        producer.flush()
    finally:
        producer.close()


@dataclass
class Expected:
    theta: list[int] = field(default_factory=lambda: [0] * D)
    theta0: int = 0
    mistakes: int = 0
    predictions: dict[int, tuple[int, float]] = field(default_factory=dict)
    outcomes: dict[int, dict[str, Any]] = field(default_factory=dict)
    dead: dict[int, str] = field(default_factory=dict)
    """offset → how the dead letter's reason begins"""
    pending: OrderedDict[Any, tuple[list[int], int, int, int, int]] = field(default_factory=OrderedDict)
    joins: int = 0
    expiries: int = 0
    delays: list[float] = field(default_factory=list)
    max_pending: int = 0


def expected(records: list[Record], topic: str, *, pending_max: int, ttl_ms: int) -> Expected:
    """What a worker with ``SP_LABELS__PENDING_MAX=pending_max`` and a TTL of ``ttl_ms`` must
    publish and end with (timestamps only grow in :func:`late_stream`)."""
    e = Expected()
    gone: OrderedDict[Any, str] = OrderedDict()

    def score(x: list[int]) -> int:
        return sum(t * v for t, v in zip(e.theta, x, strict=True)) + e.theta0

    def learn(x: list[int], y: int) -> bool:
        mistake = y * score(x) <= 0
        if mistake:
            e.theta = [t + y * v for t, v in zip(e.theta, x, strict=True)]
            e.theta0 += y
            e.mistakes += 1
        return mistake

    def finish(rid: Any, why: str) -> None:
        gone.pop(rid, None)
        gone[rid] = why
        while len(gone) > pending_max:
            gone.popitem(last=False)

    def expire(now: int) -> None:
        while e.pending and now - next(iter(e.pending.values()))[4] > ttl_ms:
            rid = next(iter(e.pending))
            del e.pending[rid]
            e.expiries += 1
            finish(rid, "expired id")

    for offset, r in enumerate(records):
        v, rid = r.value, r.value.get("id")
        expire(r.ts)
        if "x" not in v:  # a label record
            if rid in e.pending:
                x, pred, sc, event_offset, event_ts = e.pending.pop(rid)
                e.joins += 1
                finish(rid, "id " + repr(rid) + " already labeled")
                delay = (r.ts - event_ts) / 1000
                e.delays.append(delay)
                e.outcomes[offset] = {
                    "id": rid, "topic": topic, "partition": 0, "offset": offset,
                    "event_offset": event_offset, "prediction": pred, "score": float(sc),
                    "label": v["y"], "correct": pred == v["y"], "mistake": learn(x, v["y"]),
                    "delay_s": delay,
                }
            else:
                e.dead[offset] = gone.get(rid, "unknown id")
            continue
        sc = score(v["x"])
        pred = 1 if sc > 0 else -1
        e.predictions[offset] = (pred, float(sc))
        if "y" in v:
            learn(v["x"], v["y"])
        elif rid is not None:
            if rid in e.pending:
                del e.pending[rid]
                e.expiries += 1
            gone.pop(rid, None)
            e.pending[rid] = (v["x"], pred, sc, offset, r.ts)
            while len(e.pending) > pending_max:
                old = next(iter(e.pending))
                del e.pending[old]
                e.expiries += 1
                finish(old, "expired id")
            e.max_pending = max(e.max_pending, len(e.pending))
    return e


def check_outputs(e: Expected, predictions: list[Any], outcomes: list[Any], dead: list[Any]) -> int:
    """Every output is the expected one, each offset has its output, and any copy re-emitted
    (after a restart) equals the first; returns how many offsets were published more than once."""
    repeated = 0
    for kind, read, want in (("prediction", predictions, e.predictions), ("outcome", outcomes, e.outcomes),
                             ("dead letter", dead, e.dead)):
        by_offset: dict[int, list[dict[str, Any]]] = {}
        for _, _, _, rec in read:
            by_offset.setdefault(rec["offset"], []).append(rec)
        assert sorted(by_offset) == sorted(want), f"{kind}s at other offsets than expected"
        for offset, copies in by_offset.items():
            assert all(c == copies[0] for c in copies), f"{kind} re-emitted differently at {offset}"
            repeated += len(copies) > 1
            got = copies[0]
            if kind == "prediction":
                assert (got["prediction"], got["score"]) == want[offset], offset
            elif kind == "outcome":
                assert got == want[offset], offset
            else:
                assert got["error"].startswith(want[offset]), (offset, got["error"], want[offset])
    return repeated


def check_state(e: Expected, stats: dict[str, Any], model: dict[str, Any], pending_max: int) -> None:
    """The stored state's model and pending store, against the reference."""
    assert model["weights"] == [float(t) for t in e.theta]  # bit for bit
    assert model["intercept"] == float(e.theta0) and model["mistakes"] == e.mistakes
    labels = stats["labels"]
    assert [row[0] for row in labels["entries"]] == list(e.pending)
    assert [row[1] for row in labels["entries"]] == [[float(v) for v in p[0]] for p in e.pending.values()]
    assert (labels["joins"], labels["expiries"]) == (e.joins, e.expiries)
    assert len(labels["entries"]) <= pending_max and len(labels["gone"]) <= pending_max
