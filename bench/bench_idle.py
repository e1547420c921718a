"""What a worker costs while its input is idle, against ``SP_KAFKA__FETCH_MAX_WAIT_MS``.

Run from the repository root::

    .venv/bin/python -m bench.bench_idle                            # kafka-python; waits 100, 50, 10 ms
    .venv/bin/python -m bench.bench_idle --backends kafka-python,confluent-kafka --repeats 5 \\
        --json bench/results/idle.json

With no record to read, a consumer's fetch is held by the broker for ``fetch_max_wait_ms`` and then
answered empty, and the client sends the next one: the shorter the wait, the more fetches per
second, each costing the worker and the broker some CPU. Latency at a steady rate pulls the other
way (``bench.bench_ab --only latency``, ``docs/performance.md``). This measures the idle side:
per backend and repeat, in rotated order of the waits, a worker (predictions on, defaults
otherwise) joins its group on an empty input topic, settles for ``--settle`` seconds, and is then
sampled for ``--seconds``: the CPU it and the broker used (user + system, from ``/proc``, as a
share of one core). The table gives medians over the repeats and every repeat's value.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.worker.contenders import BACKENDS, CF, SHORT, backend_env, confluent_available, rotated
from bench.worker.formatting import format_table, write_json
from bench.worker.processes import (
    SESSION_TIMEOUT_MS,
    Ctx,
    WorkerProc,
    assignments,
    broker_at,
    log_tail,
    start_worker,
    wait_logged,
    worker_log,
)

JOIN_TIMEOUT_S = 60.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--waits", default="100,50,10", help="SP_KAFKA__FETCH_MAX_WAIT_MS values, comma-separated")
    p.add_argument("--backends", default="kafka-python", help=f"comma-separated of {','.join(BACKENDS)}")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=20.0, help="how long each idle worker is sampled")
    p.add_argument("--settle", type=float, default=2.0, help="seconds between the join and sampling")
    p.add_argument("--bootstrap", help="host:port of a broker; default: start the embedded one")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    try:
        args.waits = [int(w) for w in args.waits.split(",") if w]
    except ValueError:
        p.error("--waits takes whole milliseconds, comma-separated")
    args.backends = [b for b in args.backends.split(",") if b]
    if not args.waits or min(args.waits) < 0:
        p.error("--waits takes one or more milliseconds >= 0")
    if not args.backends or not set(args.backends) <= set(BACKENDS):
        p.error(f"--backends takes {', '.join(BACKENDS)}")
    if CF in args.backends and not confluent_available():
        p.error("confluent-kafka is not installed")
    if args.repeats < 1 or args.seconds <= 0 or args.settle < 0:
        p.error("--repeats must be >= 1, --seconds positive, --settle >= 0")
    return args


def wait_for_join(wp: WorkerProc, timeout_s: float = JOIN_TIMEOUT_S) -> None:
    """Until the worker logs its assignment; fails if it exits or takes longer than ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not assignments(worker_log(wp.log)):
        if wp.proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the idle worker did not join; log: {wp.log}\n{log_tail(wp.log)}")
        time.sleep(0.1)


def idle_run(
    ctx: Ctx, backend: str, wait_ms: int, tag: str, seconds: float, settle: float
) -> dict[str, float]:
    """One worker on an empty topic at ``fetch_max_wait_ms=wait_ms``: its and the broker's CPU,
    in % of one core, over ``seconds`` once it has joined and settled."""
    env = {**backend_env(backend), "SP_KAFKA__FETCH_MAX_WAIT_MS": str(wait_ms)}
    with ctx.scope():
        (in_topic,) = ctx.new_topics(f"{tag}-in")
        wp = start_worker(ctx, in_topic, "all", tag, until_caught_up=False, env_extra=env)
        try:
            wait_for_join(wp)
            time.sleep(settle)
            t0 = time.time()
            time.sleep(seconds)
            t1 = time.time()
            if wp.proc.poll() is not None:
                raise RuntimeError(f"the idle worker exited; log: {wp.log}\n{log_tail(wp.log)}")
        finally:
            wp.proc.send_signal(signal.SIGTERM)
            wait_logged(wp.proc, 30, wp.log, "the idle worker")
            for sampler in (wp.rss, wp.broker):
                if sampler is not None:
                    sampler.stop()
    assert wp.rss is not None
    out = {"worker_cpu_pct": 100 * (wp.rss.cores_between(t0, t1) or 0.0)}
    if wp.broker is not None:
        out["broker_cpu_pct"] = 100 * (wp.broker.cores_between(t0, t1) or 0.0)
    return out


def summary_rows(runs: dict[tuple[str, int], dict[str, list[float]]]) -> list[list[str]]:
    """Per (backend, wait): each measure's median and runs.

    >>> summary_rows({("kafka-python", 50): {"worker_cpu_pct": [1.0, 3.0, 2.0]}})
    [['kafka-python', '50', 'worker_cpu_pct', '2.00', '1.00, 3.00, 2.00']]
    """
    return [
        [backend, str(wait), measure, f"{statistics.median(values):.2f}",
         ", ".join(f"{v:.2f}" for v in values)]
        for (backend, wait), measures in runs.items()
        for measure, values in measures.items()
    ]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    runs: dict[tuple[str, int], dict[str, list[float]]] = {}
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp, \
            broker_at(args.bootstrap) as (bootstrap, broker_pid):
        ctx = Ctx(bootstrap, f"idle-{int(t0)}", Path(tmp), SESSION_TIMEOUT_MS, broker_pid)
        for k in range(args.repeats):
            for backend in args.backends:
                for wait in rotated(args.waits, k):
                    tag = f"i{k}-{SHORT[backend]}-w{wait}"
                    measures = idle_run(ctx, backend, wait, tag, args.seconds, args.settle)
                    for name, value in measures.items():
                        runs.setdefault((backend, wait), {}).setdefault(name, []).append(value)
                    shown = ", ".join(f"{m} {v:.2f}" for m, v in measures.items())
                    print(f"  {backend} wait {wait} ms: {shown}", file=sys.stderr, flush=True)
    headers = ["backend", "fetch_max_wait_ms", "measure", "median", "runs"]
    rows = summary_rows(runs)
    print(f"idle worker, {args.seconds:g} s sampled per run, CPU in % of one core; "
          f"medians of {args.repeats} interleaved repeats; {time.time() - t0:,.0f} s")
    print(format_table(headers, rows))
    report = {
        "repeats": args.repeats, "seconds": args.seconds, "settle": args.settle, "waits": args.waits,
        "table": [dict(zip(headers, row, strict=True)) for row in rows],
        "runs": [{"backend": b, "fetch_max_wait_ms": w, **m} for (b, w), m in runs.items()],
    }
    if args.json:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
