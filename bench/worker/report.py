"""The report: its tables, printed to the terminal or rendered as Markdown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.worker import contenders as c
from bench.worker.formatting import Say, fmt_rate, fmt_ratio, fmt_value, format_table
from bench.worker.sections import PERCENTILES
from bench.worker.targets import target_line

Table = tuple[list[str], list[list[Any]]]
THROUGHPUT_ALIGN = "lrrrrrrrrrrrl"


def throughput_table(tp: dict[str, Any]) -> Table:
    s = tp["summary"]
    peer = (s.get(c.PEER) or {}).get("median_rate")
    headers = ["contender", "records", "median rec/s", "spread", "runs", "x own pipe", "x peer",
               "incl. flush", "cores", "CPU us/rec", "broker cores", "peak RSS MB", "measured by"]
    rows = []
    for name in tp.get("contenders") or list(s):
        e, spec = s[name], c.SPECS[name]
        stats_method = spec.kind == "worker" and spec.predictions == "none"
        rows.append([
            name, f"{tp['input']['n']:,}", fmt_rate(e["median_rate"]), f"{e.get('spread', 0):.0%}",
            f"{e['runs']}" + (f" ({e['runs_left_out']} left out)" if e.get("runs_left_out") else ""),
            fmt_ratio(e["median_rate"], (s.get(c.PIPE_OF[spec.backend]) or {}).get("median_rate")),
            fmt_ratio(e["median_rate"], peer),
            fmt_rate(e.get("median_rate_incl_flush")) if spec.kind != "worker" else "",
            fmt_value(e.get("median_cpu_cores"), ".2f"), fmt_value(e.get("median_cpu_us_per_record"), ".1f"),
            fmt_value(e.get("median_broker_cpu_cores"), ".2f"),
            fmt_value(e.get("median_peak_rss_mb"), ",.0f"),
            "stats records" if stats_method else "output CreateTime",
        ])
    return headers, rows


def memory_table(mem: dict[str, Any]) -> Table:
    runs = mem.get("runs") or {}
    backends = [b for b in c.BACKENDS if b in runs]
    rows: list[list[Any]] = [["VmRSS after the first statistics record (~5k records)"]
                             + [fmt_value(runs[b]["rss_after_first_batches_mb"], ",.0f") for b in backends]]
    marks = sorted({pt["records"] for b in backends for pt in runs[b]["milestones"]})
    for key, what in (("rss_mb", "VmRSS (median of +-0.5 s)"), ("hwm_mb", "VmHWM (peak so far)")):
        at = {b: {p["records"]: p.get(key) for p in runs[b]["milestones"]} for b in backends}
        rows += [[f"{what} after {mark:,} records"] + [fmt_value(at[b].get(mark), ",.0f") for b in backends]
                 for mark in marks]
        if {100_000, 1_000_000} <= set(marks):
            rows.append([f"{what}: 1M vs 100k"] + [f"{at[b][1_000_000] / at[b][100_000] - 1:+.1%}"
                                                   if at[b].get(100_000) and at[b].get(1_000_000) else "n/a"
                                                   for b in backends])
    rows.append(["VmHWM at the end of the run"] + [fmt_value(runs[b]["vm_hwm_mb"], ",.0f") for b in backends])
    trends = {b: runs[b].get("rss_from_100k") or {} for b in backends}
    if any(t.get("points") for t in trends.values()):
        rows.append(["VmRSS from 100k to the end: min-max; trend per 100k records"] + [
            f"{fmt_value(t.get('min_mb'), '.0f')}-{fmt_value(t.get('max_mb'), '.0f')}; "
            f"{fmt_value(t.get('slope_mb_per_100k_records'), '+.1f')} MB" if t.get("points") else "n/a"
            for t in trends.values()])
    return ["worker memory, predictions=all"] + [f"{b} MB" for b in backends], rows


def _span(values: Sequence[float] | None) -> str:
    return f"{fmt_rate(min(values))}-{fmt_rate(max(values))}" if values else "n/a"


def long_run_table(mem: dict[str, Any]) -> Table | None:
    """Worker and pipe rates on the memory section's long input (one run each)."""
    runs, pipes = mem.get("runs") or {}, mem.get("pipes_long_run") or {}
    rows = [[b, f"{pipes[b]['records']:,}", fmt_rate(pipes[b]["rate"]),
             fmt_rate(pipes[b].get("own_rate_first_poll_to_flush")),
             _span(pipes[b].get("rates_per_100k_records")),
             fmt_value(pipes[b].get("cpu_cores_in_window"), ".2f"),
             fmt_value(pipes[b].get("broker_cpu_cores_in_window"), ".2f"), fmt_rate(runs[b]["run"]["rate"]),
             _span(runs[b]["run"].get("rates_per_100k_records")),
             fmt_value(runs[b]["run"].get("cpu_cores_in_window"), ".2f"),
             fmt_ratio(runs[b]["run"]["rate"], pipes[b]["rate"])]
            for b in c.BACKENDS if b in runs and b in pipes]
    headers = ["client", "records", "pipe rec/s", "pipe incl. flush", "pipe per 100k: min-max", "pipe cores",
               "broker cores", "worker rec/s", "worker per 100k: min-max", "worker cores", "worker / pipe"]
    return (headers, rows) if rows else None


