"""``bench.bench_fastpath fetch`` and ``encode``: both contenders are timed on the same records, and
one that reads or appends differently is caught (the benchmark itself is not a test); ``append``
runs against the test broker in ``tests/integration/test_bench_fastpath.py``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka.record.memory_records import MemoryRecords

from bench import bench_fastpath
from bench.bench_fastpath import (
    BATCH_BYTES,
    ENCODE,
    append_run_per_batch,
    fetched,
    main,
    read_all,
    try_append_per_record,
)
from stream_perceptron.settings import KafkaSettings


def test_a_tiny_fetch_run_times_both_contenders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = main(["fetch", "--records", "2500", "--repeats", "2", "--json", str(tmp_path / "decode.json")])
    assert set(report["seconds"]) == set(bench_fastpath.fetch_contenders())
    assert all(len(v) == 2 and min(v) > 0 for v in report["seconds"].values())
    assert (tmp_path / "decode.json").read_text().startswith("{")
    assert "fastpath.fetch, a batch at once" in capsys.readouterr().out


def test_the_input_is_several_batches_of_the_records_in_order() -> None:
    stock = bench_fastpath.fetch_contenders()["kafka-python, record by record"]
    _, records = read_all(stock, fetched(3000, 1))
    assert [r.offset for r in records] == list(range(3000))
    assert [r.key for r in records[:3]] == [b"0", b"1", b"2"]
    batches = 0
    data = MemoryRecords(fetched(30_000, 1))
    while data.next_batch() is not None:
        batches += 1
    assert batches > 5


def test_batches_are_as_large_as_the_workers_producer_makes_them() -> None:
    assert BATCH_BYTES == KafkaSettings.model_fields["batch_size"].default


def test_a_contender_that_reads_other_records_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    stock, ours = bench_fastpath.fetch_contenders().values()

    class Lossy(ours):  # type: ignore[misc, valid-type]
        def take(self, n: Any = None) -> list[Any]:
            return super().take(n)[1:]

    monkeypatch.setattr(bench_fastpath, "fetch_contenders", lambda: {"stock": stock, "lossy": Lossy})
    with pytest.raises(SystemExit, match="lossy read other records"):
        main(["fetch", "--records", "2500", "--repeats", "1"])


def test_a_tiny_encode_run_times_both_contenders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = main(["encode", "--records", "2500", "--repeats", "2", "--json", str(tmp_path / "encode.json")])
    assert set(report["seconds"]) == set(ENCODE)
    assert all(len(v) == 2 and min(v) > 0 for v in report["seconds"].values())
    assert (tmp_path / "encode.json").read_text().startswith("{")
    assert "append_run per batch" in capsys.readouterr().out



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
    theirs, ours = try_append_per_record(keys, values), append_run_per_batch(keys, values)
    for batch in theirs + ours:
        batch.records.close()
    assert len(theirs) == len(ours) > 5
    assert [b.record_count for b in theirs] == [b.record_count for b in ours]


def test_a_contender_that_appends_differently_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def one_lost(keys: list[bytes], values: list[bytes]) -> list[Any]:
        return append_run_per_batch(keys[:-1], values[:-1])

    monkeypatch.setattr(bench_fastpath, "ENCODE", {"stock": try_append_per_record, "lossy": one_lost})
    with pytest.raises(SystemExit, match="appended differently"):
        main(["encode", "--records", "2500", "--repeats", "1"])
