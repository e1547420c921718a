"""The worker end to end on a Kafka-protocol broker, on each client backend: throughput against a
bare pipe of its own client and the Quix Streams + river peer, resident memory, latency at half
load, cost against size, events through a feature spec, and a profile. Run from the repository root
(docs/performance.md has the commands, "The command", the method, the targets and the run of
record); this module holds the command line and the order of the sections, ``bench/worker/`` the
sections and their parts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.worker import contenders as c
from bench.worker import sections as sec
from bench.worker.formatting import Say, fmt_rate, write_json
from bench.worker.machine import git_state, kafka_client_settings, machine_info
from bench.worker.measures import cpu_counters, loadavg, steal_share
from bench.worker.processes import Ctx, broker_at
from bench.worker.profile import PROFILE_RECORDS, section_profile
from bench.worker.report import print_report, render
from bench.worker.targets import evaluate_targets

MODULES = ("kafka", "crc32c", "confluent_kafka", "river", "numpy", "orjson")


def parse_rates(text: str | None) -> dict[str, float]:
    """``--latency-rate``: one rate for every backend (key ``*``), or ``backend=rate`` pairs."""
    if not text or "=" not in text:
        return {"*": float(text)} if text else {}
    split = (item.partition("=") for item in text.split(","))
    pairs = [(name.strip(), float(value)) for name, _, value in split]
    unknown = [name for name, _ in pairs if name not in c.BACKENDS]
    if unknown:
        raise ValueError(f"unknown backend {unknown[0]!r}")
    return dict(pairs)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.bench_worker", description=__doc__.split("\n\n")[0])
    add = p.add_argument
    add("--records", type=int, help=f"records per throughput run ({c.DEFAULT_RECORDS:,}; --quick 10,000)")
    add("--repeats", type=int, help=f"runs per contender ({c.DEFAULT_REPEATS}; --quick 1)")
    add("--bootstrap", help="host:port of a broker; default: start the embedded one")
    add("--json", type=Path, help="write everything to this file")
    add("--markdown", type=Path, help="also write the tables as Markdown")
    add("--from-json", type=Path, help="run nothing: print a saved report again")
    add("--quick", action="store_true", help="small sizes, 1 repeat, about 2 minutes")
    add("--only", help=f"comma-separated of {','.join(c.SECTIONS)} (default: all but events and profile)")
    add("--backends", default=",".join(c.BACKENDS), help=f"comma-separated of {', '.join(c.BACKENDS)}")
    add("--profile", default="none", choices=("none", "pyspy"),
        help="profile each one-process worker and its pipe with py-spy (wall time)")
    add("--profile-records", type=int, default=PROFILE_RECORDS)
    add("--latency-seconds", type=float, help="steady-rate phase (20; --quick 2)")
    add("--latency-rate", help="input rate of the latency runs: one for every backend, or kafka-python=N,"
        "confluent-kafka=M (default: half of each worker's measured maximum)")
    add("--latency-repeats", type=int, help="runs of each latency contender, interleaved (3; --quick 1)")
    add("--latency-extra-fetch-wait-ms", type=int, default=sec.LATENCY_EXTRA_FETCH_WAIT_MS,
        help="one more latency run of each one-process worker at this SP_KAFKA__FETCH_MAX_WAIT_MS (-1: none)")
    add("--session-timeout-ms", type=int, help="the worker's group session timeout (6000; --quick on the "
        "embedded broker: 2000); tansu holds a join for half of it")
    add("--sizes-repeats", type=int, help="repeats of the size runs (--repeats)")
    add("--event-formats", default="json,avro", help="events: the formats beside the envelope (json, avro)")
    add("--hash-bits", default="none,20", help="events: SP_MODEL__HASH_BITS (none: unset; the first judged)")
    add("--registry", help="events: a schema registry's URL for the Avro schema (default: start Apicurio)")
    add("--worker-env", action="append", default=[], metavar="SP_NAME=VALUE",
        help="an extra setting for every worker run (repeatable); the contender's own SP_KAFKA__BACKEND wins")
    add("--seed", type=int, default=c.DEFAULT_SEED)
    add("--keep-workdir", action="store_true", help="keep logs and checkpoints")
    add("--quiet", action="store_true")
    args = p.parse_args(argv)
    quick = args.quick
    args.records = args.records or (c.QUICK_RECORDS if quick else c.DEFAULT_RECORDS)
    args.repeats = args.repeats or (1 if quick else c.DEFAULT_REPEATS)
    args.sizes_repeats = args.sizes_repeats or args.repeats
    args.latency_seconds = args.latency_seconds or (2.0 if quick else 20.0)
    if args.latency_repeats is None:
        args.latency_repeats = 1 if quick else 3
    if args.session_timeout_ms is None:
        args.session_timeout_ms = 2000 if quick and args.bootstrap is None else 6000
    args.sections = set(c.SECTIONS[:-2] if args.only is None else args.only.split(","))  # not events, profile
    if args.profile != "none" and "events" not in args.sections:  # with events: its workers are profiled
        args.sections.add("profile")
    elif "profile" in args.sections:
        args.profile = "pyspy"
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    args.backends = [b for b in c.BACKENDS if b in backends]
    if args.latency_extra_fetch_wait_ms < 0:
        args.latency_extra_fetch_wait_ms = None
    unknown = args.sections - set(c.SECTIONS)
    problems = [f"unknown sections {sorted(unknown)}" if unknown else "",
                f"--backends wants some of {', '.join(c.BACKENDS)}"
                if not backends or set(backends) - set(c.BACKENDS) else "",
                "--records must be >= 10, --repeats and --latency-repeats >= 1"
                if args.records < 10 or args.repeats < 1 or args.latency_repeats < 1 else "",
                *(f"--worker-env wants SP_NAME=VALUE, got {item!r}" for item in args.worker_env
                  if not item.startswith("SP_") or "=" not in item)]
    try:
        args.latency_rates = parse_rates(args.latency_rate)
        args.hash_bits = [None if h == "none" else int(h) for h in args.hash_bits.split(",")]
    except ValueError as exc:
        problems.append(f"--latency-rate or --hash-bits: {exc}")
    args.event_formats = args.event_formats.split(",")
    if set(args.event_formats) - set(sec.EVENT_FORMATS):
        problems.append(f"--event-formats takes {', '.join(sec.EVENT_FORMATS)}")
    if any(problems):
        p.error("; ".join(filter(None, problems)))
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    say: Say = (lambda *a, **k: None) if args.quiet else (lambda *a, **k: print(*a, **k, flush=True))
    if args.from_json is not None:
        saved: dict[str, Any] = json.loads(args.from_json.read_text(encoding="utf-8"))
        print_report(saved, say)
        if args.markdown is not None:
            args.markdown.write_text(render(saved, markdown=True), encoding="utf-8")
        return saved
    t_all = time.perf_counter()
    if c.CF in args.backends and not c.confluent_available():
        say("confluent-kafka is not installed: measuring kafka-python only")
        args.backends = [b for b in args.backends if b != c.CF]
    workdir = Path(tempfile.mkdtemp(prefix="bench-worker-"))
    params = {k: v for k, v in vars(args).items() if k not in ("json", "markdown", "from_json", "sections")}
    report: dict[str, Any] = {
        "benchmark": "bench.bench_worker",
        "command": "python -m bench.bench_worker " + " ".join(argv if argv is not None else sys.argv[1:]),
        "params": {**params, "sections": sorted(args.sections)}, "source": git_state(),
        "client_settings": kafka_client_settings(),
    }
    backends, worker_max, steal = args.backends, {}, report.setdefault("cpu_steal", {})
    with contextlib.ExitStack() as stack:
        if not (args.keep_workdir or "profile" in args.sections):
            stack.callback(shutil.rmtree, workdir, True)
        bootstrap, broker_pid = stack.enter_context(broker_at(args.bootstrap))
        if "events" in args.sections and "avro" in args.event_formats and args.registry is None:
            from tests.schema_registry import Apicurio  # a real schema registry, stopped with the run

            args.registry = stack.enter_context(Apicurio()).url
        m = report["machine"] = machine_info(MODULES)
        with contextlib.suppress(ImportError):
            import confluent_kafka

            m["versions"]["librdkafka"] = confluent_kafka.libversion()[0]
        m["broker"] = f"embedded tansu at {bootstrap}" if broker_pid else f"external at {bootstrap}"
        say(f"machine: {m['cpu_model']} | {m['logical_cores']} cores | Python {m['python']} | "
            f"{m['broker']} | load {m['loadavg_at_start']}")
        ctx = Ctx(bootstrap, f"bw{int(time.time()) % 10**6}{os.getpid() % 1000}", workdir,
                  args.session_timeout_ms, broker_pid, dict(item.split("=", 1) for item in args.worker_env))
        counters = cpu_counters()
        tools = () if args.profile == "none" else (args.profile,)
        for section in (name for name in c.SECTIONS if name in args.sections):
            with ctx.scope():  # each section deletes its topics: see Ctx.scope
                if section == "throughput":
                    contenders = c.contenders_for(backends)
                    say(f"throughput: {args.records:,} records x {args.repeats} repeats x "
                        f"{len(contenders)} contenders")
                    report[section] = sec.section_throughput(ctx, args.records, args.repeats, args.seed, say,
                                                         contenders)
                    worker_max.update({b: r for b in backends
                                       if (r := report[section]["summary"][c.WORKER_OF[b]]["median_rate"])})
                elif section == "memory":
                    marks = sec.MEMORY_MILESTONES_QUICK if args.quick else sec.MEMORY_MILESTONES_FULL
                    say(f"memory: one worker run per backend on {max(marks):,} records")
                    report[section] = sec.section_memory(ctx, marks, args.seed, say, backends)
                    for b, r in report[section]["runs"].items():
                        if b not in worker_max and r["run"].get("rate"):
                            worker_max[b] = r["run"]["rate"]
                elif section == "latency":
                    given = args.latency_rates
                    rates = {b: given.get(b) or given.get("*") or worker_max.get(b, 10_000.0) / 2
                             for b in backends}
                    say("latency: steady input at " + ", ".join(f"{fmt_rate(r)} rec/s ({b})"
                                                                 for b, r in rates.items())
                        + f" for {args.latency_seconds:g} s each")
                    report[section] = sec.section_latency(ctx, rates, args.latency_seconds, args.seed, say,
                                                      extra_fetch_wait_ms=args.latency_extra_fetch_wait_ms,
                                                      repeats=args.latency_repeats)
                elif section == "events":
                    say(f"events: {args.records:,} records in each format x {args.repeats} repeats")
                    report[section] = sec.section_events(ctx, args.records, args.repeats, args.seed, say,
                                                         backends, args.event_formats, args.hash_bits,
                                                         args.registry, tools)
                elif section == "sizes":
                    say("sizes: the kafka-python worker, its pipe and the peer by the input's size")
                    report[section] = sec.section_sizes(ctx, args.records, args.sizes_repeats, args.quick,
                                                    args.seed, say)
                else:
                    say(f"profile: the worker on {args.profile_records:,} records with {', '.join(tools)}")
                    profiled = [b for b in backends if b != c.KPP]  # two processes: not profiled
                    report[section] = section_profile(ctx, args.profile_records, tools, args.seed, say,
                                                      profiled)
            steal[section], counters = steal_share(counters, now := cpu_counters()), now
    report.update(loadavg_at_end=loadavg(), source_at_end=git_state(),  # HEAD may move during a long run
                  wall_seconds=time.perf_counter() - t_all,
                  workdir=str(workdir) if workdir.exists() else None)
    report["targets"] = evaluate_targets(report)
    print_report(report, say)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(render(report, markdown=True), encoding="utf-8")
    if args.json is not None:
        write_json(args.json, report)
        say(f"wrote {args.json}")
    return report


if __name__ == "__main__":
    main()
