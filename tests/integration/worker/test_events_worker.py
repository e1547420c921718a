"""Events as systems write them, through a feature spec, end to end on a real broker and a real
schema registry (Apicurio Registry, the ``schema_registry`` fixture), on both backends.

What the worker must do, checked against the examples the spec defines computed apart from it
(:mod:`.events`: each feature by hand, standardization by river's ``StandardScaler``, learning
by a plain loop of ``Perceptron.learn_one`` in offset order):

* nested JSON events, and Avro records of a registered schema, with string, enum, integer and
  boolean categories, lists, booleans as numbers, text, and missing fields: each good event is
  predicted once, with its echo fields and the plain loop's score; each bad one is a dead letter
  whose reason names the path; the stored state (weights, intercept, updates, feature names and
  the standardization) is the plain loop's, bit for bit.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import orjson
import pytest

from stream_perceptron.codec.avro import encode_wire
from stream_perceptron.commands.read import read_topic
from stream_perceptron.kafka.registry import SchemaRegistry
from stream_perceptron.settings import KafkaSettings, Settings
from stream_perceptron.state.directory import DirectoryStore
from tests.integration.helpers import (
    predictions_by_offset,
    run_until_caught_up,
    send_all,
    topics_for,
    worker_settings,
)

from .events import (
    SPEC,
    PlainLoop,
    avro_record,
    avro_schema,
    bad_events,
    echo_by_hand,
    label_by_hand,
    payments,
    stored_as,
)

N_EVENTS = 600
REGISTRY_TIMEOUT_S = 2.0
NOT_REGISTERED = 999_999_999  # an id Apicurio gives no schema (its ids count from 1)


def _settings(kafka: KafkaSettings, topics: dict[str, str], ckpt: Any, *, avro: str | None = None,
              spec: dict[str, Any] = SPEC, **sections: Any) -> Settings:
    """A worker on events through ``spec``: JSON, or Avro with the registry at ``avro``."""
    if avro is not None:
        sections["registry"] = {"url": avro, "timeout_s": REGISTRY_TIMEOUT_S}
    return worker_settings(kafka, topics, ckpt, input={"format": "json" if avro is None else "avro"},
                           features=spec, **sections)


def _complete(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The first labeled event with every field there (the bad events are made from it)."""
    return next(e for e in events if all(e.get(k) is not None for k in ("device", "note", "outcome"))
                and all(e["user"].get(k) is not None for k in ("age", "verified", "premium", "tier"))
                and label_by_hand(e))


def _interleave(good: list[Any], bad: list[Any], seed: int) -> list[tuple[Any, Any]]:
    """``good`` and ``bad`` in one stream, the bad ones at random places after the first good
    one: (item, None) for a good item, (None, item) for a bad one."""
    rng = random.Random(seed)
    places = sorted(rng.sample(range(1, len(good)), len(bad)))
    out: list[tuple[Any, Any]] = []
    bad_items = iter(bad)
    for i, item in enumerate(good):
        while places and places[0] == i:
            places.pop(0)
            out.append((None, next(bad_items)))
        out.append((item, None))
    return out


