"""The river benchmark runs end to end on a few rows: every section, every contender, and the
figures it checks (the plain model's accuracy is river's; learn_many is learn_one, bit for bit)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_river_api import CALLS, MODELS, main  # noqa: E402


def test_a_small_run_has_every_section_and_agrees_with_river(tmp_path: Path) -> None:
    out = tmp_path / "river_api.json"
    report = main(["--sea", "300", "--rows", "2000", "--repeats", "1", "--quiet", "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    assert {(p["stream"], p["scaled"]) for p in report["progressive"]} == {
        (s, scaled) for s in ("SEA", "Phishing") for scaled in (False, True)}
    for p in report["progressive"]:
        assert set(p["accuracy"]) == set(MODELS) and p["accuracy"]["plain"] == p["accuracy"]["river"]
    assert [(c["stream"], c["call"]) for c in report["per_call"]] == [
        (s, call) for s in ("SEA", "Phishing") for call in CALLS]
    assert all(c["us"][k] > 0 for c in report["per_call"] for k in MODELS)
    batch = report["batch"]
    assert batch["learn_many_is_learn_one"] and batch["mistakes"] > 0 and batch["times_river"] > 0


def test_python_sets_the_compiled_scoring_aside_for_the_run_only(tmp_path: Path) -> None:
    from stream_perceptron.model import perceptron

    before = perceptron._compiled_score
    report = main(["--sea", "200", "--rows", "1000", "--repeats", "1", "--quiet", "--python"])
    assert report["dict_rows"] == "python"
    assert perceptron._compiled_score is before  # restored
    same = main(["--sea", "200", "--rows", "1000", "--repeats", "1", "--quiet"])
    assert same["dict_rows"] == ("python" if before is None else "compiled")
    # the two paths answer alike: the same accuracy in every progressive run
    assert [p["accuracy"] for p in same["progressive"]] == [p["accuracy"] for p in report["progressive"]]
