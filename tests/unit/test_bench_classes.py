"""bench/bench_classes.py: its labels, its table, and a tiny run on an embedded broker of its own
(the figures themselves are quoted from a full run in docs/performance.md, "Many classes")."""

from __future__ import annotations

import doctest
import sys
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench import bench_classes  # noqa: E402
from bench.worker.inputs import dense_records  # noqa: E402


def test_the_doctests_pass() -> None:
    result = doctest.testmod(bench_classes)
    assert result.attempted >= 1 and result.failed == 0


def test_the_k_class_input_keeps_the_rows_and_labels_each_with_its_best_direction() -> None:
    binary, _ = dense_records(500, 6, seed=3)
    classed = [orjson.loads(v) for v in bench_classes.class_records(binary, 10, seed=3, noise=0.0)]
    assert [r["x"] for r in classed] == [orjson.loads(v)["x"] for v in binary]
    assert [r["id"] for r in classed] == list(range(500))
    X = np.array([r["x"] for r in classed])
    directions = np.random.default_rng(3).standard_normal((10, 6))
    assert [r["y"] for r in classed] == (X @ directions.T).argmax(axis=1).tolist()
    noisy = bench_classes.class_records(binary, 10, seed=3, noise=0.1)
    assert 0 < sum(orjson.loads(v)["y"] != r["y"] for v, r in zip(noisy, classed, strict=True)) <= 50


RECORDS = 4_000


def test_a_tiny_run_times_both_workers_on_both_backends(tmp_path: Path) -> None:
    out = tmp_path / "classes.json"
    # enough records that each worker's outputs span several milliseconds of CreateTime: 600 fit
    # in one on the confluent-kafka worker (about 300,000 a second), which then has no rate
    report = bench_classes.main(["--records", str(RECORDS), "--repeats", "1", "--json", str(out)])
    assert set(report["summary"]) == {"confluent-kafka K=2", "confluent-kafka K=10",
                                      "kafka-python K=2", "kafka-python K=10"}
    for name, s in report["summary"].items():
        assert s["runs"] == 1 and s["all_complete"] and s["median_rate"] > 0, name
    runs = report["runs"]["kafka-python K=10"]
    assert all(r["seen"] == RECORDS and r["output_records"] == RECORDS for r in runs)
    # the same input, learned the same way: the mistakes repeat exactly across backends
    assert {r["mistakes"] for r in runs + report["runs"]["confluent-kafka K=10"]} == {runs[0]["mistakes"]}
    for b in ("confluent-kafka", "kafka-python"):
        s = report["summary"]
        assert report["ratios"][b] == s[f"{b} K=10"]["median_rate"] / s[f"{b} K=2"]["median_rate"]
    assert "kafka-python" in bench_classes.table(report) and out.exists()
