"""bench/bench_idle.py: its options, its table, and the join wait's refusal of a worker that exits
(the runs need a broker; the benchmark itself is not a test)."""

from __future__ import annotations

import doctest
import subprocess
import sys
from pathlib import Path

import pytest

from bench import bench_idle
from bench.bench_idle import parse_args, wait_for_join
from bench.worker.processes import WorkerProc


def test_the_module_doctests_pass():
    result = doctest.testmod(bench_idle)
    assert result.attempted >= 1 and result.failed == 0


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["--waits", "50,ten"], "whole milliseconds"),
        (["--waits", "-1"], "milliseconds >= 0"),
        (["--backends", "kafka"], "--backends takes"),
        (["--repeats", "0"], "--repeats must be >= 1"),
        (["--seconds", "0"], "--seconds positive"),
    ],
)
def test_bad_options_are_refused(capsys, given, message):
    with pytest.raises(SystemExit):
        parse_args(given)
    assert message in capsys.readouterr().err


def test_the_defaults():
    args = parse_args([])
    assert (args.waits, args.backends) == ([100, 50, 10], ["kafka-python"])
    assert (args.repeats, args.seconds, args.settle) == (3, 20.0, 2.0)


def test_the_join_wait_fails_at_once_for_a_worker_that_exited(tmp_path: Path):
    log = tmp_path / "worker.log"
    log.write_text('{"ts": 1.0, "msg": "kafka edge (kafka-python) started: group g"}\nTraceback: boom\n')
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(30)
    wp = WorkerProc(proc=proc, rss=None, log=log, topics={}, t_start=0.0)
    with pytest.raises(RuntimeError, match="did not join") as caught:
        wait_for_join(wp, timeout_s=30)
    assert "boom" in str(caught.value)  # the log's tail comes with the error


def test_the_join_wait_returns_once_the_assignment_is_logged(tmp_path: Path):
    log = tmp_path / "worker.log"
    log.write_text('{"ts": 4.0, "msg": "on_assigned: [(\'t\', 0)]"}\n')
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        wait_for_join(WorkerProc(proc=proc, rss=None, log=log, topics={}, t_start=0.0), timeout_s=5)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(10)
