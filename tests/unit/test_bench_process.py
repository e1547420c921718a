"""The processing benchmark runs on a few polls, writes the same prediction records every way,
restores the compiled part after its Python runs, and refuses to report when the ways differ."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest

from stream_perceptron.codec import native

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is a top-level folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench import bench_process, bench_step  # noqa: E402

if not native.available():  # the benchmark compares the compiled part with its twins
    if os.environ.get("CI") or os.environ.get("SP_REQUIRE_NATIVE") == "1":
        raise RuntimeError("the compiled part is not installed (make install builds it where cargo is found)")
    pytest.skip("the compiled part is not installed", allow_module_level=True)


def test_a_small_run_times_every_way_and_restores_the_compiled_part(tmp_path: Path) -> None:
    before = [native._native, *(getattr(module, name) for module, name in bench_step.COMPILED)]
    level = logging.getLogger("stream_perceptron").level
    out = tmp_path / "process.json"
    report = bench_process.main(["--records", "4500", "--repeats", "2", "--chunks", "300,2000",
                                 "--json", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    assert set(report["runs"]) == {f"{w}/{c}" for w in bench_process.WAYS for c in (300, 2000)}
    assert all(len(t) == 2 and min(t) > 0 for t in report["runs"].values())
    assert [native._native, *(getattr(module, name) for module, name in bench_step.COMPILED)] == before
    assert logging.getLogger("stream_perceptron").level == level  # later tests' log lines still caught


def test_every_way_writes_the_worker_s_prediction_records() -> None:
    from bench.worker.inputs import dense_records

    values, _ = dense_records(2500, 20, seed=3)
    ends = {way: bench_process.run(way, values, 400)[1] for way in bench_process.WAYS}
    assert len(set(ends.values())) == 1 and next(iter(ends.values())).startswith("2500:")


def test_the_python_way_runs_without_the_compiled_part(monkeypatch) -> None:
    seen = []
    real = bench_process.Worker.process

    def process(self, batch):
        seen.append(native._native is None and all(getattr(m, n) is None for m, n in bench_step.COMPILED))
        return real(self, batch)

    monkeypatch.setattr(bench_process.Worker, "process", process)
    values = [b'{"x": [1.0, -2.0], "y": 1}'] * 10
    bench_process.run("worker, python", values, 4)
    assert seen and all(seen)
    seen.clear()
    bench_process.run("worker, compiled", values, 4)
    assert seen and not any(seen)


def test_different_records_stop_the_benchmark(monkeypatch) -> None:
    monkeypatch.setattr(bench_process, "run", lambda way, values, chunk: (0.01, way))
    with pytest.raises(SystemExit) as exit_:
        bench_process.main(["--records", "500", "--repeats", "1", "--chunks", "100"])
    assert exit_.value.code == 1
