"""The model as a river user runs it, beside river's Perceptron in one process; and learn_many.

    .venv/bin/python -m bench.bench_river_api --json bench/results/river_api.json   # ~3 min
    .venv/bin/python -m bench.bench_river_api --sea 2000 --rows 6000 --repeats 2     # a smoke run
    .venv/bin/python -m bench.bench_river_api --python     # the pure-Python path, the compiled part set aside

Its sections (progressive, per call, batch), goals and timing (process CPU time, medians):
docs/performance.md, "How bench_river_api measures"; a batch unlike learn_one's exits 1.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from river import datasets, evaluate, metrics, preprocessing
from river import linear_model as river_lm
from river.datasets import synth

from bench.worker.contenders import rotated
from bench.worker.formatting import format_table, write_json
from bench.worker.machine import machine_info
from stream_perceptron import Perceptron
from stream_perceptron.model import perceptron

RIVER = "river"
MODELS: dict[str, Callable[[], Any]] = {
    RIVER: river_lm.Perceptron, "plain": Perceptron, "averaged": lambda: Perceptron(average=True),
    "hashed": lambda: Perceptron(hash_bits=20)}
GOAL = {"plain": 1.0, "hashed": 1.0, "averaged": 1.5}  # at most this × river's time a call
CALLS = ("learn_one", "predict_one", "predict_proba_one")


def _cpu(run: Callable[[], Any]) -> float:
    gc.collect()
    start = time.process_time()
    run()
    return time.process_time() - start


def _median_runs(contenders: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """The median over ``repeats`` of each contender's seconds, the contenders interleaved."""
    runs: dict[str, list[float]] = {k: [] for k in contenders}
    for rep in range(repeats):
        for key in rotated(list(contenders), rep):
            runs[key].append(contenders[key]())
    return {k: statistics.median(v) for k, v in runs.items()}


def _progressive_run(key: str, rows: list[Any], scaled: bool, scores: dict[str, float]) -> float:
    model = MODELS[key]()
    model = preprocessing.StandardScaler() | model if scaled else model
    return _cpu(lambda: scores.__setitem__(
        key, evaluate.progressive_val_score(rows, model, metrics.Accuracy()).get()))


def progressive(streams: dict[str, list[Any]], repeats: int) -> list[dict[str, Any]]:
    out = []
    for name, rows in streams.items():
        for scaled in (False, True):
            scores: dict[str, float] = {}
            runs = {k: partial(_progressive_run, k, rows, scaled, scores) for k in MODELS}
            times = _median_runs(runs, repeats)
            out.append({"stream": name, "scaled": scaled, "examples": len(rows), "seconds": times,
                        "accuracy": scores, "ratio": {k: times[k] / times[RIVER] for k in MODELS}})
    return out


def _call_run(model: Any, call: str, rows: list[Any]) -> float:
    """Seconds a call of ``call`` on each of ``rows``."""
    method = getattr(model, call)
    if call == "learn_one":
        return _cpu(lambda: [method(x, y) for x, y in rows]) / len(rows)
    xs = [x for x, _ in rows]
    return _cpu(lambda: [method(x) for x in xs]) / len(rows)


def per_call(streams: dict[str, list[Any]], repeats: int) -> list[dict[str, Any]]:
    out = []
    for name, rows in streams.items():
        for call in CALLS:
            models = {key: make() for key, make in MODELS.items()}
            for model in models.values():  # a model that has learned the rows once
                for x, y in rows:
                    model.learn_one(x, y)
            times = _median_runs({k: partial(_call_run, models[k], call, rows) for k in MODELS}, repeats)
            out.append({"stream": name, "call": call, "us": {k: v * 1e6 for k, v in times.items()},
                        "ratio": {k: times[k] / times[RIVER] for k in MODELS}})
    return out


