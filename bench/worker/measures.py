"""Pure measures: percentiles, rates from record timestamps, latency matching, trends, and readings
of ``/proc`` (RSS, CPU ticks, steal, load)."""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolated between closest ranks (numpy's default)."""
    if not values or not 0 <= q <= 100:
        raise ValueError("percentile of no values, or q outside [0, 100]")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def rate_from_timestamps(timestamps_ms: Sequence[int]) -> float | None:
    """Records/s between the first and the last timestamp (ms): ``(n − 1) / span``; None with
    fewer than two records or a zero span (too short to measure)."""
    if len(timestamps_ms) < 2 or max(timestamps_ms) == min(timestamps_ms):
        return None
    return (len(timestamps_ms) - 1) / ((max(timestamps_ms) - min(timestamps_ms)) / 1000.0)


def chunk_rates(timestamps_ms: Sequence[int], k: int) -> list[float]:
    """Records/s over consecutive chunks of ``k`` records (in output order): how steady a run was."""
    rates = (rate_from_timestamps(timestamps_ms[i : i + k]) for i in range(0, len(timestamps_ms) - k + 1, k))
    return [r for r in rates if r is not None]


def rate_from_stats(stats: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Records/s from a worker's statistics records with ``seen > 0``: ``(seen_last − seen_first)
    / (ts_last − ts_first)``; None with fewer than two."""
    pts = sorted((s["ts"], s["seen"]) for s in stats if s.get("seen") and s.get("ts") is not None)
    if len(pts) < 2 or pts[-1][0] <= pts[0][0] or pts[-1][1] <= pts[0][1]:
        return None
    (t0, s0), (t1, s1) = pts[0], pts[-1]
    return {"rate": (s1 - s0) / (t1 - t0), "seen_first": s0, "seen_last": s1, "seconds": t1 - t0,
            "t_first": t0, "t_last": t1}


def median_spread(values: Sequence[float]) -> tuple[float, float]:
    """(median, (max − min) / median)."""
    med = statistics.median(values)
    return med, (max(values) - min(values)) / med if med else 0.0


def latency_summary(input_ts: dict[int, int], outputs: Sequence[tuple[int, int]], *, from_offset: int = 0
                    ) -> dict[str, Any]:
    """Latency (ms) from each input record's timestamp to its output's, matched by input offset.

    ``input_ts``: input offset → timestamp (ms); ``outputs``: (input offset the output is for, its
    timestamp). Offsets below ``from_offset`` (a warm-up) are left out; an output sent again
    counts once (its first copy)."""
    first: dict[int, int] = {}
    for off, ts in outputs:
        if off >= from_offset:
            first.setdefault(off, ts)
    lat = [float(first[o] - input_ts[o]) for o in sorted(first) if o in input_ts]
    out: dict[str, Any] = {"matched": len(lat), "from_offset": from_offset,
                           "missing": sum(1 for o in input_ts if o >= from_offset and o not in first)}
    if lat:
        out.update({f"p{str(q).replace('.', '')}_ms": percentile(lat, q) for q in (50, 90, 99, 99.9)})
        out.update({"max_ms": max(lat), "mean_ms": sum(lat) / len(lat), "min_ms": min(lat)})
    return out


def sample_at(samples: Sequence[tuple[float, int]], when: float) -> int | None:
    """The value of the sample (time, value) nearest ``when``; None when no samples."""
    return min(samples, key=lambda s: abs(s[0] - when))[1] if samples else None


def median_around(samples: Sequence[tuple[float, int]], when: float, half_width_s: float) -> float | None:
    """The median value of the samples (time, value) within ``half_width_s`` of ``when``; the
    nearest sample's when none is that close; None when no samples."""
    near = [v for t, v in samples if abs(t - when) <= half_width_s]
    got = statistics.median(near) if near else sample_at(samples, when)
    return None if got is None else float(got)


def linear_trend(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of (x, y) points; None with fewer than two distinct x."""
    mx = sum(x for x, _ in points) / len(points) if points else 0.0
    my = sum(y for _, y in points) / len(points) if points else 0.0
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else None


def parse_status(text: str, keys: Sequence[str] = ("VmRSS", "VmHWM")) -> dict[str, int]:
    """``keys`` (``VmRSS``, ``VmHWM`` in kB; ``Threads``) out of a ``/proc/PID/status`` text."""
    fields = (line.partition(":") for line in text.splitlines())
    return {key: int(rest.split()[0]) for key, _, rest in fields if key in keys}


def parse_stat_cpu_ticks(text: str) -> int:
    """utime + stime (clock ticks) out of a ``/proc/PID/stat`` line (the name may hold spaces)."""
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cores_in_window(samples: Sequence[tuple[float, float]], t0: float, t1: float) -> float | None:
    """Average cores used in ``[t0, t1]`` from (time, cumulative CPU seconds) samples, linearly
    interpolated; None when the window is empty or not covered by the samples."""
    if t1 <= t0 or len(samples) < 2 or t0 < samples[0][0] or t1 > samples[-1][0]:
        return None

    def at(t: float) -> float:
        for (ta, ca), (tb, cb) in zip(samples, samples[1:], strict=False):
            if ta <= t <= tb:
                return ca if tb == ta else ca + (cb - ca) * (t - ta) / (tb - ta)
        return samples[-1][1]

    return (at(t1) - at(t0)) / (t1 - t0)


def cpu_counters() -> list[int] | None:
    """The machine's CPU time counters (the ``cpu`` line of ``/proc/stat``, in ticks: user nice
    system idle iowait irq softirq steal ...); None where there is no such file."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            return [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None


def steal_share(before: Sequence[int] | None, after: Sequence[int] | None) -> float | None:
    """The share of CPU time the hypervisor gave to other guests between two :func:`cpu_counters`
    readings: on a shared VM, the contenders ran slower by about that much."""
    if before is None or after is None or len(before) < 8 or len(after) < 8:
        return None
    total = sum(after[:8]) - sum(before[:8])  # guest time is already counted in user time
    return None if total <= 0 else round((after[7] - before[7]) / total, 4)


def loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None
