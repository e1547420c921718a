"""The targets judged from a report: worker ≥ 0.9 × its own client's bare pipe, worker ≥ 5 × the
Quix Streams + river application, memory at 1M records within 10% of memory at 100k, p99 ≤ 100 ms
at half load; and with the events section, events ≥ 0.6 × the envelope's records/s."""

from __future__ import annotations

from typing import Any

from bench.worker import contenders as c
from bench.worker.formatting import fmt_rate

TARGET_WORKER_OVER_PIPE = 0.9
TARGET_WORKER_OVER_PEER = 5.0
TARGET_MEMORY_GROWTH = 0.10  # RSS after 1M records within 10% of RSS after 100k
TARGET_P99_MS = 100.0  # at half of the worker's own maximum rate
TARGET_EVENTS_OVER_ENVELOPE = 0.6  # the same examples, at the first hash setting measured
# per backend, the pipe beside its bare one that the worker is also shown against, and its name
_SHOWN_AGAINST = {c.KP: (c.PIPE_KP_APPEND, "the pipe appending a poll at once, as the worker does"),
                  c.CF: (c.PIPE_CF_CODEC, "the pipe with the worker's codec, fixed model")}


def target_check(target: str, backend: str, value: float | None, goal: float, *,
                 higher_is_better: bool = True, detail: str = "") -> dict[str, Any]:
    """One target: met or not, by how much it is missed (a fraction of the goal) and the factor
    the value would have to improve by."""
    met = None if value is None else value >= goal if higher_is_better else value <= goal
    out = {"target": target, "backend": backend, "value": value, "goal": goal, "met": met,
           "higher_is_better": higher_is_better, "missed_by": None, "factor_needed": None, "detail": detail}
    if value is not None and not met:
        out["missed_by"] = (goal - value) / goal if higher_is_better else (value - goal) / goal
        out["factor_needed"] = (goal / value if value else None) if higher_is_better else value / goal
    return out


def per_repeat_ratios(runs: dict[str, list[dict[str, Any]]], a: str, b: str) -> list[float]:
    """``a``'s rate over ``b``'s in each repeat both completed, in repeat order: how far a verdict
    drawn from the two medians moves from one repeat to the next; a repeat either left
    incomplete or without a rate is left out."""
    theirs = {r.get("repeat"): r.get("rate") for r in runs.get(b, []) if r.get("complete", True)}
    mine = sorted(runs.get(a, []), key=lambda r: r.get("repeat", 0))
    return [r["rate"] / theirs[r.get("repeat")] for r in mine
            if r.get("rate") and theirs.get(r.get("repeat")) and r.get("complete", True)]


def _against_other_pipe(backend: str, worker: float, pipe: float, summary: dict[str, Any]) -> str:
    """The worker of ``backend`` against the pipe of :data:`_SHOWN_AGAINST`, beside its target."""
    label, name = _SHOWN_AGAINST.get(backend, ("", ""))
    rate = (summary.get(label) or {}).get("median_rate")
    if not rate:
        return ""
    return (f"; {name}: {fmt_rate(rate)} rec/s ({rate / pipe:.2f} x the bare pipe; "
            f"worker / it {worker / rate:.2f})")


