"""bench/bench_produce.py runs end to end on a few records (the benchmark itself is not a test)."""

from __future__ import annotations

import pytest

from bench.bench_produce import CONTENDERS, POLL_RECORDS, main, polls


def test_a_tiny_run_times_every_contender(tmp_path, capsys):
    report = main(["--records", "2500", "--repeats", "2", "--json", str(tmp_path / "produce.json")])
    assert set(report["seconds"]) == set(CONTENDERS)
    assert all(len(v) == 2 and min(v) > 0 for v in report["seconds"].values())
    assert (tmp_path / "produce.json").read_text().startswith("{")
    out = capsys.readouterr().out
    assert "produce(topic, v, k)" in out and "x earlier" in out


def test_the_polls_hold_every_record_with_its_key():
    inputs = polls(2500, seed=1)
    assert [len(keys) for keys, _ in inputs] == [POLL_RECORDS, 500]
    assert [len(values) for _, values in inputs] == [POLL_RECORDS, 500]
    assert [k for keys, _ in inputs for k in keys][1998:2001] == [b"1998", b"1999", b"2000"]


def test_a_contender_that_loses_a_record_is_caught(monkeypatch):
    positional = CONTENDERS["produce(topic, v, k)"]

    def one_lost(producer, poll):
        keys, values = poll
        positional(producer, (keys[:-1], values[:-1]))

    monkeypatch.setattr("bench.bench_produce.CONTENDERS", {"lossy": one_lost})
    with pytest.raises(SystemExit, match="queued 2498 of 2500 records"):
        main(["--records", "2500", "--repeats", "1"])
