"""End-to-end benchmark of the worker on a Kafka-protocol broker: throughput against a bare pipe
and a hand-written river loop, resident memory, latency at a steady rate, cost against size, and
(optionally) a profile of the worker.

Run from the repository root::

    .venv/bin/python -m bench.bench_worker                      # 100k records, 3 repeats, ~8-10 min
    .venv/bin/python -m bench.bench_worker --quick              # small sizes, 1 repeat, < 60 s
    .venv/bin/python -m bench.bench_worker --json bench/results/worker.json
    .venv/bin/python -m bench.bench_worker --bootstrap 127.0.0.1:9092 --records 200000
    .venv/bin/python -m bench.bench_worker --only profile --profile pyspy --profile-records 200000

Without ``--bootstrap`` it starts the embedded broker (``stream_perceptron.broker.EmbeddedBroker``,
tansu, memory only) once for the whole run. Every contender is a separate process, reads the SAME
pre-produced input records (produced once per size into a fresh topic) and writes to a fresh
output topic:

1. **limit**: ``bench.pipe``, a bare kafka-python consume → produce pipe (values unchanged);
2. **worker**: ``python -m stream_perceptron.cli run --until-caught-up`` with ``SP_*`` settings (a
   fresh group, fresh output topics and a fresh checkpoint directory per run), with
   ``SP_OUTPUT__PREDICTIONS=all`` and ``=none`` (statistics only);
3. **peer**: ``bench.peer_river_loop``, kafka-python + ``json`` + river's ``Perceptron``.

How a rate is measured (records/s), the same way for every contender:

* from the output topic's record timestamps (CreateTime, stamped by the contender's producer at
  ``send()``): ``(count − 1) / (last − first)``. The group join, the process start-up and the
  final flush all fall outside that window, for every contender (the pipe and the peer use
  ``assign()``; the worker's join on tansu takes ``session_timeout_ms / 2`` before its first
  output record);
* for the worker with predictions off there is no output record per input record, so its rate
  comes from its own statistics records: ``(seen_last − seen_first) / (ts_last − ts_first)``
  between the first periodic statistics record (after ~5,000 records) and the one published at
  shutdown. The same figure is computed for the ``all`` runs as a cross-check of the two methods.

See ``docs/performance.md`` for the method, a full run and the profile.
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
LATENCY_WARMUP = 200
PROFILE_RECORDS = 200_000
RSS_INTERVAL_S = 0.05
MIN_SIZE_RECORDS = 5_000  # records per size run: at least a few poll batches (2,000 each)

LIMIT = "limit: bare consume->produce pipe"
PEER = "peer: kafka-python + json + river loop"
WORKER_ALL = "worker, predictions=all"
WORKER_NONE = "worker, predictions=none (stats only)"
CONTENDERS = (LIMIT, PEER, WORKER_ALL, WORKER_NONE)
SECTIONS = ("throughput", "memory", "latency", "sizes", "profile")


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


def categorize_stack(frames: Sequence[str]) -> str:
    """The cost category of one py-spy stack (root first), for the profile summary.

    A frame reads ``function (path:line)``. The first marker in priority order wins, so that e.g.
    the ``encode`` inside ``publish_stats`` counts as statistics, not as prediction encoding.

    >>> categorize_stack(["<module> (cli.py:1)", "run (stream_perceptron/worker.py:150)",
    ...                   "process (stream_perceptron/worker.py:240)",
    ...                   "decode_example (stream_perceptron/records.py:80)", "loads (x.py:1)"])
    'decode_example (orjson + validation)'
    >>> categorize_stack(["_bootstrap (threading.py:1)", "run (kafka/x.py:2)"])
    'background threads (kafka-python I/O)'
    """
    parsed = [_frame(f) for f in frames]
    if parsed and parsed[0][1].endswith("threading.py"):
        return "background threads (kafka-python I/O)"
    # py-spy names methods ``Class.method``; nested functions ``f.<locals>.g``
    # both Kafka edges (kafka_io.KafkaEdge, kafka_confluent.ConfluentEdge) count as the edge
    names = {
        (fn.rsplit(".", 1)[-1], _EDGE_FILES.get(path.rsplit("/", 1)[-1], path.rsplit("/", 1)[-1]))
        for fn, path in parsed
    }
    for (fn, file), category in _MARKERS:
        if (fn, file) in names:
            return category
    return "start-up, imports, other"


_EDGE_FILES = {"kafka_confluent.py": "kafka_io.py"}

_MARKERS: list[tuple[tuple[str, str], str]] = [
    (("checkpoint", "worker.py"), "checkpoint (flush + write + fsync + commit)"),
    (("publish_stats", "worker.py"), "statistics records"),
    (("_shutdown", "worker.py"), "shutdown"),
    (("poll", "kafka_io.py"), "poll (consumer.poll + InRecord), incl. waiting"),
    (("decode_example", "records.py"), "decode_example (orjson + validation)"),
    (("vectorize_many", "perceptron.py"), "vectorize_many (lists -> matrix)"),
    (("learn_many", "perceptron.py"), "learn_many"),
    (("step", "learner.py"), "statistics update (margins, norms, update_many)"),
    (("prediction_record", "records.py"), "prediction_record (build dict)"),
    (("encode", "records.py"), "encode (orjson.dumps)"),
    (("send", "kafka_io.py"), "KafkaEdge.send (producer.send + errback + retry wrapper)"),
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
    seconds until it exits (or :meth:`stop`)."""

    def __init__(self, pid: int, interval: float = RSS_INTERVAL_S) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        # (time.time(), VmRSS kB, VmHWM kB, CPU seconds so far)
        self.samples: list[tuple[float, int, int, float]] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        status, stat = f"/proc/{self.pid}/status", f"/proc/{self.pid}/stat"
        while not self._stop_event.is_set():
            try:
                with open(status, encoding="ascii", errors="replace") as fh:
                    st = parse_status(fh.read())
                with open(stat, encoding="ascii", errors="replace") as fh:
                    ticks = parse_stat_cpu_ticks(fh.read())
            except (OSError, ValueError, IndexError):
                return
            if "VmRSS" not in st:  # a zombie: exited, not yet reaped
                return
            self.samples.append((time.time(), st["VmRSS"], st.get("VmHWM", st["VmRSS"]), ticks / CLK_TCK))
            self._stop_event.wait(self.interval)

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
            "peak_rss_mb": max(s[1] for s in self.samples) / 1024,
            "last_rss_mb": self.samples[-1][1] / 1024,
            "vm_hwm_mb": self.samples[-1][2] / 1024,
            "cpu_s_total": self.samples[-1][3],
        }


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


