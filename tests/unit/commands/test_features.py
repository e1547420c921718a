"""``stream-perceptron features``: the report of what a feature spec makes of sample events (each
event as the worker takes it, and the summary), the command on a JSONL file, and the worked
example of docs/events.md, whose quoted files, output and prediction records are checked against
the files, what the command prints and what the worker publishes today.
tests/integration/commands/test_features.py reads topics of JSON and of Avro events."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from river import preprocessing

from stream_perceptron import Perceptron
from stream_perceptron.cli import main
from stream_perceptron.codec.avro import encode_wire
from stream_perceptron.codec.events import EventDecoder
from stream_perceptron.codec.limits import Limits
from stream_perceptron.commands import features as features_command
from stream_perceptron.commands.features import Sample, avro_parse, field_text, file_samples, report
from stream_perceptron.errors import RegistryUnavailable, SchemaNotFound, SourceError
from stream_perceptron.features.spec import FeatureSpec
from stream_perceptron.features.standardize import Standardizer
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from tests.unit.worker.fakes import FakeEdge

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "docs" / "examples"

SPEC = FeatureSpec.parse({
    "label": "outcome.fraud", "positive": [True], "negative": [False], "id": "payment.id",
    "echo": ["payment.id", "user.id"],
    "numeric": {"payment.amount": {"standardize": True}, "user.age": {}},
    "categorical": ["payment.method", "user.segments"], "text": ["note"],
})


def _pay(i: int, amount=10.0, *, fraud=False, method="card", segments=("web",), **extra) -> dict:
    event = {"payment": {"id": f"p{i}", "amount": amount, "method": method},
             "user": {"id": 100 + i, "age": 30 + i, "segments": list(segments)}, "outcome": {"fraud": fraud}}
    event.update(extra)
    return event


def _lines(*events: dict | bytes) -> list[Sample]:
    return [Sample({"line": n}, None, e if isinstance(e, bytes) else orjson.dumps(e))
            for n, e in enumerate(events, 1)]


# ---------------------------------------------------------------------------------- each event


def test_each_event_is_an_example_a_label_record_or_a_dead_letter_as_the_worker_decodes_it():
    samples = _lines(_pay(1, fraud=True), {"payment": {"id": "p0"}, "outcome": {"fraud": False}},
                     _pay(2, amount="12"), b"{not json", _pay(3, outcome=None))
    found = report(SPEC, samples, Limits())
    assert [s.kind for s in found.seen] == ["example", "label record", "dead letter", "dead letter",
                                            "example"]
    first = found.seen[0]
    assert (first.y, first.label, first.id) == (1, True, "p1")
    assert first.x == {"payment.amount": 0.0, "user.age": 31.0, "payment.method=card": 1.0,
                       "user.segments=web": 1.0}
    assert first.echo == {"payment.id": "p1", "user.id": 101}
    assert (found.seen[1].y, found.seen[1].label, found.seen[1].id) == (-1, False, "p0")
    # the reasons are the worker's decoder's, word for word
    decoded = EventDecoder(SPEC, Limits()).decode_many([s.value for s in samples], [None] * 5, Standardizer())
    assert [found.seen[i].reason for i in (2, 3)] == [decoded.rejected[2], decoded.rejected[3]]
    assert found.seen[2].reason == 'payment.amount: expected a number or a boolean, got string "12"'
    assert found.seen[4].record()["y"] == 0 and found.seen[4].record()["label"] is None  # found nothing


def test_standardized_features_are_a_fresh_partitions_over_the_sample_in_order_one_per_partition():
    amounts = [10.0, 20.0, 30.0, 45.0]
    scaler = preprocessing.StandardScaler()
    expected = []
    for a in amounts:
        scaler.learn_one({"a": a})
        expected.append(scaler.transform_one({"a": a})["a"])
    in_a_file = report(SPEC, _lines(*(_pay(i, a) for i, a in enumerate(amounts))), Limits())
    assert [s.x["payment.amount"] for s in in_a_file.seen] == expected
    assert [s.x["user.age"] for s in in_a_file.seen] == [30.0, 31.0, 32.0, 33.0]  # not standardized
    # two partitions of a topic, interleaved: each standardizes its own events
    mixed = [Sample({"partition": i % 2, "offset": i // 2}, None, orjson.dumps(_pay(i, a)))
             for i, a in enumerate([10.0, 99.0, 20.0, 7.0])]
    scaled = [s.x["payment.amount"] for s in report(SPEC, mixed, Limits()).seen]
    assert scaled[:2] == [0.0, 0.0] and scaled[2:] == [1.0, -1.0]


def test_the_examples_learned_in_order_give_the_scores_the_worker_publishes(tmp_path):
    """The report's examples are the worker's: a perceptron learning them in order scores each
    as the worker's prediction records do."""
    events = [_pay(i, amount=float(5 + 17 * i % 60), fraud=i % 3 == 0, method=["card", "wallet"][i % 2],
                   segments=["web", "app", "new"][: 1 + i % 3]) for i in range(40)]
    events[7]["payment"]["amount"] = "lots"
    del events[11]["outcome"]
    values = [orjson.dumps(e) for e in events]
    edge = FakeEdge()
    worker = Worker(Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                             input={"format": "json"}, features={
                                 "label": "outcome.fraud", "positive": [True], "negative": [False],
                                 "id": "payment.id", "echo": ["payment.id", "user.id"],
                                 "numeric": {"payment.amount": {"standardize": True}, "user.age": {}},
                                 "categorical": ["payment.method", "user.segments"], "text": ["note"]}),
                    edge=edge)
    worker.process(Batch.of([InRecord("in", 0, i, None, v, 1000 + i) for i, v in enumerate(values)]))
    model, scores = Perceptron(), []
    for seen in report(SPEC, _lines(*values), Limits()).seen:
        if seen.kind == "example":
            scores.append(model.score_one(seen.x))
            if seen.y:
                model.learn_one(seen.x, seen.y)
    predictions = edge.records("predictions")
    assert [p["score"] for p in predictions] == scores and len(scores) == 39
    assert [p["echo"] for p in predictions][:2] == [{"payment.id": "p0", "user.id": 100},
                                                   {"payment.id": "p1", "user.id": 101}]


