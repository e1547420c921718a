"""bench/bench_scale.py: its options, its tables, and a tiny run of each mode on an embedded broker
of its own (the figures themselves are quoted from full runs in docs/performance.md, "Scale")."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from bench import bench_scale
from bench.bench_scale import main, parse_args
from bench.worker.contenders import ROOT
from bench.worker.processes import RssSampler


def test_a_run_of_the_base_side_gets_no_setting_its_code_may_not_know() -> None:
    env = bench_scale.run_env("head", "kafka", "g", 100)
    assert (env["SP_CHECKPOINT__STORE"], env["SP_CHECKPOINT__TOPIC"], env["SP_MIX__TOPIC"]) == (
        "kafka", "g-state", "g-model")
    assert bench_scale.run_env("base", "kafka", "g", 0) == {}
    assert "SP_MIX__TOPIC" not in bench_scale.run_env("head", "directory", "g", 0)  # mixing off
    assert "SP_MIX__MAX_STALENESS" not in env  # s = inf: unset
    assert bench_scale.run_env("head", "kafka", "g", 100, 1)["SP_MIX__MAX_STALENESS"] == "1"


def test_the_directory_store_shares_one_directory_and_everything_else_gets_its_own() -> None:
    dirs = [bench_scale.checkpoint_dir(Path("w"), side, store, "g", 1).as_posix()
            for side, store in (("head", "directory"), ("head", "kafka"), ("base", "directory"))]
    assert dirs == ["w/g-state", "w/g-1", "w/g-1"]


def test_cpu_under_one_tick_of_the_counters_is_not_measured() -> None:
    busy, idle = RssSampler(0), RssSampler(0)
    busy.samples = [(0.0, 1, 1, 0.0), (1.0, 1, 1, 0.5)]
    idle.samples = [(0.0, 1, 1, 0.0), (1.0, 1, 1, 0.0)]
    assert bench_scale.cpu_seconds([busy, idle], 0.0, 1.0) == 0.5
    assert bench_scale.cpu_seconds([idle], 0.0, 1.0) is None  # 0.0 would read as no CPU at all
    assert bench_scale.cpu_seconds([busy], 0.0, 2.0) is None  # the samples end before the window


def test_the_scale_table_gives_medians_and_their_multiples() -> None:
    runs = [{"store": "directory", "workers": w, "mix": e, "staleness": s, "rate": r, "cpu_us_per_record": c,
             "broker_cpu_us_per_record": 2.0, "mixing_points": m, "paused_s": p}
            for w, e, s, r, c, m, p in ((1, 0, None, 100.0, 10.0, 0, 0), (2, 0, None, 180.0, 11.0, 0, 0),
                                        (2, 100, None, 90.0, 22.0, 40, 0.0),
                                        (2, 100, None, 80.0, 33.0, 40, 0.0), (2, 100, 0, 70.0, 44.0, 40, 3.0),
                                        (2, 100, 0, 60.0, 44.0, 40, 5.0))]
    rows = bench_scale.scale_rows(runs)
    assert rows[1] == ["directory", "2", "0", "inf", "180", "1.80x", "11.0", "1.00x", "11.0", "2.0", "0", ""]
    # no one-worker run with E = 100 to divide by; the bounded rows before the unbounded
    assert rows[2] == ["directory", "2", "100", "0", "65", "n/a", "44.0", "4.00x", "44.0, 44.0", "2.0", "40",
                       "4.0"]
    assert rows[3] == ["directory", "2", "100", "inf", "85", "n/a", "27.5", "2.50x", "22.0, 33.0", "2.0",
                       "40", "0.0"]
    assert bench_scale.median_of([{"rate": 3.0}, {"rate": None}, {"rate": 1.0}], "rate") == 2.0


def test_the_comparison_table_gives_head_over_base_per_store() -> None:
    runs = [{"side": "base", "store": "directory", "rate": 100.0, "cpu_us_per_record": 10.0},
            {"side": "head", "store": "kafka", "rate": 90.0, "cpu_us_per_record": 10.5}]
    assert bench_scale.compare_rows(runs) == [["kafka", "10.0", "10.5", "1.050", "100", "90"]]


def test_the_runs_are_interleaved_in_an_order_rotated_by_the_repeat() -> None:
    def plan(**given: object) -> list[tuple[int, str, str, int, tuple[int, int | None]]]:
        return list(bench_scale.plan(argparse.Namespace(**{"compare": None, "mix": [0], "staleness": [None],
                                                           **given})))

    got = plan(repeats=2, stores=["directory", "kafka"], workers=[1, 2])
    assert [(k, st, w) for k, _, st, w, _ in got][:5] == [
        (0, "directory", 1), (0, "directory", 2), (0, "kafka", 1), (0, "kafka", 2), (1, "directory", 2)]
    got = plan(repeats=2, stores=["kafka"], workers=[1], mix=[0, 100])
    assert [(k, e) for k, _, _, _, (e, _) in got] == [(0, 0), (0, 100), (1, 100), (1, 0)]
    # each bound with mixing on; mixing off once
    got = plan(repeats=1, stores=["kafka"], workers=[2], mix=[0, 100], staleness=[0, None])
    assert [m for *_, m in got] == [(0, None), (100, 0), (100, None)]
    # the base side runs once a repeat, under the first store's name
    got = plan(repeats=1, stores=["directory", "kafka"], workers=[1], compare="HEAD")
    assert [(s, st) for _, s, st, _, _ in got] == [("base", "directory"), ("head", "directory"),
                                                    ("head", "kafka")]


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
        (["--mix", "100", "--staleness", "-1"], "--staleness numbers >= 0 or inf"),
        (["--mix", "100", "--staleness", "none"], "--staleness numbers >= 0 or inf"),
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
    assert args.staleness == [None]  # no bound unless asked for
    assert parse_args(["--staleness", "inf,1,0"]).staleness == [0, 1, None]


def test_the_table_gives_each_mixing_interval_over_mixing_off_with_the_same_workers_and_store() -> None:
    runs = [{"store": st, "workers": w, "mix": e, "staleness": None, "rate": 1000.0, "cpu_us_per_record": c,
             "broker_cpu_us_per_record": None, "mixing_points": e and 200_000 // e, "paused_s": 0.0}
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
