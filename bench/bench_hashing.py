"""Hashed features against indexed names: resident memory, checkpoint size and throughput.

    .venv/bin/python -m bench.bench_hashing                         # 10,000,000 distinct names
    .venv/bin/python -m bench.bench_hashing --names 200000 --quiet  # a short run

How it measures, and the figures: docs/performance.md, "Hashed features". The labels are a fixed
linear function of the common features with 5% flipped, so the model keeps updating.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.worker.formatting import write_json
from bench.worker.measures import parse_status
from stream_perceptron import Perceptron


def rss_mb() -> float:
    """This process's resident memory now, in MB (``VmRSS``)."""
    return parse_status(Path("/proc/self/status").read_text())["VmRSS"] / 1024


def chunks(n_records: int, new: int, common: int, chunk: int, seed: int = 0
           ) -> Iterator[tuple[list[dict[str, float]], np.ndarray]]:
    """The stream, ``chunk`` records at a time: (rows, labels)."""
    rng = np.random.default_rng(seed)
    u = rng.normal(size=common)
    next_id = 0
    for start in range(0, n_records, chunk):
        k = min(chunk, n_records - start)
        values = np.round(rng.normal(size=(k, common)), 3)
        y = np.where(values @ u > 0, 1, -1)
        y[rng.random(k) < 0.05] *= -1
        rows = []
        for i in range(k):
            row = {f"c{j}": float(values[i, j]) for j in range(common)}
            for _ in range(new):
                row[f"user:{next_id}"] = 1.0
                next_id += 1
            rows.append(row)
        yield rows, y


def run(model: Perceptron, n_records: int, args: argparse.Namespace) -> dict[str, Any]:
    """Learn the stream with ``model``; its memory, checkpoint size and time along the way."""
    gc.collect()
    base = rss_mb()
    points, learn_s = [], 0.0
    for c, (rows, y) in enumerate(chunks(n_records, args.new, args.common, args.chunk)):
        t = time.perf_counter()
        model.learn_many(rows, y)
        learn_s += time.perf_counter() - t
        seen = (c + 1) * args.chunk
        point: dict[str, Any] = {"records": seen, "names": seen * args.new, "rss_mb": rss_mb()}
        if c % args.every == 0 or seen >= n_records:
            t = time.perf_counter()
            point["checkpoint_mb"] = len(json.dumps(model.get_state())) / 1e6
            point["checkpoint_s"] = time.perf_counter() - t
        points.append(point)
    rss, per_s = [p["rss_mb"] for p in points], n_records / learn_s
    sizes = [p["checkpoint_mb"] for p in points if "checkpoint_mb" in p]
    return {"model": repr(model), "records": n_records, "distinct_names": n_records * args.new,
            "rss_start_mb": base, "rss_end_mb": rss[-1], "rss_max_mb": max(rss), "checkpoint_mb": sizes,
            "learn_s": learn_s, "records_per_s": per_s, "names_per_s": per_s * (args.new + args.common),
            "mistakes": model.mistakes, "points": points}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--names", type=int, default=10_000_000, help="distinct new names in all")
    p.add_argument("--new", type=int, default=10, help="new names a record brings")
    p.add_argument("--common", type=int, default=10, help="names every record has")
    p.add_argument("--bits", type=int, default=20, help="hash_bits")
    p.add_argument("--chunk", type=int, default=10_000, help="records per learn_many call")
    p.add_argument("--every", type=int, default=10, help="chunks between checkpoint sizes")
    p.add_argument("--indexed-names", type=int, default=2_000_000,
                   help="distinct names given to the model that indexes names (0: skip it)")
    p.add_argument("--json", default=None)
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    hashed = run(Perceptron(hash_bits=args.bits), args.names // args.new, args)
    report: dict[str, Any] = {"params": vars(args), "hashed": hashed}
    if args.indexed_names:
        report["indexed"] = run(Perceptron(), args.indexed_names // args.new, args)
    if args.json:
        write_json(Path(args.json), report)
    if not args.quiet:
        for r in (report[key] for key in ("hashed", "indexed") if key in report):
            sizes = r["checkpoint_mb"]
            print(f"{r['model']}: {r['distinct_names']:,} distinct names in {r['records']:,} records;"
                  f" RSS {r['rss_start_mb']:.0f} -> {r['rss_end_mb']:.0f} MB (max {r['rss_max_mb']:.0f});"
                  f" checkpoint {sizes[0]:.1f} -> {sizes[-1]:.1f} MB;"
                  f" {r['records_per_s']:,.0f} records/s ({r['names_per_s']:,.0f} features/s)"
                  f" learning; {r['mistakes']:,} mistakes")
            step = max(1, len(r["points"]) // 10)
            for p in r["points"][::step] + r["points"][-1:]:
                ck = f", checkpoint {p['checkpoint_mb']:.1f} MB" if "checkpoint_mb" in p else ""
                print(f"  {p['names']:>12,} names: RSS {p['rss_mb']:7.1f} MB{ck}")
    return report


if __name__ == "__main__":
    main()
