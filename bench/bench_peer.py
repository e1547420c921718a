"""The worker against what a Python team would write instead, side by side: a Quix Streams + river
application (``bench/peer_quix.py``, in ``.venv-peer``: ``make peer-venv``) and the worker on
confluent-kafka at each checkpoint interval of ``--every``; the worker's predictions/s over the
peer's. How it measures: docs/performance.md, "Against Quix Streams and river"; ``--help``.
"""

from __future__ import annotations

import argparse
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


def contenders(every: Sequence[int], variants: Sequence[str], peer: bool) -> dict[str, dict[str, str] | None]:
    """The contenders by label: the peer (None), then the worker's settings of each: one per
    checkpoint interval, then one per ``--variant NAME:SP_A=1,SP_B=2`` (at the first interval)."""
    out: dict[str, dict[str, str] | None] = {PEER: None} if peer else {}
    for e in every:
        out[f"worker (confluent-kafka), checkpoint every {e:,}"] = {"SP_CHECKPOINT__EVERY_EXAMPLES": str(e)}
    for v in variants:
        name, _, pairs = v.partition(":")
        out[f"worker (confluent-kafka), {name}"] = {"SP_CHECKPOINT__EVERY_EXAMPLES": str(every[0]),
                                                    **dict(p.split("=", 1) for p in pairs.split(",") if p)}
    return out


def run(ctx: Ctx, in_topic: str, n: int, repeats: int, which: dict[str, dict[str, str] | None], python: str,
        say: Any = print) -> dict[str, list[dict[str, Any]]]:
    """Every contender once per repeat, in rotated order: their runs by label."""
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in which}
    for k in range(repeats):
        for i, label in enumerate(rotated(list(which), k)):
            with ctx.scope():
                if (env := which[label]) is None:
                    r = run_contender_process(ctx, "bench.peer_quix", f"r{k}-q", in_topic, n, python=python)
                else:
                    r = run_worker(ctx, in_topic, n, "all", f"r{k}-w{i}", CF, env)
            runs[label].append(r)
            say(f"  repeat {k + 1}: {label}: {fmt_rate(r.get('rate'))} rec/s")
    return runs


def ratios(runs: dict[str, list[dict[str, Any]]], base: str) -> dict[str, Any]:
    """Each contender's median rate over ``base``'s, and the ratio repeat by repeat."""
    base_median = summarize(runs[base])["median_rate"]
    out = {}
    for label, rs in runs.items():
        med = summarize(rs)["median_rate"]
        each = [w["rate"] / b["rate"] for w, b in zip(rs, runs[base], strict=True) if w["rate"] and b["rate"]]
        out[label] = {"median": med, "base_median": base_median,
                      "ratio": med / base_median if med and base_median else None, "per_repeat": each}
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.bench_peer", description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--every", default="2000,10000", help="the worker's checkpoint intervals, in examples")
    p.add_argument("--variant", action="append", default=[], metavar="NAME:SP_A=1,SP_B=2",
                   help="one more worker, with these settings (repeatable); e.g. exactly-once")
    p.add_argument("--no-peer", action="store_true", help="the workers alone, each over the first")
    p.add_argument("--bootstrap", help="host:port of a broker; default: start the embedded one")
    p.add_argument("--peer-python", default=peer_python(), help="the interpreter with Quix Streams")
    p.add_argument("--json", type=Path)
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = p.parse_args(argv)
    if args.peer_python is None and not args.no_peer:
        p.error("Quix Streams is not installed: make peer-venv")
    which = contenders([int(e) for e in args.every.split(",")], args.variant, not args.no_peer)
    values, meta = dense_records(args.records, 20, seed=args.seed)
    load = [loadavg()]
    with tempfile.TemporaryDirectory(prefix="bench-peer-") as tmp, \
            broker_at(args.bootstrap) as (bootstrap, pid):
        ctx = Ctx(bootstrap, f"peer-{int(time.time())}", Path(tmp), 6000, broker_pid=pid)
        with ctx.scope():
            in_topic, _ = ctx.new_input("in", values)
            runs = run(ctx, in_topic, args.records, args.repeats, which, args.peer_python)
    load.append(loadavg())
    base = next(iter(which))
    out = {"records": args.records, "repeats": args.repeats, "input": meta, "loadavg": load,
           "summary": {label: summarize(r) for label, r in runs.items()}, "ratios": ratios(runs, base),
           "runs": {label: [{k: v for k, v in r.items() if not k.startswith("_")} for r in rs]
                    for label, rs in runs.items()}}
    # CPU per record (all the process's threads, over the outputs' window): what the machine's
    # other load moves less than the rate, which it moves by the share of the cores it leaves
    cpu = {label: s["median_cpu_us_per_record"] for label, s in out["summary"].items()}
    rows = [[label, fmt_rate(r["median"]), f"{r['ratio'] or 0:.2f}x",
             ", ".join(f"{v:.2f}" for v in r["per_repeat"]), ", ".join(fmt_rate(x) for x in s["rates"]),
             f"{cpu[label] or 0:.2f}", f"{(cpu[base] or 0) / cpu[label]:.2f}x" if cpu[label] else "n/a"]
            for (label, r), s in zip(out["ratios"].items(), out["summary"].values(), strict=True)]
    print(format_table(["contender", "median rec/s", f"x {base}", "per repeat", "runs", "CPU us/rec",
                        f"{base}'s CPU/rec over it"], rows))
    print(f"load average at start {load[0]}, at end {load[1]}")
    write_json(args.json, out)
    return out


if __name__ == "__main__":
    main()
