"""Events as systems write them, through a feature spec, end to end on a real broker and a real
schema registry (Apicurio Registry, the ``schema_registry`` fixture), on both backends.

What the worker must do, checked against the examples the spec defines computed apart from it
(:mod:`.events`: each feature by hand, standardization by river's ``StandardScaler``, learning
by a plain loop of ``Perceptron.learn_one`` in offset order):

* nested JSON events, and Avro records of a registered schema, with string, enum, integer and
  boolean categories, lists, booleans as numbers, text, and missing fields: each good event is
  predicted once, with its echo fields and the plain loop's score; each bad one is a dead letter
  whose reason names the path; the stored state (weights, intercept, updates, feature names and
  the standardization) is the plain loop's, bit for bit;
* a subject's schema evolving mid-stream (a version adding, removing and renaming optional
  fields, registered under ``BACKWARD`` while the worker runs): no restart, no dead letter;
* the registry stopped for 20 s while records keep coming, a new schema id first met during the
  outage: the worker waits (and says so), loses and duplicates nothing, and ends as the plain loop;
* late labels found through the spec's id and label paths joining their events.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from typing import Any

import orjson
import pytest
from kafka import KafkaProducer

from stream_perceptron.codec.avro import encode_wire
from stream_perceptron.commands.read import read_topic
from stream_perceptron.kafka.admin import client_config
from stream_perceptron.kafka.registry import SchemaRegistry
from stream_perceptron.settings import KafkaSettings, Settings
from stream_perceptron.state.directory import DirectoryStore
from tests.integration.helpers import (
    ThreadedWorker,
    predictions_by_offset,
    run_until_caught_up,
    send_all,
    topics_for,
    wait_for,
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
SPEC_V2 = {**SPEC, "categorical": [*SPEC["categorical"], "platform.os", "channel"]}
"""The spec of the evolving subject: the renamed field's path and the added one's too."""
V2_CATEGORIES = ("platform.os", "channel")


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
                  written: dict[int, list[dict[str, Any] | None]], dead: dict[tuple[int, int], str],
                  extra_categories: tuple[str, ...] = (), at_least_once: bool = False
                  ) -> dict[int, PlainLoop]:
    """What the worker left, against the plain loop over each partition's events as their
    writers wrote them (``written[p][offset]``; None where a bad record is, refused with the
    reason ``dead[(p, offset)]`` begins with): every good offset predicted once (``at_least_once``:
    any copy after the first equal to it) with the plain loop's score, label and echo fields,
    every bad one a dead letter with its reason, and each partition's stored state the plain
    loop's."""
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
        loop = loops[partition] = PlainLoop(extra_categories=extra_categories)
        for offset, event in enumerate(events):
            if event is None:
                continue
            loop.event(event, offset)
            first, *again = preds[(partition, offset)]
            assert all(copy == first for copy in again) if at_least_once else not again, (partition, offset)
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


# -- a schema evolving, and the registry stopped, while the worker runs --------------------------------

def _next_offsets(worker: ThreadedWorker, topic: str, partitions: int) -> list[int]:
    """Each input partition's next offset to process in the running worker (0: not held yet, or
    nothing processed)."""
    held = dict(worker.worker.held)
    return [(held[(topic, p)].next_offset or 0) if (topic, p) in held else 0 for p in range(partitions)]


class Writers(threading.Thread):
    """Producers writing payment events to ``partitions`` partitions in turn at ``rate`` records/s,
    each with its writer's schema: version 2 with probability :attr:`share_v2` (set by the test
    as it goes), else version 1. Records what was written where: ``written[p][offset]``."""

    def __init__(self, kafka: KafkaSettings, topic: str, partitions: int, schemas: dict[int, tuple[int, str]],
                 rate: float, seed: int) -> None:
        super().__init__(daemon=True, name="avro-writers")
        self.kafka, self.topic, self.partitions = kafka, topic, partitions
        self.schemas, self.rate = schemas, rate
        self.rng = random.Random(seed)
        self.share_v2 = 0.0
        self.written: dict[int, list[dict[str, Any]]] = {p: [] for p in range(partitions)}
        self.first_v2: dict[int, int] = {}  # each partition's first offset of version 2
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def sent(self) -> list[int]:
        return [len(self.written[p]) for p in range(self.partitions)]

    def run(self) -> None:
        try:
            producer = KafkaProducer(**client_config(self.kafka), acks="all", linger_ms=0)
            try:
                started, i = time.monotonic(), 0
                while not self._stop_event.is_set():
                    (event,) = payments(1, seed=self.rng.randrange(2**32), start=i)
                    version = 2 if self.rng.random() < self.share_v2 else 1
                    if version == 2:
                        event["channel"] = self.rng.choice(["web", "pos", None])
                    record = avro_record(event, version)
                    schema_id, schema = self.schemas[version]
                    partition = i % self.partitions
                    meta = producer.send(self.topic, encode_wire(schema_id, schema, record),
                                         key=str(i).encode(), partition=partition).get(timeout=30)
                    assert meta.offset == len(self.written[partition]), (partition, meta.offset)
                    self.written[partition].append(record)
                    if version == 2:
                        self.first_v2.setdefault(partition, meta.offset)
                    i += 1
                    self._stop_event.wait(max(0.0, i / self.rate - (time.monotonic() - started)))
            finally:
                producer.close()
        except BaseException as exc:
            self.error = exc

    def finish(self) -> None:
        self._stop_event.set()
        self.join(60)
        assert not self.is_alive() and self.error is None, self.error


