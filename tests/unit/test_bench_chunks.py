"""bench/bench_chunks.py runs end to end on a few records (the benchmark itself is not a test)."""

from __future__ import annotations

from bench.bench_chunks import main


def test_a_tiny_run_times_every_chunk_size_in_every_repeat(tmp_path, capsys):
    report = main(["--records", "3000", "--chunks", "2000,500", "--repeats", "2",
                   "--json", str(tmp_path / "chunks.json")])
    assert set(report["seconds"]) == {"2000", "500"}
    assert all(len(v) == 2 and min(v) > 0 for v in report["seconds"].values())
    assert (tmp_path / "chunks.json").read_text().startswith("{")
    out = capsys.readouterr().out
    assert "chunk_records" in out and "2,000" in out and "500" in out