def dense_stream(n: int, d: int = 20, noise: float = 0.005,
                 seed: int = 12345) -> tuple[np.ndarray, np.ndarray]:
    """``x ~ N(0, I_d)``, ``y = sign(u·x + 0.3)`` for a seeded unit ``u``, rows with ``|u·x + 0.3| <
    0.1`` rejected, then a fraction ``noise`` of the labels flipped (the stream of issue 42)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    X = np.zeros((0, d))
    while len(X) < n:
        more = rng.standard_normal((n, d))
        X = np.concatenate([X, more[np.abs(more @ u + 0.3) >= 0.1]])
    X = np.ascontiguousarray(X[:n])
    y = np.where(X @ u + 0.3 > 0, 1, -1).astype(np.int8)
    flip = rng.choice(n, size=round(noise * n), replace=False)
    y[flip] = -y[flip]
    return X, y


def batch(n: int, repeats: int) -> dict[str, Any]:
    X, y = dense_stream(n)
    dicts, labels = [dict(enumerate(row)) for row in X.tolist()], (y > 0).tolist()
    Perceptron().learn_many(X, y)  # a first long call loads the compiled loop (numba), untimed
    many = Perceptron()
    out = many.learn_many(X, y)
    one, flags = Perceptron(), []
    for row, label in zip(X, y.tolist(), strict=True):
        one.learn_one(row, label)
        flags.append(one.last_mistake)
    same = (out.mistakes.tolist() == flags and one.weights.tobytes() == many.weights.tobytes()
            and one.intercept == many.intercept)

    def river_run() -> float:
        model = river_lm.Perceptron()
        return _cpu(lambda: [model.learn_one(x, t) for x, t in zip(dicts, labels, strict=True)])

    times = _median_runs({"learn_many": lambda: _cpu(lambda: Perceptron().learn_many(X, y)),
                          "river learn_one": river_run}, repeats)
    return {"rows": n, "d": X.shape[1], "mistakes": int(out.mistakes.sum()), "seconds": times,
            "times_river": times["river learn_one"] / times["learn_many"], "learn_many_is_learn_one": same}


def report(r: dict[str, Any]) -> str:
    keys = list(MODELS)
    lines = ["progressive_val_score, Accuracy (CPU seconds; × river)"]
    lines.append(format_table(["stream", *[f"{k}" for k in keys], *[f"{k} ×" for k in keys[1:]]], [
        [f"{p['stream']}{' + StandardScaler' if p['scaled'] else ''}",
         *[f"{p['accuracy'][k]:.2%} {p['seconds'][k]:.2f}s" for k in keys],
         *[f"{p['ratio'][k]:.2f}" for k in keys[1:]]] for p in r["progressive"]]))
    lines.append(f"\nper call on dict rows ({r['dict_rows']}), µs (median of repeats; × river; goal:"
                 " plain and hashed <= 1.0, averaged <= 1.5)")
    lines.append(format_table(["stream", "call", *keys, *[f"{k} ×" for k in keys[1:]]], [
        [c["stream"], c["call"], *[f"{c['us'][k]:.2f}" for k in keys],
         *[f"{c['ratio'][k]:.2f}{'' if c['ratio'][k] <= GOAL[k] else ' (over)'}" for k in keys[1:]]]
        for c in r["per_call"]]))
    b = r["batch"]
    lines.append(f"\nlearn_many, {b['rows']:,} dense rows of {b['d']} features, {b['mistakes']} mistakes:"
                 f" {b['seconds']['learn_many'] * 1e3:.1f} ms against river's learn_one"
                 f" {b['seconds']['river learn_one'] * 1e3:.0f} ms: {b['times_river']:.1f}× river"
                 f" (goal 20×); bit for bit learn_one: {b['learn_many_is_learn_one']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_river_api",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sea", type=int, default=20_000, help="SEA examples (default 20,000)")
    parser.add_argument("--rows", type=int, default=60_000, help="dense rows of the batch section")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--python", action="store_true",
                        help="score dict rows in Python even where the compiled part is installed")
    args = parser.parse_args(argv)
    saved = perceptron._compiled_score, perceptron._compiled_pair, perceptron._compiled_proba
    if args.python:
        perceptron._compiled_score = perceptron._compiled_pair = perceptron._compiled_proba = None
    try:
        return _measure(args)
    finally:
        perceptron._compiled_score, perceptron._compiled_pair, perceptron._compiled_proba = saved


def _measure(args: argparse.Namespace) -> dict[str, Any]:
    streams = {"SEA": list(synth.SEA(seed=1, noise=0.1).take(args.sea)),
               "Phishing": list(datasets.Phishing())}
    compiled = perceptron._compiled_score is not None
    result = {"benchmark": "bench.bench_river_api", "params": vars(args) | {"json": str(args.json)},
              "dict_rows": "compiled" if compiled else "python",
              "machine": machine_info(("numpy", "river", "pandas")),
              "progressive": progressive(streams, args.repeats), "per_call": per_call(streams, args.repeats),
              "batch": batch(args.rows, args.repeats)}
    write_json(args.json, result)
    if not args.quiet:
        print(report(result))
    if not result["batch"]["learn_many_is_learn_one"]:
        raise SystemExit(1)
    return result


if __name__ == "__main__":
    main()
