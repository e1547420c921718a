"""``stream-perceptron features`` on topics, as a process: Avro events through a real schema
registry (Apicurio Registry, the ``schema_registry`` fixture) and JSON events on two partitions.
What it prints of each record is what the report makes of the same events read from a file
(tests/unit/commands/test_features.py holds that report to the worker's decoder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_perceptron.codec.avro import encode_wire
from stream_perceptron.codec.limits import Limits
from stream_perceptron.commands.features import Sample, file_samples, report
from stream_perceptron.features.spec import FeatureSpec
from stream_perceptron.kafka.registry import SchemaRegistry
from tests.integration.helpers import send_all

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "docs" / "examples"
SPEC_FILE = EXAMPLES / "payments.toml"
SPEC = FeatureSpec.parse(tomllib.loads(SPEC_FILE.read_text()))


def _features(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SP_")}
    return subprocess.run([sys.executable, "-m", "stream_perceptron.cli", "features", *args],
                          env={**clean, "SP_FEATURES__SPEC": str(SPEC_FILE), **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _json_lines(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def _events() -> list[dict[str, Any]]:
    return [orjson.loads(s.value) for s in file_samples(EXAMPLES / "payments.jsonl", limit=100)]


def _as_avro(event: dict[str, Any]) -> dict[str, Any] | None:
    """The example's event as a record of docs/examples/payment.avsc (None for one the schema
    cannot hold: a string amount, a label that is not a boolean, a label record)."""
    payment, outcome = event["payment"], event.get("outcome")
    if "amount" not in payment or not isinstance(payment["amount"], float):
        return None
    if outcome is not None and not isinstance(outcome["fraud"], bool | None):
        return None
    ts = datetime.fromisoformat(event["ts"])
    return {"payment": {**payment, "card": payment.get("card")},
            "user": {**event["user"], "age": event["user"].get("age")},
            "note": event.get("note"), "outcome": outcome, "ts": int(ts.timestamp() * 1000)}


def test_avro_events_of_a_topic_through_the_registry_are_reported_as_the_same_events_in_json(
        schema_registry, kafka_settings, new_topic):
    registry = SchemaRegistry(schema_registry.url, timeout_s=5)
    subject = f"payments-{uuid.uuid4().hex[:12]}"
    event_schema = (EXAMPLES / "payment.avsc").read_text()
    label_schema = (EXAMPLES / "payment-label.avsc").read_text()
    event_id = registry.register(f"{subject}-value", event_schema)
    label_id = registry.register(f"{subject}-label-value", label_schema)
    values, as_json = [], []
    for event in _events():
        record = _as_avro(event)
        if record is not None:
            values.append(encode_wire(event_id, event_schema, record))
        elif "amount" not in event["payment"]:  # the label record, in a schema of its own
            values.append(encode_wire(label_id, label_schema, event))
        else:
            continue
        as_json.append(orjson.dumps(event))
    unknown = max(event_id, label_id) + 100_000
    values += [encode_wire(unknown, event_schema, _as_avro(_events()[0])), orjson.dumps(_events()[0])]
    topic = new_topic()
    send_all(kafka_settings(), topic, values)

    lines = _json_lines(_features(
        "--json", SP_KAFKA__BOOTSTRAP_SERVERS=kafka_settings().bootstrap_servers, SP_TOPICS__INPUT=topic,
        SP_INPUT__FORMAT="avro", SP_REGISTRY__URL=schema_registry.url, SP_LABELS__PENDING_MAX="100"))
    events, summary = lines[:-1], lines[-1]["summary"]
    assert [(e["partition"], e["offset"]) for e in events] == [(0, i) for i in range(len(values))]
    expected = [{k: v for k, v in s.record().items() if k != "line"} for s in report(
        SPEC, [Sample({"line": n}, None, v) for n, v in enumerate(as_json, 1)], Limits()).seen]
    got = [{k: v for k, v in e.items() if k not in ("partition", "offset")} for e in events[:len(as_json)]]
    assert got == expected and [e["kind"] for e in got].count("label record") == 1
    assert [e["reason"] for e in events[len(as_json):]] == [
        f"schema {unknown} is not in the schema registry ({schema_registry.url})",
        "not the Avro wire format: byte 0 is 0x7b, not 0x00"]
    assert summary["examples"] == 5 and summary["label_records"] == 1 and summary["dead_letters"] == 2
    # every field of the writer's schema is in each record: the missing ones as null
    assert {f["field"]: f["kinds"] for f in summary["unread_fields"]} == {
        "payment.currency": ["string"], "ts": ["int"]}


def test_json_events_of_two_partitions_are_each_standardized_as_a_fresh_partition(kafka_settings,
                                                                                   new_topic):
    kafka = kafka_settings()
    topic = new_topic(2)
    values = [orjson.dumps({"payment": {"id": f"p{i}", "amount": 10.0 * (i + 1), "method": "card"},
                            "user": {"id": i, "segments": ["web"]}}) for i in range(6)]
    send_all(kafka, topic, values[:3], partition=0)
    send_all(kafka, topic, values[3:], partition=1)
    env = {"SP_KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "SP_INPUT__FORMAT": "json"}

    lines = _json_lines(_features("--topic", topic, "--json", **env))
    where = [(p, o) for p in (0, 1) for o in range(3)]
    assert [(e["partition"], e["offset"]) for e in lines[:-1]] == where
    expected = report(SPEC, [Sample({"partition": p, "offset": o}, str(3 * p + o).encode(), v)
                             for (p, o), v in zip(where, values, strict=True)], Limits())
    assert lines[:-1] == [s.record() for s in expected.seen]
    amounts = [e["x"]["payment.amount"] for e in lines[:-1]]
    assert amounts[0] == amounts[3] == 0.0  # each partition's own first value, then its second
    assert amounts[1] == pytest.approx(1.0) and amounts[4] == pytest.approx(1.0)

    text = _features("--topic", topic, "--limit", "4", **env)
    assert text.returncode == 0, text.stderr[-3000:]
    assert text.stdout.startswith('partition 0 offset 0: example, unlabeled, id "p0"\n')
    assert "\n4 events read: 4 examples (0 labeled" in text.stdout

    gone = _features("--topic", topic + "-gone", **env)
    assert gone.returncode == 1 and gone.stderr == (
        f"stream-perceptron: the topic {topic}-gone does not exist (--topic, or the input topic"
        " SP_TOPICS__INPUT)\n")