def _namespace() -> str:
    """A namespace of the test's own: Apicurio gives one schema text one id, whichever subject."""
    return f"shop.t{uuid.uuid4().hex[:12]}"


@pytest.mark.timeout(150)
def test_a_schema_evolving_mid_stream_needs_no_restart_and_makes_no_dead_letter(
        backend, kafka_settings, new_topic, tmp_path, schema_registry):
    kafka = kafka_settings(backend=backend)
    topics = topics_for(new_topic)
    registry = SchemaRegistry(schema_registry.url)
    subject, namespace = f"{topics['input']}-value", _namespace()
    registry.set_compatibility(subject, "BACKWARD")
    v1 = avro_schema(namespace, 1)
    id1 = registry.register(subject, v1)
    rng = random.Random(21)
    events = payments(500, seed=21)
    # the first 200 by version 1; then most writers move to version 2, some still write version 1
    versions = [1] * 200 + [2 if rng.random() < 0.7 else 1 for _ in range(300)]
    for event, version in zip(events, versions, strict=True):
        if version == 2:
            event["channel"] = rng.choice(["web", "pos", None])
    records = [avro_record(e, v) for e, v in zip(events, versions, strict=True)]
    settings = _settings(kafka, topics, tmp_path / "ckpt", avro=schema_registry.url, spec=SPEC_V2)
    worker = ThreadedWorker(settings).start()
    try:
        send_all(kafka, topics["input"], [encode_wire(id1, v1, r) for r in records[:200]])
        wait_for(lambda: _next_offsets(worker, topics["input"], 1) == [200], 60, "version 1's records")
        v2 = avro_schema(namespace, 2)
        id2 = registry.register(subject, v2)  # BACKWARD: optional fields added, removed, renamed
        assert id2 != id1
        send_all(kafka, topics["input"],
                 [encode_wire(id2, v2, r) if v == 2 else encode_wire(id1, v1, r)
                  for r, v in zip(records[200:], versions[200:], strict=True)],
                 keys=[str(i).encode() for i in range(200, 500)])
        wait_for(lambda: _next_offsets(worker, topics["input"], 1) == [500], 60, "both versions' records")
    finally:
        assert worker.stop() == 0
    (loop,) = _check_events(kafka, topics, tmp_path / "ckpt", {0: list(records)}, {},
                            extra_categories=V2_CATEGORIES).values()
    names = "".join(f"{name}\n" for name in loop.names)  # both versions' fields made features
    for prefix in ("device.os=", "platform.os=", "channel=", "note:"):
        assert f"\n{prefix}" in f"\n{names}", prefix


OUTAGE_S = 20.0
RATE = 80.0  # records/s, on two partitions


