"""bench/bench_codec.py runs end to end on a few records (the benchmark itself is not a test)."""

from __future__ import annotations

import orjson

from bench.bench_codec import (
    DECODERS,
    ENCODERS,
    decoded_bits,
    input_batches,
    main,
    prediction_batches,
    same_decoded,
    same_values,
)


def test_a_tiny_run_times_both_encoders_and_both_decoder_calls_in_every_repeat(tmp_path, capsys):
    report = main(["--records", "1200", "--repeats", "2", "--json", str(tmp_path / "codec.json")])
    assert set(report["seconds"]) == set(ENCODERS) | set(DECODERS)
    assert all(len(v) == 2 and min(v) > 0 for v in report["seconds"].values())
    assert (tmp_path / "codec.json").read_text().startswith("{")
    out = capsys.readouterr().out
    assert "dict + orjson.dumps" in out and "struct + msgspec" in out
    assert "msgspec: decode_many(values, keys)" in out and "simdjson matrix" in out


def test_the_decoder_calls_get_the_workers_inputs_and_agree_on_them():
    batches = input_batches(1200, seed=1)
    assert [len(v) for v, _ in batches] == [500, 500, 200]
    assert batches[1][1][0] == b"500"
    assert same_decoded(batches)
    broken = [(v, [b"k" * 5000] + k[1:]) for v, k in batches]  # over limits.max_key_bytes
    assert not same_decoded(broken)  # the values-only contender does not check keys


def test_the_simdjson_contender_hands_over_a_matrix_and_the_msgspec_ones_lists():
    values, keys = input_batches(600, seed=1)[0]
    results = {name: make()(values, keys) for name, make in DECODERS.items()}
    kinds = {name: type(d.xs).__name__ for name, (_, _, d) in results.items()}
    assert kinds == {"msgspec: decode_many(values)": "list", "msgspec: decode_many(values, keys)": "list",
                     "simdjson matrix: decode_many(values, keys)": "ndarray"}
    assert len({decoded_bits(r)[1] for r in results.values()}) == 1  # the same bits


def test_the_batches_are_the_workers_columns_and_the_encoders_agree_on_them():
    batches = prediction_batches(1200, seed=1)
    assert [len(b["offsets"]) for b in batches] == [500, 500, 200]
    assert sum(sum(b["mistakes"]) for b in batches) > 0  # the model learned: updates move
    assert batches[-1]["updates"][-1] == sum(sum(b["mistakes"]) for b in batches)
    assert same_values(batches)
    first = orjson.loads(ENCODERS["dict + orjson.dumps"](**batches[0])[0])
    assert first["topic"] == "examples" and first["key"] == "0" and first["offset"] == 0


def test_a_disagreement_is_found(monkeypatch):
    batches = prediction_batches(600, seed=1)
    monkeypatch.setitem(ENCODERS, "broken", lambda **c: [b'{"topic":"other"}'] * len(c["offsets"]))
    assert not same_values(batches)