def run_contender_process(ctx: Ctx, module: str, label: str, in_topic: str, n: int) -> dict[str, Any]:
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
        "memory": rss.summary(),
        "cpu_cores_in_window": rss.cores_between(w0, w1),
        "broker_cpu_cores_in_window": broker.cores_between(w0, w1) if broker is not None else None,
        "output_topic": out_topic,
    }


def worker_env(
    ctx: Ctx, topics: dict[str, str], ckpt_dir: Path, predictions: str, group: str
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
) -> WorkerProc:
    pred, stats, dead = ctx.new_topics(f"{label}-pred", f"{label}-stats", f"{label}-dead")
    topics = {"input": in_topic, "predictions": pred, "stats": stats, "dead_letter": dead}
    group = ctx.name(f"{label}-group")
    ckpt = ctx.workdir / f"{group}-ckpt"
    env = worker_env(ctx, topics, ckpt, predictions, group)
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


def run_worker(ctx: Ctx, in_topic: str, n: int, predictions: str, label: str) -> dict[str, Any]:
    wp = start_worker(ctx, in_topic, predictions, label)
    res = finish_worker(ctx, wp, n, predictions, timeout_s=120 + n / 300)
    res.pop("_rss_samples", None)
    res.pop("_stats", None)
    return res


# ============================================================================ sections
Say = Callable[..., None]


def loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def run_one(ctx: Ctx, contender: str, in_topic: str, n: int, label: str) -> dict[str, Any]:
    if contender == LIMIT:
        return run_contender_process(ctx, "bench.pipe", f"{label}-pipe", in_topic, n)
    if contender == PEER:
        return run_contender_process(ctx, "bench.peer_river_loop", f"{label}-peer", in_topic, n)
    if contender == WORKER_ALL:
        return run_worker(ctx, in_topic, n, "all", f"{label}-wall")
    if contender == WORKER_NONE:
        return run_worker(ctx, in_topic, n, "none", f"{label}-wnone")
    raise ValueError(contender)


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
    return out


