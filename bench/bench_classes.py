"""The worker's records/s with K = 10 classes against the binary worker (K = 2) on the same rows,
per client backend, side by side on one broker: the cost of the K-class perceptron end to end.

    .venv/bin/python -m bench.bench_classes                 # 100,000 records, 3 repeats
    .venv/bin/python -m bench.bench_classes --records 2000 --repeats 1 --json out.json

How it measures, and the figures: docs/performance.md, "Many classes" (goal: K = 10 at 0.5× or more).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.worker import contenders as c
from bench.worker import processes as pr
from bench.worker.formatting import fmt_rate, fmt_ratio, fmt_value, format_table, write_json
from bench.worker.inputs import DEFAULT_D, DEFAULT_NOISE, dense_records
from bench.worker.measures import loadavg

CLASSES = 10


def class_records(values: Sequence[bytes], k: int, *, seed: int, noise: float = DEFAULT_NOISE) -> list[bytes]:
    """``values`` (``{"x", "y", "id"}`` records) with ``y`` the class 0..k-1 whose seeded random
    direction scores ``x`` highest, a fraction ``noise`` of them replaced by a random class.

    >>> vs = [b'{"x":[1.0,0.0],"y":1,"id":0}', b'{"x":[0.0,-1.0],"y":-1,"id":1}']
    >>> [__import__("orjson").loads(v)["y"] in range(3) for v in class_records(vs, 3, seed=1)]
    [True, True]
    """
    import numpy as np
    import orjson

    rows = [orjson.loads(v) for v in values]
    rng = np.random.default_rng(seed)
    X = np.array([r["x"] for r in rows], dtype=np.float64)
    y = (X @ rng.standard_normal((k, X.shape[1])).T).argmax(axis=1)
    flips = rng.choice(len(rows), size=round(noise * len(rows)), replace=False)
    y[flips] = rng.integers(0, k, size=len(flips))
    return [orjson.dumps({**r, "y": int(label)}) for r, label in zip(rows, y.tolist(), strict=True)]


def contenders(backends: Sequence[str]) -> list[tuple[str, int]]:
    """``(backend, K)`` pairs, in the order of repeat 0."""
    return [(b, k) for b in backends for k in (2, CLASSES)]


def run(ctx: pr.Ctx, n: int, repeats: int, seed: int, backends: Sequence[str], say: Any = print
        ) -> dict[str, Any]:
    binary, meta = dense_records(n, DEFAULT_D, seed=seed)
    topics = {2: ctx.new_input("k2-in", binary)[0],
              CLASSES: ctx.new_input(f"k{CLASSES}-in", class_records(binary, CLASSES, seed=seed))[0]}
    env = {2: {}, CLASSES: {"SP_MODEL__CLASSES": str(list(range(CLASSES)))}}
    runs: dict[str, list[dict[str, Any]]] = {f"{b} K={k}": [] for b, k in contenders(backends)}
    for rep in range(repeats):
        for b, k in c.rotated(contenders(backends), rep):
            with ctx.scope():
                r = pr.run_worker(ctx, topics[k], n, "all", f"r{rep}-{c.SHORT[b]}-k{k}", b, env[k])
            runs[f"{b} K={k}"].append(r)
            say(f"  repeat {rep + 1}/{repeats} {b:<16} K={k:<3} {fmt_rate(r['rate']):>9} rec/s  "
                f"mistakes {r['mistakes']}" + ("" if r["complete"] else "  INCOMPLETE"))
    summary = {name: pr.summarize(rs) for name, rs in runs.items()}
    ratios = {b: (lambda a, z: a / z if a and z else None)(summary[f"{b} K={CLASSES}"]["median_rate"],
                                                           summary[f"{b} K=2"]["median_rate"])
              for b in backends}
    return {"input": meta, "records": n, "repeats": repeats, "runs": runs, "summary": summary,
            "ratios": ratios}


def table(report: dict[str, Any], markdown: bool = False) -> str:
    """Per backend: the median records/s at K = 2 and K = 10, their ratio, and the median CPU time
    per record (the worker process's, over its output window) at each K and their ratio K=2 / K=10
    (records/s on a CPU-bound core; steadier than the rates on a loaded machine)."""
    s, cpu = report["summary"], "median_cpu_us_per_record"
    rows = [[b, fmt_rate(s[f"{b} K=2"]["median_rate"]), fmt_rate(s[f"{b} K={CLASSES}"]["median_rate"]),
             fmt_ratio(s[f"{b} K={CLASSES}"]["median_rate"], s[f"{b} K=2"]["median_rate"]),
             fmt_value(s[f"{b} K=2"][cpu], ".1f"), fmt_value(s[f"{b} K={CLASSES}"][cpu], ".1f"),
             fmt_ratio(s[f"{b} K=2"][cpu], s[f"{b} K={CLASSES}"][cpu])] for b in report["ratios"]]
    return format_table(["backend", "K=2 rec/s", f"K={CLASSES} rec/s", "ratio", "K=2 CPU us/rec",
                         f"K={CLASSES} CPU us/rec", "CPU ratio"], rows, markdown=markdown)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.bench_classes", description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=c.DEFAULT_RECORDS)
    p.add_argument("--repeats", type=int, default=c.DEFAULT_REPEATS)
    p.add_argument("--seed", type=int, default=c.DEFAULT_SEED)
    p.add_argument("--backends", default=f"{c.CF},{c.KP}")
    p.add_argument("--bootstrap", help="host:port of a broker; default: start the embedded one")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    with tempfile.TemporaryDirectory(prefix="bench-classes-") as tmp, pr.broker_at(args.bootstrap) as at:
        ctx = pr.Ctx(at[0], f"bk{int(time.time()) % 10**6}{os.getpid() % 1000}", Path(tmp), 6000, at[1])
        print(f"{args.records:,} records, d={DEFAULT_D}, 1 partition, {args.repeats} repeats;"
              f" load {loadavg()}")
        with ctx.scope():
            report = run(ctx, args.records, args.repeats, args.seed, backends)
    report["loadavg_at_end"] = loadavg()
    print(table(report))
    write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