def test_the_text_of_each_kind(tmp_path):
    found = report(SPEC, _lines(_pay(1, fraud=True, note="Gift cards"), {"payment": {"id": "p1"},
                                "outcome": {"fraud": True}}, b"[1]"), Limits(), late_labels=False)
    lines = list(found.lines())
    assert lines[:8] == [
        'line 1: example, label +1 (true), id "p1"',
        "    payment.amount       0",
        "    user.age             31",
        "    payment.method=card  1",
        "    user.segments=web    1",
        "    note:gift            1",
        "    note:cards           1",
        '    echo: payment.id="p1"  user.id=101',
    ]
    assert lines[8] == ('line 2: label record, label +1 (true), id "p1" (late labels are off,'
                        " SP_LABELS__PENDING_MAX=0: the worker refuses it)")
    assert lines[9] == "line 3: dead letter: record must be a JSON object, got array"
    assert ("late labels are off (SP_LABELS__PENDING_MAX=0): the worker sends label records to the"
            " dead-letter topic") in lines
    topic = report(SPEC, [Sample({"partition": 2, "offset": 41}, b"k", orjson.dumps(_pay(1)))], Limits())
    assert next(topic.lines()).startswith('partition 2 offset 41: example, label -1 (false), id "p1"')


# ---------------------------------------------------------------------------------- the summary


def test_the_summary_counts_kinds_labels_and_dead_letters_by_reason():
    samples = _lines(_pay(1, fraud=True), _pay(2), _pay(3, outcome={"fraud": None}), _pay(4, amount="x"),
                     _pay(5, amount="x"), _pay(6, outcome={"fraud": "maybe"}),
                     {"payment": {"id": "p1"}, "outcome": {"fraud": True}})
    s = report(SPEC, samples, Limits()).summary()
    assert {k: s[k] for k in ("events", "examples", "labeled", "positive", "negative", "unlabeled",
                              "label_records", "dead_letters")} == {
        "events": 7, "examples": 3, "labeled": 2, "positive": 1, "negative": 1, "unlabeled": 1,
        "label_records": 1, "dead_letters": 3}
    assert list(s["dead_letter_reasons"].items()) == [
        ('payment.amount: expected a number or a boolean, got string "x"', 2),
        ('outcome.fraud: "maybe" is neither a positive (true) nor a negative (false) value', 1)]


