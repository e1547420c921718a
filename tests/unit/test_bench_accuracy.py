"""The accuracy table's script runs on a few rows of each stream, and its plain column is river's."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_accuracy import main, table  # noqa: E402


def test_a_short_run_gives_every_stream_and_the_plain_model_equals_rivers() -> None:
    rows = main(["--n", "300", "--quiet"])
    assert [r["examples"] for r in rows] == [300] * 8
    for r in rows:
        acc = r["accuracy"]
        assert acc["Perceptron()"] == acc["river Perceptron"], r["stream"]
        assert 0.0 < acc["Perceptron(average=True)"] <= 1.0
    text = table(rows)
    assert text.count("\n") == 2 + len(rows) - 1 and "Phishing" in text
