"""The worker's learning step with the compiled part and with its pure-Python twins: Learner.step
over the throughput benchmark's dense records, in calls of a chunk's rows.

    .venv/bin/python -m bench.bench_step                      # 100,000 records, calls of 500 and 2,000
    .venv/bin/python -m bench.bench_step --rows 500 --repeats 9 --json bench/results/step.json

A worker learns each chunk of a poll (``SP_OUTPUT__CHUNK_RECORDS``, 500 by default) with one
``Learner.step``: the perceptron's pass, the margins and norms, the statistics and ADWIN. This
times that call alone, in process CPU time, on a fresh learner as a partition's state builds it
(a two-class Perceptron, RunningStats, ADWIN on the mistakes), over the records of
``bench.worker.inputs.dense_records`` (20 features, 1% flipped labels). "compiled" runs what
is installed (the compiled part's dense pass, the EWMA's loop and ADWIN's loop); "ADWIN only"
sets the first two aside (numpy's blocks and numpy's runs, as before the compiled part had
them); "python" sets all three aside, as in a worker without the compiled part. Each repeat runs
every contender once, in rotated order; the table gives medians. Every way must end with the
same weights and statistics, bit for bit, or the benchmark exits 1.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import orjson

from bench.worker.contenders import interleaved_ways, offline_parser
from bench.worker.formatting import ways_report
from bench.worker.inputs import DEFAULT_D, dense_records
from stream_perceptron.model import dense_pass, drift, stats
from stream_perceptron.model.drift import DriftWatch
from stream_perceptron.model.learner import Learner
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.model.stats import RunningStats

# the compiled part's functions that the learning step calls, each with a pure-Python twin
COMPILED = ((dense_pass, "_compiled_pass"), (stats, "_compiled_ewma"), (drift, "_compiled_update"))
# each way: how many of COMPILED, from the first, it sets aside
WAYS = {"compiled": 0, "ADWIN only": 2, "python": 3}


def rows_of(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The throughput benchmark's first ``n`` records as a matrix and their labels (±1)."""
    values, _ = dense_records(n, DEFAULT_D, seed=seed)
    records = [orjson.loads(v) for v in values]
    return np.array([r["x"] for r in records], dtype=np.float64), np.array([r["y"] for r in records], np.int8)


@contextmanager
def python_twins(aside: int) -> Iterator[None]:
    """The first ``aside`` compiled functions of :data:`COMPILED` set aside while it lasts."""
    saved = [getattr(module, name) for module, name in COMPILED]
    try:
        for module, name in COMPILED[:aside]:
            setattr(module, name, None)
        yield
    finally:
        for (module, name), value in zip(COMPILED, saved, strict=True):
            setattr(module, name, value)


def run(way: str, X: np.ndarray, y: np.ndarray, rows: int) -> tuple[float, Any]:
    """Process CPU seconds of ``Learner.step`` over ``X`` in calls of ``rows`` rows, and what the
    learner holds after them."""
    learner = Learner(Perceptron(), RunningStats(), DriftWatch("adwin"))
    with python_twins(WAYS[way]):
        cuts = [(a, min(a + rows, len(X))) for a in range(0, len(X), rows)]
        start = time.process_time()
        for a, b in cuts:
            learner.step(X[a:b], y[a:b], labeled=y[a:b] != 0)
        spent = time.process_time() - start
    model, kept = learner.state()
    return spent, json.dumps([model, kept], sort_keys=True, default=str)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = offline_parser(__doc__ or "", records=100_000, repeats=7)
    parser.add_argument("--rows", default="500,2000", help="comma-separated rows per call")
    args = parser.parse_args(argv)
    sizes = [int(r) for r in args.rows.split(",")]
    X, y = rows_of(args.records, args.seed)
    runs = interleaved_ways(list(WAYS), sizes, args.repeats, lambda way, rows: run(way, X, y, rows),
                            "calls of {} rows: the ways ended in different states")
    return ways_report(
        args, runs, list(WAYS), len(X), base="python",
        heading=f"Learner.step over {len(X):,} rows of {DEFAULT_D} features; process CPU, medians of"
                f" {args.repeats} interleaved repeats; the same weights and statistics every way",
        columns=["rows per call", "way", "µs per row", "spread", "× python"])

if __name__ == "__main__":
    main()
