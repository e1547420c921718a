"""End-to-end benchmark of the worker on a Kafka-protocol broker, on both of its client backends:
throughput against a bare pipe of the same client and a hand-written river loop, resident memory,
latency at half load, cost against size, and (optionally) a profile of the worker.

Run from the repository root::

    .venv/bin/python -m bench.bench_worker                      # 100k records, 3 repeats, ~20 min
    .venv/bin/python -m bench.bench_worker --quick              # small sizes, 1 repeat, ~2 min
    .venv/bin/python -m bench.bench_worker --profile both --json bench/results/worker.json
    .venv/bin/python -m bench.bench_worker --backends kafka-python --only throughput
    .venv/bin/python -m bench.bench_worker --bootstrap 127.0.0.1:9092 --records 200000
    .venv/bin/python -m bench.bench_worker --only profile --profile pyspy --profile-records 200000

Without ``--bootstrap`` it starts the embedded broker (``stream_perceptron.broker.EmbeddedBroker``,
tansu, memory only) once for the whole run. Every contender is a separate process, reads the SAME
pre-produced input records (produced once per size into a fresh topic) and writes to a fresh
output topic. Per client backend (``--backends``, default both: kafka-python and confluent-kafka):

1. **pipe**: ``bench.pipe --client BACKEND``, a bare consume → produce pipe (values unchanged)
   with the client settings of the worker's edge for that backend;
2. **worker**: ``python -m stream_perceptron.cli run --until-caught-up`` with
   ``SP_KAFKA__BACKEND=BACKEND`` and other ``SP_*`` settings at their defaults (a fresh group,
   fresh output topics and a fresh checkpoint directory per run), with
   ``SP_OUTPUT__PREDICTIONS=all`` and ``=none`` (statistics only);

and once: 3. **peer**: ``bench.peer_river_loop``, kafka-python + ``json`` + river's ``Perceptron``.

How a rate is measured (records/s), the same way for every contender:

* from the output topic's record timestamps (CreateTime, stamped by the contender's producer at
  ``send()`` / ``produce()``): ``(count − 1) / (last − first)``. The group join, the process
  start-up and the final flush all fall outside that window, for every contender (the pipes and
  the peer use ``assign()``; the worker's join on tansu takes ``session_timeout_ms / 2`` before
  its first output record);
* for the worker with predictions off there is no output record per input record, so its rate
  comes from its own statistics records: ``(seen_last − seen_first) / (ts_last − ts_first)``
  between the first periodic statistics record (after ~5,000 records) and the one published at
  shutdown. The same figure is computed for the ``all`` runs as a cross-check of the two methods.

See ``docs/performance.md`` for the method, a full run, the targets and the profile.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile  # noqa: F401  (the profile runs ``python -m cProfile``; imported to fail early)
import json
import math
import os
import platform
import pstats
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_RECORDS = 100_000
QUICK_RECORDS = 10_000
DEFAULT_REPEATS = 3
DEFAULT_D = 20
DEFAULT_NOISE = 0.01
DEFAULT_SEED = 20_260_521
MARGIN = 0.1  # rows with |u·x| < MARGIN (on the values as sent) are rejected: separable with a margin
SPARSE_NAMES = 10_000
SPARSE_NNZ = 20
MEMORY_MILESTONES_FULL = (100_000, 1_000_000)
MEMORY_MILESTONES_QUICK = (100_000,)
MEMORY_EXTRA = 0.05  # records beyond the last milestone, so that it is reached mid-stream, not at shutdown
MEMORY_WINDOW_S = 0.5  # VmRSS at a milestone: the median of the samples within this of it
LATENCY_WARMUP = 200
PROFILE_RECORDS = 200_000
RSS_INTERVAL_S = 0.05
MIN_SIZE_RECORDS = 5_000  # records per size run: at least a few poll batches (2,000 each)

KP = "kafka-python"
KPP = "kafka-python+process"  # kafka-python, SP_KAFKA__PRODUCER_PROCESS=true
CF = "confluent-kafka"
BACKENDS = (KP, KPP, CF)
SHORT = {KP: "kp", KPP: "kpp", CF: "cf"}  # in topic and group names

PIPE_KP = "pipe: bare kafka-python consume->produce"
WORKER_KP = "worker (kafka-python), predictions=all"
WORKER_KP_NONE = "worker (kafka-python), predictions=none"
PIPE_KPP = "pipe: bare kafka-python, producer in a 2nd process"
WORKER_KPP = "worker (kafka-python+process), predictions=all"
WORKER_KPP_NONE = "worker (kafka-python+process), predictions=none"
PIPE_CF = "pipe: bare confluent-kafka consume->produce"
WORKER_CF = "worker (confluent-kafka), predictions=all"
WORKER_CF_NONE = "worker (confluent-kafka), predictions=none"
PEER = "peer: kafka-python + json + river loop"
# the names of the single-backend benchmark, kept for the size section and old reports
LIMIT, WORKER_ALL, WORKER_NONE = PIPE_KP, WORKER_KP, WORKER_KP_NONE


@dataclass(frozen=True)
class Spec:
    """What a contender label runs: ``kind`` pipe / worker / peer, on ``backend``."""

    kind: str
    backend: str
    predictions: str = "all"


SPECS: dict[str, Spec] = {
    PIPE_KP: Spec("pipe", KP),
    WORKER_KP: Spec("worker", KP, "all"),
    WORKER_KP_NONE: Spec("worker", KP, "none"),
    PIPE_KPP: Spec("pipe", KPP),
    WORKER_KPP: Spec("worker", KPP, "all"),
    WORKER_KPP_NONE: Spec("worker", KPP, "none"),
    PIPE_CF: Spec("pipe", CF),
    WORKER_CF: Spec("worker", CF, "all"),
    WORKER_CF_NONE: Spec("worker", CF, "none"),
    PEER: Spec("peer", KP),
}
PIPE_OF = {KP: PIPE_KP, KPP: PIPE_KPP, CF: PIPE_CF}
WORKER_OF = {KP: WORKER_KP, KPP: WORKER_KPP, CF: WORKER_CF}
WORKER_NONE_OF = {KP: WORKER_KP_NONE, KPP: WORKER_KPP_NONE, CF: WORKER_CF_NONE}
CONTENDERS = (
    PIPE_KP, WORKER_KP, WORKER_KP_NONE, PIPE_KPP, WORKER_KPP, WORKER_KPP_NONE, PIPE_CF, WORKER_CF,
    WORKER_CF_NONE, PEER,
)
SECTIONS = ("throughput", "memory", "latency", "sizes", "profile")

# The targets (docs/performance.md)
TARGET_WORKER_OVER_PIPE = 0.9
TARGET_WORKER_OVER_PEER = 3.0
TARGET_MEMORY_GROWTH = 0.10  # RSS after 1M records within 10% of RSS after 100k
TARGET_P99_MS = 100.0  # at half of the worker's own maximum rate
LATENCY_EXTRA_FETCH_WAIT_MS = 10  # one extra kafka-python worker point at this fetch_max_wait_ms


# ============================================================================ pure helpers (tested)
def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks (numpy's default).

    >>> percentile([1, 2, 3, 4], 50), percentile([5], 99), percentile([0, 10], 90)
    (2.5, 5.0, 9.0)
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError("q must be in [0, 100]")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))


def rate_from_timestamps(timestamps_ms: Sequence[int]) -> float | None:
    """Records/s between the first and the last timestamp (ms): ``(n − 1) / span``.

    None with fewer than two records or a zero span (the span is too short to measure).

    >>> rate_from_timestamps([1000, 1500, 2000])
    2.0
    >>> rate_from_timestamps([5]) is None, rate_from_timestamps([7, 7]) is None
    (True, True)
    """
    if len(timestamps_ms) < 2:
        return None
    span = (max(timestamps_ms) - min(timestamps_ms)) / 1000.0
    if span <= 0:
        return None
    return (len(timestamps_ms) - 1) / span


def chunk_rates(timestamps_ms: Sequence[int], k: int) -> list[float]:
    """Records/s over consecutive chunks of ``k`` records (in output order): how steady a run was.

    >>> chunk_rates([0, 10, 20, 100, 200, 300, 400], 3)  # the last, partial chunk is left out
    [100.0, 10.0]
    """
    out = []
    for i in range(0, len(timestamps_ms) - k + 1, k):
        r = rate_from_timestamps(timestamps_ms[i : i + k])
        if r is not None:
            out.append(r)
    return out


def rate_from_stats(stats: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Records/s from a worker's statistics records: ``(seen_last − seen_first) / (ts_last − ts_first)``
    over the records with ``seen > 0`` (in time order). None when fewer than two such records.

    >>> rate_from_stats([{"seen": 0, "ts": 0.0}, {"seen": 6000, "ts": 10.0}, {"seen": 10000, "ts": 12.0}])
    {'rate': 2000.0, 'seen_first': 6000, 'seen_last': 10000, 'seconds': 2.0, 't_first': 10.0, 't_last': 12.0}
    """
    pts = sorted((s["ts"], s["seen"]) for s in stats if s.get("seen") and s.get("ts") is not None)
    if len(pts) < 2:
        return None
    (t0, s0), (t1, s1) = pts[0], pts[-1]
    if t1 <= t0 or s1 <= s0:
        return None
    return {
        "rate": (s1 - s0) / (t1 - t0),
        "seen_first": s0,
        "seen_last": s1,
        "seconds": t1 - t0,
        "t_first": t0,
        "t_last": t1,
    }


def median_spread(values: Sequence[float]) -> tuple[float, float]:
    """(median, (max − min) / median).

    >>> median_spread([9.0, 10.0, 12.0])
    (10.0, 0.3)
    """
    if not values:
        raise ValueError("no values")
    med = statistics.median(values)
    return med, (max(values) - min(values)) / med if med else 0.0


def latency_summary(
    input_ts: dict[int, int], outputs: Sequence[tuple[int, int]], *, from_offset: int = 0
) -> dict[str, Any]:
    """Latency (ms) from each input record's timestamp to its output's, matched by input offset.

    ``input_ts``: input offset → timestamp (ms); ``outputs``: (input offset the output is for, its
    timestamp). Offsets below ``from_offset`` (a warm-up) are left out; a re-emitted output counts
    once (its first copy).

    >>> s = latency_summary({0: 100, 1: 110, 2: 120}, [(0, 105), (1, 130), (2, 121), (2, 190)])
    >>> s["matched"], s["p50_ms"], s["max_ms"], s["missing"]
    (3, 5.0, 20.0, 0)
    """
    first: dict[int, int] = {}
    for off, ts in outputs:
        if off >= from_offset and off not in first:
            first[off] = ts
    lat = [float(first[o] - input_ts[o]) for o in sorted(first) if o in input_ts]
    wanted = [o for o in input_ts if o >= from_offset]
    out: dict[str, Any] = {
        "matched": len(lat),
        "missing": sum(1 for o in wanted if o not in first),
        "from_offset": from_offset,
    }
    if lat:
        out.update(
            {
                "p50_ms": percentile(lat, 50),
                "p90_ms": percentile(lat, 90),
                "p99_ms": percentile(lat, 99),
                "p999_ms": percentile(lat, 99.9),
                "max_ms": max(lat),
                "mean_ms": sum(lat) / len(lat),
                "min_ms": min(lat),
            }
        )
    return out


def median_around(samples: Sequence[tuple[float, int]], when: float, half_width_s: float) -> float | None:
    """The median value of the samples (time, value) within ``half_width_s`` of ``when``; the
    nearest sample's when none is that close; None when no samples.

    >>> median_around([(1.0, 10), (2.0, 50), (2.1, 20), (2.2, 30), (9.0, 99)], 2.1, 0.5)
    30.0
    >>> median_around([(1.0, 10), (5.0, 50)], 4.0, 0.5), median_around([], 1.0, 0.5)
    (50.0, None)
    """
    near = [v for t, v in samples if abs(t - when) <= half_width_s]
    if near:
        return float(statistics.median(near))
    got = sample_at(samples, when)
    return None if got is None else float(got)


