"""The memory section: one worker run per backend through 100k and 1M records, its resident memory
sampled at each milestone; then each backend's bare pipe on the same records (the long run)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from bench.worker.contenders import BACKENDS, KP, SHORT, backend_env
from bench.worker.formatting import Say, fmt_rate, fmt_value
from bench.worker.inputs import DEFAULT_D, dense_records
from bench.worker.measures import linear_trend, median_around, sample_at
from bench.worker.processes import Ctx, finish_worker, run_contender_process, start_worker

MEMORY_MILESTONES_FULL, MEMORY_MILESTONES_QUICK = (100_000, 1_000_000), (100_000,)
MEMORY_EXTRA = 0.05  # records beyond the last milestone, so that it is reached mid-stream, not at shutdown
MEMORY_WINDOW_S = 0.5  # VmRSS at a milestone: the median of the samples within this of it


def section_memory(ctx: Ctx, milestones: Sequence[int], seed: int, say: Say, backends: Sequence[str] = (KP,)
                   ) -> dict[str, Any]:
    """One worker run (predictions=all) per backend on the same records, VmRSS sampled; then each
    backend's bare pipe on them (a long-window check of the pipes' rates: worker / pipe at 1M)."""
    n = int(max(milestones) * (1 + MEMORY_EXTRA))
    values, meta = dense_records(n, DEFAULT_D, seed=seed + 1)
    in_topic, produce_s = ctx.new_input("mem-in", values)
    del values
    say(f"  input: {n:,} records produced in {produce_s:.1f} s; the worker's memory sampled every 50 ms")
    out: dict[str, Any] = {"input": meta, "runs": {}, "pipes_long_run": {}}
    for b in (b for b in BACKENDS if b in backends):
        with ctx.scope():
            r = out["runs"][b] = _memory_run(ctx, in_topic, n, milestones, b)
        pts = ", ".join(f"{p['records']:,}: {p['rss_mb']:,.0f} MB" for p in r["milestones"] if p["rss_mb"])
        say(f"  worker ({b}): {pts}; peak {r['peak_rss_mb'] or 0:,.0f} MB; "
            f"{fmt_rate(r['run']['rate'])} rec/s")
    for b in (b for b in BACKENDS if b in backends):
        with ctx.scope():
            p = out["pipes_long_run"][b] = run_contender_process(ctx, "bench.pipe", f"mem-{SHORT[b]}-pipe",
                                                                 in_topic, n, ["--client", b])
        say(f"  {b} pipe on the same {n:,} records: {fmt_rate(p['rate'])} rec/s "
            f"({fmt_rate(p.get('own_rate_first_poll_to_flush'))} first poll -> flush; "
            f"{fmt_value(p.get('cpu_cores_in_window'), '.2f')} cores)")
    return out


def _memory_run(ctx: Ctx, in_topic: str, n: int, milestones: Sequence[int], backend: str) -> dict[str, Any]:
    """VmRSS (the median of the samples within ``MEMORY_WINDOW_S``) and VmHWM at the worker's first
    statistics record past each milestone, and at every statistics record (every 5,000 records)."""
    wp = start_worker(ctx, in_topic, "all", f"mem-{SHORT[backend]}", env_extra=backend_env(backend))
    res = {**finish_worker(ctx, wp, n, "all", timeout_s=180 + n / 300, keep_samples=True), "backend": backend}
    raw = res.pop("_rss_samples")
    rss, hwm = [(t, r) for t, r, _, _ in raw], [(t, h) for t, _, h, _ in raw]
    stats = sorted((s for s in res.pop("_stats") if s.get("seen") and s.get("ts") is not None),
                   key=lambda s: s["ts"])

    def mb(value: float | None, digits: int | None = None) -> float | None:
        return None if value is None else round(value / 1024, digits) if digits else value / 1024

    points = []
    for mark in milestones:
        hit = next((s for s in stats if s["seen"] >= mark), None)
        if hit is not None:
            points.append({"records": mark, "stats_seen": hit["seen"],
                           "rss_mb": mb(median_around(rss, hit["ts"], MEMORY_WINDOW_S)),
                           "hwm_mb": mb(sample_at(hwm, hit["ts"]))})
    series = [{"seen": s["seen"], "rss_mb": mb(median_around(rss, s["ts"], MEMORY_WINDOW_S), 1),
               "hwm_mb": mb(sample_at(hwm, s["ts"]), 1)} for s in stats]
    later = [(p["seen"], p["rss_mb"]) for p in series if p["seen"] >= 100_000 and p["rss_mb"]]
    span = max(x for x, _ in later) - min(x for x, _ in later) if later else 0
    slope = linear_trend(later) if span >= 200_000 else None  # a slope over a short span is noise
    return {
        "backend": backend, "run": res, "series": series, "milestones": points,
        "rss_from_100k": {"points": len(later), "min_mb": min((v for _, v in later), default=None),
                          "median_mb": statistics.median([v for _, v in later]) if later else None,
                          "max_mb": max((v for _, v in later), default=None),
                          "slope_mb_per_100k_records": None if slope is None else slope * 100_000},
        "rss_after_first_batches_mb": mb(sample_at(rss, stats[0]["ts"])) if stats else None,
        "peak_rss_mb": res["memory"].get("peak_rss_mb"), "vm_hwm_mb": res["memory"].get("vm_hwm_mb"),
    }