def test_each_path_counts_values_missing_and_wrong_types_over_the_events_that_are_not_label_records():
    samples = _lines(
        _pay(1, note="hello"),
        _pay(2, amount=None, method=7, segments=("a", True)),  # an integer and a boolean are categories
        {**_pay(3, method=2.5), "user": {"id": "u3", "age": "old", "segments": "solo"}},
        {"payment": {"id": 4, "amount": 1.0}, "user": {"segments": [{"nested": 1}]}, "note": ["not", "text"]},
        {"payment": {"id": "p1"}, "outcome": {"fraud": True}},  # a label record: counted apart
    )
    found = report(SPEC, samples, Limits())
    counts = {(p["role"], p["path"]): (p["value"], p["missing"], p["wrong_type"])
              for p in found.summary()["paths"]}
    assert found.events == 4 and found.summary()["paths_over"] == 4
    assert counts == {
        ("label", "outcome.fraud"): (3, 1, 0),
        ("id", "payment.id"): (4, 0, 0),
        ("numeric", "payment.amount"): (3, 1, 0),
        ("numeric", "user.age"): (2, 1, 1),
        ("categorical", "payment.method"): (2, 1, 1),
        ("categorical", "user.segments"): (3, 0, 1),
        ("text", "note"): (1, 2, 1),
        ("echo", "payment.id"): (4, 0, 0),
        ("echo", "user.id"): (3, 1, 0),
    }
    categories = found.summary()["categories"]
    assert categories["user.segments"] == {"distinct": 4, "events": 3,
                                           "top": [["web", 1], ["a", 1], ["true", 1], ["solo", 1]]}
    assert categories["payment.method"]["top"] == [["card", 1], ["7", 1]]  # named as the features are


def test_a_path_that_never_matched_is_named_with_the_nearest_field():
    spec = FeatureSpec.parse({"label": "outcome.fraud", "numeric": ["payment.amount", "user.agee"],
                              "categorical": ["device.kind"]})
    found = report(spec, _lines(_pay(1), _pay(2)), Limits())
    assert found.never_matched() == [("user.agee", "user.age"), ("device.kind", None)]
    lines = list(found.summary_lines())
    assert ("paths that never matched (found nothing in any event): user.agee (nearest field: user.age),"
            " device.kind") in lines
    assert report(spec, [], Limits()).never_matched() == []  # no event: nothing to say


def test_the_fields_no_path_reads_are_listed_nested_the_most_frequent_first():
    spec = FeatureSpec.parse({"numeric": ["a.b", "items[0].price"], "echo": ["e"]})
    events = [{"a": {"b": 1, "c": "x", "d": {"e": True}}, "items": [{"price": 2}], "e": 1, "ts": 5,
               "headers": {"content type": "json"}, "empty": {}},
              {"a": {"b": 2, "c": None}, "ts": 6, "tags": ["x"]}]
    found = report(spec, _lines(*events), Limits())
    assert [(f["field"], f["events"], f["kinds"]) for f in found.summary()["unread_fields"]] == [
        ("a.c", 2, ["null", "string"]), ("ts", 2, ["int"]), ("a.d.e", 1, ["bool"]), ("empty", 1, ["object"]),
        ('headers["content type"]', 1, ["string"]), ("tags", 1, ["array"])]
    assert field_text(("1st", "x")) == '["1st"].x'


def test_what_the_summary_counts_is_bounded(monkeypatch):
    monkeypatch.setattr(features_command, "MAX_FIELDS", 5)
    monkeypatch.setattr(features_command, "FIELDS_SHOWN", 3)
    spec = FeatureSpec.parse({"categorical": ["c"]})
    found = report(spec, _lines(*({"c": f"v{i}", f"k{i}": i} for i in range(8))), Limits())
    summary = found.summary()
    assert len(found.fields) == 5 and found.fields_dropped == 4
    assert summary["categories"]["c"]["distinct"] == 5 and summary["categories"]["c"]["events"] == 8
    assert len(summary["unread_fields"]) == 3 and summary["unread_fields_not_shown"] == 1
    lines = list(found.summary_lines())
    assert "    and 1 more" in lines and "    (past 5 distinct fields, 4 more were not counted)" in lines


def test_json_lines_hold_each_event_then_the_summary():
    label = {"payment": {"id": "p1"}, "outcome": {"fraud": True}}
    found = report(SPEC, _lines(_pay(1, fraud=True), b"[1]", label), Limits())
    lines = [json.loads(line) for line in found.json_lines()]
    assert lines[0] == {"line": 1, "kind": "example", "y": 1, "label": True, "id": "p1",
                        "x": {"payment.amount": 0.0, "user.age": 31.0, "payment.method=card": 1.0,
                              "user.segments=web": 1.0},
                        "echo": {"payment.id": "p1", "user.id": 101}}
    assert lines[1] == {"line": 2, "kind": "dead letter", "reason": "record must be a JSON object, got array"}
    assert lines[2] == {"line": 3, "kind": "label record", "y": 1, "label": True, "id": "p1"}
    assert lines[3]["summary"]["events"] == 3 and len(lines) == 4