def latency_table(lat: dict[str, Any]) -> Table:
    headers = ["contender", "runs", "target rec/s", "input rec/s", "records", "p50 ms", "p90 ms", "p99 ms",
               "p99.9 ms", "max ms", "p99 range ms", "cores"]
    rows = []
    for r in lat.get("summary") or lat["runs"]:
        la = r["latency"]
        ranged = r.get("repeats", 1) > 1 and r.get("p99_min_ms") is not None
        rows.append([r["name"], r.get("repeats", 1), fmt_rate(r["rate"]), fmt_rate(r["achieved_input_rate"]),
                     f"{la['matched']:,}", *(f"{la.get(k, 0):.0f}" for k in PERCENTILES),
                     f"{r['p99_min_ms']:.0f}-{r['p99_max_ms']:.0f}" if ranged else "",
                     fmt_value(r.get("contender_cpu_cores"), ".2f")])
    return headers, rows


def sizes_table(sz: dict[str, Any]) -> Table:
    short = {c.PIPE_KP: "pipe", c.PEER: "peer", c.WORKER_KP: "worker"}
    names = sz.get("contenders") or [c.PIPE_KP, c.PEER, c.WORKER_KP]
    headers = ["input", "records", "bytes/rec", *(f"{short[n]} rec/s" for n in names), "worker/pipe",
               "worker/peer", "worker peak RSS MB"]
    rows = []
    for v in sz["variants"]:
        med = {n: v["summary"][n]["median_rate"] for n in names}
        peaks = [(r.get("memory") or {}).get("peak_rss_mb") or 0 for r in v["runs"][c.WORKER_KP]]
        rows.append([v["label"], f"{v['records']:,}", f"{v['input']['mean_bytes']:,.0f}",
                     *(fmt_rate(med[n]) for n in names), fmt_ratio(med[c.WORKER_KP], med[c.PIPE_KP]),
                     fmt_ratio(med[c.WORKER_KP], med[c.PEER]), f"{max(peaks):,.0f}" if any(peaks) else "n/a"])
    return headers, rows


def events_table(ev: dict[str, Any]) -> Table:
    """Per backend, hash setting and format: the median rate and CPU per record, and their ratios to
    the envelope's (of the medians, and repeat by repeat)."""
    def x(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}x"

    return ["backend", "hash bits", "format", "bytes/rec", "median rec/s", "spread", "runs", "x envelope",
            "per repeat", "CPU us/rec", "CPU x envelope", "mistakes"], [
        [r["backend"], r["hash_bits"] or "none", r["format"], f"{ev['input']['mean_bytes'][r['format']]:.0f}",
         fmt_rate(s["median_rate"]), f"{s.get('spread', 0):.0%}",
         f"{s['runs']}" + (f" ({s['runs_left_out']} left out)" if s["runs_left_out"] else ""), x(r["ratio"]),
         ", ".join(map(x, r["per_repeat"])), fmt_value(s["median_cpu_us_per_record"], ".1f"),
         x(r["cpu_ratio"]), "/".join(map(str, r["mistakes"]))] for r in ev["rows"] for s in [r["summary"]]]


def profile_text(entry: dict[str, Any], records: int, markdown: bool = False) -> str:
    """One backend's py-spy summary: the worker by its own stages, then (if profiled) worker and
    pipe side by side."""
    ps, pipe, b = entry["pyspy"], entry.get("pyspy_pipe"), entry.get("backend", c.KP)
    run = f"run rate {fmt_rate((ps.get('run') or {}).get('rate'))} rec/s while sampled"
    about = (f"py-spy --idle at {ps['hz']} Hz (wall time, so waiting for the GIL counts where it "
             f"happens), worker main thread, {records:,} records, predictions=all; the group join "
             f"({ps['group_join_s'] or 0:.1f} s) is taken out of poll; {run}")
    stages = [[r["category"], f"{r['seconds']:.2f}", f"{r['us_per_record']:.1f}",
               "" if r["share_of_processing"] is None else f"{r['share_of_processing']:.0%}"]
              for r in ps["categories"]]
    wl = {r["category"]: r for r in ps["library"]}
    pl = {r["category"]: r for r in pipe["library"]} if pipe else {}
    calls = [[k, *("" if x is None else f"{x['us_per_record']:.1f}" for x in (wl.get(k), pl.get(k)))]
             for k in dict.fromkeys([*wl, *pl])]
    return "\n\n".join([
        f"PROFILE ({b}): {about}",
        format_table(["category", "seconds", "us/record", "share of processing"], stages, markdown=markdown),
        *([f"client-library calls per record, worker vs the bare {b} pipe (same records, same client "
           f"settings); pipe rate {fmt_rate(pipe['rate'])} rec/s while sampled",
           format_table(["category", "worker us/record", "pipe us/record"], calls, markdown=markdown)]
          if pipe else [])])


