"""The report: its tables, printed to the terminal and rendered as Markdown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.worker.contenders import (
    BACKENDS,
    KP,
    KPP,
    LIMIT,
    PEER,
    PIPE_CF,
    PIPE_KP,
    PIPE_OF,
    SPECS,
    WORKER_ALL,
    WORKER_CF,
    WORKER_KP,
    WORKER_OF,
)
from bench.worker.formatting import Say, fmt_rate, fmt_ratio, fmt_value, format_table, markdown_table
from bench.worker.targets import target_line
from bench.worker.throughput import throughput_ratios

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
                f"{e['runs']}" + (f" ({e['runs_left_out']} left out)" if e.get("runs_left_out") else ""),
                fmt_ratio(e["median_rate"], own),
                fmt_ratio(e["median_rate"], peer),
                fmt_rate(e.get("median_rate_incl_flush")) if spec.kind != "worker" else "",
                fmt_value(e.get("median_cpu_cores"), ".2f"),
                fmt_value(e.get("median_cpu_us_per_record"), ".1f"),
                fmt_value(e.get("median_broker_cpu_cores"), ".2f"),
                fmt_value(e.get("median_peak_rss_mb"), ",.0f"),
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
            f"{b}: worker / own pipe = {fmt_value(r['worker_over_own_pipe'], '.2f')}x, "
            f"worker / peer = {fmt_value(r['worker_over_peer'], '.2f')}x, "
            f"worker predictions=none / own pipe = {fmt_value(r['worker_none_over_own_pipe'], '.2f')}x; "
            f"worker by the stats method {fmt_rate(stats_rate)} rec/s"
        )
        if r.get("worker_over_appending_pipe") is not None:
            line += f"; worker / appending pipe = {r['worker_over_appending_pipe']:.2f}x"
        if r.get("worker_over_codec_pipe") is not None:
            line += f"; worker / codec pipe = {r['worker_over_codec_pipe']:.2f}x"
        if r.get("codec_pipe_over_own_pipe") is not None:
            line += f"; codec pipe / own pipe = {r['codec_pipe_over_own_pipe']:.2f}x"
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
        + [fmt_value(runs[b]["rss_after_first_batches_mb"], ",.0f") for b in backends]
    ]
    milestones = sorted({pt["records"] for b in backends for pt in runs[b]["milestones"]})
    for key, what in (("rss_mb", "VmRSS (median of +-0.5 s)"), ("hwm_mb", "VmHWM (peak so far)")):
        for m in milestones:
            row: list[Any] = [f"{what} after {m:,} records"]
            for b in backends:
                pt = next((x for x in runs[b]["milestones"] if x["records"] == m), None)
                row.append(fmt_value(pt.get(key), ",.0f") if pt else "n/a")
            rows.append(row)
        if 100_000 in milestones and 1_000_000 in milestones:
            row = [f"{what}: 1M vs 100k"]
            for b in backends:
                pts = {x["records"]: x.get(key) for x in runs[b]["milestones"]}
                a, z = pts.get(100_000), pts.get(1_000_000)
                row.append(f"{z / a - 1:+.1%}" if a and z else "n/a")
            rows.append(row)
    rows.append(["VmHWM at the end of the run"] + [fmt_value(runs[b]["vm_hwm_mb"], ",.0f") for b in backends])
    if any(runs[b].get("rss_from_100k") for b in backends):
        row = ["VmRSS from 100k to the end: min-max; trend per 100k records"]
        for b in backends:
            t = runs[b].get("rss_from_100k") or {}
            row.append(
                f"{fmt_value(t.get('min_mb'), '.0f')}-{fmt_value(t.get('max_mb'), '.0f')}; "
                f"{fmt_value(t.get('slope_mb_per_100k_records'), '+.1f')} MB"
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
                    fmt_value(pipes[b].get("cpu_cores_in_window"), ".2f"),
                    fmt_value(pipes[b].get("broker_cpu_cores_in_window"), ".2f"),
                    fmt_rate(w),
                    _span(runs[b]["run"].get("rates_per_100k_records")),
                    fmt_value(runs[b]["run"].get("cpu_cores_in_window"), ".2f"),
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
            + [spread, fmt_value(r.get("contender_cpu_cores"), ".2f")]
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


# an entry's py-spy summaries: --idle, --gil, and --gil of the producer process (its child)
PYSPY_KEYS = ("pyspy", "pyspy_gil", "pyspy_gil_child")


def profile_text(entry: dict[str, Any], records: int, markdown: bool = False, key: str = "pyspy") -> str:
    """One backend's py-spy summary (``key``: ``pyspy``, sampled ``--idle``, or ``pyspy_gil``,
    sampled ``--gil``): the worker by its own steps, then worker and pipe side by side."""
    table = markdown_table if markdown else format_table
    ps, pipe = entry[key], entry.get(f"{key}_pipe")
    b = entry.get("backend", KP)
    head = ["category", "seconds", "us/record", "share of processing"]
    run = f"run rate {fmt_rate((ps.get('run') or {}).get('rate'))} rec/s while sampled"
    if ps.get("mode") == "--gil":
        which = "the producer process (the child), " if ps.get("process", 1) > 1 else ""
        about = (
            f"py-spy --gil at {ps['hz']} Hz (only the thread holding the GIL: how the one core of the "
            f"process's Python is shared out; seconds at the nominal rate), {which}{records:,} records, "
            f"predictions=all; {run}"
        )
    else:
        about = (
            f"py-spy --idle at {ps['hz']} Hz (wall time, so waiting for the GIL counts where "
            f"it happens), worker main thread, {records:,} records, predictions=all; the group join "
            f"({ps['group_join_s'] or 0:.1f} s) is taken out of poll; {run}"
        )
    parts = [
        f"PROFILE ({b}): {about}",
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
        for key in PYSPY_KEYS:
            if "categories" in (entry.get(key) or {}):
                out += ["", profile_text(entry, prof["records"], markdown=True, key=key)]
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
        for key in PYSPY_KEYS:
            if "categories" in (entry.get(key) or {}):
                say("")
                say(profile_text(entry, prof["records"], key=key))
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
