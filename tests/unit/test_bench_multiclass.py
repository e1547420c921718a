"""The multiclass benchmark runs end to end on a few rows: every stream, scaled and bare, every
contender, and the figures it checks (learn_many is learn_one, bit for bit; the generated rows
hold the classes and the share of moved labels asked for)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_multiclass import MODELS, labeled_rows, main, report  # noqa: E402


def test_a_small_run_has_every_stream_and_contender_and_learn_many_is_learn_one(tmp_path: Path) -> None:
    out = tmp_path / "multiclass.json"
    result = main(["--n", "200", "--rows", "3000", "--repeats", "1", "--quiet", "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert [(a["stream"], a["classes"], a["scaled"]) for a in result["accuracy"]] == [
        (s, k, scaled) for s, k in (("ImageSegments", 7), ("LED, 10% noise", 10), ("Waveform", 3),
                                    ("generated K=5, 5% noise", 5)) for scaled in (True, False)]
    for a in result["accuracy"]:
        assert a["examples"] == 200 and set(a["scores"]) == set(MODELS)
        assert all(0.0 < s["accuracy"] <= 1.0 and 0.0 <= s["macro_f1"] <= 1.0 for s in a["scores"].values())
    speed = result["speed"]
    assert speed["learn_many_is_learn_one"] and speed["classes"] == 10 and speed["rows"] == 3000
    assert 0 < speed["mistakes"] < 3000 and speed["times_river"] > 0
    assert report(result).count("\n| ") == 1 + len(result["accuracy"])


def test_the_generated_rows_are_separable_but_for_the_moved_labels() -> None:
    X, y = labeled_rows(5000, 5, d=8, noise=0.05, seed=3)
    clean, _ = labeled_rows(5000, 5, d=8, noise=0.0, seed=3)
    assert X.shape == (5000, 8) and set(y.tolist()) == set(range(5))
    rng = np.random.default_rng(3)  # the same W as labeled_rows draws first
    W = rng.standard_normal((5, 8)) / np.sqrt(8)
    scores = np.sort(X @ W.T, axis=1)
    assert (scores[:, -1] - scores[:, -2] >= 0.1).all()
    assert (np.argmax(X @ W.T, axis=1) != y).sum() == 250
    assert np.array_equal(clean, X)