def targets_text(targets: Sequence[dict[str, Any]], markdown: bool = False) -> str:
    if not markdown:
        return "\n".join(target_line(t) for t in targets)
    rows = []
    for t in targets:
        verdict = {True: "MET", False: "NOT MET", None: "n/a"}[t["met"]]
        rest = target_line(t)[len(verdict):].strip()
        rows.append([f"**{verdict}**" if t["met"] is False else verdict, rest])
    return format_table(["verdict", "target"], rows, "ll", markdown=True)


def steal_text(steal: dict[str, float | None] | None) -> str:
    """The CPU steal of each section, as a sentence for the machine line."""
    known = ", ".join(f"{k} {100 * v:.1f}%" for k, v in (steal or {}).items() if v is not None)
    return f" CPU steal (time the hypervisor gave to other guests): {known}." if known else ""


def render(report: dict[str, Any], markdown: bool = False) -> str:
    """The whole report as text, or as Markdown (for docs/performance.md)."""
    m, src, params = report["machine"], report.get("source") or {}, report["params"]
    versions = ", ".join(f"{k} {v or 'not installed'}" for k, v in m.get("versions", {}).items())
    parts = [f"Machine: {m['cpu_model']}, {m['logical_cores']} logical cores ({m['usable_cores']} usable), "
             f"{m['memory_gb']} GB; {m['platform']}; Python {m['python']}; {versions}; broker: "
             f"{m.get('broker')}. Load average at start {m['loadavg_at_start']}, at end "
             f"{report.get('loadavg_at_end')}; wall time "
             f"{report.get('wall_seconds', 0):.0f} s; commit {(src.get('commit') or '?')[:10]} "
             f"({src.get('changed_files')} changed files in the tree).{steal_text(report.get('cpu_steal'))}"]
    if params.get("quick"):
        parts.append("--quick: small sizes, one run each: a smoke test of the benchmark, not a measurement")

    def table(t: Table, align: str | None = None) -> str:
        return format_table(*t, align, markdown=markdown)

    if tp := report.get("throughput"):
        parts += [f"THROUGHPUT: the same {tp['input']['n']:,} input records (d={tp['input']['d']}, "
                  f"~{tp['input']['mean_bytes']:.0f} bytes), median of {params['repeats']} interleaved runs",
                  table(throughput_table(tp), THROUGHPUT_ALIGN)]
    if (mem := report.get("memory")) and mem.get("runs"):
        parts += ["MEMORY (worker VmRSS, predictions=all, one run per backend on the same records)",
                  table(memory_table(mem))]
        if long_run := long_run_table(mem):
            parts += ["LONG RUN: worker (the memory run) and pipe on the same records, one run each",
                      table(long_run)]
    if (lat := report.get("latency")) and lat.get("runs"):
        rates = ", ".join(f"{b} {fmt_rate(v)} rec/s" for b, v in lat["target_rates"].items())
        parts += [f"LATENCY at half of each worker's maximum ({rates}), {lat['seconds']:g} s each; "
                  f"medians of {lat.get('repeats', 1)} interleaved runs", table(latency_table(lat))]
    if sz := report.get("sizes"):
        parts += ["COST AGAINST SIZE (kafka-python, predictions=all; median of runs)", table(sizes_table(sz))]
    if ev := report.get("events") or {}:
        parts += [f"EVENTS: the same {ev['input']['n']:,} examples as envelope records and as events through "
                  "a feature spec of 10 numeric, 3 categorical and 1 list field, predictions=all; medians of "
                  f"{params['repeats']} interleaved runs; x envelope: over the envelope's, same backend and "
                  "hash bits", table(events_table(ev), "lrlrrrlrlrrl")]
    prof = report.get("profile") or {}
    profiled = [(prof["backends"][b], prof["records"]) for b in c.BACKENDS if b in prof.get("backends", {})]
    profiled += [(e, ev["input"]["n"]) for e in ev.get("profile", {}).values()]
    for entry, records in profiled:
        if "categories" in (entry.get("pyspy") or {}):
            parts.append(profile_text(entry, records, markdown))
    if report.get("targets"):
        parts += ["TARGETS", targets_text(report["targets"], markdown)]
    return "\n\n".join(parts) + "\n"


def print_report(report: dict[str, Any], say: Say) -> None:
    say("\n" + render(report))
