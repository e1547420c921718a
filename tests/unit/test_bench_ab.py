"""bench/bench_ab.py: its options, and that a process started for a side runs that side's code (the
runs need a broker; the benchmark itself is not a test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import bench_ab
from bench.bench_ab import parse_args
from bench.worker.contenders import ROOT
from bench.worker.machine import worktree
from bench.worker.processes import clean_env, popen_logged


def test_the_table_gives_each_sides_median_and_runs_and_head_over_base():
    runs = {("throughput", "kafka-python", "worker"): {"base": [10.0, 12.0, 11.0],
                                                      "head": [12.0, 13.0, 14.0]}}
    assert bench_ab.summary_rows(runs) == [
        ["throughput", "kafka-python", "worker rec/s", "11", "10, 12, 11", "13", "12, 13, 14", "1.18x"]]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["--only", "memory"], "--only takes"),
        (["--backends", "kafka-python,kafka"], "--backends takes"),
        (["--repeats", "0"], "--repeats >= 1"),
        ([], "--base"),
    ],
)
def test_bad_options_are_refused(capsys, given, message):
    argv = given if not given or given[0] == "--base" else ["--base", "HEAD", *given]
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err


def test_the_defaults():
    args = parse_args(["--base", "HEAD~1"])
    assert (args.sections, args.backends, args.repeats) == (["throughput"], ["kafka-python"], 5)


def test_a_process_started_in_the_base_worktree_imports_the_base_code(tmp_path: Path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    with worktree("HEAD") as (root, commit):
        assert commit == head.strip() and (root / "stream_perceptron" / "worker" / "loop.py").is_file()
        log = tmp_path / "probe.log"
        probe = "import bench, stream_perceptron; print(bench.__file__); print(stream_perceptron.__file__)"
        proc = popen_logged([sys.executable, "-c", probe], clean_env(root), log, root)
        assert proc.wait(60) == 0, log.read_text()
        files = log.read_text().split()
        assert [Path(f).resolve().parent.parent for f in files] == [root.resolve()] * 2, files
    assert not root.exists()  # the worktree is removed afterwards
    listed = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True).stdout
    assert str(root) not in listed