def evaluate_targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets, per backend measured (the p99 target for each worker run at default settings)."""
    out: list[dict[str, Any]] = []
    tp = (report.get("throughput") or {}).get("summary") or {}
    tp_runs = (report.get("throughput") or {}).get("runs") or {}

    def rate(label: str) -> float | None:
        return (tp.get(label) or {}).get("median_rate")  # type: ignore[no-any-return]

    def ratio(what: str, b: str, w: float, than: float, goal: float, detail: str) -> None:
        out.append(target_check(f"worker >= {goal:g} x {what}", b, w / than, goal,
                                detail=f"{fmt_rate(w)} vs {fmt_rate(than)} rec/s{detail}"))

    for b in c.BACKENDS:
        w, pipe, peer, one_process = rate(c.WORKER_OF[b]), rate(c.PIPE_OF[b]), rate(c.PEER), rate(c.PIPE_KP)
        if w is not None and pipe:
            each = per_repeat_ratios(tp_runs, c.WORKER_OF[b], c.PIPE_OF[b])
            shown = ", ".join(_apart(v, TARGET_WORKER_OVER_PIPE, 2) for v in each)
            ratio("its own client's bare pipe", b, w, pipe, TARGET_WORKER_OVER_PIPE,
                  (f"; per repeat: {shown}" if len(each) > 1 else "") + _against_other_pipe(b, w, pipe, tp))
        if b == c.KPP and w is not None and one_process:
            ratio("the one-process kafka-python pipe", b, w, one_process, TARGET_WORKER_OVER_PIPE,
                  "; the worker uses two processes, that pipe one")
        if w is not None and peer:
            ratio("the Quix Streams + river application", b, w, peer, TARGET_WORKER_OVER_PEER, "")
    for b in c.BACKENDS:
        for key, what in (("rss_mb", "VmRSS"), ("hwm_mb", "VmHWM (peak so far)")):
            ms = ((report.get("memory") or {}).get("runs") or {}).get(b, {}).get("milestones", [])
            pts = {p["records"]: p.get(key) for p in ms if p.get(key)}
            if 100_000 in pts and 1_000_000 in pts:
                growth = pts[1_000_000] / pts[100_000] - 1
                out.append(target_check(
                    f"{what} after 1M records within {TARGET_MEMORY_GROWTH:.0%} of after 100k", b,
                    abs(growth), TARGET_MEMORY_GROWTH, higher_is_better=False,
                    detail=f"{pts[100_000]:,.0f} MB -> {pts[1_000_000]:,.0f} MB ({growth:+.1%})"))
    lat = report.get("latency") or {}
    for run in lat.get("summary") or lat.get("runs") or []:
        if run.get("kind") == "worker" and not run.get("extra_env") and "p99_ms" in run["latency"]:
            each = ", ".join(f"{v:.0f}" for v in run.get("p99_each_ms", []))
            detail = f"at {fmt_rate(run['achieved_input_rate'])} rec/s, p50 {run['latency']['p50_ms']:.0f} ms"
            detail += f"; p99 of the {run['repeats']} runs: {each} ms" if run.get("repeats", 1) > 1 else ""
            out.append(target_check(f"p99 latency <= {TARGET_P99_MS:g} ms at half load", run["backend"],
                                    run["latency"]["p99_ms"], TARGET_P99_MS, higher_is_better=False,
                                    detail=detail))
    ev, goal = report.get("events") or {}, TARGET_EVENTS_OVER_ENVELOPE
    for r in ev.get("rows", []):
        if r["format"] != "envelope" and r["hash_bits"] == ev["hash_bits"][0]:
            each = ", ".join(_apart(v, goal, 2) for v in r["per_repeat"])
            out.append(target_check(f"{r['format']} events >= {goal:g} x the envelope", r["backend"],
                                    r["ratio"], goal, detail=f"hash bits {r['hash_bits']}, runs {each}"))
    return out


def _apart(a: float | None, b: float, least: int, *, scale: float = 1.0, unit: str = "") -> str:
    """``a`` (times ``scale``) printed so that it never reads as ``b``: at least ``least``
    decimals, more as needed, and past six of them a ``<`` or ``>`` in front."""
    if a is None:
        return "n/a"
    x, y = a * scale, b * scale
    d = least
    while a != b and d < 6 and f"{x:.{d}f}" == f"{y:.{d}f}":
        d += 1
    text = f"{x:.{d}f}"
    if a != b and text == f"{y:.{d}f}":
        text = ("<" if a < b else ">") + text
    return text + unit


def target_line(t: dict[str, Any]) -> str:
    """One target as a line of text."""
    v, g = t["value"], t["goal"]
    fraction = g < 1 and not t["higher_is_better"]  # memory growth
    if "latency" in t["target"]:
        vs, gs = _apart(v, g, 0, unit=" ms"), f"{g:.0f} ms"
    elif fraction:
        vs, gs = _apart(v, g, 1, scale=100, unit="%"), f"{g:.0%}"
    else:
        vs, gs = _apart(v, g, 2), f"{g:.2f}"
    verdict = {True: "MET", False: "NOT MET", None: "n/a"}[t["met"]]
    op = ">=" if t["higher_is_better"] else "<="
    line = f"{verdict:<8} {t['backend']:<16} {t['target']}: {vs} (goal {op} {gs})"
    if t["met"] is False and fraction:
        line += f": missed by {_apart(v - g, 0.0, 1, scale=100)} percentage points"
    elif t["met"] is False:
        line += (f": missed by {_apart(t['missed_by'], 0.0, 0, scale=100, unit='%')}"
                 f" (needs {_apart(t['factor_needed'], 1.0, 2, unit='x')})")
    return line + (f"; {t['detail']}" if t.get("detail") else "")
