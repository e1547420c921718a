"""bench/bench_scale.py: its options, its tables, and a tiny run of each mode on an embedded broker
of its own (the figures themselves are quoted from full runs in docs/performance.md, "Scale")."""

from __future__ import annotations

import doctest
import subprocess

import pytest

from bench import bench_scale
from bench.bench_scale import main, parse_args
from bench.worker.contenders import ROOT


def test_the_module_doctests_pass() -> None:
    result = doctest.testmod(bench_scale)
    assert result.attempted >= 8 and result.failed == 0


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["--stores", "disk"], "--stores takes"),
        (["--workers", "1,9"], "between 1 and --partitions"),
        (["--workers", "two"], "comma-separated numbers"),
        (["--records", "50"], ">= 10 per partition"),
        (["--repeats", "0"], "--repeats >= 1"),
        (["--mix", "0,-100"], "--mix takes comma-separated numbers >= 0"),
        (["--mix", "off"], "--mix takes comma-separated numbers >= 0"),
        (["--mix", ","], "--mix takes comma-separated numbers >= 0"),
        (["--compare", "HEAD", "--mix", "0,100"], "--compare measures mixing off only"),
    ],
)
def test_bad_options_are_refused(capsys: pytest.CaptureFixture[str], given: list[str], message: str) -> None:
    with pytest.raises(SystemExit):
        parse_args(given)
    assert message in capsys.readouterr().err


def test_the_defaults_and_that_a_comparison_is_of_one_worker() -> None:
    args = parse_args([])
    assert (args.workers, args.stores, args.partitions, args.records) == ([1, 2, 4], ["directory", "kafka"],
                                                                          8, 200_000)
    assert parse_args(["--compare", "HEAD~1", "--workers", "2,4"]).workers == [1]
    assert args.mix == [0]  # mixing off unless asked for
    assert parse_args(["--mix", "100,0,1000,100"]).mix == [0, 100, 1000]


def test_the_table_gives_each_mixing_interval_over_mixing_off_with_the_same_workers_and_store() -> None:
    runs = [{"store": st, "workers": w, "mix": e, "rate": 1000.0, "cpu_us_per_record": c,
             "broker_cpu_us_per_record": None, "mixing_points": e and 200_000 // e}
            for st, w, e, c in (("kafka", 1, 0, 20.0), ("kafka", 1, 1000, 30.0), ("kafka", 2, 0, 25.0),
                                ("kafka", 2, 1000, 25.0), ("directory", 1, 1000, 40.0))]
    rows = {(r[0], r[1], r[2]): dict(zip(bench_scale.SCALE_HEADERS, r, strict=True))
            for r in bench_scale.scale_rows(runs)}
    assert rows["kafka", "1", "1000"]["CPU x off"] == "1.50x"  # 30 over kafka, 1 worker, off: 20
    assert rows["kafka", "2", "1000"]["CPU x off"] == rows["kafka", "2", "0"]["CPU x off"] == "1.00x"
    assert rows["directory", "1", "1000"]["CPU x off"] == "n/a"  # no run with mixing off to divide by
    assert rows["kafka", "1", "1000"]["mixing points"] == "200"


TINY = ["--records", "400", "--repeats", "1", "--session-timeout-ms", "1000"]


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_tiny_run_measures_every_store_and_worker_count(capsys: pytest.CaptureFixture[str]) -> None:
    report = main([*TINY, "--workers", "1,2"])
    runs = report["runs"]
    assert sorted((r["store"], r["workers"]) for r in runs) == [
        ("directory", 1), ("directory", 2), ("kafka", 1), ("kafka", 2)]
    for run in runs:  # a run that missed a prediction or a clean exit raised instead
        assert run["records"] == 400
        # 400 records take a few ms of CPU: under the counters' tick, a figure is not measured
        assert all(run[k] is None or run[k] > 0 for k in ("rate", "cpu_us_per_record"))
    assert [(row["store"], row["workers"]) for row in report["scale"]] == [
        ("directory", "1"), ("directory", "2"), ("kafka", "1"), ("kafka", "2")]
    assert "CPU us/record" in capsys.readouterr().out


# reading the model topic back makes one more consumer; kafka-python leaves a socket of one now
# and then (tests/integration/conftest.py, _kafka_client_sockets_finalized)
@pytest.mark.integration
@pytest.mark.timeout(240)
@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
def test_a_tiny_run_with_mixing_makes_mixing_points_and_one_without_makes_none() -> None:
    report = main([*TINY, "--workers", "1", "--stores", "kafka", "--mix", "0,20"])
    points = {r["mix"]: r["mixing_points"] for r in report["runs"]}
    # one per 20 records of each of the 8 partitions: at most 400 / 20, and with 50 records a
    # partition on average, some
    assert points[0] == 0 and 0 < points[20] <= 20
    off = report["scale"][0]
    assert off["mix E"] == "0" and off["CPU x off"] in ("1.00x", "n/a")  # n/a: CPU not measured


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_tiny_comparison_runs_one_worker_on_each_side() -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    report = main([*TINY, "--compare", "HEAD", "--stores", "kafka"])
    assert report["base"]["commit"] == head.strip()
    assert sorted((r["side"], r["store"], r["workers"]) for r in report["runs"]) == [
        ("base", "kafka", 1), ("head", "kafka", 1)]
    (row,) = report["compare"]
    # either side's CPU may be under the counters' tick in 400 records: then not measured
    assert row["store (head)"] == "kafka"
    assert row["head / base"] == "n/a" or float(row["head / base"]) > 0