def linear_trend(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of (x, y) points; None with fewer than two distinct x.

    >>> linear_trend([(0, 1.0), (1, 3.0), (2, 5.0)]), linear_trend([(1, 2.0)])
    (2.0, None)
    """
    if len(points) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def sample_at(samples: Sequence[tuple[float, int]], when: float) -> int | None:
    """The value of the sample (time, value) closest in time to ``when``; None when no samples.

    >>> sample_at([(1.0, 10), (2.0, 20), (3.0, 30)], 2.4), sample_at([], 1.0)
    (20, None)
    """
    if not samples:
        return None
    return min(samples, key=lambda s: abs(s[0] - when))[1]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """A plain-text table; ``align`` has one of ``l``/``r`` per column (default: first left, rest right).

    >>> print(format_table(["name", "rec/s"], [["pipe", "1,000"], ["worker", "900"]]))
    name    rec/s
    ------  -----
    pipe    1,000
    worker    900
    """
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    ncol = len(headers)
    align = align or ("l" + "r" * (ncol - 1))
    widths = [max(len(r[i]) for r in cells) for i in range(ncol)]

    def fmt(row: list[str]) -> str:
        parts = [row[i].ljust(widths[i]) if align[i] == "l" else row[i].rjust(widths[i]) for i in range(ncol)]
        return "  ".join(parts).rstrip()

    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells[1:]]
    return "\n".join(lines)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """The same table in Markdown.

    >>> print(markdown_table(["a", "b"], [[1, 2]]))
    | a | b |
    |---|---:|
    | 1 | 2 |
    """
    ncol = len(headers)
    align = align or ("l" + "r" * (ncol - 1))
    out = ["| " + " | ".join(str(h) for h in headers) + " |"]
    out.append("|" + "|".join("---" if a == "l" else "---:" for a in align) + "|")
    out += ["| " + " | ".join("" if c is None else str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def fmt_rate(rate: float | None) -> str:
    """Records/s with thousands separators (``n/a`` for None).

    >>> fmt_rate(12345.6), fmt_rate(None)
    ('12,346', 'n/a')
    """
    return "n/a" if rate is None else f"{rate:,.0f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    """``a / b`` as ``0.53x``.

    >>> fmt_ratio(1.0, 2.0), fmt_ratio(None, 1.0)
    ('0.50x', 'n/a')
    """
    if a is None or not b:
        return "n/a"
    return f"{a / b:.2f}x"


def parse_status(text: str) -> dict[str, int]:
    """``VmRSS`` / ``VmHWM`` (kB) out of a ``/proc/PID/status`` text.

    >>> parse_status("Name:\\tpython\\nVmHWM:\\t  2048 kB\\nVmRSS:\\t  1024 kB\\n")
    {'VmHWM': 2048, 'VmRSS': 1024}
    """
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(rest.split()[0])
    return out


def rotated(items: Sequence[Any], k: int) -> list[Any]:
    """``items`` rotated left by ``k`` (the interleaving order of repeat ``k``).

    >>> rotated(["a", "b", "c"], 1), rotated(["a", "b", "c"], 4)
    (['b', 'c', 'a'], ['b', 'c', 'a'])
    """
    if not items:
        return []
    k %= len(items)
    return list(items[k:]) + list(items[:k])


def contenders_for(backends: Sequence[str]) -> list[str]:
    """The throughput contenders for ``backends``: per backend its pipe and its worker (predictions
    all and none), then the river peer; the interleaving order of repeat 0.

    >>> [c.split(":")[0].split(",")[0] for c in contenders_for(["kafka-python"])]
    ['pipe', 'worker (kafka-python)', 'worker (kafka-python)', 'peer']
    >>> len(contenders_for(BACKENDS))
    10
    """
    out: list[str] = []
    for b in BACKENDS:
        if b in backends:
            out += [PIPE_OF[b], WORKER_OF[b], WORKER_NONE_OF[b]]
    return [*out, PEER]


def target_check(
    target: str, backend: str, value: float | None, goal: float, *, higher_is_better: bool = True
) -> dict[str, Any]:
    """One target: met or not, and by how much it is missed (a fraction of the goal) and the factor
    the value would have to improve by.

    >>> t = target_check("worker / own pipe", "kafka-python", 0.6, 0.9)
    >>> t["met"], round(t["missed_by"], 3), round(t["factor_needed"], 2)
    (False, 0.333, 1.5)
    >>> t = target_check("p99 ms", "confluent-kafka", 150.0, 100.0, higher_is_better=False)
    >>> t["met"], t["missed_by"], t["factor_needed"]
    (False, 0.5, 1.5)
    >>> target_check("x", "b", 4.0, 3.0)["met"], target_check("x", "b", None, 3.0)["met"]
    (True, None)
    """
    out: dict[str, Any] = {
        "target": target,
        "backend": backend,
        "value": value,
        "goal": goal,
        "higher_is_better": higher_is_better,
        "met": None,
        "missed_by": None,
        "factor_needed": None,
    }
    if value is None:
        return out
    met = value >= goal if higher_is_better else value <= goal
    out["met"] = met
    if not met:
        out["missed_by"] = (goal - value) / goal if higher_is_better else (value - goal) / goal
        out["factor_needed"] = (goal / value if value else None) if higher_is_better else value / goal
    return out


def evaluate_targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The four targets, per backend measured: worker ≥ 0.9 × its own client's bare pipe; worker ≥
    3 × the river loop; RSS after 1M records within 10% of RSS after 100k; p99 ≤ 100 ms at half of
    the worker's own maximum rate (default settings)."""
    out: list[dict[str, Any]] = []
    tp = (report.get("throughput") or {}).get("summary") or {}
    for b in BACKENDS:
        w = (tp.get(WORKER_OF[b]) or {}).get("median_rate")
        pipe = (tp.get(PIPE_OF[b]) or {}).get("median_rate")
        peer = (tp.get(PEER) or {}).get("median_rate")
        if w is not None and pipe:
            out.append(
                {
                    **target_check(
                        f"worker >= {TARGET_WORKER_OVER_PIPE:g} x its own client's bare pipe",
                        b,
                        w / pipe,
                        TARGET_WORKER_OVER_PIPE,
                    ),
                    "detail": f"{fmt_rate(w)} vs {fmt_rate(pipe)} rec/s",
                }
            )
        one_process = (tp.get(PIPE_KP) or {}).get("median_rate")
        if b == KPP and w is not None and one_process:
            out.append(
                {
                    **target_check(
                        f"worker >= {TARGET_WORKER_OVER_PIPE:g} x the one-process kafka-python pipe",
                        b,
                        w / one_process,
                        TARGET_WORKER_OVER_PIPE,
                    ),
                    "detail": f"{fmt_rate(w)} vs {fmt_rate(one_process)} rec/s; the worker uses two "
                    "processes, that pipe one",
                }
            )
        if w is not None and peer:
            out.append(
                {
                    **target_check(
                        f"worker >= {TARGET_WORKER_OVER_PEER:g} x the hand-written river loop",
                        b,
                        w / peer,
                        TARGET_WORKER_OVER_PEER,
                    ),
                    "detail": f"{fmt_rate(w)} vs {fmt_rate(peer)} rec/s",
                }
            )
    mem = (report.get("memory") or {}).get("runs") or {}
    for b in BACKENDS:
        for key, what in (("rss_mb", "VmRSS"), ("hwm_mb", "VmHWM (peak so far)")):
            ms = (mem.get(b) or {}).get("milestones", [])
            pts = {p["records"]: p.get(key) for p in ms if p.get(key)}
            if 100_000 in pts and 1_000_000 in pts:
                growth = pts[1_000_000] / pts[100_000] - 1
                out.append(
                    {
                        **target_check(
                            f"{what} after 1M records within {TARGET_MEMORY_GROWTH:.0%} of after 100k",
                            b,
                            abs(growth),
                            TARGET_MEMORY_GROWTH,
                            higher_is_better=False,
                        ),
                        "detail": f"{pts[100_000]:,.0f} MB -> {pts[1_000_000]:,.0f} MB ({growth:+.1%})",
                    }
                )
    lat = report.get("latency") or {}
    for run in lat.get("summary") or lat.get("runs") or []:
        if run.get("kind") == "worker" and not run.get("extra_env") and "p99_ms" in run["latency"]:
            out.append(
                {
                    **target_check(
                        f"p99 latency <= {TARGET_P99_MS:g} ms at half load",
                        run["backend"],
                        run["latency"]["p99_ms"],
                        TARGET_P99_MS,
                        higher_is_better=False,
                    ),
                    "detail": f"at {fmt_rate(run['achieved_input_rate'])} rec/s, p50 "
                    f"{run['latency']['p50_ms']:.0f} ms" + _p99_each(run),
                }
            )
    return out


def _p99_each(run: dict[str, Any]) -> str:
    if run.get("repeats", 1) <= 1:
        return ""
    each = ", ".join(f"{v:.0f}" for v in run.get("p99_each_ms", []))
    return f"; p99 of the {run['repeats']} runs: {each} ms"


def target_line(t: dict[str, Any]) -> str:
    """One target as a line of text.

    >>> target_line(target_check("worker / pipe", "kafka-python", 0.6, 0.9))
    'NOT MET  kafka-python     worker / pipe: 0.60 (goal >= 0.90): missed by 33% (needs 1.50x)'
    """
    v, g = t["value"], t["goal"]
    if t["goal"] < 1 and not t["higher_is_better"]:  # a fraction (memory growth)
        vs, gs = f"{v:.1%}" if v is not None else "n/a", f"{g:.0%}"
    else:
        vs, gs = f"{v:.2f}" if v is not None else "n/a", f"{g:.2f}"
    if "latency" in t["target"]:
        vs, gs = (f"{v:.0f} ms" if v is not None else "n/a"), f"{g:.0f} ms"
    op = ">=" if t["higher_is_better"] else "<="
    verdict = {True: "MET", False: "NOT MET", None: "n/a"}[t["met"]]
    line = f"{verdict:<8} {t['backend']:<16} {t['target']}: {vs} (goal {op} {gs})"
    if t["met"] is False and t["goal"] < 1 and not t["higher_is_better"]:
        line += f": missed by {(v - g) * 100:.1f} percentage points"
    elif t["met"] is False:
        line += f": missed by {t['missed_by']:.0%} (needs {t['factor_needed']:.2f}x)"
    if t.get("detail"):
        line += f"; {t['detail']}"
    return line


def categorize_stack(frames: Sequence[str]) -> str:
    """The cost category of one py-spy stack (root first), for the profile summary.

    A frame reads ``function (path:line)``. The first marker in priority order wins, so that e.g.
    the ``encode`` inside ``publish_stats`` counts as statistics, not as prediction encoding.

    >>> categorize_stack(["<module> (cli.py:1)", "run (stream_perceptron/worker.py:150)",
    ...                   "process (stream_perceptron/worker.py:240)",
    ...                   "BatchDecoder.decode_many (stream_perceptron/records.py:80)"])
    'decode_many (msgspec, validated)'
    >>> categorize_stack(["_bootstrap (threading.py:1)", "run (kafka/x.py:2)"])
    'background threads (kafka-python I/O)'
    >>> categorize_stack(["Worker.run (stream_perceptron/worker.py:1)",
    ...                   "ConfluentEdge.poll (stream_perceptron/kafka_confluent.py:2)"])
    'edge poll (client poll + column copies), incl. waiting'
    """
    parsed = [_frame(f) for f in frames]
    if parsed and parsed[0][1].endswith("threading.py"):
        return "background threads (kafka-python I/O)"
    # py-spy names methods ``Class.method``; nested functions ``f.<locals>.g``
    # both Kafka edges (KafkaEdge, ConfluentEdge and their base, edge.EdgeBase) count as the edge
    names = {
        (fn.rsplit(".", 1)[-1], _EDGE_FILES.get(path.rsplit("/", 1)[-1], path.rsplit("/", 1)[-1]))
        for fn, path in parsed
    }
    for (fn, file), category in _MARKERS:
        if (fn, file) in names:
            return category
    return "start-up, imports, other"


_EDGE_FILES = {"kafka_confluent.py": "kafka_io.py", "edge.py": "kafka_io.py"}

_MARKERS: list[tuple[tuple[str, str], str]] = [
    (("checkpoint", "worker.py"), "checkpoint (flush + write + fsync + commit)"),
    (("publish_stats", "worker.py"), "statistics records"),
    (("_shutdown", "worker.py"), "shutdown"),
    (("poll", "kafka_io.py"), "edge poll (client poll + column copies), incl. waiting"),
    (("decode_example", "records.py"), "decode_example (fallback: reference decoder)"),
    (("decode_many", "records.py"), "decode_many (msgspec, validated)"),
    (("vectorize_many", "perceptron.py"), "vectorize_many (lists -> matrix)"),
    (("learn_many", "perceptron.py"), "learn_many"),
    (("step", "learner.py"), "statistics update (margins, norms, update_many)"),
    (("prediction_record", "records.py"), "prediction_record (build dict)"),
    (("encode", "records.py"), "encode (orjson.dumps)"),
    (("encode_predictions", "records.py"), "encode_predictions (dicts + orjson.dumps)"),
    (("send", "kafka_io.py"), "edge send (client send + loop)"),
    (("send_many", "kafka_io.py"), "edge send (client send + loop)"),
    (("_learn_and_publish", "worker.py"), "publish loop: other (tolist, cumsum, loop)"),
    (("process", "worker.py"), "batch loop: other (decode loop, bookkeeping)"),
    (("run", "worker.py"), "run loop: other (policies, caught_up)"),
]


def _frame(text: str) -> tuple[str, str]:
    m = re.match(r"^(.*?) \((.*?)(?::\d+)?\)$", text.strip())
    if not m:
        return text.strip(), ""
    return m.group(1), m.group(2)


# ============================================================================ input records
def dense_records(
    n: int, d: int, *, seed: int, noise: float = DEFAULT_NOISE
) -> tuple[list[bytes], dict[str, Any]]:
    """``n`` input records ``{"x": [d floats], "y": ±1, "id": i}``, separable with a margin, then
    a fraction ``noise`` of the labels flipped.

    ``x ~ N(0, I_d)`` rounded to one decimal (standardised features as they are often sent); ``u``
    a seeded random unit vector; rows with ``|u·x| < MARGIN`` on the rounded values are rejected,
    so the values as sent are separable by ``u`` with that margin; ``y = sign(u·x)``.
    """
    import numpy as np
    import orjson

    rng = np.random.default_rng(seed)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    chunks = []
    have = 0
    while have < n:
        X = np.round(rng.standard_normal((max(1024, int((n - have) * 1.3)), d)), 1)
        keep = np.abs(X @ u) >= MARGIN
        chunks.append(X[keep])
        have += int(keep.sum())
    X = np.concatenate(chunks)[:n]
    y = np.where(X @ u > 0, 1, -1)
    flips = rng.choice(n, size=round(noise * n), replace=False) if noise else np.zeros(0, dtype=int)
    y[flips] = -y[flips]
    dumps = orjson.dumps
    rows = X.tolist()
    labels = y.tolist()
    values = [dumps({"x": rows[i], "y": labels[i], "id": i}) for i in range(n)]
    meta = {
        "kind": "dense",
        "d": d,
        "n": n,
        "seed": seed,
        "noise": noise,
        "labels_flipped": int(len(flips)),
        "margin_on_sent_values": MARGIN,
        "mean_bytes": sum(map(len, values)) / n,
        "positive_fraction": float((y > 0).mean()),
        "generator": "x ~ N(0, I_d) rounded to 1 decimal; rows with |u.x| < 0.1 rejected; "
        "y = sign(u.x); then a fraction `noise` of the labels flipped",
    }
    return values, meta


def sparse_records(
    n: int, *, names: int = SPARSE_NAMES, nnz: int = SPARSE_NNZ, seed: int, noise: float = DEFAULT_NOISE
) -> tuple[list[bytes], dict[str, Any]]:
    """``n`` records ``{"x": {"f<j>": v, ... nnz of them}, "y": ±1, "id": i}``, names drawn
    uniformly from ``names`` names, values N(0, 1) rounded to one decimal, labelled by a hidden
    weight per name (rows within 0.1 of the boundary rejected), then ``noise`` of them flipped."""
    import numpy as np
    import orjson

    rng = np.random.default_rng(seed)
    u = rng.standard_normal(names)
    u /= np.linalg.norm(u) / math.sqrt(names / nnz)  # scores of order 1
    keys = [f"f{j}" for j in range(names)]
    dumps = orjson.dumps
    values: list[bytes] = []
    labels: list[int] = []
    while len(values) < n:
        idx = rng.integers(0, names, size=(4096, nnz + 8))
        vals = np.round(rng.standard_normal((4096, nnz)), 1)
        for r in range(4096):
            cols = list(dict.fromkeys(idx[r].tolist()))[:nnz]
            if len(cols) < nnz:
                continue
            v = vals[r]
            score = float(np.dot(u[cols], v))
            if abs(score) < MARGIN:
                continue
            label = 1 if score > 0 else -1
            labels.append(label)
            values.append(b"")  # filled below, once the flips are known
            values[-1] = dumps({"x": dict(zip([keys[c] for c in cols], v.tolist(), strict=True)), "y": label})
            if len(values) == n:
                break
    flips = set(rng.choice(n, size=round(noise * n), replace=False).tolist()) if noise else set()
    out = []
    for i, raw in enumerate(values):
        rec = orjson.loads(raw)
        if i in flips:
            rec["y"] = -rec["y"]
        rec["id"] = i
        out.append(dumps(rec))
    meta = {
        "kind": "sparse",
        "names": names,
        "nnz": nnz,
        "n": n,
        "seed": seed,
        "noise": noise,
        "labels_flipped": len(flips),
        "mean_bytes": sum(map(len, out)) / n,
        "positive_fraction": sum(1 for v in labels if v > 0) / n,
        "generator": f"{nnz} distinct names of {names} per record, values N(0,1) rounded to 1 decimal; "
        "y = sign(u.x) for a hidden u over the names, |u.x| >= 0.1; then `noise` flipped",
    }
    return out, meta


# ============================================================================ broker I/O
def create_topics(bootstrap: str, names: Sequence[str]) -> None:
    """One-partition topics (idempotent)."""
    from stream_perceptron.kafka_io import ensure_topics
    from stream_perceptron.settings import KafkaSettings

    ensure_topics(KafkaSettings(bootstrap_servers=bootstrap), dict.fromkeys(names, 1))


def delete_topics(bootstrap: str, names: Sequence[str]) -> None:
    """Best effort (used with an external broker, to leave nothing behind)."""
    from kafka import KafkaAdminClient

    from stream_perceptron.kafka_io import client_config
    from stream_perceptron.settings import KafkaSettings

    with contextlib.suppress(Exception):
        admin = KafkaAdminClient(**client_config(KafkaSettings(bootstrap_servers=bootstrap)))
        try:
            for i in range(0, len(names), 50):
                with contextlib.suppress(Exception):
                    admin.delete_topics(list(names[i : i + 50]))
        finally:
            admin.close()


def produce_all(bootstrap: str, topic: str, values: Sequence[bytes]) -> float:
    """Send ``values`` (keys = the index) with the worker's producer settings; returns seconds."""
    from kafka import KafkaProducer

    from bench.pipe import producer_kwargs

    producer = KafkaProducer(**producer_kwargs(bootstrap))
    t0 = time.perf_counter()
    try:
        send = producer.send
        for i, v in enumerate(values):
            send(topic, value=v, key=str(i).encode())
        producer.flush()
    finally:
        producer.close()
    return time.perf_counter() - t0


@dataclass
class ReadBack:
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    values: list[bytes] = field(default_factory=list)
    timestamp_types: set[int] = field(default_factory=set)


def read_back(
    bootstrap: str,
    topic: str,
    *,
    expected: int | None = None,
    values: bool = False,
    timeout_s: float = 300.0,
    idle_s: float = 3.0,
) -> ReadBack:
    """Partition 0 of ``topic`` from offset 0: until ``expected`` records, else up to the high-water
    mark from fetch responses (``end_offsets`` is wrong on tansu), or ``idle_s`` idle. A read that
    comes back short (or not from offset 0) is tried once more."""
    if expected == 0:
        return ReadBack()
    out = _read_back_once(bootstrap, topic, expected, values, timeout_s, idle_s)
    if (expected is not None and len(out.offsets) < expected) or (out.offsets and out.offsets[0] != 0):
        again = _read_back_once(bootstrap, topic, expected, values, timeout_s, idle_s * 3)
        if len(again.offsets) > len(out.offsets):
            out = again
    return out


def _read_back_once(
    bootstrap: str, topic: str, expected: int | None, values: bool, timeout_s: float, idle_s: float
) -> ReadBack:
    from bench.pipe import assigned_consumer

    out = ReadBack()
    consumer = assigned_consumer(bootstrap, topic)
    from kafka import TopicPartition

    tp = TopicPartition(topic, 0)
    try:
        deadline = time.monotonic() + timeout_s
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=200, max_records=20_000)
            for recs in got.values():
                for r in recs:
                    out.offsets.append(r.offset)
                    out.timestamps.append(r.timestamp)
                    out.timestamp_types.add(r.timestamp_type)
                    if values:
                        out.values.append(r.value)
            if got:
                last_new = time.monotonic()
            if expected is not None:
                if len(out.offsets) >= expected:
                    break
            else:
                hw = consumer.highwater(tp)
                if hw is not None and consumer.position(tp) >= hw:
                    break
            if time.monotonic() - last_new > idle_s:
                break
    finally:
        consumer.close()
    return out


