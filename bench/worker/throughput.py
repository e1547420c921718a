"""The throughput section (every contender on the same records, interleaved; the ratios worker /
own pipe and worker / river loop) and the size section (the kafka-python worker, its pipe and the
river loop on 10, 100 and 1,000 dense features and on 10,000-name sparse features)."""

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
        say(f"  repeat {rep + 1}/{repeats} {what} {name:<45} {fmt_rate(r['rate']):>9} rec/s  "
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
    return {"input": meta, "contenders": list(contenders), "runs": runs, "summary": summary,
            "ratios": throughput_ratios(summary)}


def throughput_ratios(summary: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per backend: its worker (predictions all and none) over its own client's pipe and over the
    peer, and beside the other pipes."""

    def ratio(a: str, b: str) -> float | None:
        x, y = ((summary.get(label) or {}).get("median_rate") for label in (a, b))
        return x / y if x is not None and y else None

    return {b: {"worker_over_own_pipe": ratio(c.WORKER_OF[b], c.PIPE_OF[b]),
                "worker_over_peer": ratio(c.WORKER_OF[b], c.PEER),
                "worker_none_over_own_pipe": ratio(c.WORKER_NONE_OF[b], c.PIPE_OF[b]),
                "pipe_over_kafka_python_pipe": ratio(c.PIPE_OF[b], c.PIPE_KP),
                "worker_over_kafka_python_pipe": ratio(c.WORKER_OF[b], c.PIPE_KP),
                "worker_over_appending_pipe": ratio(c.WORKER_OF[b], c.PIPE_KP_APPEND) if b == c.KP else None,
                "worker_over_codec_pipe": ratio(c.WORKER_OF[b], c.PIPE_CF_CODEC) if b == c.CF else None,
                "codec_pipe_over_own_pipe": ratio(c.PIPE_CF_CODEC, c.PIPE_OF[b]) if b == c.CF else None}
            for b in c.BACKENDS if c.WORKER_OF[b] in summary}


def size_variants(n: int, quick: bool) -> list[dict[str, Any]]:
    """The inputs of the size section: fewer records where records are large or the worker slow,
    never fewer than ``MIN_SIZE_RECORDS`` (one batch would only time its send loop).

    >>> [[v["records"] for v in size_variants(n, quick)] for n, quick in ((100_000, False), (10_000, True))]
    [[100000, 100000, 25000, 50000], [10000, 10000, 5000, 5000]]
    """
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
