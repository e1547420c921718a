"""bench/bench_scale.py: its options, its tables, and a tiny run of each mode on an embedded broker
of its own (the figures themselves are quoted from full runs in docs/performance.md, "Scale")."""

from __future__ import annotations

import doctest
import subprocess

import pytest

from bench import bench_scale
from bench.bench_scale import main, parse_args
from bench.worker.contenders import ROOT


def test_the_module_doctests_pass():
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
    ],
)
def test_bad_options_are_refused(capsys, given, message):
    with pytest.raises(SystemExit):
        parse_args(given)
    assert message in capsys.readouterr().err


def test_the_defaults_and_that_a_comparison_is_of_one_worker():
    args = parse_args([])
    assert (args.workers, args.stores, args.partitions, args.records) == ([1, 2, 4], ["directory", "kafka"],
                                                                          8, 200_000)
    assert parse_args(["--compare", "HEAD~1", "--workers", "2,4"]).workers == [1]


TINY = ["--records", "400", "--repeats", "1", "--session-timeout-ms", "1000"]


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_tiny_run_measures_every_store_and_worker_count(capsys):
    report = main([*TINY, "--workers", "1,2"])
    runs = report["runs"]
    assert sorted((r["store"], r["workers"]) for r in runs) == [
        ("directory", 1), ("directory", 2), ("kafka", 1), ("kafka", 2)]
    for run in runs:  # a run that missed a prediction or a clean exit raised instead
        assert run["records"] == 400 and run["rate"] > 0 and run["cpu_us_per_record"] > 0
    assert [(row["store"], row["workers"]) for row in report["scale"]] == [
        ("directory", "1"), ("directory", "2"), ("kafka", "1"), ("kafka", "2")]
    assert "CPU us/record" in capsys.readouterr().out


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_a_tiny_comparison_runs_one_worker_on_each_side():
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    report = main([*TINY, "--compare", "HEAD", "--stores", "kafka"])
    assert report["base"]["commit"] == head.strip()
    assert sorted((r["side"], r["store"], r["workers"]) for r in report["runs"]) == [
        ("base", "kafka", 1), ("head", "kafka", 1)]
    (row,) = report["compare"]
    assert row["store (head)"] == "kafka" and float(row["head / base"]) > 0
