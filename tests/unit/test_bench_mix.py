"""The mixing evaluation's script runs on a small stream: every run of every stream, its plot, and
figures that agree with the single perceptron and with the synchronous bound, and the seed spread."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_mix import generated, main, spread_table, table  # noqa: E402
from stream_perceptron import Perceptron  # noqa: E402


def test_a_short_run_gives_every_run_of_every_stream_and_its_plot(tmp_path):
    png, out = tmp_path / "mix.png", tmp_path / "mix.json"
    rows = main(["--n", "240", "--held-out", "40", "--passes", "2", "--every", "10,50", "--seeds", "2",
                 "--plot", str(png), "--json", str(out), "--quiet"])
    runs = ["single", "unmixed", "uniform@10", "uniform@50", "mistakes@10", "mistakes@50",
            "ipm uniform", "ipm mistakes"]
    streams = ["separable", "separable, 10% label noise", "Phishing"]
    assert [(r["stream"], r["run"]) for r in rows] == [(s, r) for s in streams for r in runs]
    by = {(r["stream"], r["run"]): r for r in rows}
    # the reference row is the plain perceptron on the training stream, seen once
    X, y, _, _ = generated(0.0, 240, 40)()
    single = int(Perceptron().learn_many(X, y).mistakes.sum())
    assert by["separable", "single"]["first_pass_mistakes"] == single
    # synchronous IPM's first epoch is the unmixed partitions' first pass (nothing mixed before it)
    for s in streams:
        assert by[s, "ipm uniform"]["first_pass_mistakes"] == by[s, "unmixed"]["first_pass_mistakes"]
        assert all(0.0 <= by[s, r]["served_accuracy"] <= 1.0 for r in runs)
    sep = by["separable", "ipm mistakes"]
    assert sep["sum_mu_k"] <= sep["bound"]
    # every 10 examples of a partition, round-robin over 8: a mixed state is < 80 examples old
    assert 0 < by["separable", "uniform@10"]["oldest_state_mixed"] < 80
    assert all(by["Phishing", r]["examples"] == 1000 and by["Phishing", r]["held_out"] == 250 for r in runs)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert table(rows).count("\n") == len(rows) + 1

    # the seed spread: seed 1 is the main table's separable stream; × single is per seed
    spread = json.loads(out.read_text())["seed_spread"]
    assert [r["run"] for r in spread] == ["single", "unmixed", "uniform@10", "uniform@50"]
    for r in spread:
        assert r["seeds"] == [1, 2] and r["mistakes"][0] == by["separable", r["run"]]["first_pass_mistakes"]
        assert r["x_single"] == [k / s for k, s in zip(r["mistakes"], spread[0]["mistakes"], strict=True)]
    assert spread[0]["x_single"] == [1.0, 1.0]
    assert spread_table(spread).count("\n") == len(spread) + 1
