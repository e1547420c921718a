"""The core benchmark runs end to end on a tiny stream, and its contenders agree on the mistakes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_core import LEARN_MANY, LEARN_ONE, RIVER, SKLEARN, main  # noqa: E402


def test_tiny_run_agrees_on_mistakes_and_writes_the_expected_json(tmp_path: Path) -> None:
    out = tmp_path / "core.json"
    report = main(
        ["--n", "2000", "--d", "5", "--repeats", "2", "--quiet", "--json", str(out)]
    )

    data = json.loads(out.read_text(encoding="utf-8"))
    assert data == json.loads(json.dumps(report))
    assert {"machine", "params", "stream", "contenders", "checks", "target", "notes"} <= set(data)
    assert {"cpu_model", "logical_cores", "python"} <= set(data["machine"])
    assert {"numpy", "river", "sklearn"} <= set(data["machine"]["versions"])
    assert data["params"]["n"] == 2000 and data["params"]["d"] == 5
    assert data["stream"]["min_abs_u_x_plus_b"] >= 0.1

    by = {c["contender"]: c for c in data["contenders"]}
    assert set(by) == {LEARN_MANY, LEARN_ONE, RIVER, SKLEARN}
    keys = {"rows", "times_s", "median_s", "examples_per_s", "speedup_vs_river_learn_one", "mistakes"}
    for c in by.values():
        assert keys <= set(c)
        assert c["rows"] == 2000 and len(c["times_s"]) == 2 and c["examples_per_s"] > 0

    # learn_many, learn_one and sklearn's partial_fit make the same updates on the same stream
    assert by[LEARN_MANY]["mistakes"] > 0
    assert by[LEARN_MANY]["mistakes"] == by[LEARN_ONE]["mistakes"] == by[SKLEARN]["mistakes"]
    assert by[LEARN_ONE]["first_row_differing_from_learn_many"] is None
    assert by[SKLEARN]["first_row_differing_from_learn_many"] is None
    assert data["checks"]["learn_many_equals_learn_one"]
    assert data["checks"]["mistakes_many_one_sklearn_equal"]
    # river updates on the same rows as learn_many (its predict_one may disagree on boundary rows)
    assert by[RIVER]["mistakes"] == by[LEARN_MANY]["mistakes"] and data["checks"]["river_updates_equal"]
    assert data["first_call_s"] > 0
