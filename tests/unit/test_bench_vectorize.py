"""bench/bench_vectorize.py runs end to end on a few records (the benchmark itself is not a test)."""

from __future__ import annotations

from bench.bench_vectorize import CONTENDERS, main, named_batches, same_rows


def test_a_tiny_run_times_both_contenders_in_every_repeat(tmp_path, capsys):
    report = main(["--records", "1200", "--repeats", "2", "--json", str(tmp_path / "vectorize.json")])
    assert set(report["seconds"]) == set(CONTENDERS)
    assert all(len(v) == 2 and min(v) > 0 for v in report["seconds"].values())
    assert (tmp_path / "vectorize.json").read_text().startswith("{")
    assert "per-row lists (earlier)" in capsys.readouterr().out


def test_the_batches_are_named_rows_and_the_contenders_agree_on_them():
    batches = named_batches(1200, seed=1)
    assert [len(b) for b in batches] == [500, 500, 200]
    assert all(isinstance(x, dict) and len(x) == 20 for b in batches for x in b)
    assert same_rows(batches)
    assert same_rows(batches, n_features=5_000)  # names refused once the limit is reached


def test_a_disagreement_is_found(monkeypatch):
    batches = named_batches(600, seed=1)
    earlier = CONTENDERS["per-row lists (earlier)"]

    def reversed_rows(model, xs):
        return earlier(model, list(reversed(xs)))

    monkeypatch.setitem(CONTENDERS, "broken", reversed_rows)
    assert not same_rows(batches)
