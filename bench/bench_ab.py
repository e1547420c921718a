"""Two versions of the worker side by side on one broker: this checkout against a git ref.

Run from the repository root::

    .venv/bin/python -m bench.bench_ab --base HEAD~1                      # throughput, kafka-python
    .venv/bin/python -m bench.bench_ab --base 4161bf6 --only latency --backends kafka-python+process \\
        --latency-rate 32000 --repeats 5 --json bench/results/ab.json

``--base`` is checked out into a temporary git worktree and run against this checkout as it is on
disk, on one broker, the two sides in rotated order: each process starts in its side's directory,
which ``python -m`` puts first on ``sys.path``, so each runs its own ``stream_perceptron`` and
``bench``. ``throughput``: each side's bare pipe and worker on one input topic; ``latency``: each
side's worker at ``--latency-rate``, p50 and p99. The table gives medians, every run, head / base.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.worker.contenders import BACKENDS, CF, ROOT, SHORT, backend_env, confluent_available, rotated
from bench.worker.formatting import format_table, write_json
from bench.worker.inputs import DEFAULT_D, dense_records
from bench.worker.machine import git_state, worktree
from bench.worker.processes import SESSION_TIMEOUT_MS, Ctx, broker_at, pipe_then_worker
from bench.worker.sections import LATENCY_WARMUP, latency_run, worker_starter

SIDES = ("base", "head")
SECTIONS = ("throughput", "latency")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the git ref to compare this checkout with")
    p.add_argument("--only", default="throughput", help=f"comma-separated of {','.join(SECTIONS)}")
    p.add_argument("--backends", default="kafka-python", help=f"comma-separated of {','.join(BACKENDS)}")
    p.add_argument("--records", type=int, default=100_000, help="records per throughput run")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--latency-rate", type=float, default=20_000, help="input records/s of the latency runs")
    p.add_argument("--latency-seconds", type=float, default=15)
    p.add_argument("--bootstrap", help="host:port of a broker; default: start the embedded one")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    args.sections = [s for s in args.only.split(",") if s]
    args.backends = [b for b in args.backends.split(",") if b]
    if not args.sections or not set(args.sections) <= set(SECTIONS):
        p.error(f"--only takes {', '.join(SECTIONS)}")
    if not args.backends or not set(args.backends) <= set(BACKENDS):
        p.error(f"--backends takes {', '.join(BACKENDS)}")
    if CF in args.backends and not confluent_available():
        p.error("confluent-kafka is not installed")
    if args.records < 10 or args.repeats < 1 or args.latency_rate <= 0 or args.latency_seconds <= 0:
        p.error("--records must be >= 10, --repeats >= 1, the latency rate and seconds positive")
    return args


def summary_rows(runs: dict[tuple[str, str, str], dict[str, list[float]]]) -> list[list[str]]:
    """Per (section, backend, measure): each side's median and runs, and head / base."""
    rows = []
    for (section, backend, measure), sides in runs.items():
        med = {side: statistics.median(sides[side]) for side in SIDES}
        unit = " rec/s" if section == "throughput" else ""
        each = {side: ", ".join(f"{v:,.0f}" for v in sides[side]) for side in SIDES}
        rows.append([section, backend, f"{measure}{unit}", f"{med['base']:,.0f}", each["base"],
                     f"{med['head']:,.0f}", each["head"], f"{med['head'] / med['base']:.2f}x"])
    return rows


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    runs: dict[tuple[str, str, str], dict[str, list[float]]] = {}

    def record(section: str, backend: str, side: str, measures: dict[str, float]) -> None:
        for measure, value in measures.items():
            runs.setdefault((section, backend, measure), {s: [] for s in SIDES})[side].append(value)
        shown = ", ".join(f"{m} {v:,.0f}" for m, v in measures.items())
        print(f"  {section} {backend} {side}: {shown}", file=sys.stderr, flush=True)

    t0 = time.time()
    with worktree(args.base) as (base_root, base_commit), \
            tempfile.TemporaryDirectory(prefix="bench-ab-run-") as tmp, \
            broker_at(args.bootstrap) as (bootstrap, broker_pid):
        roots = {"base": base_root, "head": ROOT}
        ctx = Ctx(bootstrap, f"ab-{int(t0)}", Path(tmp), SESSION_TIMEOUT_MS, broker_pid)

        def rounds(section: str) -> Iterator[tuple[str, str, str]]:
            """(backend, side, tag) of each run of ``section``, the side's checkout made current."""
            for k in range(args.repeats):
                for backend in args.backends:
                    for side in rotated(SIDES, k):
                        ctx.code_root = roots[side]
                        yield backend, side, f"{section[0]}{k}-{SHORT[backend]}-{side}"

        if "throughput" in args.sections:
            values, _ = dense_records(args.records, DEFAULT_D, seed=args.seed)
            with ctx.scope():
                in_topic, _ = ctx.new_input("input", values)
                for backend, side, tag in rounds("throughput"):
                    runs_ = pipe_then_worker(ctx, backend, in_topic, args.records, tag)
                    record("throughput", backend, side, {kind: r["rate"] for kind, r in runs_.items()})
        if "latency" in args.sections:
            n = max(100, int(args.latency_rate * args.latency_seconds))
            values, _ = dense_records(LATENCY_WARMUP + n, DEFAULT_D, seed=args.seed + 2)
            for backend, side, tag in rounds("latency"):
                start = worker_starter(ctx, tag, backend_env(backend))
                with ctx.scope():
                    lat = latency_run(ctx, tag, values, args.latency_rate, start, lambda v: int(v["offset"]),
                                      lambda _: None)["latency"]
                record("latency", backend, side, {"p50_ms": lat["p50_ms"], "p99_ms": lat["p99_ms"]})
    headers = ["section", "backend", "measure", "base median", "base runs", "head median", "head runs",
               "head / base"]
    rows = summary_rows(runs)
    src = git_state()
    head_commit, dirty = src["commit"], bool(src["tracked_changed"])
    print(f"base {base_commit[:7]} ({args.base}), head {head_commit[:7]}{' with changes' if dirty else ''}; "
          f"medians of {args.repeats} interleaved repeats; {time.time() - t0:,.0f} s")
    if "throughput" in args.sections:
        print(f"throughput: {args.records:,} records of {DEFAULT_D} features")
    if "latency" in args.sections:
        print(f"latency: {args.latency_rate:,.0f} records/s for {args.latency_seconds:g} s")
    print(format_table(headers, rows))
    report = {
        "base": {"ref": args.base, "commit": base_commit},
        "head": {"commit": head_commit, "uncommitted_changes": dirty},
        "repeats": args.repeats, "records": args.records,
        "latency_rate": args.latency_rate, "latency_seconds": args.latency_seconds,
        "table": [dict(zip(headers, row, strict=True)) for row in rows],
        "runs": [{"section": s, "backend": b, "measure": m, **sides} for (s, b, m), sides in runs.items()],
    }
    if args.json:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