def _check_events(kafka: KafkaSettings, topics: dict[str, str], ckpt_dir: Any,
                  written: dict[int, list[dict[str, Any] | None]], dead: dict[tuple[int, int], str]
                  ) -> dict[int, PlainLoop]:
    """What the worker left, against the plain loop over each partition's events as their
    writers wrote them (``written[p][offset]``; None where a bad record is, refused with the
    reason ``dead[(p, offset)]`` begins with): every good offset predicted once with the plain
    loop's score, label and echo fields, every bad one a dead letter with its reason, and each
    partition's stored state the plain loop's."""
    got_dead = {(rec["partition"], rec["offset"]): rec["error"]
                for *_, rec in read_topic(kafka, topics["dead_letter"])}
    assert sorted(got_dead) == sorted(dead)
    for where, reason in dead.items():
        assert got_dead[where].startswith(reason), (where, got_dead[where], reason)

    preds = predictions_by_offset(kafka, topics["predictions"])
    good_offsets = [(p, o) for p, events in written.items() for o, e in enumerate(events) if e is not None]
    assert sorted(preds) == sorted(good_offsets), "a prediction per good offset, none for a bad one"
    loops = {}
    for partition, events in written.items():
        loop = loops[partition] = PlainLoop()
        for offset, event in enumerate(events):
            if event is None:
                continue
            loop.event(event, offset)
            first, *again = preds[(partition, offset)]
            assert not again, (partition, offset)
            score, y = loop.scores[-1], label_by_hand(event)
            assert first["score"] == score, (partition, offset, first, score)
            assert first["prediction"] == (1 if score > 0 else -1)
            assert first["label"] == (y or None)
            assert first["echo"] == echo_by_hand(event)
            assert first["id"] == event["payment"]["id"]
        ckpt = DirectoryStore(ckpt_dir).load(topics["input"], partition)
        assert ckpt is not None and ckpt.offsets == {topics["input"]: {partition: len(events)}}
        assert stored_as(ckpt) == loop.state()  # weights, intercept, updates, names, standardization
        good = [e for e in events if e is not None]
        assert (ckpt.stats["seen"], ckpt.stats["labeled"]) == (
            len(good), sum(label_by_hand(e) != 0 for e in good))
        assert loop.model.mistakes > 10 and len(loop.state()["standardization"]) == 2  # a stream that tests
    return loops


@pytest.mark.timeout(120)
def test_nested_json_events_are_predicted_refused_by_path_and_learned_as_the_plain_loop(
        backend, kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings(backend=backend)
    topics = topics_for(new_topic)
    events = payments(N_EVENTS, seed=11)
    bad = [(orjson.dumps(e), reason) for e, reason in bad_events(_complete(events))]
    bad += [(b"[1, 2]", "record must be a JSON object, got array"), (b"{not json", "not valid JSON")]
    stream = _interleave(events, bad, seed=11)
    values = [orjson.dumps(e) if e is not None else b[0] for e, b in stream]
    send_all(kafka, topics["input"], values)
    settings = _settings(kafka, topics, tmp_path / "ckpt")
    run_until_caught_up(settings, len(values))
    _check_events(kafka, topics, tmp_path / "ckpt", {0: [e for e, _ in stream]},
                  {(0, o): b[1] for o, (_, b) in enumerate(stream) if b is not None})


@pytest.mark.timeout(120)
def test_avro_events_of_a_registered_schema_are_predicted_refused_by_path_and_learned_as_the_plain_loop(
        backend, kafka_settings, new_topic, tmp_path, schema_registry):
    kafka = kafka_settings(backend=backend)
    topics = topics_for(new_topic)
    schema = avro_schema(f"shop.t{uuid.uuid4().hex[:12]}")
    schema_id = SchemaRegistry(schema_registry.url).register(f"{topics['input']}-value", schema)
    events = [avro_record(e) for e in payments(N_EVENTS, seed=12)]
    bad = [(encode_wire(schema_id, schema, avro_record(e)), reason)
           for e, reason in bad_events(_complete(events), avro=True)]
    sample = encode_wire(schema_id, schema, events[0])
    bad += [
        (b'{"payment": {"id": "p1"}}', "not the Avro wire format: byte 0 is 0x7b, not 0x00"),
        (encode_wire(NOT_REGISTERED, schema, events[0]),
         f"schema {NOT_REGISTERED} is not in the schema registry"),
        (sample[:-3], f"the Avro payload is truncated for schema {schema_id}"),
        (sample + b"\x00", f"1 bytes after the Avro record of schema {schema_id}"),
    ]
    stream = _interleave(events, bad, seed=12)
    values = [encode_wire(schema_id, schema, e) if e is not None else b[0] for e, b in stream]
    send_all(kafka, topics["input"], values)
    settings = _settings(kafka, topics, tmp_path / "ckpt", avro=schema_registry.url)
    run_until_caught_up(settings, len(values))
    _check_events(kafka, topics, tmp_path / "ckpt", {0: [e for e, _ in stream]},
                  {(0, o): b[1] for o, (_, b) in enumerate(stream) if b is not None})
