"""The memory section: one worker run per backend through 100k and 1M records, with its resident
memory sampled at each milestone."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from bench.worker.contenders import BACKENDS, KP, SHORT, backend_env
from bench.worker.formatting import Say, fmt_rate, fmt_value
from bench.worker.inputs import DEFAULT_D, dense_records
from bench.worker.measures import linear_trend, median_around, sample_at
from bench.worker.processes import RSS_INTERVAL_S, Ctx, finish_worker, run_contender_process, start_worker

MEMORY_MILESTONES_FULL = (100_000, 1_000_000)
MEMORY_MILESTONES_QUICK = (100_000,)
MEMORY_EXTRA = 0.05  # records beyond the last milestone, so that it is reached mid-stream, not at shutdown
MEMORY_WINDOW_S = 0.5  # VmRSS at a milestone: the median of the samples within this of it


def section_memory(
    ctx: Ctx, milestones: Sequence[int], seed: int, say: Say, backends: Sequence[str] = (KP,)
) -> dict[str, Any]:
    """One worker run (predictions=all) per backend on the same records (5% beyond the last
    milestone, so that every milestone is reached mid-stream), VmRSS sampled; then each backend's
    bare pipe on the same records (a long-window check of the pipes' rates: worker / pipe at 1M)."""
    n = int(max(milestones) * (1 + MEMORY_EXTRA))
    values, meta = dense_records(n, DEFAULT_D, seed=seed + 1)
    in_topic, produce_s = ctx.new_input("mem-in", values)
    del values
    say(
        f"  input: {n:,} records produced in {produce_s:.1f}s; worker (predictions=all) sampled every "
        f"{RSS_INTERVAL_S * 1000:.0f} ms"
    )
    runs = {}
    for b in BACKENDS:
        if b in backends:
            with ctx.scope():
                runs[b] = _memory_run(ctx, in_topic, n, milestones, b)
            r = runs[b]
            pts = ", ".join(
                f"{p['records']:,}: {p['rss_mb']:,.0f} MB" for p in r["milestones"] if p["rss_mb"]
            )
            say(
                f"  worker ({b}): {pts}; peak {r['peak_rss_mb'] or 0:,.0f} MB; "
                f"{fmt_rate(r['run']['rate'])} rec/s"
            )
    out: dict[str, Any] = {
        "input": meta,
        "input_topic": in_topic,
        "runs": runs,
        "method": "VmRSS from /proc/PID/status sampled every 50 ms; at a milestone, the sample nearest "
        "in time to the worker's first statistics record with seen >= milestone",
    }
    out["pipes_long_run"] = {}
    for b in BACKENDS:
        if b in backends:
            with ctx.scope():
                r = run_contender_process(
                    ctx, "bench.pipe", f"mem-{SHORT[b]}-pipe", in_topic, n, ["--client", b]
                )
            out["pipes_long_run"][b] = r
            say(
                f"  {b} pipe on the same {n:,} records: {fmt_rate(r['rate'])} rec/s "
                f"({fmt_rate(r.get('own_rate_first_poll_to_flush'))} rec/s first poll -> flush; "
                f"{fmt_value(r.get('cpu_cores_in_window'), '.2f')} cores, broker "
                f"{fmt_value(r.get('broker_cpu_cores_in_window'), '.2f')} cores)"
            )
    return out


def _memory_run(ctx: Ctx, in_topic: str, n: int, milestones: Sequence[int], backend: str) -> dict[str, Any]:
    wp = start_worker(ctx, in_topic, "all", f"mem-{SHORT[backend]}", env_extra=backend_env(backend))
    res = finish_worker(ctx, wp, n, "all", timeout_s=180 + n / 300)
    res["backend"] = backend
    raw = res.pop("_rss_samples")
    samples = [(t, rss) for t, rss, _, _ in raw]
    hwm = [(t, h) for t, _, h, _ in raw]
    stats = sorted(res.pop("_stats"), key=lambda s: s.get("ts", 0))
    points = []
    for m in milestones:
        hit = next((s for s in stats if s.get("seen", 0) >= m), None)
        if hit is None:
            continue
        rss = median_around(samples, hit["ts"], MEMORY_WINDOW_S)
        point = sample_at(samples, hit["ts"])
        peak = sample_at(hwm, hit["ts"])
        points.append(
            {
                "records": m,
                "stats_seen": hit["seen"],
                "rss_mb": None if rss is None else rss / 1024,
                "rss_nearest_sample_mb": None if point is None else point / 1024,
                "hwm_mb": None if peak is None else peak / 1024,
            }
        )
    first = next((s for s in stats if s.get("seen", 0) > 0), None)
    early = sample_at(samples, first["ts"]) if first else None
    # the trajectory: at every statistics record (every 5,000 records), VmRSS and VmHWM
    series = []
    for st in stats:
        if st.get("seen") and st.get("ts") is not None:
            rss = median_around(samples, st["ts"], MEMORY_WINDOW_S)
            peak = sample_at(hwm, st["ts"])
            series.append(
                {
                    "seen": st["seen"],
                    "rss_mb": None if rss is None else round(rss / 1024, 1),
                    "hwm_mb": None if peak is None else round(peak / 1024, 1),
                }
            )
    later = [(pt["seen"], pt["rss_mb"]) for pt in series if pt["seen"] >= 100_000 and pt["rss_mb"]]
    span = (max(x for x, _ in later) - min(x for x, _ in later)) if later else 0
    slope = linear_trend(later) if span >= 200_000 else None  # a slope over a short span is noise
    return {
        "backend": backend,
        "run": res,
        "series": series,
        "rss_from_100k": {
            "points": len(later),
            "min_mb": min((v for _, v in later), default=None),
            "median_mb": statistics.median([v for _, v in later]) if later else None,
            "max_mb": max((v for _, v in later), default=None),
            "slope_mb_per_100k_records": None if slope is None else slope * 100_000,
        },
        "rss_after_first_batches_mb": None if early is None else early / 1024,
        "first_stats_seen": first["seen"] if first else None,
        "milestones": points,
        "peak_rss_mb": res["memory"].get("peak_rss_mb"),
        "vm_hwm_mb": res["memory"].get("vm_hwm_mb"),
    }
