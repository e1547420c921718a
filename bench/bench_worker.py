"""End-to-end benchmark of the worker on a Kafka-protocol broker, on both of its client backends:
throughput against a bare pipe of the same client and a hand-written river loop, resident memory,
latency at half load, cost against size, and (optionally) a profile of the worker.

Run from the repository root::

    .venv/bin/python -m bench.bench_worker                      # 100k records, 3 repeats, ~30 min
    .venv/bin/python -m bench.bench_worker --quick              # small sizes, 1 repeat, ~2 min
    .venv/bin/python -m bench.bench_worker --profile both --json bench/results/worker.json
    .venv/bin/python -m bench.bench_worker --backends kafka-python --only throughput
    .venv/bin/python -m bench.bench_worker --bootstrap 127.0.0.1:9092 --records 200000
    .venv/bin/python -m bench.bench_worker --only profile --profile pyspy --profile-records 200000
    .venv/bin/python -m bench.bench_worker --only profile --profile pyspy-gil --backends kafka-python

Without ``--bootstrap`` it starts the embedded broker (``stream_perceptron.commands.broker.EmbeddedBroker``,
tansu, memory only) once for the whole run. Every contender is a separate process, reads the SAME
pre-produced input records (produced once per size into a fresh topic) and writes to a fresh
output topic. Per client backend (``--backends``, default both: kafka-python and confluent-kafka):

1. **pipe**: ``bench.pipe --client BACKEND``, a bare consume → produce pipe (values unchanged)
   with the client settings of the worker's edge for that backend; for kafka-python also the
   pipe with the worker's client paths (``--decode --append``), for confluent-kafka also the
   pipe with the worker's codec around a fixed model (``--codec``);
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

See ``docs/performance.md`` for the method, a full run, the targets and the profile. This module
holds the command line and the order of the sections; the sections and their helpers are the
modules of ``bench/worker/`` (listed in ``bench/README.md``).
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

from bench.worker.contenders import (
    BACKENDS,
    CF,
    DEFAULT_RECORDS,
    DEFAULT_REPEATS,
    DEFAULT_SEED,
    KPP,
    PEER,
    PIPE_KP,
    QUICK_RECORDS,
    SECTIONS,
    WORKER_KP,
    WORKER_OF,
    confluent_available,
    contenders_for,
)
from bench.worker.formatting import Say, fmt_rate, write_json
from bench.worker.inputs import DEFAULT_D, DEFAULT_NOISE
from bench.worker.latency import LATENCY_EXTRA_FETCH_WAIT_MS, section_latency
from bench.worker.machine import git_state, kafka_client_settings, machine_info
from bench.worker.measures import cpu_counters, loadavg, steal_share
from bench.worker.memory import MEMORY_MILESTONES_FULL, MEMORY_MILESTONES_QUICK, section_memory
from bench.worker.processes import Ctx, broker_at
from bench.worker.profile import PROFILE_RECORDS, section_profile
from bench.worker.report import print_report, render_markdown
from bench.worker.sizes import section_sizes
from bench.worker.targets import (
    TARGET_MEMORY_GROWTH,
    TARGET_P99_MS,
    TARGET_WORKER_OVER_PEER,
    TARGET_WORKER_OVER_PIPE,
    evaluate_targets,
)
from bench.worker.throughput import section_throughput


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
    p.add_argument("--quick", action="store_true", help="small sizes, 1 repeat, about 2 minutes")
    p.add_argument(
        "--only",
        default=None,
        help=f"comma-separated sections of {','.join(SECTIONS)} "
        "(default: all but profile; profile runs when --profile is given)",
    )
    p.add_argument(
        "--profile",
        default="none",
        choices=("none", "cprofile", "pyspy", "pyspy-gil", "both"),
        help="profile the worker on --profile-records records: cProfile, py-spy sampling wall time "
        "(pyspy) or the GIL's holder (pyspy-gil); both: cprofile and pyspy",
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
    brokers = contextlib.ExitStack()
    try:
        bootstrap, broker_pid = brokers.enter_context(broker_at(args.bootstrap))
        report["machine"] = machine_info(bootstrap, broker_pid is not None)
        m = report["machine"]
        say(
            f"machine: {m['cpu_model']} | {m['logical_cores']} cores | Python {m['python']} | "
            f"kafka-python {m['kafka_python']} | {m['broker']} at {bootstrap} | load {m['loadavg_at_start']}"
        )
        ctx = Ctx(bootstrap, prefix, workdir, args.session_timeout_ms, broker_pid)
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
            with ctx.scope():  # each section deletes its topics: see Ctx.scope
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
            with ctx.scope():
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
            with ctx.scope():
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
            with ctx.scope():
                report["sizes"] = section_sizes(
                    ctx, args.records, args.sizes_repeats, args.quick, args.seed, [PIPE_KP, PEER, WORKER_KP],
                    say,
                )
            section_done("sizes")
        if "profile" in args.sections:
            tools = ("cprofile", "pyspy") if args.profile == "both" else (args.profile,)
            say(
                f"profile: the worker on {args.profile_records:,} records with {', '.join(tools)}, "
                "per backend"
            )
            # the producer-process worker is two processes: only py-spy --gil --subprocesses
            # tells their GILs apart (bench/worker/profile.py)
            profiled = [b for b in backends if b != KPP or "pyspy-gil" in tools]
            with ctx.scope():
                report["profile"] = section_profile(
                    ctx, args.profile_records, tools, args.seed, say, profiled
                )
            section_done("profile")
    finally:
        brokers.close()
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
        write_json(args.json, report)
        say(f"wrote {args.json}")
    return report


if __name__ == "__main__":
    main()
