"""The worker benchmark's events section, its pure parts: the same examples in every format, the
settings each worker run gets, the ratios to the envelope, the target and the table (a tiny run
on a broker: tests/integration/test_bench_events.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_worker import parse_args  # noqa: E402
from bench.worker import inputs, report, sections, targets  # noqa: E402
from stream_perceptron.codec.avro import AvroDecoder, encode_wire  # noqa: E402
from stream_perceptron.codec.events import EventDecoder  # noqa: E402
from stream_perceptron.codec.inputs import BatchDecoder  # noqa: E402
from stream_perceptron.codec.limits import Limits  # noqa: E402
from stream_perceptron.features.spec import FeatureSpec  # noqa: E402
from stream_perceptron.features.standardize import Standardizer  # noqa: E402
from stream_perceptron.settings import Settings  # noqa: E402


def test_the_spec_makes_of_each_event_the_envelope_records_example_in_json_and_in_avro() -> None:
    events, envelopes, meta = inputs.event_records(500, seed=3)
    assert meta["n"] == len(events) == len(envelopes) == 500 and meta["labels_flipped"] == 5
    envelope = BatchDecoder(Limits()).decode_many(envelopes, [None] * 500)
    spec = EventDecoder(FeatureSpec.parse(inputs.EVENT_SPEC), Limits())
    schema = json.dumps(inputs.EVENT_SCHEMA)
    avro = AvroDecoder()
    parses = {"json": orjson.loads, "avro": lambda v: avro.decode_wire(v, {9: schema}.__getitem__)}
    for fmt, values in (("json", [orjson.dumps(e) for e in events]),
                        ("avro", [encode_wire(9, schema, e) for e in events])):
        got = spec.decode_many(values, [None] * 500, Standardizer(), parses[fmt])
        assert got.rejected == {} and got.ids == envelope.ids == list(range(500))
        assert got.ys == envelope.ys and {1, -1} == set(got.ys)
        # the same names, values and order: the model sees the same rows
        assert [list(x.items()) for x in got.xs] == [list(x.items()) for x in envelope.xs]
    assert len(envelope.xs[0]) == 10 + 3 + len(events[0]["tags"])


def test_each_format_gets_its_settings_and_a_worker_takes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sections.event_env("envelope", None, "http://r") == {}
    assert sections.event_env("envelope", 20, None) == {"SP_MODEL__HASH_BITS": "20"}
    avro = sections.event_env("avro", None, "http://127.0.0.1:1/apis/ccompat/v7")
    assert avro["SP_INPUT__FORMAT"] == "avro" and avro["SP_REGISTRY__URL"].startswith("http://127.0.0.1")
    assert "SP_REGISTRY__URL" not in sections.event_env("json", None, "http://r")
    for name, value in avro.items():
        monkeypatch.setenv(name, value)
    assert Settings().features.feature_spec() == FeatureSpec.parse(inputs.EVENT_SPEC)


def _run(fmt: str, repeat: int, rate: float, *, hash_bits: int | None = None, complete: bool = True,
         mistakes: int = 7) -> dict[str, object]:
    return {"backend": "kafka-python", "hash_bits": hash_bits, "format": fmt, "repeat": repeat, "rate": rate,
            "complete": complete, "mistakes": mistakes, "cpu_cores_in_window": rate / 1e5}


def test_each_format_is_judged_against_the_envelope_of_its_own_backend_and_hash_setting() -> None:
    runs = [_run("envelope", 0, 100.0), _run("json", 0, 50.0), _run("envelope", 1, 200.0),
            _run("json", 1, 160.0), _run("json", 2, 1.0, complete=False, mistakes=6),
            _run("envelope", 0, 1000.0, hash_bits=20), _run("json", 0, 300.0, hash_bits=20)]
    rows = {(r["format"], r["hash_bits"]): r for r in sections.event_rows(runs)}
    json_rows = rows["json", None]
    # the medians 105 (of 50 and 160) and 150; the incomplete run left out
    assert json_rows["ratio"] == pytest.approx(105 / 150)
    assert json_rows["per_repeat"] == [0.5, 0.8] and json_rows["summary"]["runs_left_out"] == 1
    assert json_rows["mistakes"] == [6, 7]  # a run that disagrees shows
    assert rows["json", 20]["ratio"] == pytest.approx(0.3) and rows["envelope", 20]["ratio"] == 1.0
    ev = {"rows": list(rows.values()), "hash_bits": [None, 20], "input": {
        "n": 10, "mean_bytes": {"envelope": 230.0, "json": 197.0}}}
    (target,) = targets.evaluate_targets({"events": ev})  # the first hash setting's alone
    assert (target["backend"], target["met"], target["value"]) == ("kafka-python", True, pytest.approx(0.7))
    assert "json events >= 0.6 x the envelope" in targets.target_line(target)
    headers, table = report.events_table(ev)
    assert dict(zip(headers, table[1], strict=True))["x envelope"] == "0.70x"
    assert dict(zip(headers, table[1], strict=True))["per repeat"] == "0.50x, 0.80x"


def test_events_run_only_when_asked_for_and_profile_their_own_workers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert "events" not in parse_args([]).sections
    args = parse_args(["--only", "events", "--profile", "pyspy", "--hash-bits", "12,none"])
    assert args.sections == {"events"} and args.hash_bits == [12, None]
    assert args.event_formats == ["json", "avro"]
    for bad in (["--event-formats", "xml"], ["--hash-bits", "many"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
    assert "--event-formats takes" in capsys.readouterr().err
