"""``bench.bench_fetch_decode``: both contenders are timed on the same records, and one that
reads other records is caught (the benchmark itself is not a test)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka.record.memory_records import MemoryRecords

from bench import bench_fetch_decode
from bench.bench_fetch_decode import fetched, main, read_all
from stream_perceptron.settings import KafkaSettings


def test_a_tiny_run_times_both_contenders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = main(["--records", "2500", "--repeats", "2", "--json", str(tmp_path / "decode.json")])
    assert set(report["seconds"]) == set(bench_fetch_decode.contenders())
    assert all(len(v) == 2 and min(v) > 0 for v in report["seconds"].values())
    assert (tmp_path / "decode.json").read_text().startswith("{")
    assert "fastpath.fetch, a batch at once" in capsys.readouterr().out


def test_the_input_is_several_batches_of_the_records_in_order() -> None:
    _, records = read_all(bench_fetch_decode.contenders()["kafka-python, record by record"], fetched(3000, 1))
    assert [r.offset for r in records] == list(range(3000))
    assert [r.key for r in records[:3]] == [b"0", b"1", b"2"]
    batches = 0
    data = MemoryRecords(fetched(30_000, 1))
    while data.next_batch() is not None:
        batches += 1
    assert batches > 5


def test_batches_are_as_large_as_the_workers_producer_makes_them() -> None:
    assert bench_fetch_decode.BATCH_BYTES == KafkaSettings.model_fields["batch_size"].default


def test_a_contender_that_reads_other_records_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    stock, ours = bench_fetch_decode.contenders().values()

    class Lossy(ours):  # type: ignore[misc, valid-type]
        def take(self, n: Any = None) -> list[Any]:
            return super().take(n)[1:]

    monkeypatch.setattr(bench_fetch_decode, "contenders", lambda: {"stock": stock, "lossy": Lossy})
    with pytest.raises(SystemExit, match="lossy read other records"):
        main(["--records", "2500", "--repeats", "1"])
