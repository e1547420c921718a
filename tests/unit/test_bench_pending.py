"""The late-label store benchmark on a small flood: what it keeps and stores stays bounded."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_pending import flood  # noqa: E402


def test_a_flood_past_the_bound_keeps_the_store_and_its_state_the_same_size() -> None:
    small, large = (flood(n, 5, 200, named=True) for n in (400, 2_000))
    assert small["kept"] == large["kept"] == 200
    assert (small["expiries"], large["expiries"]) == (200, 1_800)
    assert large["state_mb"] < 1.05 * small["state_mb"]  # 200 entries either way (longer ids, offsets)
    assert large["memory_mb"] < 1.5 * small["memory_mb"]