# ---------------------------------------------------------------------------------- the samples


class _Registry:
    """A schema registry's ``schema``: the schemas held, or a registry that does not answer."""

    def __init__(self, schemas: dict[int, str], answers: bool = True) -> None:
        self.schemas, self.answers = schemas, answers

    def schema(self, schema_id: int) -> str:
        if not self.answers:
            raise RegistryUnavailable("the schema registry (http://registry) did not answer: refused")
        if schema_id not in self.schemas:
            raise SchemaNotFound(f"schema {schema_id} is not in the schema registry (http://registry)")
        return self.schemas[schema_id]


AVRO = json.dumps({"type": "record", "name": "Pay", "fields": [
    {"name": "payment", "type": {"type": "record", "name": "P", "fields": [
        {"name": "id", "type": "string"}, {"name": "amount", "type": "double"},
        {"name": "method", "type": {"type": "enum", "name": "M", "symbols": ["card", "wallet"]}}]}},
    {"name": "outcome", "type": ["null", {"type": "record", "name": "O", "fields": [
        {"name": "fraud", "type": "boolean"}]}], "default": None},
    {"name": "raw", "type": "bytes"}]})


def test_avro_records_are_read_with_their_writers_schema_and_an_unknown_id_is_a_dead_letter():
    values = [encode_wire(3, AVRO, {"payment": {"id": "a", "amount": 2.0, "method": "wallet"},
                                    "outcome": {"fraud": True}, "raw": b"\x00"}),
              encode_wire(9, AVRO, {"payment": {"id": "b", "amount": 1.0, "method": "card"}, "outcome": None,
                                    "raw": b""}),
              b'{"payment": {}}']
    spec = FeatureSpec.parse({"label": "outcome.fraud", "id": "payment.id", "numeric": ["payment.amount"],
                              "categorical": ["payment.method"]})
    samples = [Sample({"partition": 0, "offset": i}, None, v) for i, v in enumerate(values)]
    found = report(spec, samples, Limits(), parse=avro_parse(_Registry({3: AVRO})))
    assert found.seen[0].x == {"payment.amount": 2.0, "payment.method=wallet": 1.0}
    assert found.seen[1].reason == "schema 9 is not in the schema registry (http://registry)"
    assert found.seen[2].reason == "not the Avro wire format: byte 0 is 0x7b, not 0x00"
    assert [f["field"] for f in found.summary()["unread_fields"]] == ["raw"]
    assert "\n".join(found.json_lines())  # bytes in an event do not stop the JSON lines
    with pytest.raises(RegistryUnavailable):  # not a record's fault: it ends the report
        report(spec, samples[:1], Limits(), parse=avro_parse(_Registry({3: AVRO}, answers=False)))


def test_a_files_events_are_its_non_blank_lines_numbered_as_in_the_file(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"a": 1}\n\n  \r\n{"a": 2}\r\n{"a": 3}\n{"a": 4}')
    assert list(file_samples(path)) == [Sample({"line": n}, None, b'{"a": %d}' % a)
                                        for n, a in [(1, 1), (4, 2), (5, 3), (6, 4)]]
    assert [s.where["line"] for s in file_samples(path, limit=2)] == [1, 4]
    with pytest.raises(SourceError, match=r"cannot read .*gone.jsonl: No such file or directory"):
        list(file_samples(tmp_path / "gone.jsonl"))


# ---------------------------------------------------------------------------------- the command


def _run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["features", *args], env=env or {}, catch_exceptions=False)


@pytest.fixture
def spec_env(tmp_path) -> dict[str, str]:
    spec = tmp_path / "spec.toml"
    spec.write_text('label = "outcome.fraud"\npositive = [true]\nnegative = [false]\nid = "payment.id"\n'
                    '[numeric]\n"payment.amount" = { standardize = true }\n'
                    '[categorical]\n"payment.method" = {}\n')
    return {"SP_INPUT__FORMAT": "json", "SP_FEATURES__SPEC": str(spec)}