# ============================================================================ processes
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class RssSampler(threading.Thread):
    """Samples ``VmRSS``, ``VmHWM`` and CPU time (user + system) of a process every ``interval``
    seconds until it exits (or :meth:`stop`). Each sample is the sum over the process and its
    child processes (the worker's producer process, with ``SP_KAFKA__PRODUCER_PROCESS``); a
    child's VmHWM is its own peak, so the summed VmHWM may exceed the peak of the sum."""

    def __init__(self, pid: int, interval: float = RSS_INTERVAL_S) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        # (time.time(), VmRSS kB, VmHWM kB, CPU seconds so far)
        self.samples: list[tuple[float, int, int, float]] = []
        self.max_processes = 1
        self._stop_event = threading.Event()

    def run(self) -> None:
        ticks_of: dict[int, int] = {}  # CPU ticks per process; a child that exited keeps its last
        while not self._stop_event.is_set():
            try:
                rss, hwm, ticks_of[self.pid] = self._read(self.pid)
            except (OSError, ValueError, IndexError, KeyError):
                return  # exited (or a zombie: exited, not yet reaped)
            children = _children(self.pid)
            for child in children:
                try:
                    c_rss, c_hwm, ticks_of[child] = self._read(child)
                except (OSError, ValueError, IndexError, KeyError):
                    continue
                rss, hwm = rss + c_rss, hwm + c_hwm
            self.max_processes = max(self.max_processes, 1 + len(children))
            self.samples.append((time.time(), rss, hwm, sum(ticks_of.values()) / CLK_TCK))
            self._stop_event.wait(self.interval)

    @staticmethod
    def _read(pid: int) -> tuple[int, int, int]:
        """(VmRSS kB, VmHWM kB, CPU ticks) of ``pid``."""
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            st = parse_status(fh.read())
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            ticks = parse_stat_cpu_ticks(fh.read())
        return st["VmRSS"], st.get("VmHWM", st["VmRSS"]), ticks

    def stop(self) -> None:
        self._stop_event.set()
        self.join(2)

    def cores_between(self, t0: float | None, t1: float | None) -> float | None:
        """Average CPU cores used between wall times ``t0`` and ``t1``."""
        if t0 is None or t1 is None:
            return None
        return cores_in_window([(s[0], s[3]) for s in self.samples], t0, t1)

    def summary(self) -> dict[str, Any]:
        if not self.samples:
            return {"samples": 0}
        return {
            "samples": len(self.samples),
            "processes": self.max_processes,
            "peak_rss_mb": max(s[1] for s in self.samples) / 1024,
            "last_rss_mb": self.samples[-1][1] / 1024,
            "vm_hwm_mb": self.samples[-1][2] / 1024,
            "cpu_s_total": self.samples[-1][3],
        }


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux ``/proc/PID/task/TID/children``)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                out += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return out


def parse_stat_cpu_ticks(text: str) -> int:
    """utime + stime (clock ticks) out of a ``/proc/PID/stat`` line (the name may hold spaces).

    >>> parse_stat_cpu_ticks("42 (py thon) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 3")
    200
    """
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def cores_in_window(samples: Sequence[tuple[float, float]], t0: float, t1: float) -> float | None:
    """Average cores used in ``[t0, t1]`` from (time, cumulative CPU seconds) samples, linearly
    interpolated; None when the window is empty or not covered by the samples.

    >>> cores_in_window([(0.0, 0.0), (1.0, 0.5), (2.0, 2.0)], 0.5, 1.5)
    1.0
    >>> cores_in_window([(0.0, 0.0), (1.0, 0.5)], 2.0, 3.0) is None
    True
    """
    if t1 <= t0 or len(samples) < 2 or t0 < samples[0][0] or t1 > samples[-1][0]:
        return None

    def at(t: float) -> float:
        for (ta, ca), (tb, cb) in zip(samples, samples[1:], strict=False):
            if ta <= t <= tb:
                return ca if tb == ta else ca + (cb - ca) * (t - ta) / (tb - ta)
        return samples[-1][1]

    return (at(t1) - at(t0)) / (t1 - t0)


def _popen(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)


def _wait(proc: subprocess.Popen[bytes], timeout_s: float, log: Path, what: str) -> int:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise RuntimeError(
            f"{what} did not finish within {timeout_s:.0f} s; log: {log}\n{_tail(log)}"
        ) from None


def _tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SP_")}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@dataclass
class Ctx:
    """What every run needs: the broker, a name prefix, a scratch directory, the group-join setting."""

    bootstrap: str
    prefix: str
    workdir: Path
    session_timeout_ms: int
    broker_pid: int | None = None
    worker_env: dict[str, str] = field(default_factory=dict)
    topics: list[str] = field(default_factory=list)
    counter: int = 0

    def name(self, label: str) -> str:
        self.counter += 1
        return f"{self.prefix}-{self.counter:03d}-{label}"

    def broker_sampler(self) -> RssSampler | None:
        """CPU and memory of the embedded broker while a contender runs (None for an external one)."""
        if self.broker_pid is None:
            return None
        sampler = RssSampler(self.broker_pid, interval=0.1)
        sampler.start()
        return sampler

    def new_topics(self, *labels: str) -> list[str]:
        names = [self.name(lab) for lab in labels]
        create_topics(self.bootstrap, names)
        self.topics += names
        return names


def run_contender_process(
    ctx: Ctx, module: str, label: str, in_topic: str, n: int, extra_args: Sequence[str] = ()
) -> dict[str, Any]:
    """Run ``bench.pipe`` or ``bench.peer_river_loop`` on ``in_topic``; rate from its output topic."""
    from bench.pipe import parse_result

    (out_topic,) = ctx.new_topics(f"{label}-out")
    log = ctx.workdir / f"{out_topic}.log"
    cmd = [
        sys.executable,
        "-m",
        module,
        "--bootstrap",
        ctx.bootstrap,
        "--input",
        in_topic,
        "--output",
        out_topic,
        "--records",
        str(n),
        *extra_args,
    ]
    t0 = time.time()
    broker = ctx.broker_sampler()
    proc = _popen(cmd, _clean_env(), log)
    rss = RssSampler(proc.pid)
    rss.start()
    code = _wait(proc, 120 + n / 500, log, module)
    rss.stop()
    if broker is not None:
        broker.stop()
    wall = time.time() - t0
    if code != 0:
        raise RuntimeError(f"{module} exited with {code}; log: {log}\n{_tail(log)}")
    own = parse_result(log.read_text(errors="replace")) or {}
    back = read_back(ctx.bootstrap, out_topic, expected=n)
    rate = rate_from_timestamps(back.timestamps)
    w0, w1 = (min(back.timestamps) / 1000, max(back.timestamps) / 1000) if back.timestamps else (None, None)
    chunks = chunk_rates(back.timestamps, 100_000) if n >= 200_000 else []
    return {
        "records": n,
        "output_records": len(back.offsets),
        "complete": len(back.offsets) == n,
        "rate": rate,
        "method": "output CreateTime: (count-1)/(last-first)",
        "timestamp_types": sorted(back.timestamp_types),
        "own_rate_first_poll_to_flush": own.get("own_rate_first_poll_to_flush"),
        "startup_s": (own["t_first_polled"] - t0) if own.get("t_first_polled") else None,
        "process_wall_s": wall,
        "mistakes": own.get("mistakes"),
        "client": own.get("client"),
        "rates_per_100k_records": chunks,
        "memory": rss.summary(),
        "cpu_cores_in_window": rss.cores_between(w0, w1),
        "broker_cpu_cores_in_window": broker.cores_between(w0, w1) if broker is not None else None,
        "output_topic": out_topic,
    }