def section_throughput(ctx: Ctx, n: int, repeats: int, seed: int, say: Say) -> dict[str, Any]:
    values, meta = dense_records(n, DEFAULT_D, seed=seed)
    (in_topic,) = ctx.new_topics("tp-in")
    produce_s = produce_all(ctx.bootstrap, in_topic, values)
    del values
    say(
        f"  input: {n:,} records, d={DEFAULT_D}, mean {meta['mean_bytes']:.0f} bytes, "
        f"produced in {produce_s:.1f}s ({n / produce_s:,.0f} rec/s)"
    )
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CONTENDERS}
    for rep in range(repeats):
        for c in rotated(CONTENDERS, rep):
            r = run_one(ctx, c, in_topic, n, f"tp-r{rep}")
            r["repeat"] = rep
            runs[c].append(r)
            extra = f" (stats-based {fmt_rate(r['rate_stats'])})" if c == WORKER_ALL else ""
            say(
                f"  repeat {rep + 1}/{repeats} {c:<40} {fmt_rate(r['rate']):>9} rec/s{extra}"
                + ("" if r["complete"] else "  INCOMPLETE")
                + (" REBALANCED" if r.get("rebalanced") else "")
            )
    summary = {c: summarize(runs[c]) for c in CONTENDERS}
    wall_stats = [r["rate_stats"] for r in runs[WORKER_ALL] if r.get("rate_stats")]
    summary[WORKER_ALL]["median_rate_stats_method"] = statistics.median(wall_stats) if wall_stats else None
    return {
        "input": meta,
        "input_topic": in_topic,
        "produce_seconds": produce_s,
        "runs": runs,
        "summary": summary,
    }


def section_memory(ctx: Ctx, milestones: Sequence[int], seed: int, say: Say) -> dict[str, Any]:
    n = max(milestones)
    values, meta = dense_records(n, DEFAULT_D, seed=seed + 1)
    (in_topic,) = ctx.new_topics("mem-in")
    produce_s = produce_all(ctx.bootstrap, in_topic, values)
    del values
    say(
        f"  input: {n:,} records produced in {produce_s:.1f}s; worker (predictions=all) sampled every "
        f"{RSS_INTERVAL_S * 1000:.0f} ms"
    )
    wp = start_worker(ctx, in_topic, "all", "mem")
    res = finish_worker(ctx, wp, n, "all", timeout_s=180 + n / 300)
    samples = [(t, rss) for t, rss, _, _ in res.pop("_rss_samples")]
    stats = sorted(res.pop("_stats"), key=lambda s: s.get("ts", 0))
    points = []
    for m in milestones:
        hit = next((s for s in stats if s.get("seen", 0) >= m), None)
        if hit is None:
            continue
        rss = sample_at(samples, hit["ts"])
        points.append(
            {"records": m, "stats_seen": hit["seen"], "rss_mb": None if rss is None else rss / 1024}
        )
    first = next((s for s in stats if s.get("seen", 0) > 0), None)
    early = sample_at(samples, first["ts"]) if first else None
    return {
        "input": meta,
        "run": res,
        "rss_after_first_batches_mb": None if early is None else early / 1024,
        "first_stats_seen": first["seen"] if first else None,
        "milestones": points,
        "peak_rss_mb": res["memory"].get("peak_rss_mb"),
        "vm_hwm_mb": res["memory"].get("vm_hwm_mb"),
        "method": "VmRSS from /proc/PID/status sampled every 50 ms; at a milestone, the sample nearest "
        "in time to the worker's first statistics record with seen >= milestone",
    }


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
    from kafka import KafkaProducer

    from bench.pipe import assigned_consumer, producer_kwargs

    n = len(values) - LATENCY_WARMUP
    (in_topic,) = ctx.new_topics(f"{label}-in")
    proc, out_topic, log = start(in_topic)
    producer = KafkaProducer(**producer_kwargs(ctx.bootstrap))
    consumer = assigned_consumer(ctx.bootstrap, out_topic)
    outputs: list[tuple[int, int]] = []

    def drain_until(count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(outputs) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"latency run: {len(outputs)} of {count} outputs; log {log}\n{_tail(log)}")
            for recs in consumer.poll(timeout_ms=200, max_records=20_000).values():
                outputs.extend((offset_of(orjson.loads(r.value)), r.timestamp) for r in recs)
            if len(outputs) < count and proc.poll() not in (None, 0):
                raise RuntimeError(f"{label}: the process exited with {proc.returncode}\n{_tail(log)}")

    try:
        for i in range(LATENCY_WARMUP):
            producer.send(in_topic, value=values[i], key=str(i).encode())
        producer.flush()
        drain_until(LATENCY_WARMUP, 60 + ctx.session_timeout_ms / 1000)
        send = producer.send
        t0 = time.monotonic()
        for j in range(n):
            ahead = j / rate - (time.monotonic() - t0)
            if ahead > 0.0005:
                time.sleep(ahead)
            i = LATENCY_WARMUP + j
            send(in_topic, value=values[i], key=str(i).encode())
        send_s = time.monotonic() - t0
        producer.flush()
        drain_until(LATENCY_WARMUP + n, 60 + n / max(rate, 1))
    finally:
        producer.close()
        consumer.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _wait(proc, 60, log, f"the {label} process")
    inputs = read_back(ctx.bootstrap, in_topic, expected=LATENCY_WARMUP + n)
    input_ts = dict(zip(inputs.offsets, inputs.timestamps, strict=True))
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
        "latency": summary,
        "log": str(log),
    }