def test_the_command_reports_on_a_jsonl_file(tmp_path, spec_env):
    sample = tmp_path / "events.jsonl"
    sample.write_bytes(b"\n".join(orjson.dumps(_pay(i, 10.0 * i, fraud=i == 2)) for i in range(1, 4))
                       + b"\n{not json}\n")
    done = _run(str(sample), env=spec_env)
    assert done.exit_code == 0, done.output
    assert done.output.startswith('line 1: example, label -1 (false), id "p1"\n    payment.amount       0\n')
    assert "line 4: dead letter: not valid JSON" in done.output
    assert ("4 events read: 3 examples (3 labeled: 1 positive, 2 negative; 0 unlabeled), 0 label records,"
            " 1 dead letter") in done.output
    as_json = _run(str(sample), "--json", "--limit", "2", env=spec_env)
    lines = [json.loads(line) for line in as_json.output.splitlines()]
    assert [line.get("line") for line in lines] == [1, 2, None]
    assert lines[1]["x"] == {"payment.amount": 1.0, "payment.method=card": 1.0}
    assert lines[-1]["summary"]["events"] == 2


@pytest.mark.parametrize(("args", "env", "line", "code"), [
    ([], {}, "no feature spec: set SP_FEATURES__SPEC to a TOML file holding it (or write the config"
             " file's [features] table)", 2),
    ([], {"SP_INPUT__FORMAT": "json"}, "invalid settings: SP_INPUT__FORMAT=json needs a feature spec: the"
                                       " config file's [features] table, or SP_FEATURES__SPEC", 2),
    (["x.jsonl", "--topic", "t"], None, "give a SAMPLE file or --topic TOPIC: one of them", 2),
    ([], None, "SP_KAFKA__BOOTSTRAP_SERVERS is not set (nor bootstrap_servers under [kafka] in --config)", 2),
    (["gone.jsonl"], None, "cannot read gone.jsonl: No such file or directory", 1),
], ids=["no-spec", "json-without-a-spec", "file-and-topic", "topic-without-a-cluster", "no-such-file"])
def test_what_stops_the_command_is_one_line(args, env, line, code, spec_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, ["features", *args], env=spec_env if env is None else env)
    assert done.exit_code == code and done.output == f"stream-perceptron: {line}\n"


# ---------------------------------------------------------------------------------- the docs


EVENTS_PAGE = ROOT / "docs" / "events.md"


def _quoted(marker: str) -> str:
    """The fenced block that follows ``<!-- marker -->`` in docs/events.md, without its fences."""
    page = EVENTS_PAGE.read_text()
    found = re.search(rf"<!-- {re.escape(marker)} -->\n```[\w-]*\n(.*?)^```\n", page, re.S | re.M)
    assert found is not None, f"docs/events.md has no block after <!-- {marker} -->"
    return found.group(1)


@pytest.mark.parametrize("name", ["payments.toml", "payments.jsonl", "payment.avsc", "payment-label.avsc"])
def test_the_docs_quote_the_example_files_as_they_are(name):
    assert _quoted(f"file: docs/examples/{name}") == (EXAMPLES / name).read_text()


def test_the_docs_quote_what_the_command_prints_on_the_example_today(monkeypatch):
    """The page's session: its ``export`` line sets the environment, its command runs from the
    repository's root, and what follows is what it prints."""
    session = _quoted("features-output").splitlines()
    export, command, printed = session[0], session[1], session[2:]
    assert export.startswith("$ export ") and command.startswith("$ stream-perceptron features ")
    env = dict(pair.split("=", 1) for pair in shlex.split(export)[2:])
    monkeypatch.chdir(ROOT)
    done = CliRunner().invoke(main, shlex.split(command)[2:], env=env, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == printed


def test_the_docs_prediction_records_are_what_the_worker_publishes_for_the_example(tmp_path):
    """The sample file's lines as the records of partition 0 of the topic ``payments``, a second
    apart: the predictions and the outcome the page shows."""
    values = [line for line in (EXAMPLES / "payments.jsonl").read_bytes().splitlines() if line.strip()]
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        input={"format": "json"}, features={"spec": str(EXAMPLES / "payments.toml")},
                        labels={"pending_max": 10_000})
    edge = FakeEdge(assigned=[("payments", 0)])
    Worker(settings, edge=edge).process(Batch.of(
        [InRecord("payments", 0, i, None, v, 1_795_857_243_000 + 1000 * i) for i, v in enumerate(values)]))
    assert [json.loads(line) for line in _quoted("predictions").splitlines()] == edge.records("predictions")
    assert [json.loads(line) for line in _quoted("outcomes").splitlines()] == edge.records("outcomes")
