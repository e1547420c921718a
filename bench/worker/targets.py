"""The issue's targets, judged from a report: worker / own pipe, worker / river loop, memory
growth from 100k to 1M records, and p99 latency at half load."""

from __future__ import annotations

from typing import Any

from bench.worker.contenders import (
    BACKENDS,
    CF,
    KP,
    KPP,
    PEER,
    PIPE_CF_CODEC,
    PIPE_KP,
    PIPE_KP_APPEND,
    PIPE_OF,
    WORKER_OF,
)
from bench.worker.formatting import fmt_rate

# The targets (docs/performance.md)
TARGET_WORKER_OVER_PIPE = 0.9
TARGET_WORKER_OVER_PEER = 3.0
TARGET_MEMORY_GROWTH = 0.10  # RSS after 1M records within 10% of RSS after 100k
TARGET_P99_MS = 100.0  # at half of the worker's own maximum rate


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


def per_repeat_ratios(runs: dict[str, list[dict[str, Any]]], a: str, b: str) -> list[float]:
    """``a``'s rate over ``b``'s in each repeat both completed, in repeat order: how far a verdict
    drawn from the two medians moves from one repeat to the next.

    >>> runs = {"w": [{"repeat": 0, "rate": 9.0}, {"repeat": 1, "rate": 8.0}, {"repeat": 2, "rate": 7.0},
    ...               {"repeat": 3, "rate": 9.5, "complete": False}],
    ...         "p": [{"repeat": 1, "rate": 10.0}, {"repeat": 0, "rate": 10.0}, {"repeat": 2, "rate": None},
    ...               {"repeat": 3, "rate": 10.0}]}
    >>> per_repeat_ratios(runs, "w", "p")
    [0.9, 0.8]
    """
    rates_b = {r.get("repeat"): r.get("rate") for r in runs.get(b, []) if r.get("complete", True)}
    out = []
    for r in sorted(runs.get(a, []), key=lambda r: r.get("repeat", 0)):
        mine, theirs = r.get("rate"), rates_b.get(r.get("repeat"))
        if mine and theirs and r.get("complete", True):
            out.append(mine / theirs)
    return out


def _each_repeat(runs: dict[str, list[dict[str, Any]]], a: str, b: str, goal: float) -> str:
    ratios = per_repeat_ratios(runs, a, b)
    if len(ratios) < 2:
        return ""
    return "; per repeat: " + ", ".join(_apart(v, goal, 2) for v in ratios)


# per backend, the pipe beside its bare one that the worker is also shown against, and its name
_SHOWN_AGAINST = {
    # the client at its fastest, as the worker's edge uses it: the worker's own work shows alone
    KP: (PIPE_KP_APPEND, "the pipe appending a poll at once, as the worker does"),
    # the least any worker reading and writing these records with the worker's codec costs: the
    # worker's learning and bookkeeping show alone, and its ratio to the bare pipe bounds the worker
    CF: (PIPE_CF_CODEC, "the pipe with the worker's codec, fixed model"),
}


def _against_other_pipe(backend: str, worker: float, pipe: float, tp: dict[str, Any]) -> str:
    """The worker of ``backend`` against the pipe of :data:`_SHOWN_AGAINST`, beside its target.

    >>> line = _against_other_pipe(KP, 40_000.0, 30_000.0, {PIPE_KP_APPEND: {"median_rate": 50_000.0}})
    >>> print(*line.split(": "), sep="\\n")
    ; the pipe appending a poll at once, as the worker does
    50,000 rec/s (1.67 x the bare pipe; worker / it 0.80)
    >>> line = _against_other_pipe(CF, 30_000.0, 100_000.0, {PIPE_CF_CODEC: {"median_rate": 50_000.0}})
    >>> print(*line.split(": "), sep="\\n")
    ; the pipe with the worker's codec, fixed model
    50,000 rec/s (0.50 x the bare pipe; worker / it 0.60)
    >>> _against_other_pipe(KP, 40_000.0, 30_000.0, {}), _against_other_pipe(KPP, 1.0, 1.0, {})
    ('', '')
    """
    label, name = _SHOWN_AGAINST.get(backend, ("", ""))
    rate = (tp.get(label) or {}).get("median_rate")
    if not rate:
        return ""
    return (
        f"; {name}: {fmt_rate(rate)} rec/s ({rate / pipe:.2f} x the bare pipe; "
        f"worker / it {worker / rate:.2f})"
    )


