"""Hostile input end to end: every record sent to a real topic is either predicted or
dead-lettered with a reason, exactly once, and the worker never leaves its loop.

The decoder-only fuzz test is in ``tests/unit/codec/test_records.py``; this one goes through the
broker, the worker's batching, the model's vectorisation and the output topics. The oracle is
the decoder itself: a record it rejects must be dead-lettered with *that* reason; a record it
accepts is predicted unless the model rejects its shape (then dead-lettered with that reason).
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from stream_perceptron.codec.inputs import LabelRecord, decode_record
from stream_perceptron.codec.limits import Limits
from stream_perceptron.codec.outputs import decode, key_text
from stream_perceptron.commands.read import read_topic
from stream_perceptron.errors import DecodeError
from stream_perceptron.kafka.admin import client_config
from tests.integration.helpers import ThreadedWorker, predictions_by_offset, topics_for

from .support import fault_settings, reap, start_worker, wait_until

pytestmark = pytest.mark.faults

FUZZ_EXAMPLES = int(os.environ.get("SP_FAULTS_FUZZ_EXAMPLES", "60"))

LIMITS = {"max_record_bytes": 4096, "max_features": 16, "max_abs_value": 1e6,
          "max_key_bytes": 24, "max_id_chars": 10, "positive_class": "spam", "negative_class": "ham"}
DIM = 4
SEED_RECORD = b'{"x": [0.5, -1.0, 2.0, 0.25], "y": 1, "id": "seed"}'

# the model's own rejections (vectorize), as opposed to the decoder's
SHAPE_REASONS = ("features, the model has", "named features but the model was fixed",
                 "new feature names", "must be a vector")


class Harness:
    """One worker in a thread, a producer to its input, and a reader of both output topics."""

    def __init__(self, kafka: Any, topics: dict[str, str], settings_: Any) -> None:
        self.kafka, self.topics = kafka, topics
        self.limits = Limits(**settings_.limits.model_dump())
        self.tw = ThreadedWorker(settings_).start()
        self.producer = KafkaProducer(**client_config(kafka), acks="all", linger_ms=1,
                                      max_request_size=8 * 1024 * 1024)
        self.reader = KafkaConsumer(**client_config(kafka), group_id=None,
                                    enable_auto_commit=False)
        tps = [TopicPartition(topics["predictions"], 0), TopicPartition(topics["dead_letter"], 0)]
        self.reader.assign(tps)
        self.reader.seek_to_beginning(*tps)
        self.outcomes: dict[int, list[tuple[str, dict[str, Any]]]] = {}
        self.sent: dict[int, tuple[bytes | None, bytes | None]] = {}

    def send(self, records: list[tuple[bytes | None, bytes | None]]) -> list[int]:
        futures = [self.producer.send(self.topics["input"], value=v, key=k) for v, k in records]
        self.producer.flush(timeout=30)
        offsets = [f.get(timeout=30).offset for f in futures]
        for off, rec in zip(offsets, records, strict=True):
            self.sent[off] = rec
        return offsets

    def settle(self, offsets: list[int], timeout_s: float = 60) -> None:
        """Wait until the worker has passed ``offsets`` and their outcomes are readable."""
        worker, topic = self.tw.worker, self.topics["input"]
        last = max(offsets) + 1
        wait_until(lambda: not self.tw.thread.is_alive()
                   or worker.offsets.get(topic, {}).get(0, 0) >= last, timeout_s,
                   f"the worker to pass offset {last - 1}", every_s=0.02)
        assert self.tw.thread.is_alive(), f"the worker left its loop (code {self.tw.code})"
        deadline = time.monotonic() + timeout_s
        while not all(o in self.outcomes for o in offsets):
            assert time.monotonic() < deadline, (
                f"no outcome for {[o for o in offsets if o not in self.outcomes][:10]}")
            for tp, recs in self.reader.poll(timeout_ms=200, max_records=5000).items():
                kind = "dead" if tp.topic == self.topics["dead_letter"] else "pred"
                for r in recs:
                    body = decode(r.value)
                    self.outcomes.setdefault(body["offset"], []).append((kind, body))

    def check(self, offset: int) -> str:
        """The property for one record; returns its outcome kind."""
        value, key = self.sent[offset]
        outcomes = self.outcomes[offset]
        assert len(outcomes) == 1, f"offset {offset}: {len(outcomes)} outcomes {outcomes}"
        kind, body = outcomes[0]
        assert body["topic"] == self.topics["input"] and body["partition"] == 0
        kept = key if key is None or kind == "pred" else key[: self.limits.max_key_bytes]
        assert body["key"] == key_text(kept)
        try:
            example = decode_record(value, self.limits, key)
            reason = None
        except DecodeError as exc:
            example, reason = None, exc.reason
        if isinstance(example, LabelRecord):  # a label record, with late labels off here
            assert kind == "dead" and body["error"].endswith("late labels are off (SP_LABELS__PENDING_MAX=0)")
            return kind
        if kind == "dead":
            assert isinstance(body["error"], str) and body["error"].strip()
            assert (None if body["value"] is None else base64.b64decode(body["value"])) == value
            if reason is not None:
                assert body["error"] == reason
            else:
                assert any(s in body["error"] for s in SHAPE_REASONS), (value, body["error"])
        else:
            assert reason is None, f"predicted a record the decoder rejects ({reason}): {value!r}"
            assert body["prediction"] in (-1, 1)
            assert isinstance(body["score"], float) and math.isfinite(body["score"])
            assert body["label"] == (example.y or None)
            assert body["id"] == example.id
        return kind

    def close(self) -> int | None:
        try:
            self.producer.close(timeout=10)
            self.reader.close()
        finally:
            code = self.tw.stop()
        return code


def _start(fast_kafka: Any, new_topic: Any, tmp_path: Any, **limits: Any) -> Harness:
    kafka = fast_kafka()
    topics = topics_for(new_topic)
    # late labels off: a label record is a dead letter, never an outcome on a topic not read here
    s = fault_settings(kafka, topics, tmp_path / "ckpt", limits={**LIMITS, **limits},
                       checkpoint={"every_examples": 200, "every_seconds": 1}, labels={"pending_max": 0})
    h = Harness(kafka, topics, s)
    wait_until(lambda: h.tw.assignment(), 30, "the worker's assignment")
    h.settle(h.send([(SEED_RECORD, b"seed")]))
    assert h.check(0) == "pred"
    return h


# ------------------------------------------------------------------ strategies
NUMBER_SPELLINGS = ["NaN", "-NaN", "Infinity", "-Infinity", "inf", "-inf", "nan", "1e999",
                    "-1e999", "1E400", "0x10", "+1", "01", ".5", "1.", "-", "1e", "--1",
                    "-0", "1e-400", "123456789012345678901234567890", "1000001", "-1e6",
                    "true", "null", '"1"', "[]", "{}"]

number_token = st.one_of(
    st.sampled_from(NUMBER_SPELLINGS),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
)

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**25), max_value=10**25),
    st.floats(), st.text(max_size=12),
)
json_value = st.recursive(
    json_leaf,
    lambda children: st.one_of(st.lists(children, max_size=5),
                               st.dictionaries(st.text(max_size=6), children, max_size=5)),
    max_leaves=20,
)

label = st.one_of(
    st.sampled_from([1, -1, 0, True, False, "spam", "ham", "maybe", "SPAM", 0.5, 2, -2, 1.0,
                     "1", None, [1], {"y": 1}, float("nan"), float("inf")]),
    st.text(max_size=70),
)
feature_value = st.one_of(
    st.floats(min_value=-1e6, max_value=1e6), st.floats(), st.integers(-(10**20), 10**20),
    st.booleans(), st.none(), st.text(max_size=3), st.lists(st.integers(), max_size=2),
)
x_value = st.one_of(
    st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=DIM, max_size=DIM),  # valid
    st.lists(feature_value, min_size=0, max_size=20),
    st.dictionaries(st.text(max_size=4), feature_value, max_size=6),
    st.lists(st.floats(-1, 1), min_size=LIMITS["max_features"] + 1, max_size=200),  # too many
    json_leaf,
)


def _dumps(obj: Any) -> bytes:
    """json.dumps, which spells NaN/Inf as NaN/Infinity and keeps huge ints (orjson would not)."""
    return json.dumps(obj, allow_nan=True).encode()


@st.composite
def example_shaped(draw: Any) -> bytes:
    rec: dict[str, Any] = {"x": draw(x_value)}
    if draw(st.integers(0, 4)):
        rec["y"] = draw(label)
    if draw(st.booleans()):
        rec["id"] = draw(st.one_of(json_leaf, st.lists(st.integers(), max_size=2)))
    if draw(st.integers(0, 9)) == 0:
        rec["pad"] = "z" * draw(st.integers(3000, 6000))  # around max_record_bytes
    if draw(st.integers(0, 9)) == 0:
        del rec["x"]
    return _dumps(rec)


@st.composite
def spelled_numbers(draw: Any) -> bytes:
    tokens = draw(st.lists(number_token, min_size=1, max_size=DIM + 2))
    y = draw(st.sampled_from(["1", "-1", "0", "NaN", "Infinity", '"spam"', "1e999"]))
    return f'{{"x": [{", ".join(tokens)}], "y": {y}}}'.encode()


@st.composite
def deep(draw: Any) -> bytes:
    depth = draw(st.sampled_from([2, 100, 1023, 1024, 1025, 2000, 3000]))
    kind = draw(st.sampled_from(["list", "dict", "x-list", "x-dict"]))
    if kind == "list":
        return b"[" * depth + b"]" * depth
    if kind == "dict":
        return b'{"a":' * depth + b"1" + b"}" * depth
    inner = b"[" * depth + b"1" + b"]" * depth if kind == "x-list" else (
        b'{"a":' * depth + b"1" + b"}" * depth)
    return b'{"x": ' + inner + b', "y": 1}'


@st.composite
def mangled(draw: Any) -> bytes:
    """Valid records, then damaged: bad UTF-8, BOM, truncation, duplicate keys, trailing junk."""
    base = b'{"x": [1.5, -2, 0.25, 3], "y": 1, "id": "v"}'
    how = draw(st.sampled_from(["utf8", "bom", "truncate", "dupkey", "trailing", "nul", "ws"]))
    if how == "utf8":
        return b'{"x": [1, 2, 3, 4], "y": "\xff\xfe", "id": "\xc3\x28"}'
    if how == "bom":
        return b"\xef\xbb\xbf" + base
    if how == "truncate":
        return base[: draw(st.integers(0, len(base) - 1))]
    if how == "dupkey":
        return b'{"x": [1, 2, 3, 4], "x": "a", "y": 1}'
    if how == "trailing":
        return base + draw(st.sampled_from([b" x", b"}", b"\n{}", b"\x00"]))
    if how == "nul":
        return base.replace(b'"v"', b'"v\x00"')
    return b" \n\t" + base + b" \r\n"


valid = st.builds(
    lambda x, y, i: _dumps({"x": x, "y": y, "id": i}),
    st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=DIM, max_size=DIM),
    st.sampled_from([1, -1, 0, True, False, "spam", "ham", None]),
    st.one_of(st.none(), st.integers(), st.text(max_size=8)),
)

record_value = st.one_of(
    valid,
    valid,
    st.binary(max_size=300),
    json_value.map(_dumps),
    example_shaped(),
    spelled_numbers(),
    deep(),
    mangled(),
    st.just(None),  # a tombstone
)
record_key = st.one_of(st.none(), st.binary(max_size=30), st.text(max_size=8).map(str.encode))
# Kafka takes no record without both: a tombstone gets a key
batch = st.lists(st.tuples(record_value, record_key).map(
    lambda r: r if r[0] is not None or r[1] is not None else (None, b"tombstone")),
    min_size=1, max_size=25)


@pytest.mark.timeout(300)
def test_fuzzed_records_through_the_worker_are_predicted_or_dead_lettered(
    fast_kafka, new_topic, tmp_path
):
    h = _start(fast_kafka, new_topic, tmp_path)
    kinds: dict[str, int] = {"pred": 0, "dead": 0}
    reasons: dict[str, int] = {}
    try:
        @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, print_blob=True,
                  suppress_health_check=list(HealthCheck))
        @given(records=batch)
        def one_batch(records: list[tuple[bytes | None, bytes | None]]) -> None:
            offsets = h.send(records)
            h.settle(offsets)
            for off in offsets:
                kind = h.check(off)
                kinds[kind] += 1
                if kind == "dead":
                    error = h.outcomes[off][0][1]["error"]
                    reason = re.sub(r"[0-9][0-9.e+]*", "N", error.split(":")[0])[:60]
                    reasons[reason] = reasons.get(reason, 0) + 1

        one_batch()
        assert h.tw.thread.is_alive()
        assert np.isfinite(h.tw.worker.learner.model.weights).all()
    finally:
        code = h.close()
    assert code == 0
    assert kinds["pred"] > 0 and kinds["dead"] > 0
    print(f"\n{sum(kinds.values())} fuzzed records: {kinds}; dead-letter reasons: "
          f"{dict(sorted(reasons.items(), key=lambda kv: -kv[1]))}")


CATALOGUE: list[tuple[str, bytes | None]] = [
    ("random bytes", bytes(range(256))),
    ("empty", b""),
    ("tombstone", None),
    ("label record", b'{"id": "v", "y": 1}'),
    ("label record, null label", b'{"id": "v", "y": null}'),
    ("NaN literal", b'{"x": [NaN, 1, 2, 3], "y": 1}'),
    ("Infinity literal", b'{"x": [Infinity, 1, 2, 3], "y": 1}'),
    ("-Infinity literal", b'{"x": [-Infinity, 1, 2, 3], "y": 1}'),
    ("overflowing float", b'{"x": [1e999, 1, 2, 3], "y": 1}'),
    ("huge integer", b'{"x": [123456789012345678901234567890, 1, 2, 3], "y": 1}'),
    ("over max_abs_value", b'{"x": [1000001, 1, 2, 3], "y": 1}'),
    ("string feature", b'{"x": ["1", 1, 2, 3], "y": 1}'),
    ("bool feature", b'{"x": [true, 1, 2, 3], "y": 1}'),
    ("null feature", b'{"x": [null, 1, 2, 3], "y": 1}'),
    ("nested feature", b'{"x": [[1], 1, 2, 3], "y": 1}'),
    ("x not a list", b'{"x": "1,2,3,4", "y": 1}'),
    ("x empty", b'{"x": [], "y": 1}'),
    ("too many features", _dumps({"x": [0.5] * 17, "y": 1})),
    ("far too many features", _dumps({"x": [0.5] * 600, "y": 1})),
    ("wrong dimension", b'{"x": [1, 2, 3], "y": 1}'),
    ("named on a dense model", b'{"x": {"a": 1, "b": 2}, "y": 1}'),
    ("unknown label", b'{"x": [1, 2, 3, 4], "y": "maybe"}'),
    ("label 2", b'{"x": [1, 2, 3, 4], "y": 2}'),
    ("label 0.5", b'{"x": [1, 2, 3, 4], "y": 0.5}'),
    ("label list", b'{"x": [1, 2, 3, 4], "y": [1]}'),
    ("id object", b'{"x": [1, 2, 3, 4], "y": 1, "id": {"a": 1}}'),
    ("id bool", b'{"x": [1, 2, 3, 4], "y": 1, "id": true}'),
    ("not an object", b"[1, 2, 3, 4]"),
    ("string", b'"x"'),
    ("deep list 1500", b"[" * 1500 + b"]" * 1500),
    ("deep x 1100", b'{"x": ' + b"[" * 1100 + b"]" * 1100 + b"}"),
    ("oversized", _dumps({"x": [1, 2, 3, 4], "y": 1, "pad": "z" * 5000})),
    ("bad utf-8", b'{"x": [1, 2, 3, 4], "y": "\xff"}'),
    ("id too long", b'{"x": [1, 2, 3, 4], "y": 1, "id": "' + b"i" * 11 + b'"}'),
    ("key too long " + "k" * 12, b'{"x": [1, 2, 3, 4], "y": 1}'),
    ("valid", b'{"x": [1, 2, 3, 4], "y": "ham", "id": 7}'),
    ("valid unlabeled", b'{"x": [1, 2, 3, 4], "id": 8}'),
]


@pytest.mark.timeout(120)
def test_catalogue_of_hostile_records(fast_kafka, new_topic, tmp_path):
    """One of each kind, with its expected outcome; the two valid ones are predicted."""
    h = _start(fast_kafka, new_topic, tmp_path)
    try:
        offsets = h.send([(v, name.encode()) for name, v in CATALOGUE])
        h.settle(offsets)
        got = {name: h.check(off) for (name, _), off in zip(CATALOGUE, offsets, strict=True)}
        errors = {name: h.outcomes[off][0][1].get("error")
                  for (name, _), off in zip(CATALOGUE, offsets, strict=True)}
    finally:
        code = h.close()
    assert code == 0
    predicted = {name for name, kind in got.items() if kind == "pred"}
    assert predicted == {"valid", "valid unlabeled"}, errors
    for name in ("NaN literal", "Infinity literal", "overflowing float", "deep list 1500",
                 "bad utf-8", "random bytes", "empty"):
        assert "not valid JSON" in errors[name], (name, errors[name])
    # digits enough to tell the value from the limit apart
    assert "magnitude 1000001, over the limit of 1000000" in errors["over max_abs_value"]
    assert "over the limit of 1e+06" in errors["huge integer"]
    assert "over the limit of 16" in errors["far too many features"]
    assert "over the limit of 4096" in errors["oversized"]
    assert errors["id too long"] == "id is 11 characters, over the limit of 10 (SP_LIMITS__MAX_ID_CHARS)"
    assert errors["key too long " + "k" * 12] == (
        "key is 25 bytes, over the limit of 24 (SP_LIMITS__MAX_KEY_BYTES)")
    assert errors["tombstone"] == "record has no value"
    assert errors["label record"] == "label record for id 'v': late labels are off (SP_LABELS__PENDING_MAX=0)"
    assert errors["label record, null label"] == "record has no 'x' (a label record has 'id' and 'y')"
    assert "unknown label" in errors["unknown label"] and "unknown label" in errors["label 2"]


def _through_a_worker_with_the_default_limits(
    fast_kafka: Any, new_topic: Any, tmp_path: Any, records: list[tuple[bytes, bytes]]
) -> tuple[dict[Any, Any], dict[int, tuple[bytes | None, dict[str, Any]]]]:
    """Send ``records`` (value, key), run a worker with the default limits until it has caught
    up, and return its predictions and its dead letters (Kafka key, record) by input offset."""
    kafka = fast_kafka()
    topics = topics_for(new_topic)
    producer = KafkaProducer(**client_config(kafka), acks="all", max_request_size=8 * 1024 * 1024)
    try:
        for value, key in records:
            producer.send(topics["input"], value=value, key=key)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    settings_ = fault_settings(kafka, topics, tmp_path / "ckpt")
    log = tmp_path / "worker.log"
    proc = start_worker(settings_, "--until-caught-up", log=log)
    try:
        code = proc.wait(timeout=60)
    finally:
        reap(proc)
    assert code == 0, f"the worker died ({code}):\n{log.read_text()[-2500:]}"
    preds = predictions_by_offset(kafka, topics["predictions"])
    dead = {v["offset"]: (k, v) for _, _, k, v in read_topic(kafka, topics["dead_letter"])}
    return preds, dead


@pytest.mark.timeout(120)
def test_large_records_with_the_default_limits_do_not_kill_the_worker(
    fast_kafka, new_topic, tmp_path
):
    """With the default limits.max_record_bytes (1 MiB): a 900 kB record that is not JSON and a
    1.5 MB record are dead-lettered; the records around them are predicted; the worker lives."""
    preds, dead = _through_a_worker_with_the_default_limits(fast_kafka, new_topic, tmp_path, [
        (b'{"x": [1, 2, 3, 4], "y": 1}', b"a"),
        (b"{" + b"z" * 900_000, b"900k-not-json"),
        (_dumps({"x": [1, 2, 3, 4], "y": 1, "pad": "z" * 1_500_000}), b"1.5M"),
        (b'{"x": [4, 3, 2, 1], "y": -1}', b"b"),
    ])
    assert sorted(preds) == [(0, 0), (0, 3)]
    assert sorted(dead) == [1, 2]
    assert "not valid JSON" in dead[1][1]["error"]
    assert "over the limit of 1048576" in dead[2][1]["error"]


@pytest.mark.timeout(120)
def test_a_huge_key_or_id_with_the_default_limits_does_not_stop_the_worker(
    fast_kafka, new_topic, tmp_path
):
    """A prediction copies the record's key and id. Within the default limits.max_record_bytes,
    a 900k-character id or a 600 kB key would make one too large to send, and the worker would
    stop at that offset on every restart; the limits on both dead-letter the record instead."""
    preds, dead = _through_a_worker_with_the_default_limits(fast_kafka, new_topic, tmp_path, [
        (b'{"x": [1, 2, 3, 4], "y": 1}', b"a"),
        (_dumps({"x": [1, 2, 3, 4], "y": 1, "id": "i" * 900_000}), b"long-id"),
        (b'{"x": [4, 3, 2, 1], "y": -1}', b"\x01" * 600_000),
        (b'{"x": [4, 3, 2, 1], "y": -1}', b"b"),
    ])
    assert sorted(preds) == [(0, 0), (0, 3)]
    assert sorted(dead) == [1, 2]
    key, letter = dead[1]
    assert letter["error"] == "id is 900000 characters, over the limit of 1024 (SP_LIMITS__MAX_ID_CHARS)"
    assert key == b"long-id" and letter["key"] == "long-id" and not letter["key_truncated"]
    key, letter = dead[2]
    assert letter["error"] == "key is 600000 bytes, over the limit of 4096 (SP_LIMITS__MAX_KEY_BYTES)"
    assert key is None, "a key too long to send is left off the dead letter"
    assert letter["key"] == "\x01" * 4096 and letter["key_bytes"] == 600_000 and letter["key_truncated"]
