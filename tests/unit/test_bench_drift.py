"""The drift table's script runs on a tiny size: every detector on both streams, the flips found."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_drift import NAMES, flip_stream, main, markdown, score  # noqa: E402


def test_a_tiny_run_gives_every_detector_on_both_streams_and_adwin_finds_the_flips() -> None:
    rows = main(["--scale", "0.02", "--seeds", "1", "--quiet"])
    assert [(r["stream"], r["detector"]) for r in rows] == [(s, d) for s in ("flip", "sea") for d in NAMES]
    adwin = rows[0]
    assert adwin["changes"] == 5 and adwin["missed"] <= 2 and adwin["delay_max"] < 300
    text = markdown(rows)
    assert text.count("\n") == 1 + len(rows) and "`hddm-a`" in text


def test_the_flip_stream_turns_every_label_at_each_change_but_the_noisy_ones() -> None:
    _, y = flip_stream(4000, 1000, seed=3, noise=0.0)
    X2, y2 = flip_stream(4000, 1000, seed=3, noise=0.0, changes=False)
    assert (y[:1000] == y2[:1000]).all() and (y[1000:2000] == -y2[1000:2000]).all()
    assert score([5, 1010, 1500, 3999], [1000, 2000, 3000], 1000) == ([10, 999], 1)