def worker_env(
    ctx: Ctx,
    topics: dict[str, str],
    ckpt_dir: Path,
    predictions: str,
    group: str,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """``SP_*`` for one worker run: fresh group, topics and checkpoint directory; defaults otherwise."""
    from stream_perceptron.settings import Settings

    env = _clean_env()
    env.update(
        {
            "SP_KAFKA__BOOTSTRAP_SERVERS": ctx.bootstrap,
            "SP_KAFKA__GROUP_ID": group,
            "SP_KAFKA__CLIENT_ID": group,
            "SP_KAFKA__SESSION_TIMEOUT_MS": str(ctx.session_timeout_ms),
            "SP_KAFKA__HEARTBEAT_INTERVAL_MS": str(max(100, min(1000, ctx.session_timeout_ms // 3))),
            "SP_TOPICS__INPUT": topics["input"],
            "SP_TOPICS__PREDICTIONS": topics["predictions"],
            "SP_TOPICS__STATS": topics["stats"],
            "SP_TOPICS__DEAD_LETTER": topics["dead_letter"],
            "SP_CHECKPOINT__DIR": str(ckpt_dir),
            "SP_OUTPUT__PREDICTIONS": predictions,
            "SP_LOG_FORMAT": "json",
            "SP_LOG_LEVEL": "INFO",
        }
    )
    if "observe" in Settings.model_fields:
        env["SP_OBSERVE__ENABLED"] = "false"
    env.update(ctx.worker_env)
    env.update(extra or {})  # the contender's own (its backend) wins over --worker-env
    return env


@dataclass
class WorkerProc:
    proc: subprocess.Popen[bytes]
    rss: RssSampler | None
    log: Path
    topics: dict[str, str]
    t_start: float
    broker: RssSampler | None = None


def start_worker(
    ctx: Ctx,
    in_topic: str,
    predictions: str,
    label: str,
    *,
    until_caught_up: bool = True,
    wrap: Sequence[str] = (),
    python_args: Sequence[str] = (),
    sample_rss: bool = True,
    env_extra: dict[str, str] | None = None,
) -> WorkerProc:
    pred, stats, dead = ctx.new_topics(f"{label}-pred", f"{label}-stats", f"{label}-dead")
    topics = {"input": in_topic, "predictions": pred, "stats": stats, "dead_letter": dead}
    group = ctx.name(f"{label}-group")
    ckpt = ctx.workdir / f"{group}-ckpt"
    env = worker_env(ctx, topics, ckpt, predictions, group, env_extra)
    cmd = [*wrap, sys.executable, *python_args, "-m", "stream_perceptron.cli", "run"]
    if until_caught_up:
        cmd.append("--until-caught-up")
    log = ctx.workdir / f"{group}.log"
    t0 = time.time()
    broker = ctx.broker_sampler()
    proc = _popen(cmd, env, log)
    rss = None
    if sample_rss:
        rss = RssSampler(proc.pid)
        rss.start()
    return WorkerProc(proc, rss, log, topics, t0, broker)


def worker_log(path: Path) -> list[dict[str, Any]]:
    """The worker's JSON log lines (other lines are skipped)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


def join_seconds(lines: Sequence[dict[str, Any]]) -> float | None:
    """From "kafka edge ... started" to the first "on_assigned" log line: the group join.

    >>> join_seconds([{"ts": 1.0, "msg": "kafka edge (confluent-kafka) started: group g"},
    ...               {"ts": 4.0, "msg": "on_assigned: [('t', 0)]"}])
    3.0
    """
    started = next((ln["ts"] for ln in lines if re.match(r"kafka edge.* started", ln.get("msg", ""))), None)
    assigned = next((ln["ts"] for ln in lines if ln.get("msg", "").startswith("on_assigned")), None)
    if started is None or assigned is None:
        return None
    return float(assigned - started)


def finish_worker(ctx: Ctx, wp: WorkerProc, n: int, predictions: str, *, timeout_s: float) -> dict[str, Any]:
    """Wait for a ``--until-caught-up`` worker, then read back its outputs and compute its rates."""
    import orjson

    code = _wait(wp.proc, timeout_s, wp.log, "the worker")
    if wp.rss is not None:
        wp.rss.stop()
    if wp.broker is not None:
        wp.broker.stop()
    wall = time.time() - wp.t_start
    if code != 0:
        raise RuntimeError(f"the worker exited with {code}; log: {wp.log}\n{_tail(wp.log)}")
    stats_back = read_back(ctx.bootstrap, wp.topics["stats"], values=True)
    stats = [orjson.loads(v) for v in stats_back.values]
    expected = n if predictions == "all" else 0
    preds = read_back(ctx.bootstrap, wp.topics["predictions"], expected=expected)
    by_stats = rate_from_stats(stats)
    by_ts = rate_from_timestamps(preds.timestamps)
    lines = worker_log(wp.log)
    assigned = sum(1 for ln in lines if ln.get("msg", "").startswith("on_assigned"))
    last = max(stats, key=lambda s: s.get("seen", 0)) if stats else {}
    w0: float | None
    w1: float | None
    if predictions == "all" and preds.timestamps:
        w0, w1 = min(preds.timestamps) / 1000, max(preds.timestamps) / 1000
    elif by_stats:
        w0, w1 = by_stats["t_first"], by_stats["t_last"]
    else:
        w0 = w1 = None
    result: dict[str, Any] = {
        "records": n,
        "predictions_mode": predictions,
        "output_records": len(preds.offsets),
        "seen": last.get("seen"),
        "complete": last.get("seen") == n and len(preds.offsets) == expected,
        "rate_output_createtime": by_ts,
        "rate_stats": by_stats["rate"] if by_stats else None,
        "stats_window": by_stats,
        "rate": by_ts if predictions == "all" else (by_stats["rate"] if by_stats else None),
        "method": "output CreateTime: (count-1)/(last-first)"
        if predictions == "all"
        else "statistics records: (seen_last-seen_first)/(ts_last-ts_first)",
        "timestamp_types": sorted(preds.timestamp_types),
        "rates_per_100k_records": chunk_rates(preds.timestamps, 100_000) if n >= 200_000 else [],
        "mistakes": last.get("mistakes"),
        "mistake_rate": last.get("mistake_rate"),
        "dead_letters": last.get("dead_letters"),
        "group_join_s": join_seconds(lines),
        "first_output_after_start_s": (min(preds.timestamps) / 1000 - wp.t_start)
        if preds.timestamps
        else None,
        "assignments": assigned,
        "rebalanced": assigned > 1,
        "process_wall_s": wall,
        "memory": wp.rss.summary() if wp.rss is not None else None,
        "cpu_cores_in_window": wp.rss.cores_between(w0, w1) if wp.rss is not None else None,
        "broker_cpu_cores_in_window": wp.broker.cores_between(w0, w1) if wp.broker is not None else None,
        "topics": wp.topics,
        "_stats": stats,
    }
    if wp.rss is not None:
        result["_rss_samples"] = wp.rss.samples
    return result


def backend_env(backend: str) -> dict[str, str]:
    """The worker's settings that pick its client library (and where its producer runs)."""
    if backend == KPP:
        return {"SP_KAFKA__BACKEND": KP, "SP_KAFKA__PRODUCER_PROCESS": "true"}
    return {"SP_KAFKA__BACKEND": backend}


def run_worker(
    ctx: Ctx, in_topic: str, n: int, predictions: str, label: str, backend: str = KP
) -> dict[str, Any]:
    wp = start_worker(ctx, in_topic, predictions, label, env_extra=backend_env(backend))
    res = finish_worker(ctx, wp, n, predictions, timeout_s=120 + n / 300)
    res["backend"] = backend
    res.pop("_rss_samples", None)
    res.pop("_stats", None)
    return res


# ============================================================================ sections
Say = Callable[..., None]


def cpu_counters() -> list[int] | None:
    """The machine's aggregate CPU time counters (the ``cpu`` line of ``/proc/stat``, in ticks:
    user nice system idle iowait irq softirq steal ...); None where there is no such file."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            return [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None


def steal_share(before: Sequence[int] | None, after: Sequence[int] | None) -> float | None:
    """The share of CPU time stolen by the hypervisor (given to other guests) between two
    :func:`cpu_counters` readings: on a shared VM, the contenders ran slower by about that much.

    >>> steal_share([100, 0, 50, 800, 0, 0, 0, 50], [200, 0, 100, 1500, 0, 0, 0, 200])
    0.15
    >>> steal_share(None, [1, 2, 3]) is None, steal_share([1, 2, 3], [1, 2, 3]) is None
    (True, True)
    """
    if before is None or after is None or len(before) < 8 or len(after) < 8:
        return None
    total = sum(after[:8]) - sum(before[:8])  # guest time is already counted in user time
    return None if total <= 0 else round((after[7] - before[7]) / total, 4)


def loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def run_one(ctx: Ctx, contender: str, in_topic: str, n: int, label: str) -> dict[str, Any]:
    spec = SPECS[contender]
    tag = f"{label}-{SHORT[spec.backend]}"
    if spec.kind == "pipe":
        r = run_contender_process(ctx, "bench.pipe", f"{tag}-pipe", in_topic, n, ["--client", spec.backend])
    elif spec.kind == "peer":
        r = run_contender_process(ctx, "bench.peer_river_loop", f"{label}-peer", in_topic, n)
    elif spec.kind == "worker":
        r = run_worker(ctx, in_topic, n, spec.predictions, f"{tag}-w{spec.predictions}", spec.backend)
    else:
        raise ValueError(contender)
    r["backend"] = spec.backend
    return r


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["rate"] for r in runs if r.get("rate")]
    out: dict[str, Any] = {
        "runs": len(runs),
        "rates": rates,
        "all_complete": all(r["complete"] for r in runs),
    }
    if rates:
        med, spread = median_spread(rates)
        out.update({"median_rate": med, "spread": spread, "min_rate": min(rates), "max_rate": max(rates)})
    else:
        out["median_rate"] = None

    def median_of(values: list[Any]) -> float | None:
        got = [v for v in values if v is not None]
        return statistics.median(got) if got else None

    out["median_cpu_cores"] = median_of([r.get("cpu_cores_in_window") for r in runs])
    out["median_broker_cpu_cores"] = median_of([r.get("broker_cpu_cores_in_window") for r in runs])
    out["median_cpu_us_per_record"] = median_of(
        [
            r["cpu_cores_in_window"] * 1e6 / r["rate"]
            for r in runs
            if r.get("cpu_cores_in_window") and r.get("rate")
        ]
    )
    out["median_peak_rss_mb"] = median_of([(r.get("memory") or {}).get("peak_rss_mb") for r in runs])
    # pipes and peer: their own clock from the first poll that returned records to the end of the
    # final flush (the CreateTime window ends at the last send, before the flush)
    out["median_rate_incl_flush"] = median_of([r.get("own_rate_first_poll_to_flush") for r in runs])
    return out


def section_throughput(
    ctx: Ctx, n: int, repeats: int, seed: int, say: Say, contenders: Sequence[str] = CONTENDERS
) -> dict[str, Any]:
    values, meta = dense_records(n, DEFAULT_D, seed=seed)
    (in_topic,) = ctx.new_topics("tp-in")
    produce_s = produce_all(ctx.bootstrap, in_topic, values)
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
        }
    return out


def section_memory(
    ctx: Ctx, milestones: Sequence[int], seed: int, say: Say, backends: Sequence[str] = (KP,)
) -> dict[str, Any]:
    """One worker run (predictions=all) per backend on the same records (5% beyond the last
    milestone, so that every milestone is reached mid-stream), VmRSS sampled; then each backend's
    bare pipe on the same records (a long-window check of the pipes' rates: worker / pipe at 1M)."""
    n = int(max(milestones) * (1 + MEMORY_EXTRA))
    values, meta = dense_records(n, DEFAULT_D, seed=seed + 1)
    (in_topic,) = ctx.new_topics("mem-in")
    produce_s = produce_all(ctx.bootstrap, in_topic, values)
    del values
    say(
        f"  input: {n:,} records produced in {produce_s:.1f}s; worker (predictions=all) sampled every "
        f"{RSS_INTERVAL_S * 1000:.0f} ms"
    )
    runs = {}
    for b in BACKENDS:
        if b in backends:
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
            r = run_contender_process(ctx, "bench.pipe", f"mem-{SHORT[b]}-pipe", in_topic, n, ["--client", b])
            out["pipes_long_run"][b] = r
            say(
                f"  {b} pipe on the same {n:,} records: {fmt_rate(r['rate'])} rec/s "
                f"({fmt_rate(r.get('own_rate_first_poll_to_flush'))} rec/s first poll -> flush; "
                f"{_fmt(r.get('cpu_cores_in_window'), '.2f')} cores, broker "
                f"{_fmt(r.get('broker_cpu_cores_in_window'), '.2f')} cores)"
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


def confluent_available() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


class LoadProducer:
    """The latency runs' load generator: the worker's producer settings (linger, batch size,
    acks=all) on confluent-kafka when it is installed (about 2 µs per record, so even a 40k rec/s
    load costs the 2-core machine little), else kafka-python."""

    def __init__(self, bootstrap: str) -> None:
        self.failed: list[str] = []
        self.client = CF if confluent_available() else KP
        if self.client == CF:
            from confluent_kafka import Producer

            from bench.pipe import confluent_configs

            def on_delivery(err: Any, _msg: Any) -> None:
                if err is not None:
                    self.failed.append(str(err))

            _, cfg = confluent_configs(bootstrap, "bench-load")
            self._p: Any = Producer({**cfg, "on_delivery": on_delivery})
        else:
            from kafka import KafkaProducer

            from bench.pipe import producer_kwargs

            self._p = KafkaProducer(**producer_kwargs(bootstrap))

    def sender(self, topic: str) -> Callable[[bytes, bytes], None]:
        """``send(value, key)`` to ``topic``."""
        if self.client == CF:
            produce, serve = self._p.produce, self._p.poll

            def send_cf(value: bytes, key: bytes) -> None:
                while True:
                    try:
                        produce(topic, value=value, key=key)
                        return
                    except BufferError:
                        serve(0.01)

            return send_cf
        send = self._p.send
        return lambda value, key: send(topic, value=value, key=key)

    def flush(self) -> None:
        self._p.flush(60) if self.client == CF else self._p.flush()
        if self.failed:
            raise RuntimeError(f"load generator: {len(self.failed)} records failed: {self.failed[:3]}")

    def close(self) -> None:
        if self.client == KP:
            self._p.close()


class TopicReader:
    """Partition 0 of a fresh topic from offset 0: (offset, timestamp ms, value) per record; on
    confluent-kafka when installed (fast, ``fetch.wait.max.ms`` 10), else kafka-python."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.client = CF if confluent_available() else KP
        if self.client == CF:
            from confluent_kafka import Consumer, TopicPartition

            from bench.pipe import confluent_configs

            cfg, _ = confluent_configs(bootstrap, f"bench-reader-{os.getpid()}", fetch_wait_max_ms=10)
            self._c: Any = Consumer(cfg)
            self._c.assign([TopicPartition(topic, 0, 0)])
        else:
            from bench.pipe import assigned_consumer

            self._c = assigned_consumer(bootstrap, topic, fetch_max_wait_ms=10)

    def poll(self, timeout_s: float = 0.2) -> list[tuple[int, int, bytes]]:
        if self.client == CF:
            first = self._c.poll(timeout_s)
            if first is None:
                return []
            msgs = [first, *self._c.consume(50_000, 0)]
            return [(m.offset(), m.timestamp()[1], m.value()) for m in msgs if m.error() is None]
        out = []
        for recs in self._c.poll(timeout_ms=int(timeout_s * 1000), max_records=20_000).values():
            out += [(r.offset, r.timestamp, r.value) for r in recs]
        return out

    def read(self, expected: int, timeout_s: float) -> list[tuple[int, int, bytes]]:
        out: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            out += self.poll()
        return out

    def close(self) -> None:
        self._c.close()


def _latency_run(
    ctx: Ctx,
    label: str,
    values: Sequence[bytes],
    rate: float,
    start: Callable[[str], tuple[subprocess.Popen[bytes], str, Path]],
    offset_of: Callable[[dict[str, Any]], int],
    say: Say,
) -> dict[str, Any]:
    """Warm-up records until the contender answers, then the rest at ``rate`` records/s; latency
    from each input record's CreateTime to its output's, matched by input offset."""
    import orjson

    n = len(values) - LATENCY_WARMUP
    (in_topic,) = ctx.new_topics(f"{label}-in")
    proc, out_topic, log = start(in_topic)
    producer = LoadProducer(ctx.bootstrap)
    reader = TopicReader(ctx.bootstrap, out_topic)
    outputs: list[tuple[int, int]] = []

    def drain_until(count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(outputs) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"latency run: {len(outputs)} of {count} outputs; log {log}\n{_tail(log)}")
            outputs.extend((offset_of(orjson.loads(v)), ts) for _, ts, v in reader.poll())
            if len(outputs) < count and proc.poll() not in (None, 0):
                raise RuntimeError(f"{label}: the process exited with {proc.returncode}\n{_tail(log)}")

    cpu = RssSampler(proc.pid, interval=0.1)
    cpu.start()
    try:
        send = producer.sender(in_topic)
        for i in range(LATENCY_WARMUP):
            send(values[i], str(i).encode())
        producer.flush()
        drain_until(LATENCY_WARMUP, 60 + ctx.session_timeout_ms / 1000)
        t_steady = time.time()
        t0 = time.monotonic()
        for j in range(n):
            ahead = j / rate - (time.monotonic() - t0)
            if ahead > 0.0005:
                time.sleep(ahead)
            i = LATENCY_WARMUP + j
            send(values[i], str(i).encode())
        send_s = time.monotonic() - t0
        t_sent = time.time()
        producer.flush()
        drain_until(LATENCY_WARMUP + n, 60 + n / max(rate, 1))
    finally:
        producer.close()
        reader.close()
        cpu.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _wait(proc, 60, log, f"the {label} process")
    inputs_reader = TopicReader(ctx.bootstrap, in_topic)
    try:
        inputs = inputs_reader.read(LATENCY_WARMUP + n, 120)
    finally:
        inputs_reader.close()
    input_ts = {off: ts for off, ts, _ in inputs}
    summary = latency_summary(input_ts, outputs, from_offset=LATENCY_WARMUP)
    steady = [input_ts[o] for o in input_ts if o >= LATENCY_WARMUP]
    achieved = rate_from_timestamps(steady)
    say(
        f"  {label}: {summary['matched']:,} records at {fmt_rate(achieved)} rec/s: p50 "
        f"{summary.get('p50_ms', 0):.0f} ms, p99 {summary.get('p99_ms', 0):.0f} ms"
    )
    return {
        "achieved_input_rate": achieved,
        "records": n,
        "send_seconds": send_s,
        "contender_cpu_cores": cpu.cores_between(t_steady, t_sent),
        "load_client": producer.client,
        "latency": summary,
        "log": str(log),
    }


def latency_plan(
    rates: dict[str, float],
    *,
    extra_fetch_wait_ms: int | None,
    cf_pipe_fetch_wait_ms: int | None,
    cf_honours_fetch_wait: bool = True,
) -> list[dict[str, Any]]:
    """The latency runs: per backend its worker (default settings) and its pipe at half that
    worker's maximum; optionally the worker at another ``SP_KAFKA__FETCH_MAX_WAIT_MS`` (kafka-python,
    and confluent-kafka when its edge passes the setting on), and the confluent-kafka pipe at
    another ``fetch.wait.max.ms``.

    >>> plan = latency_plan({"kafka-python": 1.0}, extra_fetch_wait_ms=10, cf_pipe_fetch_wait_ms=100)
    >>> [(p["kind"], p["extra_env"], p["fetch_wait_ms"]) for p in plan]  # doctest: +NORMALIZE_WHITESPACE
    [('worker', {}, None), ('pipe', {}, None),
     ('worker', {'SP_KAFKA__FETCH_MAX_WAIT_MS': '10'}, None)]
    >>> len(latency_plan({"confluent-kafka": 1.0}, extra_fetch_wait_ms=10, cf_pipe_fetch_wait_ms=None))
    3
    >>> len(latency_plan({"confluent-kafka": 1.0}, extra_fetch_wait_ms=10, cf_pipe_fetch_wait_ms=100,
    ...                  cf_honours_fetch_wait=False))
    3
    """
    plan: list[dict[str, Any]] = []
    for b in BACKENDS:
        if b not in rates:
            continue
        base = {"backend": b, "rate": rates[b], "extra_env": {}, "fetch_wait_ms": None}
        plan += [{**base, "kind": "worker"}, {**base, "kind": "pipe"}]
        if extra_fetch_wait_ms is not None and (b == KP or (b == CF and cf_honours_fetch_wait)):
            plan.append(
                {
                    **base,
                    "kind": "worker",
                    "extra_env": {"SP_KAFKA__FETCH_MAX_WAIT_MS": str(extra_fetch_wait_ms)},
                }
            )
        if b == CF and cf_pipe_fetch_wait_ms is not None:
            plan.append({**base, "kind": "pipe", "fetch_wait_ms": cf_pipe_fetch_wait_ms})
    return plan


def latency_summaries(plan: Sequence[dict[str, Any]], runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per plan entry, the median over its repeats of each percentile, and the p99 range.

    >>> plan = [{"kind": "worker", "backend": "b", "extra_env": {}, "fetch_wait_ms": None, "rate": 1.0}]
    >>> runs = [{"plan_index": 0, "achieved_input_rate": 1.0, "latency": {"p50_ms": v, "p99_ms": 2 * v}}
    ...         for v in (10.0, 30.0, 20.0)]
    >>> s = latency_summaries(plan, runs)[0]
    >>> s["repeats"], s["latency"]["p50_ms"], s["latency"]["p99_ms"], s["p99_min_ms"], s["p99_max_ms"]
    (3, 20.0, 40.0, 20.0, 60.0)
    """
    out = []
    for k, p in enumerate(plan):
        mine = [r for r in runs if r["plan_index"] == k]
        lat: dict[str, Any] = {}
        for key in ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"):
            got = [r["latency"][key] for r in mine if key in r["latency"]]
            if got:
                lat[key] = float(statistics.median(got))
        lat["matched"] = sum(r["latency"].get("matched", 0) for r in mine)
        p99s = [r["latency"]["p99_ms"] for r in mine if "p99_ms" in r["latency"]]
        rates = [r["achieved_input_rate"] for r in mine if r.get("achieved_input_rate")]
        cores = [r["contender_cpu_cores"] for r in mine if r.get("contender_cpu_cores") is not None]
        out.append(
            {
                **p,
                "name": latency_run_name(p),
                "repeats": len(mine),
                "latency": lat,
                "p99_min_ms": min(p99s, default=None),
                "p99_max_ms": max(p99s, default=None),
                "p99_each_ms": p99s,
                "achieved_input_rate": statistics.median(rates) if rates else None,
                "contender_cpu_cores": statistics.median(cores) if cores else None,
            }
        )
    return out


def latency_run_name(run: dict[str, Any]) -> str:
    """How a latency run is named in the tables.

    >>> latency_run_name({"kind": "worker", "backend": "kafka-python",
    ...                   "extra_env": {"SP_KAFKA__FETCH_MAX_WAIT_MS": "10"}, "fetch_wait_ms": None})
    'worker (kafka-python), SP_KAFKA__FETCH_MAX_WAIT_MS=10'
    """
    name = f"{run['kind']} ({run['backend']})"
    if run["extra_env"]:
        name += ", " + ", ".join(f"{k}={v}" for k, v in run["extra_env"].items())
    if run["fetch_wait_ms"] is not None:
        name += f", fetch wait {run['fetch_wait_ms']} ms"
    return name


def section_latency(
    ctx: Ctx,
    rates: dict[str, float],
    seconds: float,
    seed: int,
    say: Say,
    *,
    extra_fetch_wait_ms: int | None = LATENCY_EXTRA_FETCH_WAIT_MS,
    cf_pipe_fetch_wait_ms: int | None = None,
    cf_honours_fetch_wait: bool = True,
    repeats: int = 1,
) -> dict[str, Any]:
    """Per backend: the worker at a steady rate (half its own maximum), and the bare pipe of the
    same client at the same rate (the broker's and the client's share of the latency). With
    ``repeats`` > 1 the whole plan runs that many times, order rotated per repeat, and the summary
    holds the median of each percentile over the repeats."""
    plan = latency_plan(
        rates,
        extra_fetch_wait_ms=extra_fetch_wait_ms,
        cf_pipe_fetch_wait_ms=cf_pipe_fetch_wait_ms,
        cf_honours_fetch_wait=cf_honours_fetch_wait,
    )
    n_max = max(max(100, int(p["rate"] * seconds)) for p in plan)
    values, meta = dense_records(LATENCY_WARMUP + n_max, DEFAULT_D, seed=seed + 2)
    runs = []
    for rep, (k, p) in ((r, kp) for r in range(repeats) for kp in rotated(list(enumerate(plan)), r)):
        n = max(100, int(p["rate"] * seconds))
        vals = values[: LATENCY_WARMUP + n]
        label = f"lat{k}r{rep}-{SHORT[p['backend']]}-{p['kind']}"

        def start_w(in_topic: str, p: dict[str, Any] = p, label: str = label) -> tuple[Any, str, Path]:
            env = {**backend_env(p["backend"]), **p["extra_env"]}
            wp = start_worker(
                ctx, in_topic, "all", label, until_caught_up=False, sample_rss=False, env_extra=env
            )
            return wp.proc, wp.topics["predictions"], wp.log

        def start_pipe(
            in_topic: str, p: dict[str, Any] = p, label: str = label, count: int = len(vals)
        ) -> tuple[Any, str, Path]:
            (out_topic,) = ctx.new_topics(f"{label}-out")
            log = ctx.workdir / f"{out_topic}.log"
            cmd = [sys.executable, "-m", "bench.pipe", "--client", p["backend"], "--bootstrap", ctx.bootstrap]
            cmd += ["--input", in_topic, "--output", out_topic, "--records", str(count)]
            if p["fetch_wait_ms"] is not None:
                cmd += ["--fetch-wait-ms", str(p["fetch_wait_ms"])]
            return _popen(cmd, _clean_env(), log), out_topic, log

        if p["kind"] == "worker":
            # the prediction's offset field is the input offset
            res = _latency_run(ctx, label, vals, p["rate"], start_w, lambda v: int(v["offset"]), say)
            lines = worker_log(Path(res["log"]))
            res["rebalanced"] = sum(1 for ln in lines if ln.get("msg", "").startswith("on_assigned")) > 1
        else:
            # the input's "id" is its index, which is its offset in the fresh one-partition topic
            res = _latency_run(ctx, label, vals, p["rate"], start_pipe, lambda v: int(v["id"]), say)
        runs.append({**p, "name": latency_run_name(p), "plan_index": k, "repeat": rep, **res})
    return {
        "target_rates": rates,
        "seconds": seconds,
        "repeats": repeats,
        "warmup_records": LATENCY_WARMUP,
        "runs": runs,
        "summary": latency_summaries(plan, runs),
        "input": meta,
        "fetch_wait": "kafka-python worker and pipe: SP_KAFKA__FETCH_MAX_WAIT_MS (default 100 ms) as "
        "fetch_max_wait_ms; confluent-kafka worker and pipe: the edge's fetch.wait.max.ms (see "
        "client_settings.confluent_edge_fetch_wait_max_ms)",
        "method": "input CreateTime (the load generator's produce(), with the worker's producer "
        "settings incl. linger 20 ms) -> output CreateTime (the contender's send()), matched by input "
        "offset (the prediction's offset field; the pipe's forwarded id); warm-up records excluded",
    }


def size_variants(n: int, quick: bool) -> list[dict[str, Any]]:
    """(label, kind, d, records): fewer records where records are large or the worker is slow, but
    never fewer than MIN_SIZE_RECORDS (several poll batches: one batch only times its send loop).

    >>> [v["records"] for v in size_variants(100_000, quick=False)]
    [100000, 100000, 25000, 50000]
    >>> [v["records"] for v in size_variants(10_000, quick=True)]
    [10000, 10000, 5000, 5000]
    """
    big = max(MIN_SIZE_RECORDS, n // (2 if quick else 4))
    return [
        {"label": "dense d=10", "kind": "dense", "d": 10, "records": n},
        {"label": "dense d=100", "kind": "dense", "d": 100, "records": n},
        {"label": "dense d=1000", "kind": "dense", "d": 1000, "records": big},
        {
            "label": f"sparse {SPARSE_NNZ} of {SPARSE_NAMES:,} names",
            "kind": "sparse",
            "d": None,
            "records": max(MIN_SIZE_RECORDS, n // 2),
        },
    ]


def section_sizes(
    ctx: Ctx, n: int, repeats: int, quick: bool, seed: int, contenders: Sequence[str], say: Say
) -> dict[str, Any]:
    variants = size_variants(n, quick)
    for k, v in enumerate(variants):
        if v["kind"] == "dense":
            values, meta = dense_records(v["records"], v["d"], seed=seed + 10 + k)
        else:
            values, meta = sparse_records(v["records"], seed=seed + 10 + k)
        (topic,) = ctx.new_topics(f"size{k}-in")
        v["produce_seconds"] = produce_all(ctx.bootstrap, topic, values)
        v["input"], v["topic"] = meta, topic
        v["runs"] = {c: [] for c in contenders}
        say(f"  {v['label']}: {v['records']:,} records, mean {meta['mean_bytes']:,.0f} bytes")
        del values
    for rep in range(repeats):
        for k, v in enumerate(rotated(variants, rep)):
            for c in rotated(list(contenders), rep + k):
                r = run_one(ctx, c, v["topic"], v["records"], f"size-r{rep}")
                r["repeat"] = rep
                v["runs"][c].append(r)
                say(
                    f"  repeat {rep + 1}/{repeats} {v['label']:<26} {c:<40} {fmt_rate(r['rate']):>9} rec/s"
                    f"  peak RSS {r['memory'].get('peak_rss_mb', 0):,.0f} MB"
                    + ("" if r["complete"] else "  INCOMPLETE")
                )
    for v in variants:
        v["summary"] = {c: summarize(v["runs"][c]) for c in contenders}
    return {"variants": variants}


# ============================================================================ profile
PYSPY_HZ = 250


def _pyspy() -> str | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return spy if Path(spy).exists() else None


def section_profile(
    ctx: Ctx, n: int, tools: Sequence[str], seed: int, say: Say, backends: Sequence[str] = (KP,)
) -> dict[str, Any]:
    """Per backend, the worker (predictions=all) on ``n`` records under cProfile and/or py-spy; with
    py-spy also the bare pipe of the same client on the same records, so the two can be compared
    per record."""
    values, meta = dense_records(n, DEFAULT_D, seed=seed + 3)
    (in_topic,) = ctx.new_topics("prof-in")
    produce_all(ctx.bootstrap, in_topic, values)
    del values
    out: dict[str, Any] = {"records": n, "input": meta, "backends": {}}
    for b in BACKENDS:
        if b in backends:
            out["backends"][b] = _profile_backend(ctx, in_topic, n, tools, b, say)
    return out


def _profile_backend(
    ctx: Ctx, in_topic: str, n: int, tools: Sequence[str], backend: str, say: Say
) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": backend}
    tag, env = SHORT[backend], backend_env(backend)
    if "cprofile" in tools:
        prof = ctx.workdir / f"worker-{tag}.prof"
        wp = start_worker(
            ctx,
            in_topic,
            "all",
            f"prof-cp-{tag}",
            python_args=["-m", "cProfile", "-o", str(prof)],
            env_extra=env,
        )
        res = finish_worker(ctx, wp, n, "all", timeout_s=300 + n / 200)
        res.pop("_rss_samples", None)
        res.pop("_stats", None)
        out["cprofile"] = {"run": res, **summarize_cprofile(prof)}
        say(f"  cProfile worker ({backend}): {fmt_rate(res['rate'])} rec/s under the profiler; {prof}")
    if "pyspy" in tools:
        spy = _pyspy()
        if spy is None:
            out["pyspy"] = {"error": "py-spy not installed (.venv/bin/pip install py-spy)"}
            return out
        # --idle: wall time, including waits (for the GIL, in poll); --nonblocking: never pause it
        base = [spy, "record", "--idle", "--nonblocking", "-r", str(PYSPY_HZ), "-f", "raw", "-o"]
        raw = ctx.workdir / f"worker-{tag}.pyspy.txt"
        wp = start_worker(
            ctx,
            in_topic,
            "all",
            f"prof-spy-{tag}",
            wrap=[*base, str(raw), "--"],
            sample_rss=False,
            env_extra=env,
        )
        res = finish_worker(ctx, wp, n, "all", timeout_s=300 + n / 200)
        res.pop("_stats", None)
        out["pyspy"] = {
            "run": res,
            **summarize_pyspy(raw, PYSPY_HZ, n, wall_s=res["process_wall_s"], join_s=res.get("group_join_s")),
        }
        say(
            f"  py-spy worker ({backend}): {fmt_rate(res['rate'])} rec/s while sampled at {PYSPY_HZ} Hz; "
            f"{raw}"
        )
        raw_pipe = ctx.workdir / f"pipe-{tag}.pyspy.txt"
        (out_topic,) = ctx.new_topics(f"prof-pipe-{tag}-out")
        log = ctx.workdir / f"pipe-{tag}-pyspy.log"
        cmd = [*base, str(raw_pipe), "--", sys.executable, "-m", "bench.pipe", "--client", backend]
        cmd += ["--bootstrap", ctx.bootstrap, "--input", in_topic, "--output", out_topic, "--records", str(n)]
        t0 = time.time()
        _wait(_popen(cmd, _clean_env(), log), 120 + n / 500, log, "the profiled pipe")
        wall = time.time() - t0
        back = read_back(ctx.bootstrap, out_topic, expected=n)
        out["pyspy_pipe"] = {
            "rate": rate_from_timestamps(back.timestamps),
            **summarize_pyspy(raw_pipe, PYSPY_HZ, n, wall_s=wall, join_s=None),
        }
        say(f"  py-spy pipe ({backend}): {fmt_rate(out['pyspy_pipe']['rate'])} rec/s; {raw_pipe}")
    return out


_CPROFILE_FUNCS = [
    ("worker.py", "run", "Worker.run (everything after start-up)"),
    ("worker.py", "process", "Worker.process (per batch)"),
    ("kafka_io.py", "poll", "KafkaEdge.poll (incl. waiting, group join)"),
    ("records.py", "decode_many", "BatchDecoder.decode_many"),
    ("records.py", "decode_example", "decode_example (fallback)"),
    ("perceptron.py", "vectorize_many", "vectorize_many"),
    ("learner.py", "step", "Learner.step (learn_many + statistics)"),
    ("perceptron.py", "learn_many", "learn_many"),
    ("stats.py", "update_many", "RunningStats.update_many"),
    ("worker.py", "_learn_and_publish", "_learn_and_publish"),
    ("records.py", "prediction_record", "prediction_record"),
    ("records.py", "encode", "encode (orjson.dumps)"),
    ("records.py", "encode_predictions", "encode_predictions"),
    ("kafka_io.py", "send_many", "KafkaEdge.send_many"),
    ("kafka.py", "send", "KafkaProducer.send"),
    ("kafka_confluent.py", "poll", "ConfluentEdge.poll (incl. waiting, group join)"),
    ("kafka_confluent.py", "_consume", "ConfluentEdge._consume (poll + consume, C)"),
    ("kafka_confluent.py", "send_many", "ConfluentEdge.send_many"),
    ("edge.py", "_retrying", "EdgeBase._retrying (either edge)"),
    ("kafka_confluent.py", "attempt", "ConfluentEdge._send_retrying.attempt (produce, slow path)"),
    ("edge.py", "flush", "EdgeBase.flush (either edge)"),
    ("future.py", "add_errback", "Future.add_errback"),
    ("worker.py", "checkpoint", "Worker.checkpoint"),
    ("checkpoint.py", "save", "CheckpointStore.save"),
    ("worker.py", "publish_stats", "Worker.publish_stats"),
]


def summarize_cprofile(path: Path, top: int = 25) -> dict[str, Any]:
    st = pstats.Stats(str(path))
    raw: dict[Any, Any] = st.stats  # type: ignore[attr-defined]
    picked = []
    for file, func, label in _CPROFILE_FUNCS:
        best = None
        for (filename, _line, fn), (cc, nc, tt, ct, _) in raw.items():
            if (
                fn == func
                and filename.endswith(file)
                and (file != "kafka.py" or "producer" in filename)
                and (best is None or ct > best[3])
            ):
                best = (nc, cc, tt, ct)
        if best is not None:
            picked.append({"what": label, "calls": best[0], "tottime_s": best[2], "cumtime_s": best[3]})
    # confluent-kafka's C methods (e.g. "<method 'produce' of 'cimpl.Producer' objects>")
    c_calls = [
        {"what": f"{fn} (C)", "calls": nc, "tottime_s": tt, "cumtime_s": ct}
        for (filename, _line, fn), (cc, nc, tt, ct, _) in raw.items()
        if filename == "~" and "cimpl." in fn
    ]
    picked += sorted(c_calls, key=lambda e: -e["tottime_s"])[:6]
    rows = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    top_tottime = [
        {"function": f"{Path(f).name}:{ln}({fn})", "calls": v[1], "tottime_s": v[2], "cumtime_s": v[3]}
        for (f, ln, fn), v in rows
    ]
    return {"profile_file": str(path), "functions": picked, "top_by_tottime": top_tottime}


CF_CONSUME = "confluent-kafka poll + consume (C), incl. waiting"
CF_PRODUCE = "confluent-kafka produce (C)"
CF_FLUSH = "confluent-kafka flush (waiting for acks)"
CF_SERVE = "confluent-kafka poll(0) (delivery reports)"


def _source_line(path: str, lineno: int | None) -> str:
    """The text of line ``lineno`` of the file a py-spy frame names (relative to the repository
    or absolute); ``""`` when it cannot be read."""
    import linecache

    if not lineno:
        return ""
    for cand in (Path(path), ROOT / path):
        if cand.is_file():
            return linecache.getline(str(cand), lineno)
    return ""


def _frame_line(text: str) -> int | None:
    m = re.search(r":(\d+)\)$", text.strip())
    return int(m.group(1)) if m else None


def library_category(frames: Sequence[str]) -> str:
    """The coarse category of a py-spy stack, the same for the worker and the pipe of a client.

    librdkafka's calls are C, so under py-spy the Python line that makes them is the leaf; for the
    confluent-kafka pipe (one loop in ``bench/pipe.py``) and the edge's ``send`` closure the leaf's
    source line tells which call it is.

    >>> library_category(["<module> (x.py:1)", "Worker.run (stream_perceptron/worker.py:1)",
    ...                   "KafkaProducer.send (kafka/producer/kafka.py:9)"])
    'kafka-python KafkaProducer.send'
    >>> library_category(["<module> (x.py:1)", "consume_produce (bench/pipe.py:1)", "f (y.py:2)"])
    'own code (everything else)'
    >>> library_category(["Worker.run (stream_perceptron/worker.py:1)",
    ...                   "ConfluentEdge.poll (stream_perceptron/kafka_confluent.py:2)",
    ...                   "ConfluentEdge._consume (stream_perceptron/kafka_confluent.py:3)"])
    'confluent-kafka poll + consume (C), incl. waiting'
    """
    parsed = [_frame(f) for f in frames]
    if parsed and parsed[0][1].endswith("threading.py"):
        return "background threads (kafka-python I/O)"
    names = {fn for fn, _ in parsed}
    if "KafkaProducer.send" in names:
        return "kafka-python KafkaProducer.send"
    if "KafkaConsumer.poll" in names:
        return "kafka-python KafkaConsumer.poll (incl. waiting)"
    if "KafkaProducer.flush" in names:
        return "kafka-python KafkaProducer.flush (waiting for acks)"
    leaf_fn, leaf_path = parsed[-1] if parsed else ("", "")
    leaf_text = _source_line(leaf_path, _frame_line(frames[-1])) if frames else ""
    if "ConfluentEdge._consume" in names:
        return CF_CONSUME
    if "ConfluentEdge._flush_once" in names or "ConfluentEdge.flush" in names:
        return CF_FLUSH
    if "ConfluentEdge.send_many" in names:
        if leaf_fn.endswith("attempt"):  # the slow path's closure: produce, waiting out a full queue
            return CF_PRODUCE
        if leaf_fn.endswith("send_many") and "produce(" in leaf_text:
            return CF_PRODUCE
        if leaf_fn.endswith("send_many") and ".poll(0)" in leaf_text:
            return CF_SERVE
        return "ConfluentEdge.send_many: Python around produce (loop, counter)"
    if "ConfluentEdge.poll" in names:
        return "ConfluentEdge.poll: Python around consume (column copies, highwater)"
    if leaf_fn == "confluent_pipe":
        if "consume_first(" in leaf_text or "consume_batch(" in leaf_text:
            return CF_CONSUME
        if "produce(" in leaf_text:
            return CF_PRODUCE
        if ".flush(" in leaf_text:
            return CF_FLUSH
        if "serve(" in leaf_text:
            return CF_SERVE
    if "Worker.run" in names or "consume_produce" in names or "confluent_pipe" in names:
        return "own code (everything else)"
    return "start-up, imports, other"


_IDLE_LEAVES = {"select", "wait", "sleep", "poll", "_poll_once", "acquire"}


def summarize_pyspy(
    path: Path, hz: int, records: int, *, wall_s: float, join_s: float | None
) -> dict[str, Any]:
    """Samples per category (worker-level and library-level), in seconds and µs per record.

    py-spy falls behind its nominal rate on a busy machine, so samples become seconds at the
    effective rate: main-thread samples / the process's wall time. ``join_s`` (the worker's group
    join, from its log) is taken out of the poll categories, and start-up is left out of the
    shares, so that the shares describe steady processing.
    """
    fine: dict[str, int] = {}
    coarse: dict[str, int] = {}
    in_send: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, num = line.rpartition(" ")
        if not stack or not num.isdigit():
            continue
        k = int(num)
        frames = stack.split(";")
        lib = library_category(frames)
        if lib.startswith("background") and _frame(frames[-1])[0].rsplit(".", 1)[-1] in _IDLE_LEAVES:
            lib = "background threads: idle (select, wait)"
        elif lib.startswith("background"):
            lib = "background threads: busy"
        coarse[lib] = coarse.get(lib, 0) + k
        cat = lib if lib.startswith(("background", "start-up")) else categorize_stack(frames)
        fine[cat] = fine.get(cat, 0) + k
        names = [_frame(f)[0] for f in frames]
        if "KafkaProducer.send" in names:
            i = names.index("KafkaProducer.send")
            child = names[i + 1] if i + 1 < len(names) else "KafkaProducer.send (itself)"
            in_send[child] = in_send.get(child, 0) + k
    main = sum(v for k, v in coarse.items() if not k.startswith("background"))
    eff_hz = main / wall_s if wall_s > 0 and main else float(hz)
    join = int(round((join_s or 0.0) * eff_hz))

    def table(counts: dict[str, int]) -> list[dict[str, Any]]:
        adj = dict(counts)
        for key in adj:
            if "incl. waiting" in key and join:  # the one category per table that waits in poll
                adj[key] = max(0, adj[key] - join)
        processing = sum(v for k, v in adj.items() if not k.startswith(("background", "start-up")))
        rows = []
        for key, v in sorted(adj.items(), key=lambda kv: -kv[1]):
            steady = not key.startswith(("background", "start-up"))
            rows.append(
                {
                    "category": key,
                    "samples": v,
                    "seconds": v / eff_hz,
                    "us_per_record": v / eff_hz / records * 1e6,
                    "share_of_processing": v / processing if processing and steady else None,
                }
            )
        return rows

    total_send = sum(in_send.values())
    return {
        "raw_file": str(path),
        "hz": hz,
        "effective_hz_main_thread": eff_hz,
        "process_wall_s": wall_s,
        "records": records,
        "group_join_s": join_s,
        "group_join_samples_removed_from_poll": join,
        "categories": table(fine),
        "library": table(coarse),
        "inside_producer_send": [
            {"callee": k, "samples": v, "share_of_send": v / total_send}
            for k, v in sorted(in_send.items(), key=lambda kv: -kv[1])[:8]
        ],
    }


# ============================================================================ machine
def machine_info(bootstrap: str | None, embedded: bool) -> dict[str, Any]:
    import kafka
    import numpy
    import orjson
    import river

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    mem = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/meminfo", encoding="ascii") as fh:
            mem = int(fh.readline().split()[1]) / 1024 / 1024
    try:
        import crc32c  # noqa: F401

        has_crc = True
    except ImportError:
        has_crc = False
    broker = "external"
    if embedded:
        with contextlib.suppress(Exception):
            from stream_perceptron.broker import broker_binary

            broker = "embedded tansu: " + Path(broker_binary()).name
    cf_version = librdkafka = None
    with contextlib.suppress(ImportError):
        import confluent_kafka

        cf_version = getattr(confluent_kafka, "__version__", None)
        librdkafka = confluent_kafka.libversion()[0]
    return {
        "confluent_kafka": cf_version,
        "librdkafka": librdkafka,
        "cpu_model": cpu,
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gb": None if mem is None else round(mem, 1),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "kafka_python": kafka.__version__,
        "crc32c_installed": has_crc,
        "river": getattr(river, "__version__", "?"),
        "numpy": numpy.__version__,
        "orjson": getattr(orjson, "__version__", "?"),
        "broker": broker,
        "bootstrap": bootstrap,
        "loadavg_at_start": loadavg(),
    }


def git_state() -> dict[str, Any]:
    """The repository's HEAD and whether the working tree had changes (what was measured)."""

    def git(*a: str) -> str | None:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return None

    head = git("rev-parse", "HEAD")
    status = git("status", "--porcelain")
    return {
        "commit": head.strip() if head else None,
        "changed_files": None if status is None else len(status.splitlines()),
    }


def kafka_client_settings() -> dict[str, Any]:
    """The client settings every contender uses, and whether the confluent-kafka edge passes the
    worker's ``fetch_max_wait_ms`` on as ``fetch.wait.max.ms`` (checked by building its config)."""
    from stream_perceptron.settings import KafkaSettings

    k = KafkaSettings()
    out: dict[str, Any] = {
        "max_poll_records": k.max_poll_records,
        "poll_timeout_ms": k.poll_timeout_ms,
        "fetch_max_wait_ms": k.fetch_max_wait_ms,
        "linger_ms": k.linger_ms,
        "batch_size": k.batch_size,
        "acks": "all",
        "source": "stream_perceptron.settings.KafkaSettings defaults; acks as kafka_io builds its producer",
    }
    if confluent_available():
        from bench.pipe import confluent_configs

        consumer, producer = confluent_configs("127.0.0.1:9092", "g")
        safe = {"bootstrap.servers", "group.id", "client.id"}
        out["confluent_consumer"] = {k2: v for k2, v in consumer.items() if k2 not in safe}
        out["confluent_producer"] = {k2: v for k2, v in producer.items() if k2 not in safe}
        out["confluent_edge_fetch_wait_max_ms"] = confluent_edge_fetch_wait(10)
        out["confluent_edge_honours_fetch_max_wait_ms"] = confluent_edge_fetch_wait(10) == 10
    return out


def confluent_edge_fetch_wait(fetch_max_wait_ms: int) -> Any:
    """The ``fetch.wait.max.ms`` the confluent-kafka edge gives librdkafka when the worker's
    ``kafka.fetch_max_wait_ms`` is ``fetch_max_wait_ms``."""
    from stream_perceptron.kafka_confluent import ConfluentEdge
    from stream_perceptron.settings import KafkaSettings

    kafka = KafkaSettings(bootstrap_servers="127.0.0.1:9092", fetch_max_wait_ms=fetch_max_wait_ms)
    edge = ConfluentEdge(kafka, "t", lambda _p: None, lambda _p: None)
    return edge._consumer_config().get("fetch.wait.max.ms")


# ============================================================================ report
def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


THROUGHPUT_ALIGN = "lrrrrrrrrrrrl"


def throughput_table(tp: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    s = tp["summary"]
    contenders = tp.get("contenders") or list(s)
    peer = (s.get(PEER) or {}).get("median_rate")
    headers = [
        "contender",
        "records",
        "median rec/s",
        "spread",
        "runs",
        "x own pipe",
        "x peer",
        "incl. flush",
        "cores",
        "CPU us/rec",
        "broker cores",
        "peak RSS MB",
        "measured by",
    ]
    rows = []
    for c in contenders:
        e, spec = s[c], SPECS[c]
        own = (s.get(PIPE_OF[spec.backend]) or {}).get("median_rate")
        method = (
            "stats records" if spec.kind == "worker" and spec.predictions == "none" else "output CreateTime"
        )
        rows.append(
            [
                c,
                f"{tp['input']['n']:,}",
                fmt_rate(e["median_rate"]),
                f"{e.get('spread', 0):.0%}",
                e["runs"],
                fmt_ratio(e["median_rate"], own),
                fmt_ratio(e["median_rate"], peer),
                fmt_rate(e.get("median_rate_incl_flush")) if spec.kind != "worker" else "",
                _fmt(e.get("median_cpu_cores"), ".2f"),
                _fmt(e.get("median_cpu_us_per_record"), ".1f"),
                _fmt(e.get("median_broker_cpu_cores"), ".2f"),
                _fmt(e.get("median_peak_rss_mb"), ",.0f"),
                method,
            ]
        )
    return headers, rows


def ratio_lines(tp: dict[str, Any]) -> list[str]:
    """Per backend: worker / its own client's pipe and worker / peer (the headline ratios)."""
    s, out = tp["summary"], []
    for b, r in (tp.get("ratios") or throughput_ratios(s)).items():
        stats_rate = (s.get(WORKER_OF[b]) or {}).get("median_rate_stats_method")
        line = (
            f"{b}: worker / own pipe = {_fmt(r['worker_over_own_pipe'], '.2f')}x, "
            f"worker / peer = {_fmt(r['worker_over_peer'], '.2f')}x, "
            f"worker predictions=none / own pipe = {_fmt(r['worker_none_over_own_pipe'], '.2f')}x; "
            f"worker by the stats method {fmt_rate(stats_rate)} rec/s"
        )
        if b != KP and r.get("pipe_over_kafka_python_pipe") is not None:
            line += f"; this pipe = {r['pipe_over_kafka_python_pipe']:.1f}x the kafka-python pipe"
        if b == KPP and r.get("worker_over_kafka_python_pipe") is not None:
            line += f"; worker / one-process kafka-python pipe = {r['worker_over_kafka_python_pipe']:.2f}x"
        out.append(line)
    return out


def memory_table(mem: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    runs = mem.get("runs") or {}
    backends = [b for b in BACKENDS if b in runs]
    headers = ["worker memory, predictions=all"] + [f"{b} MB" for b in backends]
    rows: list[list[Any]] = [
        ["VmRSS after the first statistics record (~5k records)"]
        + [_fmt(runs[b]["rss_after_first_batches_mb"], ",.0f") for b in backends]
    ]
    milestones = sorted({pt["records"] for b in backends for pt in runs[b]["milestones"]})
    for key, what in (("rss_mb", "VmRSS (median of +-0.5 s)"), ("hwm_mb", "VmHWM (peak so far)")):
        for m in milestones:
            row: list[Any] = [f"{what} after {m:,} records"]
            for b in backends:
                pt = next((x for x in runs[b]["milestones"] if x["records"] == m), None)
                row.append(_fmt(pt.get(key), ",.0f") if pt else "n/a")
            rows.append(row)
        if 100_000 in milestones and 1_000_000 in milestones:
            row = [f"{what}: 1M vs 100k"]
            for b in backends:
                pts = {x["records"]: x.get(key) for x in runs[b]["milestones"]}
                a, z = pts.get(100_000), pts.get(1_000_000)
                row.append(f"{z / a - 1:+.1%}" if a and z else "n/a")
            rows.append(row)
    rows.append(["VmHWM at the end of the run"] + [_fmt(runs[b]["vm_hwm_mb"], ",.0f") for b in backends])
    if any(runs[b].get("rss_from_100k") for b in backends):
        row = ["VmRSS from 100k to the end: min-max; trend per 100k records"]
        for b in backends:
            t = runs[b].get("rss_from_100k") or {}
            row.append(
                f"{_fmt(t.get('min_mb'), '.0f')}-{_fmt(t.get('max_mb'), '.0f')}; "
                f"{_fmt(t.get('slope_mb_per_100k_records'), '+.1f')} MB"
                if t.get("points")
                else "n/a"
            )
        rows.append(row)
    return headers, rows


def _span(values: Sequence[float] | None) -> str:
    if not values:
        return "n/a"
    return f"{fmt_rate(min(values))}-{fmt_rate(max(values))}"


def long_run_table(mem: dict[str, Any]) -> tuple[list[str], list[list[Any]]] | None:
    """Worker and pipe rates on the memory section's long input (one run each)."""
    runs, pipes = mem.get("runs") or {}, mem.get("pipes_long_run") or {}
    rows = []
    for b in BACKENDS:
        if b in runs and b in pipes:
            w, p = runs[b]["run"]["rate"], pipes[b]["rate"]
            rows.append(
                [
                    b,
                    f"{pipes[b]['records']:,}",
                    fmt_rate(p),
                    fmt_rate(pipes[b].get("own_rate_first_poll_to_flush")),
                    _span(pipes[b].get("rates_per_100k_records")),
                    _fmt(pipes[b].get("cpu_cores_in_window"), ".2f"),
                    _fmt(pipes[b].get("broker_cpu_cores_in_window"), ".2f"),
                    fmt_rate(w),
                    _span(runs[b]["run"].get("rates_per_100k_records")),
                    _fmt(runs[b]["run"].get("cpu_cores_in_window"), ".2f"),
                    fmt_ratio(w, p),
                ]
            )
    if not rows:
        return None
    headers = [
        "client",
        "records",
        "pipe rec/s",
        "pipe incl. flush",
        "pipe per 100k: min-max",
        "pipe cores",
        "broker cores",
        "worker rec/s",
        "worker per 100k: min-max",
        "worker cores",
        "worker / pipe",
    ]
    return headers, rows


def latency_table(lat: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    entries = lat.get("summary") or lat["runs"]
    headers = [
        "contender",
        "runs",
        "target rec/s",
        "input rec/s",
        "records",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "p99 range ms",
        "cores",
    ]
    rows = []
    for r in entries:
        la = r["latency"]
        spread = (
            f"{r['p99_min_ms']:.0f}-{r['p99_max_ms']:.0f}"
            if r.get("repeats", 1) > 1 and r.get("p99_min_ms") is not None
            else ""
        )
        rows.append(
            [
                r["name"],
                r.get("repeats", 1),
                fmt_rate(r["rate"]),
                fmt_rate(r["achieved_input_rate"]),
                f"{la['matched']:,}",
            ]
            + [f"{la.get(k, 0):.0f}" for k in ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")]
            + [spread, _fmt(r.get("contender_cpu_cores"), ".2f")]
        )
    return headers, rows


def latency_text(lat: dict[str, Any], markdown: bool = False) -> str:
    rates = ", ".join(f"{b} {fmt_rate(v)} rec/s" for b, v in lat["target_rates"].items())
    reps = lat.get("repeats", 1)
    head = f"LATENCY at half of each worker's maximum ({rates}), {lat['seconds']:g} s each" + (
        f"; medians of {reps} interleaved runs" if reps > 1 else ""
    )
    headers, rows = latency_table(lat)
    table = (markdown_table if markdown else format_table)(headers, rows)
    return head + ("\n\n" if markdown else "\n") + table


def sizes_table(sz: dict[str, Any], contenders: Sequence[str]) -> tuple[list[str], list[list[Any]]]:
    short = {PIPE_KP: "pipe", PEER: "peer", WORKER_KP: "worker", PIPE_CF: "cf pipe", WORKER_CF: "cf worker"}
    headers = ["input", "records", "bytes/rec"] + [f"{short.get(c, c)} rec/s" for c in contenders]
    if WORKER_ALL in contenders and LIMIT in contenders:
        headers.append("worker/pipe")
    if WORKER_ALL in contenders and PEER in contenders:
        headers.append("worker/peer")
    if WORKER_ALL in contenders:
        headers.append("worker peak RSS MB")
    rows = []
    for v in sz["variants"]:
        med = {c: v["summary"][c]["median_rate"] for c in contenders}
        row: list[Any] = [v["label"], f"{v['records']:,}", f"{v['input']['mean_bytes']:,.0f}"]
        row += [fmt_rate(med[c]) for c in contenders]
        if WORKER_ALL in contenders and LIMIT in contenders:
            row.append(fmt_ratio(med[WORKER_ALL], med[LIMIT]))
        if WORKER_ALL in contenders and PEER in contenders:
            row.append(fmt_ratio(med[WORKER_ALL], med[PEER]))
        if WORKER_ALL in contenders:
            peaks = [r["memory"].get("peak_rss_mb") for r in v["runs"][WORKER_ALL] if r.get("memory")]
            row.append(f"{max(p for p in peaks if p):,.0f}" if any(peaks) else "n/a")
        rows.append(row)
    return headers, rows


def _profile_rows(rows: Sequence[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            r["category"],
            f"{r['seconds']:.2f}",
            f"{r['us_per_record']:.1f}",
            "" if r["share_of_processing"] is None else f"{r['share_of_processing']:.0%}",
        ]
        for r in rows
    ]


def profile_text(entry: dict[str, Any], records: int, markdown: bool = False) -> str:
    """One backend's py-spy summary: the worker by its own steps, then worker and pipe side by side."""
    table = markdown_table if markdown else format_table
    ps, pipe = entry["pyspy"], entry.get("pyspy_pipe")
    b = entry.get("backend", KP)
    head = ["category", "seconds", "us/record", "share of processing"]
    parts = [
        f"PROFILE ({b}): py-spy --idle at {ps['hz']} Hz (wall time, so waiting for the GIL counts where "
        f"it happens), worker main thread, {records:,} records, predictions=all; the group join "
        f"({ps['group_join_s'] or 0:.1f} s) is taken out of poll; run rate "
        f"{fmt_rate((ps.get('run') or {}).get('rate'))} rec/s while sampled",
        table(head, _profile_rows(ps["categories"])),
        "",
        f"client-library calls per record, worker vs the bare {b} pipe (same records, same client "
        "settings)" + (f"; pipe rate {fmt_rate(pipe['rate'])} rec/s while sampled" if pipe else ""),
    ]
    wl = {r["category"]: r for r in ps["library"]}
    pl = {r["category"]: r for r in pipe["library"]} if pipe else {}
    rows = []
    for c in dict.fromkeys([*wl, *pl]):
        w, p = wl.get(c), pl.get(c)
        rows.append(
            [
                c,
                "" if w is None else f"{w['us_per_record']:.1f}",
                "" if p is None else f"{p['us_per_record']:.1f}",
            ]
        )
    parts.append(table(["category", "worker us/record", "pipe us/record"], rows))
    if ps.get("inside_producer_send"):
        inside = ", ".join(f"{e['callee']} {e['share_of_send']:.0%}" for e in ps["inside_producer_send"][:5])
        parts += ["", f"inside KafkaProducer.send (worker): {inside}"]
    if markdown:  # a table needs a blank line before it
        parts = [part for item in parts for part in (item, "") if item] or parts
    return "\n".join(parts).rstrip("\n")


def cprofile_rows(cp: dict[str, Any]) -> list[list[Any]]:
    return [
        [f["what"], f"{f['calls']:,}", f"{f['tottime_s']:.2f}", f"{f['cumtime_s']:.2f}"]
        for f in cp["functions"]
    ]


def _profile_entries(prof: dict[str, Any]) -> list[dict[str, Any]]:
    return [prof["backends"][b] for b in BACKENDS if b in (prof.get("backends") or {})]


def targets_text(targets: Sequence[dict[str, Any]], markdown: bool = False) -> str:
    if markdown:
        rows = []
        for t in targets:
            line = target_line(t)
            verdict = {True: "MET", False: "NOT MET", None: "n/a"}[t["met"]]
            rest = line[len(verdict) :].strip()
            rows.append([f"**{verdict}**" if t["met"] is False else verdict, rest])
        return markdown_table(["verdict", "target"], rows, "ll")
    return "\n".join(target_line(t) for t in targets)


def machine_line(report: dict[str, Any]) -> str:
    m, src = report["machine"], report.get("source") or {}
    return (
        f"Machine: {m['cpu_model']}, {m['logical_cores']} logical cores ({m['usable_cores']} usable), "
        f"{m['memory_gb']} GB; {m['platform']}; Python {m['python']}; kafka-python {m['kafka_python']} "
        f"(crc32c {'installed' if m['crc32c_installed'] else 'not installed'}); confluent-kafka "
        f"{m.get('confluent_kafka')} (librdkafka {m.get('librdkafka')}); river {m['river']}; "
        f"numpy {m['numpy']}; orjson {m['orjson']}; broker: {m['broker']}. Load average at start "
        f"{m['loadavg_at_start']}, at end {report.get('loadavg_at_end')}; wall time "
        f"{report.get('wall_seconds', 0):.0f} s; commit {(src.get('commit') or '?')[:10]}"
        f" ({src.get('changed_files')} changed files in the tree).{steal_text(report.get('cpu_steal'))}"
    )


def steal_text(steal: dict[str, float | None] | None) -> str:
    """The CPU steal of each section, as a sentence for the machine line.

    >>> steal_text({"throughput": 0.031, "latency": 0.2})
    ' CPU steal (time the hypervisor gave to other guests): throughput 3.1%, latency 20.0%.'
    >>> steal_text({}), steal_text({"sizes": None})
    ('', '')
    """
    known = {k: v for k, v in (steal or {}).items() if v is not None}
    if not known:
        return ""
    parts = ", ".join(f"{k} {100 * v:.1f}%" for k, v in known.items())
    return f" CPU steal (time the hypervisor gave to other guests): {parts}."


def render_markdown(report: dict[str, Any]) -> str:
    """The report's tables in Markdown (for docs/performance.md)."""
    out = [machine_line(report)]
    tp = report.get("throughput")
    if tp:
        headers, rows = throughput_table(tp)
        out += ["", markdown_table(headers, rows, THROUGHPUT_ALIGN), ""]
        out += [f"* {line}" for line in ratio_lines(tp)]
    mem = report.get("memory")
    if mem and mem.get("runs"):
        headers, rows = memory_table(mem)
        out += ["", markdown_table(headers, rows)]
        long_run = long_run_table(mem)
        if long_run:
            out += ["", markdown_table(*long_run)]
    lat = report.get("latency")
    if lat and lat.get("runs"):
        out += ["", latency_text(lat, markdown=True)]
    sz = report.get("sizes")
    if sz:
        headers, rows = sizes_table(sz, report["params"]["size_contenders"])
        out += ["", markdown_table(headers, rows)]
    prof = report.get("profile") or {}
    for entry in _profile_entries(prof):
        if "pyspy" in entry and "categories" in entry["pyspy"]:
            out += ["", profile_text(entry, prof["records"], markdown=True)]
        if "cprofile" in entry:
            cp = entry["cprofile"]
            out += [
                "",
                f"cProfile ({entry['backend']}, main thread, {prof['records']:,} records; run rate under "
                f"the profiler {fmt_rate(cp['run']['rate'])} rec/s)",
                "",
                markdown_table(["function", "calls", "tottime s", "cumtime s"], cprofile_rows(cp)),
            ]
    if report.get("targets"):
        out += ["", targets_text(report["targets"], markdown=True)]
    return "\n".join(out) + "\n"


def print_report(report: dict[str, Any], say: Say) -> None:
    say("")
    say(machine_line(report))
    if report["params"].get("quick"):
        say("--quick: small sizes, one run each: a smoke test of the benchmark, not a measurement")
    cs = report.get("client_settings") or {}
    if cs.get("confluent_edge_honours_fetch_max_wait_ms") is False:
        say(
            "NOTE: the confluent-kafka edge does not pass SP_KAFKA__FETCH_MAX_WAIT_MS on: its "
            f"fetch.wait.max.ms is {cs.get('confluent_edge_fetch_wait_max_ms')} ms whatever the setting"
        )
    tp = report.get("throughput")
    if tp:
        say("")
        say(
            f"THROUGHPUT: same {tp['input']['n']:,} input records (d={tp['input']['d']}, "
            f"~{tp['input']['mean_bytes']:.0f} bytes), "
            f"median of {report['params']['repeats']} interleaved runs"
        )
        headers, rows = throughput_table(tp)
        say(format_table(headers, rows, THROUGHPUT_ALIGN))
        for line in ratio_lines(tp):
            say(line)
    mem = report.get("memory")
    if mem and mem.get("runs"):
        say("")
        say("MEMORY (worker VmRSS, predictions=all, one run per backend on the same records)")
        headers, rows = memory_table(mem)
        say(format_table(headers, rows))
        long_run = long_run_table(mem)
        if long_run:
            say("")
            say("LONG RUN: worker (the memory run) and pipe on the same records, one run each")
            say(format_table(*long_run))
    lat = report.get("latency")
    if lat and lat.get("runs"):
        say("")
        say(latency_text(lat))
    sz = report.get("sizes")
    if sz:
        say("")
        say("COST AGAINST SIZE (kafka-python, predictions=all; median of runs)")
        headers, rows = sizes_table(sz, report["params"]["size_contenders"])
        say(format_table(headers, rows))
    prof = report.get("profile") or {}
    for entry in _profile_entries(prof):
        say("")
        if "pyspy" in entry and "categories" in entry["pyspy"]:
            say(profile_text(entry, prof["records"]))
        if "cprofile" in entry:
            say("")
            say(
                f"PROFILE ({entry['backend']}, cProfile, main thread; times inflated by the profiler's "
                f"per-call cost; {fmt_rate(entry['cprofile']['run']['rate'])} rec/s under it)"
            )
            say(
                format_table(
                    ["function", "calls", "tottime s", "cumtime s"], cprofile_rows(entry["cprofile"])
                )
            )
    if report.get("targets"):
        say("")
        say("TARGETS")
        say(targets_text(report["targets"]))


# ============================================================================ main
def parse_rates(text: str | None) -> dict[str, float]:
    """``--latency-rate``: one rate for every backend (key ``*``), or ``backend=rate`` pairs.

    >>> parse_rates("5000"), parse_rates("kafka-python=12000,confluent-kafka=44000"), parse_rates(None)
    ({'*': 5000.0}, {'kafka-python': 12000.0, 'confluent-kafka': 44000.0}, {})
    """
    if not text:
        return {}
    if "=" not in text:
        return {"*": float(text)}
    out = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name.strip() not in BACKENDS:
            raise ValueError(f"unknown backend {name.strip()!r}")
        out[name.strip()] = float(value)
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.bench_worker", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--records",
        type=int,
        default=None,
        help=f"records per throughput run ({DEFAULT_RECORDS:,}; --quick {QUICK_RECORDS:,})",
    )
    p.add_argument(
        "--repeats", type=int, default=None, help=f"runs per contender ({DEFAULT_REPEATS}; --quick 1)"
    )
    p.add_argument("--bootstrap", default=None, help="host:port of a broker; default: start the embedded one")
    p.add_argument("--json", type=Path, default=None, help="write everything to this file")
    p.add_argument("--quick", action="store_true", help="small sizes, 1 repeat, under a minute")
    p.add_argument(
        "--only",
        default=None,
        help=f"comma-separated sections of {','.join(SECTIONS)} "
        "(default: all but profile; profile runs when --profile is given)",
    )
    p.add_argument(
        "--profile",
        default="none",
        choices=("none", "cprofile", "pyspy", "both"),
        help="profile the worker on --profile-records records",
    )
    p.add_argument("--profile-records", type=int, default=PROFILE_RECORDS)
    p.add_argument("--latency-seconds", type=float, default=None, help="steady-rate phase (20; --quick 2)")
    p.add_argument(
        "--latency-rate",
        default=None,
        help="input rate of the latency runs: one number for every backend, or per backend as "
        "kafka-python=N,confluent-kafka=M (default: half of each worker's measured maximum)",
    )
    p.add_argument(
        "--latency-repeats",
        type=int,
        default=None,
        help="runs of each latency contender, interleaved (3; --quick 1)",
    )
    p.add_argument(
        "--session-timeout-ms",
        type=int,
        default=None,
        help="worker group session timeout (6000; --quick with the embedded broker: 2000); "
        "tansu holds a join for half of it",
    )
    p.add_argument("--sizes-repeats", type=int, default=None, help="repeats of the size runs (--repeats)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--keep-workdir", action="store_true", help="keep logs and checkpoints")
    p.add_argument(
        "--worker-env",
        action="append",
        default=[],
        metavar="SP_NAME=VALUE",
        help="an extra setting for every worker run (repeatable), e.g. SP_KAFKA__BACKEND=confluent-kafka",
    )
    p.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help="comma-separated client backends to measure (worker and its own pipe): "
        f"{', '.join(BACKENDS)} (default: all; confluent-kafka is skipped when not installed)",
    )
    p.add_argument(
        "--latency-extra-fetch-wait-ms",
        type=int,
        default=LATENCY_EXTRA_FETCH_WAIT_MS,
        help="one extra latency run of each worker with SP_KAFKA__FETCH_MAX_WAIT_MS at this "
        f"value ({LATENCY_EXTRA_FETCH_WAIT_MS}; -1: none)",
    )
    p.add_argument("--markdown", type=Path, default=None, help="also write the tables as Markdown")
    p.add_argument("--from-json", type=Path, default=None, help="run nothing: re-print a saved report")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    args.records = args.records or (QUICK_RECORDS if args.quick else DEFAULT_RECORDS)
    args.repeats = args.repeats or (1 if args.quick else DEFAULT_REPEATS)
    args.sizes_repeats = args.sizes_repeats or args.repeats
    args.latency_seconds = args.latency_seconds or (2.0 if args.quick else 20.0)
    if args.session_timeout_ms is None:
        args.session_timeout_ms = 2000 if args.quick and args.bootstrap is None else 6000
    sections = set(SECTIONS) - {"profile"} if args.only is None else set(args.only.split(","))
    if args.profile != "none":
        sections.add("profile")
    unknown = sections - set(SECTIONS)
    if unknown:
        p.error(f"unknown sections {sorted(unknown)}")
    if "profile" in sections and args.profile == "none":
        args.profile = "pyspy"
    args.sections = sections
    for item in args.worker_env:
        name, sep, _ = item.partition("=")
        if not sep or not name.startswith("SP_"):
            p.error(f"--worker-env wants SP_NAME=VALUE, got {item!r}")
    if args.records < 10 or args.repeats < 1:
        p.error("--records must be >= 10 and --repeats >= 1")
    try:
        args.latency_rates = parse_rates(args.latency_rate)
    except ValueError as exc:
        p.error(f"--latency-rate: {exc}")
    if args.latency_repeats is None:
        args.latency_repeats = 1 if args.quick else 3
    if args.latency_repeats < 1:
        p.error("--latency-repeats must be >= 1")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or set(backends) - set(BACKENDS):
        p.error(f"--backends wants some of {', '.join(BACKENDS)}, got {args.backends!r}")
    args.backends = [b for b in BACKENDS if b in backends]
    if args.latency_extra_fetch_wait_ms < 0:
        args.latency_extra_fetch_wait_ms = None
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    say: Say = (lambda *a, **k: None) if args.quiet else (lambda *a, **k: print(*a, **k, flush=True))
    if args.from_json is not None:
        saved: dict[str, Any] = json.loads(args.from_json.read_text(encoding="utf-8"))
        print_report(saved, say)
        if args.markdown is not None:
            args.markdown.write_text(render_markdown(saved), encoding="utf-8")
        return saved
    t_all = time.perf_counter()
    if CF in args.backends and not confluent_available():
        say("confluent-kafka is not installed: measuring kafka-python only")
        args.backends = [b for b in args.backends if b != CF]
    workdir = Path(tempfile.mkdtemp(prefix="bench-worker-"))
    prefix = f"bw{int(time.time()) % 10**6}{os.getpid() % 1000}"
    report: dict[str, Any] = {
        "benchmark": "bench.bench_worker",
        "command": "python -m bench.bench_worker " + " ".join(argv if argv is not None else sys.argv[1:]),
        "params": {
            "records": args.records,
            "repeats": args.repeats,
            "sizes_repeats": args.sizes_repeats,
            "quick": args.quick,
            "d": DEFAULT_D,
            "noise": DEFAULT_NOISE,
            "seed": args.seed,
            "sections": sorted(args.sections),
            "session_timeout_ms": args.session_timeout_ms,
            "latency_seconds": args.latency_seconds,
            "latency_repeats": args.latency_repeats,
            "profile": args.profile,
            "profile_records": args.profile_records,
            "size_contenders": [PIPE_KP, PEER, WORKER_KP],
            "worker_env": args.worker_env,
            "backends": args.backends,
            "latency_extra_fetch_wait_ms": args.latency_extra_fetch_wait_ms,
            "targets": {
                "worker_over_own_pipe": TARGET_WORKER_OVER_PIPE,
                "worker_over_peer": TARGET_WORKER_OVER_PEER,
                "memory_growth_100k_to_1M": TARGET_MEMORY_GROWTH,
                "p99_ms_at_half_load": TARGET_P99_MS,
            },
        },
        "source": git_state(),
        "client_settings": kafka_client_settings(),
        "method": {
            "rate": "records/s between the first and the last output record's CreateTime (stamped by "
            "the contender's producer at send()): (count-1)/(last-first). Start-up, the worker's group "
            "join and the final flush fall outside the window for every contender.",
            "worker_predictions_none": "no output per record: (seen_last-seen_first)/(ts_last-ts_first) "
            "over the worker's statistics records (first periodic one, ~5k records in, to the shutdown "
            "one); the same computed for predictions=all as a cross-check",
            "contenders": "each a separate process; pipes and peer use assign() (no group); the worker "
            "runs `python -m stream_perceptron.cli run --until-caught-up` with SP_KAFKA__BACKEND set to "
            "its client, a fresh group, fresh output topics and checkpoint directory, "
            "SP_OBSERVE__ENABLED=false, other settings default; each pipe uses the client settings of "
            "the worker's edge for the same client (bench/pipe.py)",
            "interleaving": "each repeat runs every contender once, order rotated by one per repeat",
            "statistic": "median over repeats; spread = (max-min)/median",
            "input": "pre-produced once per size into a fresh one-partition topic, read by every run",
        },
    }
    broker = None
    try:
        if args.bootstrap is None:
            from stream_perceptron.broker import EmbeddedBroker

            broker = EmbeddedBroker()
            broker.start()
            bootstrap = broker.bootstrap
        else:
            bootstrap = args.bootstrap
        report["machine"] = machine_info(bootstrap, broker is not None)
        m = report["machine"]
        say(
            f"machine: {m['cpu_model']} | {m['logical_cores']} cores | Python {m['python']} | "
            f"kafka-python {m['kafka_python']} | {m['broker']} at {bootstrap} | load {m['loadavg_at_start']}"
        )
        ctx = Ctx(bootstrap, prefix, workdir, args.session_timeout_ms, broker.pid if broker else None)
        ctx.worker_env = dict(item.split("=", 1) for item in args.worker_env)
        backends = args.backends
        worker_max: dict[str, float] = {}
        steal = report["cpu_steal"] = {}
        counters = cpu_counters()

        def section_done(name: str) -> None:
            nonlocal counters
            now = cpu_counters()
            steal[name] = steal_share(counters, now)
            counters = now

        if "throughput" in args.sections:
            contenders = contenders_for(backends)
            say(
                f"throughput: {args.records:,} records x {args.repeats} repeats "
                f"x {len(contenders)} contenders"
            )
            report["throughput"] = section_throughput(
                ctx, args.records, args.repeats, args.seed, say, contenders
            )
            for b in backends:
                rate = report["throughput"]["summary"][WORKER_OF[b]]["median_rate"]
                if rate:
                    worker_max[b] = rate
            section_done("throughput")
        if "memory" in args.sections:
            ms = MEMORY_MILESTONES_QUICK if args.quick else MEMORY_MILESTONES_FULL
            say(f"memory: one worker run per backend on {max(ms):,} records")
            report["memory"] = section_memory(ctx, ms, args.seed, say, backends)
            for b, r in report["memory"]["runs"].items():
                if b not in worker_max and r["run"].get("rate"):
                    worker_max[b] = r["run"]["rate"]
            section_done("memory")
        if "latency" in args.sections:
            given = args.latency_rates
            rates = {
                b: given.get(b) or given.get("*") or (worker_max[b] / 2 if b in worker_max else 5000.0)
                for b in backends
            }
            cf_pipe_wait = None
            cs = report["client_settings"]
            if CF in backends and cs.get("confluent_edge_honours_fetch_max_wait_ms") is False:
                cf_pipe_wait = cs["fetch_max_wait_ms"]  # what the edge would use if it honoured it
            say(
                "latency: steady input at "
                + ", ".join(f"{fmt_rate(r)} rec/s ({b})" for b, r in rates.items())
                + f" for {args.latency_seconds:g} s each"
            )
            report["latency"] = section_latency(
                ctx,
                rates,
                args.latency_seconds,
                args.seed,
                say,
                extra_fetch_wait_ms=args.latency_extra_fetch_wait_ms,
                cf_pipe_fetch_wait_ms=cf_pipe_wait,
                cf_honours_fetch_wait=cs.get("confluent_edge_honours_fetch_max_wait_ms") is not False,
                repeats=args.latency_repeats,
            )
            section_done("latency")
        if "sizes" in args.sections:
            say("sizes: kafka-python worker records/s against the input's size (plus its pipe and the peer)")
            report["sizes"] = section_sizes(
                ctx, args.records, args.sizes_repeats, args.quick, args.seed, [PIPE_KP, PEER, WORKER_KP], say
            )
            section_done("sizes")
        if "profile" in args.sections:
            tools = ("cprofile", "pyspy") if args.profile == "both" else (args.profile,)
            say(
                f"profile: the worker on {args.profile_records:,} records with {', '.join(tools)}, "
                "per backend"
            )
            # py-spy samples one process: the producer process's share would go unseen
            profiled = [b for b in backends if b != KPP]
            report["profile"] = section_profile(ctx, args.profile_records, tools, args.seed, say, profiled)
            section_done("profile")
        if args.bootstrap is not None:
            delete_topics(bootstrap, ctx.topics)
    finally:
        if broker is not None:
            broker.stop()
        report["loadavg_at_end"] = loadavg()
        report["source_at_end"] = git_state()  # HEAD may move while a long run is going
        report["wall_seconds"] = time.perf_counter() - t_all
        report["workdir"] = str(workdir) if args.keep_workdir or "profile" in args.sections else None
        if not (args.keep_workdir or "profile" in args.sections):
            shutil.rmtree(workdir, ignore_errors=True)
    report["targets"] = evaluate_targets(report)
    if "machine" in report:
        print_report(report, say)
    say(f"\ntotal wall time {report['wall_seconds']:.0f} s")
    if args.markdown is not None and "machine" in report:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(render_markdown(report), encoding="utf-8")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
        say(f"wrote {args.json}")
    return report


if __name__ == "__main__":
    main()
