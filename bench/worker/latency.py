"""The latency section: a steady input rate of half the worker's maximum, and p50 / p99 from an
input record's timestamp to its prediction record's."""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.worker.contenders import BACKENDS, CF, KP, SHORT, backend_env, rotated
from bench.worker.formatting import Say, fmt_rate
from bench.worker.inputs import DEFAULT_D, dense_records
from bench.worker.measures import latency_summary, rate_from_timestamps
from bench.worker.processes import (
    Ctx,
    RssSampler,
    assignments,
    clean_env,
    log_tail,
    popen_logged,
    start_worker,
    wait_logged,
    worker_log,
)
from bench.worker.topics import LoadProducer, TopicReader

LATENCY_WARMUP = 200
LATENCY_EXTRA_FETCH_WAIT_MS = 10  # one extra kafka-python worker point at this fetch_max_wait_ms


def latency_run(
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

    n = len(values) - LATENCY_WARMUP
    (in_topic,) = ctx.new_topics(f"{label}-in")
    proc, out_topic, log = start(in_topic)
    producer = LoadProducer(ctx.bootstrap)
    reader = TopicReader(ctx.bootstrap, out_topic)
    outputs: list[tuple[int, int]] = []

    def drain_until(count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(outputs) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"latency run: {len(outputs)} of {count} outputs; log {log}\n{log_tail(log)}"
                )
            outputs.extend((offset_of(orjson.loads(v)), ts) for _, ts, v in reader.poll())
            if len(outputs) < count and proc.poll() not in (None, 0):
                raise RuntimeError(f"{label}: the process exited with {proc.returncode}\n{log_tail(log)}")

    cpu = RssSampler(proc.pid, interval=0.1)
    cpu.start()
    try:
        send = producer.sender(in_topic)
        for i in range(LATENCY_WARMUP):
            send(values[i], str(i).encode())
        producer.flush()
        drain_until(LATENCY_WARMUP, 60 + ctx.session_timeout_ms / 1000)
        t_steady = time.time()
        t0 = time.monotonic()
        for j in range(n):
            ahead = j / rate - (time.monotonic() - t0)
            if ahead > 0.0005:
                time.sleep(ahead)
            i = LATENCY_WARMUP + j
            send(values[i], str(i).encode())
        send_s = time.monotonic() - t0
        t_sent = time.time()
        producer.flush()
        drain_until(LATENCY_WARMUP + n, 60 + n / max(rate, 1))
    finally:
        producer.close()
        reader.close()
        cpu.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        wait_logged(proc, 60, log, f"the {label} process")
    inputs_reader = TopicReader(ctx.bootstrap, in_topic)
    try:
        inputs = inputs_reader.read(LATENCY_WARMUP + n, 120)
    finally:
        inputs_reader.close()
    input_ts = {off: ts for off, ts, _ in inputs}
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
        "contender_cpu_cores": cpu.cores_between(t_steady, t_sent),
        "load_client": producer.client,
        "latency": summary,
        "log": str(log),
    }


def worker_starter(
    ctx: Ctx, label: str, env_extra: dict[str, str]
) -> Callable[[str], tuple[subprocess.Popen[bytes], str, Path]]:
    """``start`` for :func:`latency_run`: a worker (predictions on, not stopping when caught up)
    on the given input topic, with ``env_extra`` (its backend and any other setting)."""

    def start(in_topic: str) -> tuple[subprocess.Popen[bytes], str, Path]:
        wp = start_worker(
            ctx, in_topic, "all", label, until_caught_up=False, sample_rss=False, env_extra=env_extra
        )
        return wp.proc, wp.topics["predictions"], wp.log

    return start


