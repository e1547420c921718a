"""The hashing benchmark runs on a few thousand names: the hashed model's width and checkpoint stay put."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_hashing import main  # noqa: E402


def test_a_short_run_keeps_the_hashed_checkpoint_bounded_and_the_indexed_one_growing() -> None:
    report = main(["--names", "4000", "--new", "4", "--common", "3", "--bits", "8", "--chunk", "200",
                   "--every", "1", "--indexed-names", "4000", "--quiet"])
    hashed, indexed = report["hashed"], report["indexed"]
    assert hashed["distinct_names"] == indexed["distinct_names"] == 4000
    sizes = hashed["checkpoint_mb"]
    assert len(sizes) == 5 and max(sizes) < 0.01  # 256 weights, however many names
    assert indexed["checkpoint_mb"][-1] > 4 * indexed["checkpoint_mb"][0]  # every name kept
    assert hashed["mistakes"] > 0 and hashed["records_per_s"] > 0
