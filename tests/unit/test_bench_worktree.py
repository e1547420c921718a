"""A process started in a git worktree of another ref (``bench_scale --compare``, ``bench_http
--compare``) runs that ref's code (the runs need a broker; the benchmarks themselves are not
tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.worker.contenders import ROOT
from bench.worker.machine import worktree
from bench.worker.processes import clean_env, popen_logged


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