def latency_plan(
    rates: dict[str, float],
    *,
    extra_fetch_wait_ms: int | None,
    cf_pipe_fetch_wait_ms: int | None,
    cf_honours_fetch_wait: bool = True,
) -> list[dict[str, Any]]:
    """The latency runs: per backend its worker (default settings) and its pipe at half that
    worker's maximum; optionally the worker at another ``SP_KAFKA__FETCH_MAX_WAIT_MS`` (kafka-python,
    and confluent-kafka when its edge passes the setting on), and the confluent-kafka pipe at
    another ``fetch.wait.max.ms``.

    >>> plan = latency_plan({"kafka-python": 1.0}, extra_fetch_wait_ms=10, cf_pipe_fetch_wait_ms=100)
    >>> [(p["kind"], p["extra_env"], p["fetch_wait_ms"]) for p in plan]  # doctest: +NORMALIZE_WHITESPACE
    [('worker', {}, None), ('pipe', {}, None),
     ('worker', {'SP_KAFKA__FETCH_MAX_WAIT_MS': '10'}, None)]
    >>> len(latency_plan({"confluent-kafka": 1.0}, extra_fetch_wait_ms=10, cf_pipe_fetch_wait_ms=None))
    3
    >>> len(latency_plan({"confluent-kafka": 1.0}, extra_fetch_wait_ms=10, cf_pipe_fetch_wait_ms=100,
    ...                  cf_honours_fetch_wait=False))
    3
    """
    plan: list[dict[str, Any]] = []
    for b in BACKENDS:
        if b not in rates:
            continue
        base = {"backend": b, "rate": rates[b], "extra_env": {}, "fetch_wait_ms": None}
        plan += [{**base, "kind": "worker"}, {**base, "kind": "pipe"}]
        if extra_fetch_wait_ms is not None and (b == KP or (b == CF and cf_honours_fetch_wait)):
            plan.append(
                {
                    **base,
                    "kind": "worker",
                    "extra_env": {"SP_KAFKA__FETCH_MAX_WAIT_MS": str(extra_fetch_wait_ms)},
                }
            )
        if b == CF and cf_pipe_fetch_wait_ms is not None:
            plan.append({**base, "kind": "pipe", "fetch_wait_ms": cf_pipe_fetch_wait_ms})
    return plan


