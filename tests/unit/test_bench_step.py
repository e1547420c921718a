"""The learning-step benchmark runs on a few rows, sets the compiled part aside for its Python
runs only, and refuses to report when the two ways end in different states."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench import bench_step  # noqa: E402


def test_a_small_run_times_both_ways_and_restores_the_compiled_part(tmp_path: Path) -> None:
    before = [getattr(module, name) for module, name in bench_step.COMPILED]
    out = tmp_path / "step.json"
    report = bench_step.main(["--records", "3000", "--repeats", "2", "--rows", "200,1000",
                              "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    assert set(report["runs"]) == {f"{w}/{r}" for w in bench_step.WAYS for r in (200, 1000)}
    assert all(len(t) == 2 and min(t) > 0 for t in report["runs"].values())
    assert [getattr(module, name) for module, name in bench_step.COMPILED] == before


def test_the_python_way_runs_without_the_compiled_functions(monkeypatch) -> None:
    seen = []
    real = bench_step.Learner.step

    def step(self, *args, **kwargs):
        seen.append(tuple(getattr(module, name) is None for module, name in bench_step.COMPILED))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(bench_step.Learner, "step", step)
    X, y = bench_step.rows_of(400, 1)
    _, python = bench_step.run("python", X, y, 200)
    assert seen and all(all(flags) for flags in seen)
    seen.clear()
    _, adwin_only = bench_step.run("ADWIN only", X, y, 200)
    assert seen and all(flags == (True, True, False) for flags in seen)
    _, compiled = bench_step.run("compiled", X, y, 200)
    assert python == adwin_only == compiled


def test_different_ends_stop_the_benchmark(monkeypatch) -> None:
    monkeypatch.setattr(bench_step, "run", lambda way, X, y, rows: (0.01, way))
    with pytest.raises(SystemExit) as exit_:
        bench_step.main(["--records", "500", "--repeats", "1", "--rows", "100"])
    assert exit_.value.code == 1
