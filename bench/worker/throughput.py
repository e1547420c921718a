"""The throughput section (every contender on the same records, interleaved) and the size
section (the kafka-python worker, its pipe and the river loop on 10, 100 and 1,000 dense features
and on 10,000-name sparse features)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.worker import contenders as c
from bench.worker.formatting import Say, fmt_rate
from bench.worker.inputs import DEFAULT_D, SPARSE_NAMES, SPARSE_NNZ, dense_records, sparse_records
from bench.worker.processes import Ctx, run_one, summarize

MIN_SIZE_RECORDS = 5_000  # records per size run: at least a few poll batches (2,000 each)


def _repeats(ctx: Ctx, runs: dict[str, list[dict[str, Any]]], topic: str, n: int, rep: int, repeats: int,
             order: Sequence[str], what: str, say: Say) -> None:
    """One repeat: every contender of ``order`` once on ``n`` records of ``topic``, in that order."""
    for name in order:
        r = {**run_one(ctx, name, topic, n, f"{what.split()[0]}-r{rep}"), "repeat": rep}
        runs[name].append(r)
        rss = (r.get("memory") or {}).get("peak_rss_mb") or 0
        by_stats = f" (statistics records: {fmt_rate(r['rate_stats'])})" if r.get("rate_stats") else ""
        say(f"  repeat {rep + 1}/{repeats} {what} {name:<45} {fmt_rate(r['rate']):>9} rec/s{by_stats}  "
            f"peak RSS {rss:,.0f} MB" + ("" if r["complete"] else "  INCOMPLETE")
            + (" REBALANCED" if r.get("rebalanced") else ""))


def section_throughput(ctx: Ctx, n: int, repeats: int, seed: int, say: Say, contenders: Sequence[str]
                       ) -> dict[str, Any]:
    values, meta = dense_records(n, DEFAULT_D, seed=seed)
    in_topic, produce_s = ctx.new_input("tp-in", values)
    say(f"  input: {n:,} records, d={DEFAULT_D}, mean {meta['mean_bytes']:.0f} bytes, produced in "
        f"{produce_s:.1f} s")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
    for rep in range(repeats):
        _repeats(ctx, runs, in_topic, n, rep, repeats, c.rotated(list(contenders), rep), "tp", say)
    summary = {name: summarize(runs[name]) for name in contenders}
    return {"input": meta, "contenders": list(contenders), "runs": runs, "summary": summary}


def size_variants(n: int, quick: bool) -> list[dict[str, Any]]:
    """The inputs of the size section: fewer records where records are large or the worker slow,
    never fewer than ``MIN_SIZE_RECORDS`` (one batch would only time its send loop)."""
    big = max(MIN_SIZE_RECORDS, n // (2 if quick else 4))
    return [{"label": "dense d=10", "d": 10, "records": n}, {"label": "dense d=100", "d": 100, "records": n},
            {"label": "dense d=1000", "d": 1000, "records": big},
            {"label": f"sparse {SPARSE_NNZ} of {SPARSE_NAMES:,} names", "d": None,
             "records": max(MIN_SIZE_RECORDS, n // 2)}]


SIZE_CONTENDERS = (c.PIPE_KP, c.PEER, c.WORKER_KP)


def section_sizes(ctx: Ctx, n: int, repeats: int, quick: bool, seed: int, say: Say) -> dict[str, Any]:
    variants = size_variants(n, quick)
    for k, v in enumerate(variants):
        s = seed + 10 + k
        values, v["input"] = (dense_records(v["records"], v["d"], seed=s) if v["d"]
                              else sparse_records(v["records"], seed=s))
        v["topic"], _ = ctx.new_input(f"size{k}-in", values)
        v["runs"] = {name: [] for name in SIZE_CONTENDERS}
        say(f"  {v['label']}: {v['records']:,} records, mean {v['input']['mean_bytes']:,.0f} bytes")
    for rep in range(repeats):
        for k, v in enumerate(c.rotated(variants, rep)):
            order = c.rotated(list(SIZE_CONTENDERS), rep + k)
            what = f"size {v['label']:<26}"
            _repeats(ctx, v["runs"], v["topic"], v["records"], rep, repeats, order, what, say)
    for v in variants:
        v["summary"] = {name: summarize(v["runs"][name]) for name in SIZE_CONTENDERS}
    return {"variants": variants, "contenders": list(SIZE_CONTENDERS)}