@pytest.mark.timeout(240)
def test_the_registry_stopped_for_20_s_under_load_loses_and_refuses_nothing(
        backend, kafka_settings, new_topic, tmp_path, schema_registry, caplog):
    caplog.set_level(logging.WARNING, logger="stream_perceptron")
    kafka = kafka_settings(backend=backend)
    topics = topics_for(new_topic, partitions=2)
    topic = topics["input"]
    registry = SchemaRegistry(schema_registry.url)
    subject, namespace = f"{topic}-value", _namespace()
    registry.set_compatibility(subject, "BACKWARD")
    schemas = {1: (registry.register(subject, avro_schema(namespace, 1)), avro_schema(namespace, 1))}
    worker = ThreadedWorker(_settings(kafka, topics, tmp_path / "ckpt", avro=schema_registry.url,
                                      spec=SPEC_V2)).start()
    writers = Writers(kafka, topic, 2, schemas, RATE, seed=31)
    timeline: dict[str, Any] = {}
    try:
        writers.start()
        wait_for(lambda: min(_next_offsets(worker, topic, 2)) >= 40, 60, "records of version 1 learned")
        # version 2 registered while the registry is up; its first record comes only once it is down
        schemas[2] = (registry.register(subject, avro_schema(namespace, 2)), avro_schema(namespace, 2))
        stopping = time.monotonic()
        schema_registry.stop()
        stopped = time.monotonic()
        timeline["registry stop s"] = round(stopped - stopping, 1)
        # records of the schema the worker holds, sent once the registry is down, are learned
        mark = [n + 20 for n in writers.sent()]
        wait_for(lambda: all(a >= b for a, b in zip(_next_offsets(worker, topic, 2), mark, strict=True)),
                 OUTAGE_S / 2, "version 1 records sent after the stop, learned while the registry is down")
        timeline["learned in the outage by"] = _next_offsets(worker, topic, 2)
        writers.share_v2 = 0.5  # a new schema id, first seen while the registry is down
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - stopped)))  # deliberate: the outage lasts 20 s
        at_restart = _next_offsets(worker, topic, 2)
        assert set(writers.first_v2) == {0, 1}
        for p, first in writers.first_v2.items():  # no record of the new id passed while it was down
            assert at_restart[p] <= first, (p, at_restart[p], first)
        timeline["waiting at"] = at_restart
        restarted = time.monotonic()
        schema_registry.start()
        timeline["registry restart s"] = round(time.monotonic() - restarted, 1)
        time.sleep(2.0)  # deliberate: records keep coming once it is back
        writers.finish()
        ends = writers.sent()
        took = wait_for(lambda: _next_offsets(worker, topic, 2) == ends, 90, "every record learned")
        timeline["caught up s after restart"] = round(time.monotonic() - restarted, 1)
        timeline["last wait"] = round(took, 1)
    finally:
        if writers.is_alive():
            writers.finish()
        if not schema_registry.running:
            schema_registry.start()
        code = worker.stop()
    assert code == 0
    waits = [r for r in caplog.records if "waits for the schema registry" in r.getMessage()]
    assert waits and all(r.levelno == logging.WARNING for r in waits)
    assert all("did not answer" in r.getMessage() for r in waits), waits[0].getMessage()
    for p in (0, 1):  # each partition waited where it stood, at or before its first record of the new id
        waited_at = {int(r.getMessage().split("@")[1].split()[0]) for r in waits
                     if r.getMessage().startswith(f"{topic}[{p}]@")}
        assert at_restart[p] in waited_at and max(waited_at) <= writers.first_v2[p], (p, waited_at)
    loops = _check_events(kafka, topics, tmp_path / "ckpt", dict(writers.written), {},
                          extra_categories=V2_CATEGORIES, at_least_once=True)
    duplicates = sum(len(c) - 1 for c in predictions_by_offset(kafka, topics["predictions"]).values())
    print(f"\n{backend}: {writers.sent()} records; {len(waits)} WARNING lines; {duplicates} re-emitted;"
          f" {timeline}; mistakes {[loop.model.mistakes for loop in loops.values()]}")


# -- late labels ------------------------------------------------------------------------------------------

@pytest.mark.timeout(120)
def test_late_labels_found_through_the_spec_join_their_events_in_label_order(
        backend, kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings(backend=backend)
    topics = {**topics_for(new_topic), "outcomes": new_topic()}
    rng = random.Random(41)
    records: list[dict[str, Any]] = []
    labels, waiting = {}, []
    for i, event in enumerate(payments(300, seed=41, labels="all")):
        rid = event["payment"]["id"]
        if i % 3:  # its label comes later, in a label record of the id and label paths only
            labels[rid] = event.pop("outcome")
            waiting.append(rid)
        records.append(event)
        while waiting and rng.random() < 0.4:
            rid = waiting.pop(rng.randrange(len(waiting)))
            records.append({"outcome": labels[rid], "payment": {"id": rid}})
    rng.shuffle(waiting)
    records += [{"payment": {"id": rid}, "outcome": labels[rid]} for rid in waiting]
    send_all(kafka, topics["input"], [orjson.dumps(r) for r in records],
             keys=[r["payment"]["id"].encode() for r in records])
    settings = _settings(kafka, topics, tmp_path / "ckpt", labels={"pending_max": 1000})
    run_until_caught_up(settings, len(records))

    loop, want_outcomes, events = PlainLoop(), {}, {}
    for offset, record in enumerate(records):
        rid = record["payment"]["id"]
        if "amount" in record["payment"]:
            loop.event(record, offset)
            events[offset] = (loop.scores[-1], record)
            continue
        y = label_by_hand(record)
        _, score, event_offset, mistake = loop.late_label(rid, y)
        prediction = 1 if score > 0 else -1
        want_outcomes[offset] = {"id": rid, "topic": topics["input"], "partition": 0, "offset": offset,
                                 "event_offset": event_offset, "prediction": prediction, "score": score,
                                 "label": y, "correct": prediction == y, "mistake": mistake}
    assert not loop.kept and len(want_outcomes) == 200 and loop.model.mistakes > 10  # a stream that tests
    outcomes = {rec["offset"]: rec for *_, rec in read_topic(kafka, topics["outcomes"])}
    assert sorted(outcomes) == sorted(want_outcomes)
    for offset, want in want_outcomes.items():
        got = {k: v for k, v in outcomes[offset].items() if k != "delay_s"}
        assert got == want, (offset, got, want)
    preds = predictions_by_offset(kafka, topics["predictions"])
    assert sorted(preds) == [(0, o) for o in sorted(events)]  # a label record gets no prediction
    for offset, (score, record) in events.items():
        ((p),) = preds[(0, offset)]
        assert p["score"] == score and p["echo"] == echo_by_hand(record)
    assert not read_topic(kafka, topics["dead_letter"])
    ckpt = DirectoryStore(tmp_path / "ckpt").load(topics["input"], 0)
    assert ckpt is not None and stored_as(ckpt) == loop.state()
    assert ckpt.stats["labeled"] == 300  # 100 labeled at once, 200 late
