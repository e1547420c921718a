"""The consumer's fetch bound (``SP_KAFKA__FETCH_MAX_BYTES``) side by side: rate and memory.

Run from the repository root::

    .venv/bin/python -m bench.bench_fetch                      # 200,000 records, 3 repeats
    .venv/bin/python -m bench.bench_fetch --bounds 1048576,8388608,52428800 --json bench/results/fetch.json

One fetch response carries at most ``fetch_max_bytes`` (Kafka's ``fetch.max.bytes``); the
clients' own default is 50 MB, and a broker that does not hold a partition to
``max.partition.fetch.bytes`` (the embedded one) then answers with several MB at a time, which
the client holds until it is polled. This runs, on one input topic of the benchmark's records
(``bench.worker.inputs.dense_records``: 20 features, pre-produced once), for each client and
each bound: the bare pipe (``bench.pipe --fetch-max-bytes``) and the worker
(``SP_KAFKA__FETCH_MAX_BYTES``), each as a separate process as ``bench.bench_worker`` runs them.
Each repeat runs every bound once, in rotated order. The table gives, per client and bound, the
median records/s (output CreateTime, first to last), the worker over its pipe, and the median of
each process's peak resident memory (VmRSS, sampled every 0.1 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.worker.contenders import CF, KP, SHORT, confluent_available, rotated
from bench.worker.formatting import format_table, write_json
from bench.worker.inputs import dense_records
from bench.worker.processes import SESSION_TIMEOUT_MS, Ctx, broker_at, pipe_then_worker

DEFAULT_BOUNDS = (1_048_576, 52_428_800)  # the worker's default and the clients' own


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--bounds", default=",".join(map(str, DEFAULT_BOUNDS)),
                   help="comma-separated fetch_max_bytes values (each at least 1,000,000)")
    p.add_argument("--backends", default=f"{KP},{CF}", help=f"comma-separated of {KP},{CF}")
    p.add_argument("--bootstrap", help="host:port of a broker; default: start the embedded one")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    args.bounds = [int(b) for b in args.bounds.split(",")]
    args.backends = [b for b in args.backends.split(",") if b != CF or confluent_available()]
    if min(args.bounds) < 1_000_000 or args.records < 1 or args.repeats < 1:
        p.error("bounds must be at least 1,000,000 and records and repeats positive")
    if not set(args.backends) <= {KP, CF}:
        p.error(f"--backends takes {KP} and {CF}")
    return args


def one_round(ctx: Ctx, backend: str, bound: int, in_topic: str, n: int) -> dict[str, Any]:
    """The pipe, then the worker, of ``backend`` with the fetch bound ``bound``."""
    ctx.worker_env = {"SP_KAFKA__FETCH_MAX_BYTES": str(bound)}
    tag = f"{SHORT[backend]}-{bound // 1024}k"
    return pipe_then_worker(ctx, backend, in_topic, n, tag, ["--fetch-max-bytes", str(bound)])


def _median(rounds: list[dict[str, Any]], kind: str, key: str) -> float:
    """The median over ``rounds`` of the ``kind`` process's rate (``key="rate"``) or peak RSS."""
    if key == "rate":
        return statistics.median(r[kind]["rate"] for r in rounds)
    return statistics.median(r[kind]["memory"]["peak_rss_mb"] for r in rounds)


def summary_rows(runs: dict[tuple[str, int], list[dict[str, Any]]]) -> list[list[str]]:
    """Per (client, bound): median rates, worker / pipe, median peak RSS of each process.

    >>> r = {"rate": 10.0, "memory": {"peak_rss_mb": 80.0}}
    >>> summary_rows({("kafka-python", 1_048_576): [{"pipe": r, "worker": {**r, "rate": 9.0}}]})
    [['kafka-python', '1,048,576', '10', '9', '0.90x', '80', '80']]
    """
    rows = []
    for (backend, bound), rounds in runs.items():
        pipe_rate, worker_rate = _median(rounds, "pipe", "rate"), _median(rounds, "worker", "rate")
        rows.append([
            backend, f"{bound:,}", f"{pipe_rate:,.0f}", f"{worker_rate:,.0f}",
            f"{worker_rate / pipe_rate:.2f}x",
            f"{_median(rounds, 'pipe', 'rss'):.0f}", f"{_median(rounds, 'worker', 'rss'):.0f}",
        ])
    return rows


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp, \
            broker_at(args.bootstrap) as (bootstrap, broker_pid):
        ctx = Ctx(bootstrap, f"fetch-{int(time.time())}", Path(tmp), SESSION_TIMEOUT_MS, broker_pid)
        values, meta = dense_records(args.records, 20, seed=args.seed)
        runs: dict[tuple[str, int], list[dict[str, Any]]] = {
            (b, bound): [] for b in args.backends for bound in args.bounds
        }
        with ctx.scope():
            in_topic, _ = ctx.new_input("input", values)
            for k in range(args.repeats):
                for bound in rotated(args.bounds, k):
                    for backend in args.backends:
                        r = one_round(ctx, backend, bound, in_topic, args.records)
                        runs[(backend, bound)].append(r)
                        print(f"  repeat {k + 1}/{args.repeats} {backend:<16} {bound:>11,} B: "
                              f"pipe {r['pipe']['rate']:>9,.0f} rec/s, "
                              f"worker {r['worker']['rate']:>9,.0f} rec/s", file=sys.stderr)
    headers = ["client", "fetch_max_bytes", "pipe rec/s", "worker rec/s", "worker / pipe",
               "pipe peak RSS MB", "worker peak RSS MB"]
    rows = summary_rows(runs)
    print(f"{args.records:,} records (d=20), medians of {args.repeats} interleaved repeats")
    print(format_table(headers, rows))
    report = {
        "records": args.records, "repeats": args.repeats, "input": meta,
        "table": [dict(zip(headers, row, strict=True)) for row in rows],
        "runs": [{"client": b, "fetch_max_bytes": bound, **{
            kind: {key: r[kind].get(key) for key in ("rate", "memory", "cpu_cores_in_window")}
            for kind in ("pipe", "worker")}} for (b, bound), rs in runs.items() for r in rs],
    }
    if args.json:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
