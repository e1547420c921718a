"""The throughput section: every contender on the same records, interleaved, and the ratios
worker / own pipe and worker / river loop."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from bench.worker.contenders import (
    BACKENDS,
    CF,
    CONTENDERS,
    KP,
    PEER,
    PIPE_CF_CODEC,
    PIPE_KP,
    PIPE_KP_APPEND,
    PIPE_OF,
    SPECS,
    WORKER_NONE_OF,
    WORKER_OF,
    rotated,
)
from bench.worker.formatting import Say, fmt_rate
from bench.worker.inputs import DEFAULT_D, dense_records
from bench.worker.processes import Ctx, run_one, summarize


def section_throughput(
    ctx: Ctx, n: int, repeats: int, seed: int, say: Say, contenders: Sequence[str] = CONTENDERS
) -> dict[str, Any]:
    values, meta = dense_records(n, DEFAULT_D, seed=seed)
    in_topic, produce_s = ctx.new_input("tp-in", values)
    del values
    say(
        f"  input: {n:,} records, d={DEFAULT_D}, mean {meta['mean_bytes']:.0f} bytes, "
        f"produced in {produce_s:.1f}s ({n / produce_s:,.0f} rec/s)"
    )
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in contenders}
    for rep in range(repeats):
        for c in rotated(list(contenders), rep):
            r = run_one(ctx, c, in_topic, n, f"tp-r{rep}")
            r["repeat"] = rep
            runs[c].append(r)
            spec = SPECS[c]
            extra = (
                f" (stats-based {fmt_rate(r['rate_stats'])})"
                if spec.kind == "worker" and spec.predictions == "all"
                else ""
            )
            say(
                f"  repeat {rep + 1}/{repeats} {c:<45} {fmt_rate(r['rate']):>9} rec/s{extra}"
                + ("" if r["complete"] else "  INCOMPLETE")
                + (" REBALANCED" if r.get("rebalanced") else "")
            )
    summary = {c: summarize(runs[c]) for c in contenders}
    for c in contenders:
        if SPECS[c].kind == "worker" and SPECS[c].predictions == "all":
            ws = [r["rate_stats"] for r in runs[c] if r.get("rate_stats")]
            summary[c]["median_rate_stats_method"] = statistics.median(ws) if ws else None
    return {
        "input": meta,
        "input_topic": in_topic,
        "produce_seconds": produce_s,
        "contenders": list(contenders),
        "runs": runs,
        "summary": summary,
        "ratios": throughput_ratios(summary),
    }


def throughput_ratios(summary: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per backend: worker (predictions all and none) over its own client's pipe and over the peer.

    >>> from bench.worker.contenders import PEER, PIPE_KP, WORKER_KP
    >>> r = throughput_ratios({PIPE_KP: {"median_rate": 100.0}, WORKER_KP: {"median_rate": 60.0},
    ...                        PEER: {"median_rate": 30.0}})
    >>> r["kafka-python"]["worker_over_own_pipe"], r["kafka-python"]["worker_over_peer"]
    (0.6, 2.0)
    """

    def rate(label: str) -> float | None:
        got: float | None = (summary.get(label) or {}).get("median_rate")
        return got

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    out: dict[str, dict[str, float | None]] = {}
    for b in BACKENDS:
        if WORKER_OF[b] not in summary:
            continue
        w, wn, pipe, peer = rate(WORKER_OF[b]), rate(WORKER_NONE_OF[b]), rate(PIPE_OF[b]), rate(PEER)
        out[b] = {
            "worker_over_own_pipe": ratio(w, pipe),
            "worker_over_peer": ratio(w, peer),
            "worker_none_over_own_pipe": ratio(wn, pipe),
            "pipe_over_kafka_python_pipe": ratio(pipe, rate(PIPE_KP)),
            "worker_over_kafka_python_pipe": ratio(w, rate(PIPE_KP)),
            "worker_over_appending_pipe": ratio(w, rate(PIPE_KP_APPEND)) if b == KP else None,
            "worker_over_codec_pipe": ratio(w, rate(PIPE_CF_CODEC)) if b == CF else None,
            "codec_pipe_over_own_pipe": ratio(rate(PIPE_CF_CODEC), pipe) if b == CF else None,
        }
    return out
