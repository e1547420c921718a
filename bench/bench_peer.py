"""The worker against what a Python team would write instead, side by side: a Quix Streams + river
application (``bench/peer_quix.py``, run in ``.venv-peer``: ``make peer-venv``) and the worker on
confluent-kafka, on one broker and one input (``--records`` JSON records of 20 features on one
partition), the worker at each checkpoint interval of ``--every``; the worker's predictions/s over
the peer's. Each run is a fresh process with fresh output topics (the worker: a fresh group and
state directory); rates from the outputs' CreateTime, as in ``bench_worker``; each repeat runs every
contender once, in an order rotated by the repeat. ``python -m bench.bench_peer --help``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.worker.contenders import CF, DEFAULT_SEED, peer_python, rotated
from bench.worker.formatting import fmt_rate, format_table, write_json
from bench.worker.inputs import dense_records
from bench.worker.measures import loadavg
from bench.worker.processes import Ctx, broker_at, run_contender_process, run_worker, summarize

PEER = "Quix Streams + river"


def worker_label(every: int) -> str:
    return f"worker (confluent-kafka), checkpoint every {every:,}"


def run(ctx: Ctx, in_topic: str, n: int, repeats: int, every: Sequence[int], python: str,
        say: Any = print) -> dict[str, list[dict[str, Any]]]:
    """Every contender once per repeat, in rotated order: their runs by label."""
    contenders: list[tuple[str, int | None]] = [(PEER, None), *((worker_label(e), e) for e in every)]
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in contenders}
    for k in range(repeats):
        for label, e in rotated(contenders, k):
            with ctx.scope():
                if e is None:
                    r = run_contender_process(ctx, "bench.peer_quix", f"r{k}-quix", in_topic, n,
                                              python=python)
                else:
                    r = run_worker(ctx, in_topic, n, "all", f"r{k}-w{e}", CF,
                                   {"SP_CHECKPOINT__EVERY_EXAMPLES": str(e)})
            runs[label].append(r)
            say(f"  repeat {k + 1}: {label}: {fmt_rate(r.get('rate'))} rec/s")
    return runs


def ratios(runs: dict[str, list[dict[str, Any]]], every: Sequence[int]) -> dict[str, Any]:
    """Per interval: the worker's median rate over the peer's, and the ratio repeat by repeat."""
    peer = runs[PEER]
    peer_median = summarize(peer)["median_rate"]
    out = {}
    for e in every:
        worker = runs[worker_label(e)]
        med = summarize(worker)["median_rate"]
        each = [w["rate"] / p["rate"] for w, p in zip(worker, peer, strict=True)
                if w.get("rate") and p.get("rate")]
        out[str(e)] = {"worker_median": med, "peer_median": peer_median,
                       "ratio": med / peer_median if med and peer_median else None, "per_repeat": each}
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.bench_peer", description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--every", default="2000,10000", help="the worker's checkpoint intervals, in examples")
    p.add_argument("--bootstrap", help="host:port of a broker; default: start the embedded one")
    p.add_argument("--peer-python", default=peer_python(), help="the interpreter with Quix Streams")
    p.add_argument("--json", type=Path)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = p.parse_args(argv)
    if args.peer_python is None:
        p.error("Quix Streams is not installed: make peer-venv")
    every = [int(e) for e in args.every.split(",")]
    values, meta = dense_records(args.records, 20, seed=args.seed)
    load = [loadavg()]
    with tempfile.TemporaryDirectory(prefix="bench-peer-") as tmp, \
            broker_at(args.bootstrap) as (bootstrap, pid):
        ctx = Ctx(bootstrap, f"peer-{int(time.time())}", Path(tmp), 6000, broker_pid=pid)
        with ctx.scope():
            in_topic, _ = ctx.new_input("in", values)
            runs = run(ctx, in_topic, args.records, args.repeats, every, args.peer_python)
    load.append(loadavg())
    out = {"records": args.records, "repeats": args.repeats, "input": meta, "loadavg": load,
           "summary": {label: summarize(r) for label, r in runs.items()}, "ratios": ratios(runs, every),
           "runs": {label: [{k: v for k, v in r.items() if not k.startswith("_")} for r in rs]
                    for label, rs in runs.items()}}
    rows = [[label, fmt_rate(s["median_rate"]), ", ".join(fmt_rate(r) for r in s["rates"])]
            for label, s in out["summary"].items()]
    print(format_table(["contender", "median rec/s", "runs"], rows))
    for e, r in out["ratios"].items():
        each = ", ".join(f"{v:.2f}" for v in r["per_repeat"])
        print(f"worker / {PEER}, checkpoint every {int(e):,}: {r['ratio'] or 0:.2f}x (per repeat {each}); "
              f"median of per-repeat {statistics.median(r['per_repeat']) if r['per_repeat'] else 0:.2f}x")
    print(f"load average at start {load[0]}, at end {load[1]}")
    if args.json:
        write_json(args.json, out)
    return out


if __name__ == "__main__":
    main()
