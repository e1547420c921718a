"""``bench.bench_fastpath append`` against the test broker: both contenders are timed, and one that loses a
record is caught (the benchmark itself is not a test)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_fastpath import APPEND, main  # noqa: E402


def test_a_tiny_run_times_both_contenders(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = main(["append", "--bootstrap", kafka_bootstrap, "--records", "2500", "--repeats", "2",
                   "--json", str(tmp_path / "append.json")])
    assert set(report["seconds"]) == set(APPEND)
    assert all(len(v) == 2 and min(v) > 0 for v in report["seconds"].values())
    assert (tmp_path / "append.json").read_text().startswith("{")
    assert "append_many per poll" in capsys.readouterr().out


def test_a_contender_that_loses_a_record_is_caught(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_poll = APPEND["append_many per poll"]

    def one_lost(producer, topic, poll):  # type: ignore[no-untyped-def]
        keys, values = poll
        return per_poll(producer, topic, (keys[:-1], values[:-1]))

    monkeypatch.setattr("bench.bench_fastpath.APPEND", {"lossy": one_lost})
    with pytest.raises(SystemExit, match="delivered 2498 of 2500 records"):
        main(["append", "--bootstrap", kafka_bootstrap, "--records", "2500", "--repeats", "1"])
