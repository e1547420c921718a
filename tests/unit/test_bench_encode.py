"""``bench.bench_encode``: both contenders are timed on the same records, and one that appends
differently is caught (the benchmark itself is not a test)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bench import bench_encode
from bench.bench_encode import BATCH_BYTES, CONTENDERS, main, per_record, per_run
from stream_perceptron.settings import KafkaSettings


def test_a_tiny_run_times_both_contenders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = main(["--records", "2500", "--repeats", "2", "--json", str(tmp_path / "encode.json")])
    assert set(report["seconds"]) == set(CONTENDERS)
    assert all(len(v) == 2 and min(v) > 0 for v in report["seconds"].values())
    assert (tmp_path / "encode.json").read_text().startswith("{")
    assert "append_run per batch" in capsys.readouterr().out


def test_batches_are_as_large_as_the_workers_producer_makes_them() -> None:
    assert BATCH_BYTES == KafkaSettings.model_fields["batch_size"].default


def _frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways read the wall clock per record (a default argument bound to ``time.time``), and a
    record's timestamp delta is a varint whose length grows with the milliseconds since the batch
    began: how many records fit a batch then depends on how fast each way runs. One instant for
    both makes the batches comparable byte for byte."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from stream_perceptron.kafka.fastpath import encode

    for fn in (DefaultRecordBatchBuilder.append, encode.append_run):
        frozen = tuple((lambda: 1_700_000_000.0) if d is time.time else d for d in fn.__defaults__)
        assert frozen != fn.__defaults__, f"{fn.__qualname__} no longer reads time.time by default"
        monkeypatch.setattr(fn, "__defaults__", frozen)


def test_both_fill_the_same_batches_with_the_same_records(monkeypatch: pytest.MonkeyPatch) -> None:
    _frozen_clock(monkeypatch)
    keys, values = [b"%d" % i for i in range(30_000)], [b"v" * (i % 200) for i in range(30_000)]
    theirs, ours = per_record(keys, values), per_run(keys, values)
    for batch in theirs + ours:
        batch.records.close()
    assert len(theirs) == len(ours) > 5
    assert [b.record_count for b in theirs] == [b.record_count for b in ours]


def test_a_contender_that_appends_differently_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def one_lost(keys: list[bytes], values: list[bytes]) -> list[Any]:
        return per_run(keys[:-1], values[:-1])

    monkeypatch.setattr(bench_encode, "CONTENDERS", {"stock": per_record, "lossy": one_lost})
    with pytest.raises(SystemExit, match="appended differently"):
        main(["--records", "2500", "--repeats", "1"])