def evaluate_targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The four targets, per backend measured: worker ≥ 0.9 × its own client's bare pipe; worker ≥
    3 × the river loop; RSS after 1M records within 10% of RSS after 100k; p99 ≤ 100 ms at half of
    the worker's own maximum rate (default settings)."""
    out: list[dict[str, Any]] = []
    tp = (report.get("throughput") or {}).get("summary") or {}
    tp_runs = (report.get("throughput") or {}).get("runs") or {}
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
                    "detail": f"{fmt_rate(w)} vs {fmt_rate(pipe)} rec/s"
                    + _each_repeat(tp_runs, WORKER_OF[b], PIPE_OF[b], TARGET_WORKER_OVER_PIPE)
                    + _against_other_pipe(b, w, pipe, tp),
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


def _decimals(a: float, b: float, least: int) -> int:
    """The fewest decimals, at least ``least``, that print ``a`` and ``b`` apart (at most 6), so
    that a value just short of its goal never prints as the goal itself.

    >>> _decimals(0.8976, 0.9, 2), _decimals(0.6, 0.9, 2), _decimals(0.9, 0.9, 2)
    (3, 2, 2)
    """
    if a == b:
        return least
    d = least
    while d < 6 and f"{a:.{d}f}" == f"{b:.{d}f}":
        d += 1
    return d


def _apart(a: float | None, b: float, least: int, *, scale: float = 1.0, unit: str = "") -> str:
    """``a`` (times ``scale``) printed so that it never reads as ``b``: more decimals as needed,
    and past six of them a ``<`` or ``>`` in front.

    >>> _apart(0.8976, 0.9, 2), _apart(0.9, 0.9, 2), _apart(0.9 * (1 - 1e-12), 0.9, 2)
    ('0.898', '0.90', '<0.900000')
    >>> _apart(0.10004, 0.10, 1, scale=100, unit="%"), _apart(100.5, 100.0, 0, unit=" ms")
    ('10.004%', '100.5 ms')
    >>> _apart(None, 1.0, 2)
    'n/a'
    """
    if a is None:
        return "n/a"
    x, y = a * scale, b * scale
    d = _decimals(x, y, least)
    text = f"{x:.{d}f}"
    if a != b and text == f"{y:.{d}f}":
        text = ("<" if a < b else ">") + text
    return text + unit


def target_line(t: dict[str, Any]) -> str:
    """One target as a line of text.

    >>> target_line(target_check("worker / pipe", "kafka-python", 0.6, 0.9))
    'NOT MET  kafka-python     worker / pipe: 0.60 (goal >= 0.90): missed by 33% (needs 1.50x)'
    >>> target_line(target_check("worker / pipe", "kafka-python", 34_710 / 38_669, 0.9))
    'NOT MET  kafka-python     worker / pipe: 0.898 (goal >= 0.90): missed by 0.3% (needs 1.003x)'
    """
    v, g = t["value"], t["goal"]
    fraction = g < 1 and not t["higher_is_better"]  # memory growth
    if "latency" in t["target"]:
        vs, gs = _apart(v, g, 0, unit=" ms"), f"{g:.0f} ms"
    elif fraction:
        vs, gs = _apart(v, g, 1, scale=100, unit="%"), f"{g:.0%}"
    else:
        vs, gs = _apart(v, g, 2), f"{g:.2f}"
    op = ">=" if t["higher_is_better"] else "<="
    verdict = {True: "MET", False: "NOT MET", None: "n/a"}[t["met"]]
    line = f"{verdict:<8} {t['backend']:<16} {t['target']}: {vs} (goal {op} {gs})"
    if t["met"] is False and fraction:
        line += f": missed by {_apart(v - g, 0.0, 1, scale=100)} percentage points"
    elif t["met"] is False:
        line += (f": missed by {_apart(t['missed_by'], 0.0, 0, scale=100, unit='%')}"
                 f" (needs {_apart(t['factor_needed'], 1.0, 2, unit='x')})")
    if t.get("detail"):
        line += f"; {t['detail']}"
    return line