def latency_summaries(plan: Sequence[dict[str, Any]], runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per plan entry, the median over its repeats of each percentile, and the p99 range.

    >>> plan = [{"kind": "worker", "backend": "b", "extra_env": {}, "fetch_wait_ms": None, "rate": 1.0}]
    >>> runs = [{"plan_index": 0, "achieved_input_rate": 1.0, "latency": {"p50_ms": v, "p99_ms": 2 * v}}
    ...         for v in (10.0, 30.0, 20.0)]
    >>> s = latency_summaries(plan, runs)[0]
    >>> s["repeats"], s["latency"]["p50_ms"], s["latency"]["p99_ms"], s["p99_min_ms"], s["p99_max_ms"]
    (3, 20.0, 40.0, 20.0, 60.0)
    """
    out = []
    for k, p in enumerate(plan):
        mine = [r for r in runs if r["plan_index"] == k]
        lat: dict[str, Any] = {}
        for key in ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"):
            got = [r["latency"][key] for r in mine if key in r["latency"]]
            if got:
                lat[key] = float(statistics.median(got))
        lat["matched"] = sum(r["latency"].get("matched", 0) for r in mine)
        p99s = [r["latency"]["p99_ms"] for r in mine if "p99_ms" in r["latency"]]
        rates = [r["achieved_input_rate"] for r in mine if r.get("achieved_input_rate")]
        cores = [r["contender_cpu_cores"] for r in mine if r.get("contender_cpu_cores") is not None]
        out.append(
            {
                **p,
                "name": latency_run_name(p),
                "repeats": len(mine),
                "latency": lat,
                "p99_min_ms": min(p99s, default=None),
                "p99_max_ms": max(p99s, default=None),
                "p99_each_ms": p99s,
                "achieved_input_rate": statistics.median(rates) if rates else None,
                "contender_cpu_cores": statistics.median(cores) if cores else None,
            }
        )
    return out


def latency_run_name(run: dict[str, Any]) -> str:
    """How a latency run is named in the tables.

    >>> latency_run_name({"kind": "worker", "backend": "kafka-python",
    ...                   "extra_env": {"SP_KAFKA__FETCH_MAX_WAIT_MS": "10"}, "fetch_wait_ms": None})
    'worker (kafka-python), SP_KAFKA__FETCH_MAX_WAIT_MS=10'
    """
    name = f"{run['kind']} ({run['backend']})"
    if run["extra_env"]:
        name += ", " + ", ".join(f"{k}={v}" for k, v in run["extra_env"].items())
    if run["fetch_wait_ms"] is not None:
        name += f", fetch wait {run['fetch_wait_ms']} ms"
    return name


def section_latency(
    ctx: Ctx,
    rates: dict[str, float],
    seconds: float,
    seed: int,
    say: Say,
    *,
    extra_fetch_wait_ms: int | None = LATENCY_EXTRA_FETCH_WAIT_MS,
    cf_pipe_fetch_wait_ms: int | None = None,
    cf_honours_fetch_wait: bool = True,
    repeats: int = 1,
) -> dict[str, Any]:
    """Per backend: the worker at a steady rate (half its own maximum), and the bare pipe of the
    same client at the same rate (the broker's and the client's share of the latency). With
    ``repeats`` > 1 the whole plan runs that many times, order rotated per repeat, and the summary
    holds the median of each percentile over the repeats."""
    plan = latency_plan(
        rates,
        extra_fetch_wait_ms=extra_fetch_wait_ms,
        cf_pipe_fetch_wait_ms=cf_pipe_fetch_wait_ms,
        cf_honours_fetch_wait=cf_honours_fetch_wait,
    )
    n_max = max(max(100, int(p["rate"] * seconds)) for p in plan)
    values, meta = dense_records(LATENCY_WARMUP + n_max, DEFAULT_D, seed=seed + 2)
    runs = []
    for rep, (k, p) in ((r, kp) for r in range(repeats) for kp in rotated(list(enumerate(plan)), r)):
        n = max(100, int(p["rate"] * seconds))
        vals = values[: LATENCY_WARMUP + n]
        label = f"lat{k}r{rep}-{SHORT[p['backend']]}-{p['kind']}"

        def start_pipe(
            in_topic: str, p: dict[str, Any] = p, label: str = label, count: int = len(vals)
        ) -> tuple[Any, str, Path]:
            (out_topic,) = ctx.new_topics(f"{label}-out")
            log = ctx.workdir / f"{out_topic}.log"
            cmd = [sys.executable, "-m", "bench.pipe", "--client", p["backend"], "--bootstrap", ctx.bootstrap]
            cmd += ["--input", in_topic, "--output", out_topic, "--records", str(count)]
            if p["fetch_wait_ms"] is not None:
                cmd += ["--fetch-wait-ms", str(p["fetch_wait_ms"])]
            return popen_logged(cmd, clean_env(ctx.code_root), log, ctx.code_root), out_topic, log

        with ctx.scope():
            if p["kind"] == "worker":
                # the prediction's offset field is the input offset
                start_w = worker_starter(ctx, label, {**backend_env(p["backend"]), **p["extra_env"]})
                res = latency_run(ctx, label, vals, p["rate"], start_w, lambda v: int(v["offset"]), say)
                lines = worker_log(Path(res["log"]))
                res["rebalanced"] = assignments(lines) > 1
            else:
                # the input's "id" is its index, which is its offset in the fresh one-partition topic
                res = latency_run(ctx, label, vals, p["rate"], start_pipe, lambda v: int(v["id"]), say)
        runs.append({**p, "name": latency_run_name(p), "plan_index": k, "repeat": rep, **res})
    return {
        "target_rates": rates,
        "seconds": seconds,
        "repeats": repeats,
        "warmup_records": LATENCY_WARMUP,
        "runs": runs,
        "summary": latency_summaries(plan, runs),
        "input": meta,
        "fetch_wait": "kafka-python worker and pipe: SP_KAFKA__FETCH_MAX_WAIT_MS (default 100 ms) as "
        "fetch_max_wait_ms; confluent-kafka worker and pipe: the edge's fetch.wait.max.ms (see "
        "client_settings.confluent_edge_fetch_wait_max_ms)",
        "method": "input CreateTime (the load generator's produce(), with the worker's producer "
        "settings incl. linger 20 ms) -> output CreateTime (the contender's send()), matched by input "
        "offset (the prediction's offset field; the pipe's forwarded id); warm-up records excluded",
    }
