"""The side-by-side benchmark of learn_many's two deciders runs, and they agree bit for bit."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_dense_decide import main  # noqa: E402
from stream_perceptron.model import dense_pass  # noqa: E402


def test_both_deciders_run_and_agree():
    threshold = dense_pass.COMPILED_MIN_ROWS
    report = main(["--n", "6000", "--noise", "0.01", "--repeats", "2"])
    assert report["same"] and report["mistakes"] > 0
    assert all(len(t) == 2 for t in report["times_s"].values())
    assert dense_pass.COMPILED_MIN_ROWS == threshold  # put back
