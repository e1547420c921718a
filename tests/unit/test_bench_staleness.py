"""The staleness evaluation's script: with s = 0 every convex rule is synchronous IPM (the same
mistakes), the discounted rule weighs a state one version old half as much, the sum rule adds the
partitions' own updates, and a short run gives every row."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_staleness import _mix, main, run, stream  # noqa: E402


def test_with_no_staleness_the_convex_rules_are_one_synchronous_mix():
    X, y = stream(1)
    totals = {rule: run(X, y, rule, 0, np.random.default_rng(0), every=400)
              for rule in ("newest", "discounted", "fresh")}
    assert len(set(totals.values())) == 1, totals
    stale = run(X, y, "newest", 1, np.random.default_rng(0), every=400)
    assert stale != totals["newest"]  # a group that mixes first takes the other's older states


def test_the_rules_weigh_a_state_one_version_old_as_they_say():
    a, b = (np.array([3.0, 0.0]), 3.0, 2, 1), (np.array([0.0, 3.0]), 0.0, 1, 3)  # versions 2 and 1
    published = {0: a, 1: b}
    w, b0 = _mix(published, "discounted", 2)
    assert w.tolist() == [2.0, 1.0] and b0 == 2.0  # μ = 2/3, 1/3
    w, _ = _mix(published, "fresh", 2)
    assert w.tolist() == [3.0, 0.0]
    w, _ = _mix(published, "mistakes", 2)
    assert w.tolist() == [0.75, 2.25]
    w, b0 = _mix(published, "sum", 2)
    assert w.tolist() == [3.0, 3.0] and b0 == 3.0


def test_a_short_run_gives_a_row_per_interval_rule_and_staleness(tmp_path, capsys):
    rows = main(["--seeds", "1", "--orders", "2", "--rules", "newest,sum", "--every", "400",
                 "--json", str(tmp_path / "s.json")])
    assert [(r["rule"], r["s"], r["runs"]) for r in rows] == [
        ("newest", 0, 1), ("newest", 1, 2), ("sum", 0, 1), ("sum", 1, 2)]
    assert all(r["median"] >= 1.0 or r["rule"] == "sum" for r in rows)
    assert "| 400 | newest | 1 | 2 |" in capsys.readouterr().out
    assert (tmp_path / "s.json").exists()
