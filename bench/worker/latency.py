"""The latency section: a steady input rate of half the worker's maximum, and p50 / p99 from an
input record's CreateTime to its output's."""

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
    clean_env,
    log_tail,
    popen_logged,
    start_worker,
    wait_logged,
)
from bench.worker.topics import LoadProducer, TopicReader

LATENCY_WARMUP = 200
LATENCY_EXTRA_FETCH_WAIT_MS = 10  # one extra run of each one-process worker at this fetch_max_wait_ms
Start = Callable[[str], tuple[subprocess.Popen[bytes], str, Path]]  # input topic -> process, its output, log
PERCENTILES = ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")


def latency_run(ctx: Ctx, label: str, values: Sequence[bytes], rate: float, start: Start,
                offset_of: Callable[[dict[str, Any]], int], say: Say) -> dict[str, Any]:
    """Warm-up records until the contender answers, then the rest at ``rate`` records/s; latency
    from each input record's CreateTime to its output's, matched by input offset."""
    import orjson

    n = len(values) - LATENCY_WARMUP
    (in_topic,) = ctx.new_topics(f"{label}-in")
    proc, out_topic, log = start(in_topic)
    producer, reader = LoadProducer(ctx.bootstrap), TopicReader(ctx.bootstrap, out_topic)
    outputs: list[tuple[int, int]] = []

    def drain_until(count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(outputs) < count:
            if time.monotonic() > deadline or proc.poll() not in (None, 0):
                raise RuntimeError(f"{label}: {len(outputs)} of {count} outputs, the process "
                                   f"{'running' if proc.poll() is None else f'exited {proc.returncode}'}; "
                                   f"log {log}\n{log_tail(log)}")
            outputs.extend((offset_of(orjson.loads(v)), ts) for _, ts, v in reader.poll())

    cpu = RssSampler(proc.pid, interval=0.1)
    cpu.start()
    try:
        send = producer.sender(in_topic)
        for i in range(LATENCY_WARMUP):
            send(values[i], str(i).encode())
        producer.flush()
        drain_until(LATENCY_WARMUP, 60 + ctx.session_timeout_ms / 1000)
        t_steady, t0 = time.time(), time.monotonic()
        for j in range(n):
            ahead = j / rate - (time.monotonic() - t0)
            if ahead > 0.0005:
                time.sleep(ahead)
            send(values[LATENCY_WARMUP + j], str(LATENCY_WARMUP + j).encode())
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
        input_ts = {off: ts for off, ts, _ in inputs_reader.read(LATENCY_WARMUP + n, 120)}
    finally:
        inputs_reader.close()
    summary = latency_summary(input_ts, outputs, from_offset=LATENCY_WARMUP)
    achieved = rate_from_timestamps([ts for o, ts in input_ts.items() if o >= LATENCY_WARMUP])
    say(f"  {label}: {summary['matched']:,} records at {fmt_rate(achieved)} rec/s: p50 "
        f"{summary.get('p50_ms', 0):.0f} ms, p99 {summary.get('p99_ms', 0):.0f} ms")
    return {"achieved_input_rate": achieved, "records": n, "load_client": producer.client, "latency": summary,
            "contender_cpu_cores": cpu.cores_between(t_steady, t_sent), "log": str(log)}


def worker_starter(ctx: Ctx, label: str, env_extra: dict[str, str]) -> Start:
    """``start`` for :func:`latency_run`: a worker (predictions on, not stopping when caught up)
    with ``env_extra`` (its backend and any other setting)."""

    def start(in_topic: str) -> tuple[subprocess.Popen[bytes], str, Path]:
        wp = start_worker(ctx, in_topic, "all", label, until_caught_up=False, sample_rss=False,
                          env_extra=env_extra)
        return wp.proc, wp.topics["predictions"], wp.log

    return start


def latency_plan(rates: dict[str, float], *, extra_fetch_wait_ms: int | None) -> list[dict[str, Any]]:
    """The latency runs: per backend its worker (default settings) and its pipe at half that
    worker's maximum, and each one-process worker again at ``SP_KAFKA__FETCH_MAX_WAIT_MS``
    ``extra_fetch_wait_ms`` (None: not)."""
    plan: list[dict[str, Any]] = []
    for b in (b for b in BACKENDS if b in rates):
        base = {"backend": b, "rate": rates[b], "extra_env": {}}
        plan += [{**base, "kind": "worker"}, {**base, "kind": "pipe"}]
        if extra_fetch_wait_ms is not None and b in (KP, CF):
            extra = {"SP_KAFKA__FETCH_MAX_WAIT_MS": str(extra_fetch_wait_ms)}
            plan.append({**base, "kind": "worker", "extra_env": extra})
    for p in plan:
        p["name"] = f"{p['kind']} ({p['backend']})" + "".join(f", {k}={v}" for k, v in p["extra_env"].items())
    return plan


def latency_summaries(plan: Sequence[dict[str, Any]], runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per plan entry, the median over its repeats of each percentile, and the p99 range."""
    out = []
    for k, p in enumerate(plan):
        mine = [r for r in runs if r["plan_index"] == k]
        lat: dict[str, Any] = {key: float(statistics.median(got)) for key in PERCENTILES
                               if (got := [r["latency"][key] for r in mine if key in r["latency"]])}
        lat["matched"] = sum(r["latency"].get("matched", 0) for r in mine)
        p99s = [r["latency"]["p99_ms"] for r in mine if "p99_ms" in r["latency"]]
        rates = [r["achieved_input_rate"] for r in mine if r.get("achieved_input_rate")]
        cores = [r["contender_cpu_cores"] for r in mine if r.get("contender_cpu_cores") is not None]
        out.append({**p, "repeats": len(mine), "latency": lat, "p99_each_ms": p99s,
                    "p99_min_ms": min(p99s, default=None), "p99_max_ms": max(p99s, default=None),
                    "achieved_input_rate": statistics.median(rates) if rates else None,
                    "contender_cpu_cores": statistics.median(cores) if cores else None})
    return out


def section_latency(ctx: Ctx, rates: dict[str, float], seconds: float, seed: int, say: Say, *,
                    extra_fetch_wait_ms: int | None = LATENCY_EXTRA_FETCH_WAIT_MS, repeats: int = 1
                    ) -> dict[str, Any]:
    """Per backend: the worker at a steady rate (half its own maximum), and the bare pipe of the
    same client at the same rate (the broker's and the client's share of the latency). The whole
    plan runs ``repeats`` times, order rotated per repeat; the summary holds medians."""
    plan = latency_plan(rates, extra_fetch_wait_ms=extra_fetch_wait_ms)
    most = max(max(100, int(p["rate"] * seconds)) for p in plan)
    values, meta = dense_records(LATENCY_WARMUP + most, DEFAULT_D, seed=seed + 2)
    runs = []
    for rep in range(repeats):
        for k, p in rotated(list(enumerate(plan)), rep):
            vals = values[: LATENCY_WARMUP + max(100, int(p["rate"] * seconds))]
            label = f"lat{k}r{rep}-{SHORT[p['backend']]}-{p['kind']}"

            def start_pipe(in_topic: str, p: dict[str, Any] = p, label: str = label, count: int = len(vals)
                           ) -> tuple[subprocess.Popen[bytes], str, Path]:
                (out_topic,) = ctx.new_topics(f"{label}-out")
                log = ctx.workdir / f"{out_topic}.log"
                cmd = [sys.executable, "-m", "bench.pipe", "--client", p["backend"], "--bootstrap",
                       ctx.bootstrap, "--input", in_topic, "--output", out_topic, "--records", str(count)]
                return popen_logged(cmd, clean_env(ctx.code_root), log, ctx.code_root), out_topic, log

            with ctx.scope():
                if p["kind"] == "worker":  # the prediction's offset field is the input offset
                    start = worker_starter(ctx, label, {**backend_env(p["backend"]), **p["extra_env"]})
                    res = latency_run(ctx, label, vals, p["rate"], start, lambda v: int(v["offset"]), say)
                else:  # the input's "id" is its index, its offset in the fresh one-partition topic
                    res = latency_run(ctx, label, vals, p["rate"], start_pipe, lambda v: int(v["id"]), say)
            runs.append({**p, "plan_index": k, "repeat": rep, **res})
    return {"target_rates": rates, "seconds": seconds, "repeats": repeats, "warmup_records": LATENCY_WARMUP,
            "runs": runs, "summary": latency_summaries(plan, runs), "input": meta}