def section_latency(ctx: Ctx, rate: float, seconds: float, seed: int, say: Say) -> dict[str, Any]:
    """The worker at a steady ``rate``, and the bare pipe at the same rate (the broker's and the
    client's share of the latency)."""
    n = max(100, int(rate * seconds))
    values, meta = dense_records(LATENCY_WARMUP + n, DEFAULT_D, seed=seed + 2)

    def start_w(in_topic: str) -> tuple[subprocess.Popen[bytes], str, Path]:
        wp = start_worker(ctx, in_topic, "all", "lat", until_caught_up=False, sample_rss=False)
        return wp.proc, wp.topics["predictions"], wp.log

    def start_pipe(in_topic: str) -> tuple[subprocess.Popen[bytes], str, Path]:
        (out_topic,) = ctx.new_topics("lat-pipe-out")
        log = ctx.workdir / f"{out_topic}.log"
        cmd = [
            sys.executable,
            "-m",
            "bench.pipe",
            "--bootstrap",
            ctx.bootstrap,
            "--input",
            in_topic,
            "--output",
            out_topic,
            "--records",
            str(len(values)),
        ]
        return _popen(cmd, _clean_env(), log), out_topic, log

    # the input's "id" is its index, which is its offset in the fresh one-partition topic
    worker = _latency_run(ctx, "lat-worker", values, rate, start_w, lambda v: int(v["offset"]), say)
    pipe = _latency_run(ctx, "lat-pipe", values, rate, start_pipe, lambda v: int(v["id"]), say)
    lines = worker_log(Path(worker["log"]))
    worker["rebalanced"] = sum(1 for ln in lines if ln.get("msg", "").startswith("on_assigned")) > 1
    return {
        "target_rate": rate,
        "seconds": seconds,
        "warmup_records": LATENCY_WARMUP,
        "worker": worker,
        "pipe": pipe,
        "input": meta,
        "consumer_fetch_max_wait_ms": "kafka-python default (500); the worker has no setting for it",
        "method": "input CreateTime (the load generator's send(), with the worker's producer settings "
        "incl. linger_ms) -> output CreateTime (the contender's send()), matched by input offset "
        "(the prediction's offset field; the pipe's forwarded id); warm-up records excluded",
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


def section_profile(ctx: Ctx, n: int, tools: Sequence[str], seed: int, say: Say) -> dict[str, Any]:
    """The worker (predictions=all) on ``n`` records under cProfile and/or py-spy; with py-spy also
    the bare pipe on the same records, so the two can be compared per record."""
    values, meta = dense_records(n, DEFAULT_D, seed=seed + 3)
    (in_topic,) = ctx.new_topics("prof-in")
    produce_all(ctx.bootstrap, in_topic, values)
    del values
    out: dict[str, Any] = {"records": n, "input": meta}
    if "cprofile" in tools:
        prof = ctx.workdir / "worker.prof"
        wp = start_worker(ctx, in_topic, "all", "prof-cp", python_args=["-m", "cProfile", "-o", str(prof)])
        res = finish_worker(ctx, wp, n, "all", timeout_s=300 + n / 200)
        res.pop("_rss_samples", None)
        res.pop("_stats", None)
        out["cprofile"] = {"run": res, **summarize_cprofile(prof)}
        say(f"  cProfile run: {fmt_rate(res['rate'])} rec/s under the profiler; {prof}")
    if "pyspy" in tools:
        spy = _pyspy()
        if spy is None:
            out["pyspy"] = {"error": "py-spy not installed (.venv/bin/pip install py-spy)"}
            return out
        # --idle: wall time, including waits (for the GIL, in poll); --nonblocking: never pause it
        base = [spy, "record", "--idle", "--nonblocking", "-r", str(PYSPY_HZ), "-f", "raw", "-o"]
        raw = ctx.workdir / "worker.pyspy.txt"
        wp = start_worker(ctx, in_topic, "all", "prof-spy", wrap=[*base, str(raw), "--"], sample_rss=False)
        res = finish_worker(ctx, wp, n, "all", timeout_s=300 + n / 200)
        res.pop("_stats", None)
        out["pyspy"] = {
            "run": res,
            **summarize_pyspy(raw, PYSPY_HZ, n, wall_s=res["process_wall_s"], join_s=res.get("group_join_s")),
        }
        say(f"  py-spy worker run: {fmt_rate(res['rate'])} rec/s while sampled at {PYSPY_HZ} Hz; {raw}")
        raw_pipe = ctx.workdir / "pipe.pyspy.txt"
        (out_topic,) = ctx.new_topics("prof-pipe-out")
        log = ctx.workdir / "pipe-pyspy.log"
        cmd = [
            *base,
            str(raw_pipe),
            "--",
            sys.executable,
            "-m",
            "bench.pipe",
            "--bootstrap",
            ctx.bootstrap,
            "--input",
            in_topic,
            "--output",
            out_topic,
            "--records",
            str(n),
        ]
        t0 = time.time()
        _wait(_popen(cmd, _clean_env(), log), 120 + n / 500, log, "the profiled pipe")
        wall = time.time() - t0
        back = read_back(ctx.bootstrap, out_topic, expected=n)
        out["pyspy_pipe"] = {
            "rate": rate_from_timestamps(back.timestamps),
            **summarize_pyspy(raw_pipe, PYSPY_HZ, n, wall_s=wall, join_s=None),
        }
        say(f"  py-spy pipe run: {fmt_rate(out['pyspy_pipe']['rate'])} rec/s; {raw_pipe}")
    return out


_CPROFILE_FUNCS = [
    ("worker.py", "run", "Worker.run (everything after start-up)"),
    ("worker.py", "process", "Worker.process (per batch)"),
    ("kafka_io.py", "poll", "KafkaEdge.poll (incl. waiting, group join)"),
    ("records.py", "decode_example", "decode_example"),
    ("perceptron.py", "vectorize_many", "vectorize_many"),
    ("learner.py", "step", "Learner.step (learn_many + statistics)"),
    ("perceptron.py", "learn_many", "learn_many"),
    ("stats.py", "update_many", "RunningStats.update_many"),
    ("worker.py", "_learn_and_publish", "_learn_and_publish"),
    ("records.py", "prediction_record", "prediction_record"),
    ("records.py", "encode", "encode (orjson.dumps)"),
    ("kafka_io.py", "send", "KafkaEdge.send"),
    ("kafka.py", "send", "KafkaProducer.send"),
    ("future.py", "add_errback", "Future.add_errback"),
    ("kafka_io.py", "_retrying", "KafkaEdge._retrying"),
    ("worker.py", "checkpoint", "Worker.checkpoint"),
    ("kafka_io.py", "flush", "KafkaEdge.flush"),
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
    rows = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    top_tottime = [
        {"function": f"{Path(f).name}:{ln}({fn})", "calls": v[1], "tottime_s": v[2], "cumtime_s": v[3]}
        for (f, ln, fn), v in rows
    ]
    return {"profile_file": str(path), "functions": picked, "top_by_tottime": top_tottime}


def library_category(frames: Sequence[str]) -> str:
    """The coarse category of a py-spy stack, the same for the worker and the pipe.

    >>> library_category(["<module> (x.py:1)", "Worker.run (stream_perceptron/worker.py:1)",
    ...                   "KafkaProducer.send (kafka/producer/kafka.py:9)"])
    'kafka-python KafkaProducer.send'
    >>> library_category(["<module> (x.py:1)", "consume_produce (bench/pipe.py:1)", "f (y.py:2)"])
    'own code (everything else)'
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
    if "ConfluentEdge.send" in names:  # librdkafka's produce() is C: the edge method is the leaf
        return "confluent-kafka send (ConfluentEdge.send incl. produce)"
    if "ConfluentEdge.poll" in names:
        return "confluent-kafka poll (ConfluentEdge.poll incl. consume, waiting)"
    if "Worker.run" in names or "consume_produce" in names:
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
            if "poll" in key.lower() and join:
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
    return {
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
    from stream_perceptron.settings import KafkaSettings

    k = KafkaSettings()
    return {
        "max_poll_records": k.max_poll_records,
        "poll_timeout_ms": k.poll_timeout_ms,
        "linger_ms": k.linger_ms,
        "batch_size": k.batch_size,
        "acks": "all",
        "source": "stream_perceptron.settings.KafkaSettings defaults; acks as kafka_io builds its producer",
    }


# ============================================================================ report
def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def throughput_table(tp: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    s = tp["summary"]
    lim = s[LIMIT]["median_rate"]
    peer = s[PEER]["median_rate"]
    headers = [
        "contender",
        "records",
        "median rec/s",
        "spread",
        "runs",
        "x limit",
        "x peer",
        "cores",
        "CPU us/rec",
        "broker cores",
        "peak RSS MB",
        "measured by",
    ]
    rows = []
    for c in CONTENDERS:
        e = s[c]
        method = "stats records" if c == WORKER_NONE else "output CreateTime"
        rows.append(
            [
                c,
                f"{tp['input']['n']:,}",
                fmt_rate(e["median_rate"]),
                f"{e.get('spread', 0):.0%}",
                e["runs"],
                fmt_ratio(e["median_rate"], lim),
                fmt_ratio(e["median_rate"], peer),
                _fmt(e.get("median_cpu_cores"), ".2f"),
                _fmt(e.get("median_cpu_us_per_record"), ".1f"),
                _fmt(e.get("median_broker_cpu_cores"), ".2f"),
                _fmt(e.get("median_peak_rss_mb"), ",.0f"),
                method,
            ]
        )
    return headers, rows


def sizes_table(sz: dict[str, Any], contenders: Sequence[str]) -> tuple[list[str], list[list[Any]]]:
    short = {LIMIT: "limit", PEER: "peer", WORKER_ALL: "worker"}
    headers = ["input", "records", "bytes/rec"] + [f"{short[c]} rec/s" for c in contenders]
    if WORKER_ALL in contenders and LIMIT in contenders:
        headers.append("worker/limit")
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


def latency_text(lat: dict[str, Any], markdown: bool = False) -> str:
    def line(name: str, r: dict[str, Any]) -> list[Any]:
        la = r["latency"]
        return [name, fmt_rate(r["achieved_input_rate"]), f"{la['matched']:,}"] + [
            f"{la.get(k, 0):.0f}" for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms")
        ]

    head = (
        f"LATENCY at a steady input rate of {fmt_rate(lat['target_rate'])} rec/s (half the worker's maximum)"
    )
    rows = [line("worker, predictions=all", lat["worker"]), line("limit: bare pipe", lat["pipe"])]
    table = (markdown_table if markdown else format_table)(
        ["contender", "input rec/s", "records", "p50 ms", "p90 ms", "p99 ms", "max ms"], rows
    )
    return head + ("\n\n" if markdown else "\n") + table


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


def profile_text(prof: dict[str, Any], markdown: bool = False) -> str:
    """The py-spy summary: the worker by its own steps, then worker and pipe side by side."""
    table = markdown_table if markdown else format_table
    ps, pipe = prof["pyspy"], prof.get("pyspy_pipe")
    n = prof["records"]
    head = ["category", "seconds", "us/record", "share of processing"]
    parts = [
        f"PROFILE: py-spy --idle at {ps['hz']} Hz (wall time, so waiting for the GIL counts where it "
        f"happens), worker main thread, {n:,} records, predictions=all; the group join "
        f"({ps['group_join_s'] or 0:.1f} s) is taken out of poll; run rate {fmt_rate(ps_rate(prof))} rec/s "
        "while sampled",
        table(head, _profile_rows(ps["categories"])),
        "",
        "client-library calls per record, worker vs the bare kafka-python pipe "
        "(same records, same client settings)"
        + (f"; pipe rate {fmt_rate(pipe['rate'])} rec/s while sampled" if pipe else ""),
    ]
    wl = {r["category"]: r for r in ps["library"]}
    pl = {r["category"]: r for r in pipe["library"]} if pipe else {}
    cats = list(dict.fromkeys([*wl, *pl]))
    rows = []
    for c in cats:
        w, p = wl.get(c), pl.get(c)
        rows.append(
            [
                c,
                "" if w is None else f"{w['us_per_record']:.1f}",
                "" if p is None else f"{p['us_per_record']:.1f}",
            ]
        )
    parts.append(table(["category", "worker us/record", "pipe us/record"], rows))
    inside = ", ".join(f"{e['callee']} {e['share_of_send']:.0%}" for e in ps["inside_producer_send"][:5])
    parts += ["", f"inside KafkaProducer.send (worker): {inside}"]
    return "\n".join(parts)


def ps_rate(prof: dict[str, Any]) -> float | None:
    run = prof["pyspy"].get("run") or {}
    rate: float | None = run.get("rate")
    return rate


def cprofile_rows(cp: dict[str, Any]) -> list[list[Any]]:
    return [
        [f["what"], f"{f['calls']:,}", f"{f['tottime_s']:.2f}", f"{f['cumtime_s']:.2f}"]
        for f in cp["functions"]
    ]


def render_markdown(report: dict[str, Any]) -> str:
    """The report's tables in Markdown (for docs/performance.md)."""
    m = report["machine"]
    out = [
        f"Machine: {m['cpu_model']}, {m['logical_cores']} logical cores ({m['usable_cores']} usable), "
        f"{m['memory_gb']} GB; {m['platform']}; Python {m['python']}; kafka-python {m['kafka_python']} "
        f"(crc32c {'installed' if m['crc32c_installed'] else 'not installed'}); river {m['river']}; "
        f"numpy {m['numpy']}; orjson {m['orjson']}; broker: {m['broker']}. Load average at start "
        f"{m['loadavg_at_start']}, at end {report.get('loadavg_at_end')}; wall time "
        f"{report.get('wall_seconds', 0):.0f} s.",
    ]
    tp = report.get("throughput")
    if tp:
        headers, rows = throughput_table(tp)
        out += ["", markdown_table(headers, rows, "lrrrrrrrrrrl")]
    mem = report.get("memory")
    if mem:
        rows = [
            [f"{p['records']:,}", f"{p['stats_seen']:,}", f"{p['rss_mb']:,.0f}"] for p in mem["milestones"]
        ]
        rows.insert(
            0,
            [
                f"~{mem['first_stats_seen']:,} (first statistics record)",
                f"{mem['first_stats_seen']:,}",
                f"{mem['rss_after_first_batches_mb'] or 0:,.0f}",
            ],
        )
        rows.append(["peak over the run (VmHWM)", "", f"{mem['vm_hwm_mb'] or 0:,.0f}"])
        out += ["", markdown_table(["after records", "statistics record at seen", "VmRSS MB"], rows)]
    lat = report.get("latency")
    if lat:
        out += ["", latency_text(lat, markdown=True)]
    sz = report.get("sizes")
    if sz:
        headers, rows = sizes_table(sz, report["params"]["size_contenders"])
        out += ["", markdown_table(headers, rows)]
    prof = report.get("profile")
    if prof and "pyspy" in prof and "categories" in prof["pyspy"]:
        out += ["", profile_text(prof, markdown=True)]
    if prof and "cprofile" in prof:
        cp = prof["cprofile"]
        out += [
            "",
            f"cProfile (main thread, {prof['records']:,} records; run rate under the profiler "
            f"{fmt_rate(cp['run']['rate'])} rec/s)",
            "",
            markdown_table(["function", "calls", "tottime s", "cumtime s"], cprofile_rows(cp)),
        ]
    return "\n".join(out) + "\n"


def print_report(report: dict[str, Any], say: Say) -> None:
    m = report["machine"]
    say("")
    say(
        f"machine: {m['cpu_model']} | {m['logical_cores']} logical cores ({m['usable_cores']} usable) | "
        f"{m['memory_gb']} GB | Python {m['python']} | kafka-python {m['kafka_python']} "
        f"(crc32c {'yes' if m['crc32c_installed'] else 'no'}) | river {m['river']} | {m['broker']}"
    )
    say(f"load average at start {m['loadavg_at_start']}, at end {report.get('loadavg_at_end')}")
    if report["params"].get("quick"):
        say("--quick: small sizes, one run each: a smoke test of the benchmark, not a measurement")
    tp = report.get("throughput")
    if tp:
        say("")
        say(
            f"THROUGHPUT: same {tp['input']['n']:,} input records (d={tp['input']['d']}, "
            f"~{tp['input']['mean_bytes']:.0f} bytes), "
            f"median of {report['params']['repeats']} interleaved runs"
        )
        headers, rows = throughput_table(tp)
        say(format_table(headers, rows, "lrrrrrrrrrrl"))
        s = tp["summary"]
        ws = s[WORKER_ALL].get("median_rate_stats_method")
        say(
            f"worker/limit = {fmt_ratio(s[WORKER_ALL]['median_rate'], s[LIMIT]['median_rate'])}, "
            f"worker/peer = {fmt_ratio(s[WORKER_ALL]['median_rate'], s[PEER]['median_rate'])} "
            f"(predictions=all); worker predictions=all by the stats method: {fmt_rate(ws)} rec/s"
        )
    mem = report.get("memory")
    if mem:
        say("")
        pts = ", ".join(
            f"after {p['records']:,}: {p['rss_mb']:,.0f} MB"
            for p in mem["milestones"]
            if p["rss_mb"] is not None
        )
        say(
            f"MEMORY (worker VmRSS, predictions=all): after the first ~{mem['first_stats_seen']:,} records "
            f"{mem['rss_after_first_batches_mb'] or 0:,.0f} MB; {pts}; "
            f"peak {mem['peak_rss_mb'] or 0:,.0f} MB "
            f"(run rate {fmt_rate(mem['run']['rate'])} rec/s)"
        )
    lat = report.get("latency")
    if lat:
        say("")
        say(latency_text(lat))
    sz = report.get("sizes")
    if sz:
        say("")
        say("COST AGAINST SIZE (predictions=all; median of runs)")
        headers, rows = sizes_table(sz, report["params"]["size_contenders"])
        say(format_table(headers, rows))
    prof = report.get("profile")
    if prof:
        say("")
        if "pyspy" in prof and "categories" in prof["pyspy"]:
            say(profile_text(prof))
        if "cprofile" in prof:
            cp = prof["cprofile"]
            say("")
            say("PROFILE (cProfile, main thread; times inflated by the profiler's per-call cost)")
            rows = cprofile_rows(cp)
            say(format_table(["function", "calls", "tottime s", "cumtime s"], rows))


# ============================================================================ main
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
        type=float,
        default=None,
        help="input rate for the latency run (default: half the worker's measured maximum)",
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
            "profile": args.profile,
            "profile_records": args.profile_records,
            "size_contenders": [LIMIT, PEER, WORKER_ALL],
            "worker_env": args.worker_env,
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
            "contenders": "each a separate process; pipe and peer use assign() (no group); the worker "
            "runs `python -m stream_perceptron.cli run --until-caught-up` with a fresh group, fresh "
            "output topics and checkpoint directory, SP_OBSERVE__ENABLED=false, other settings default",
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
        worker_max: float | None = None
        if "throughput" in args.sections:
            say(
                f"throughput: {args.records:,} records x {args.repeats} repeats "
                f"x {len(CONTENDERS)} contenders"
            )
            report["throughput"] = section_throughput(ctx, args.records, args.repeats, args.seed, say)
            worker_max = report["throughput"]["summary"][WORKER_ALL]["median_rate"]
        if "memory" in args.sections:
            ms = MEMORY_MILESTONES_QUICK if args.quick else MEMORY_MILESTONES_FULL
            say(f"memory: one worker run on {max(ms):,} records")
            report["memory"] = section_memory(ctx, ms, args.seed, say)
            worker_max = worker_max or report["memory"]["run"]["rate"]
        if "latency" in args.sections:
            rate = args.latency_rate or (worker_max / 2 if worker_max else 5000.0)
            say(f"latency: steady input at {rate:,.0f} rec/s for {args.latency_seconds:g} s")
            report["latency"] = section_latency(ctx, rate, args.latency_seconds, args.seed, say)
        if "sizes" in args.sections:
            say("sizes: worker records/s against the input's size (plus the limit and the peer)")
            report["sizes"] = section_sizes(
                ctx, args.records, args.sizes_repeats, args.quick, args.seed, [LIMIT, PEER, WORKER_ALL], say
            )
        if "profile" in args.sections:
            tools = ("cprofile", "pyspy") if args.profile == "both" else (args.profile,)
            say(f"profile: the worker on {args.profile_records:,} records with {', '.join(tools)}")
            report["profile"] = section_profile(ctx, args.profile_records, tools, args.seed, say)
        if args.bootstrap is not None:
            delete_topics(bootstrap, ctx.topics)
    finally:
        if broker is not None:
            broker.stop()
        report["loadavg_at_end"] = loadavg()
        report["wall_seconds"] = time.perf_counter() - t_all
        report["workdir"] = str(workdir) if args.keep_workdir or "profile" in args.sections else None
        if not (args.keep_workdir or "profile" in args.sections):
            shutil.rmtree(workdir, ignore_errors=True)
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
