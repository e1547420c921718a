"""The worker benchmark's sections on a broker: throughput, sizes, memory (the long run), latency
and events; docs/performance.md ("Method"; "Events through a feature spec") says what each runs."""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.worker import contenders as c
from bench.worker import inputs
from bench.worker import measures as m
from bench.worker import processes as pr
from bench.worker.formatting import Say, fmt_rate, fmt_value
from bench.worker.inputs import DEFAULT_D, SPARSE_NAMES, SPARSE_NNZ, dense_records, sparse_records
from bench.worker.topics import LoadProducer, TopicReader

MIN_SIZE_RECORDS = 5_000  # records per size run: at least a few poll batches (2,000 each)


def _repeats(ctx: pr.Ctx, runs: dict[str, list[dict[str, Any]]], topic: str, n: int, rep: int, repeats: int,
             order: Sequence[str], what: str, say: Say) -> None:
    """One repeat: every contender of ``order`` once on ``n`` records of ``topic``, in that order."""
    for name in order:
        r = {**pr.run_one(ctx, name, topic, n, f"{what.split()[0]}-r{rep}"), "repeat": rep}
        runs[name].append(r)
        rss = (r.get("memory") or {}).get("peak_rss_mb") or 0
        by_stats = f" (statistics records: {fmt_rate(r['rate_stats'])})" if r.get("rate_stats") else ""
        say(f"  repeat {rep + 1}/{repeats} {what} {name:<45} {fmt_rate(r['rate']):>9} rec/s{by_stats}  "
            f"peak RSS {rss:,.0f} MB" + ("" if r["complete"] else "  INCOMPLETE")
            + (" REBALANCED" if r.get("rebalanced") else ""))


def section_throughput(ctx: pr.Ctx, n: int, repeats: int, seed: int, say: Say, contenders: Sequence[str]
                       ) -> dict[str, Any]:
    values, meta = dense_records(n, DEFAULT_D, seed=seed)
    in_topic, produce_s = ctx.new_input("tp-in", values)
    say(f"  input: {n:,} records, d={DEFAULT_D}, mean {meta['mean_bytes']:.0f} bytes, produced in "
        f"{produce_s:.1f} s")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
    for rep in range(repeats):
        _repeats(ctx, runs, in_topic, n, rep, repeats, c.rotated(list(contenders), rep), "tp", say)
    summary = {name: pr.summarize(runs[name]) for name in contenders}
    return {"input": meta, "contenders": list(contenders), "runs": runs, "summary": summary}


def size_variants(n: int, quick: bool) -> list[dict[str, Any]]:
    """The inputs of the size section: fewer records where records are large or the worker slow,
    never fewer than ``MIN_SIZE_RECORDS`` (one batch would only time its send loop)."""
    big = max(MIN_SIZE_RECORDS, n // (2 if quick else 4))
    return [{"label": "dense d=10", "d": 10, "records": n}, {"label": "dense d=100", "d": 100, "records": n},
            {"label": "dense d=1000", "d": 1000, "records": big},
            {"label": f"sparse {SPARSE_NNZ} of {SPARSE_NAMES:,} names", "d": None,
             "records": max(MIN_SIZE_RECORDS, n // 2)}]


SIZE_CONTENDERS = (c.PIPE_KP, c.PEER, c.WORKER_KP)


def section_sizes(ctx: pr.Ctx, n: int, repeats: int, quick: bool, seed: int, say: Say) -> dict[str, Any]:
    variants = size_variants(n, quick)
    for k, v in enumerate(variants):
        s = seed + 10 + k
        values, v["input"] = (dense_records(v["records"], v["d"], seed=s) if v["d"]
                              else sparse_records(v["records"], seed=s))
        v["topic"], _ = ctx.new_input(f"size{k}-in", values)
        v["runs"] = {name: [] for name in SIZE_CONTENDERS}
        say(f"  {v['label']}: {v['records']:,} records, mean {v['input']['mean_bytes']:,.0f} bytes")
    for rep in range(repeats):
        for k, v in enumerate(c.rotated(variants, rep)):
            order = c.rotated(list(SIZE_CONTENDERS), rep + k)
            what = f"size {v['label']:<26}"
            _repeats(ctx, v["runs"], v["topic"], v["records"], rep, repeats, order, what, say)
    for v in variants:
        v["summary"] = {name: pr.summarize(v["runs"][name]) for name in SIZE_CONTENDERS}
    return {"variants": variants, "contenders": list(SIZE_CONTENDERS)}


MEMORY_MILESTONES_FULL, MEMORY_MILESTONES_QUICK = (100_000, 1_000_000), (100_000,)
MEMORY_EXTRA = 0.05  # records beyond the last milestone, so that it is reached mid-stream, not at shutdown
MEMORY_WINDOW_S = 0.5  # VmRSS at a milestone: the median of the samples within this of it


def section_memory(ctx: pr.Ctx, milestones: Sequence[int], seed: int, say: Say,
                   backends: Sequence[str] = (c.KP,)) -> dict[str, Any]:
    """One worker run (predictions=all) per backend on the same records, VmRSS sampled; then each
    backend's bare pipe on them (a long-window check of the pipes' rates: worker / pipe at 1M)."""
    n = int(max(milestones) * (1 + MEMORY_EXTRA))
    values, meta = dense_records(n, DEFAULT_D, seed=seed + 1)
    in_topic, produce_s = ctx.new_input("mem-in", values)
    del values
    say(f"  input: {n:,} records produced in {produce_s:.1f} s; the worker's memory sampled every 50 ms")
    out: dict[str, Any] = {"input": meta, "runs": {}, "pipes_long_run": {}}
    for b in (b for b in c.BACKENDS if b in backends):
        with ctx.scope():
            r = out["runs"][b] = _memory_run(ctx, in_topic, n, milestones, b)
        pts = ", ".join(f"{p['records']:,}: {p['rss_mb']:,.0f} MB" for p in r["milestones"] if p["rss_mb"])
        say(f"  worker ({b}): {pts}; peak {r['peak_rss_mb'] or 0:,.0f} MB; "
            f"{fmt_rate(r['run']['rate'])} rec/s")
    for b in (b for b in c.BACKENDS if b in backends):
        with ctx.scope():
            p = out["pipes_long_run"][b] = pr.run_contender_process(
                ctx, "bench.pipe", f"mem-{c.SHORT[b]}-pipe", in_topic, n, ["--client", b])
        say(f"  {b} pipe on the same {n:,} records: {fmt_rate(p['rate'])} rec/s "
            f"({fmt_rate(p.get('own_rate_first_poll_to_flush'))} first poll -> flush; "
            f"{fmt_value(p.get('cpu_cores_in_window'), '.2f')} cores)")
    return out


def _memory_run(ctx: pr.Ctx, in_topic: str, n: int, milestones: Sequence[int],
                backend: str) -> dict[str, Any]:
    """VmRSS (the median of the samples within ``MEMORY_WINDOW_S``) and VmHWM at the worker's first
    statistics record past each milestone, and at every statistics record (every 5,000 records)."""
    wp = pr.start_worker(ctx, in_topic, "all", f"mem-{c.SHORT[backend]}", env_extra=c.backend_env(backend))
    res = pr.finish_worker(ctx, wp, n, "all", timeout_s=180 + n / 300, keep_samples=True)
    res["backend"] = backend
    raw = res.pop("_rss_samples")
    rss, hwm = [(t, r) for t, r, _, _ in raw], [(t, h) for t, _, h, _ in raw]
    stats = sorted((s for s in res.pop("_stats") if s.get("seen") and s.get("ts") is not None),
                   key=lambda s: s["ts"])

    def mb(value: float | None, digits: int | None = None) -> float | None:
        return None if value is None else round(value / 1024, digits) if digits else value / 1024

    points = []
    for mark in milestones:
        hit = next((s for s in stats if s["seen"] >= mark), None)
        if hit is not None:
            points.append({"records": mark, "stats_seen": hit["seen"],
                           "rss_mb": mb(m.median_around(rss, hit["ts"], MEMORY_WINDOW_S)),
                           "hwm_mb": mb(m.sample_at(hwm, hit["ts"]))})
    series = [{"seen": s["seen"], "rss_mb": mb(m.median_around(rss, s["ts"], MEMORY_WINDOW_S), 1),
               "hwm_mb": mb(m.sample_at(hwm, s["ts"]), 1)} for s in stats]
    later = [(p["seen"], p["rss_mb"]) for p in series if p["seen"] >= 100_000 and p["rss_mb"]]
    span = max(x for x, _ in later) - min(x for x, _ in later) if later else 0
    slope = m.linear_trend(later) if span >= 200_000 else None  # a slope over a short span is noise
    return {
        "backend": backend, "run": res, "series": series, "milestones": points,
        "rss_from_100k": {"points": len(later), "min_mb": min((v for _, v in later), default=None),
                          "median_mb": statistics.median([v for _, v in later]) if later else None,
                          "max_mb": max((v for _, v in later), default=None),
                          "slope_mb_per_100k_records": None if slope is None else slope * 100_000},
        "rss_after_first_batches_mb": mb(m.sample_at(rss, stats[0]["ts"])) if stats else None,
        "peak_rss_mb": res["memory"].get("peak_rss_mb"), "vm_hwm_mb": res["memory"].get("vm_hwm_mb"),
    }


LATENCY_WARMUP = 200
LATENCY_EXTRA_FETCH_WAIT_MS = 10  # one extra run of each one-process worker at this fetch_max_wait_ms
Start = Callable[[str], tuple[subprocess.Popen[bytes], str, Path]]  # input topic -> process, its output, log
PERCENTILES = ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")


def latency_run(ctx: pr.Ctx, label: str, values: Sequence[bytes], rate: float, start: Start,
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
                                   f"log {log}\n{pr.log_tail(log)}")
            outputs.extend((offset_of(orjson.loads(v)), ts) for _, ts, v in reader.poll())

    cpu = pr.RssSampler(proc.pid, interval=0.1)
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
        pr.wait_logged(proc, 60, log, f"the {label} process")
    inputs_reader = TopicReader(ctx.bootstrap, in_topic)
    try:
        input_ts = {off: ts for off, ts, _ in inputs_reader.read(LATENCY_WARMUP + n, 120)}
    finally:
        inputs_reader.close()
    summary = m.latency_summary(input_ts, outputs, from_offset=LATENCY_WARMUP)
    achieved = m.rate_from_timestamps([ts for o, ts in input_ts.items() if o >= LATENCY_WARMUP])
    say(f"  {label}: {summary['matched']:,} records at {fmt_rate(achieved)} rec/s: p50 "
        f"{summary.get('p50_ms', 0):.0f} ms, p99 {summary.get('p99_ms', 0):.0f} ms")
    return {"achieved_input_rate": achieved, "records": n, "load_client": producer.client, "latency": summary,
            "contender_cpu_cores": cpu.cores_between(t_steady, t_sent), "log": str(log)}


def worker_starter(ctx: pr.Ctx, label: str, env_extra: dict[str, str]) -> Start:
    """``start`` for :func:`latency_run`: a worker (predictions on, not stopping when caught up)
    with ``env_extra`` (its backend and any other setting)."""

    def start(in_topic: str) -> tuple[subprocess.Popen[bytes], str, Path]:
        wp = pr.start_worker(ctx, in_topic, "all", label, until_caught_up=False, sample_rss=False,
                          env_extra=env_extra)
        return wp.proc, wp.topics["predictions"], wp.log

    return start


def latency_plan(rates: dict[str, float], *, extra_fetch_wait_ms: int | None) -> list[dict[str, Any]]:
    """The latency runs: per backend its worker (default settings) and its pipe at half that
    worker's maximum, and each one-process worker again at ``SP_KAFKA__FETCH_MAX_WAIT_MS``
    ``extra_fetch_wait_ms`` (None: not)."""
    plan: list[dict[str, Any]] = []
    for b in (b for b in c.BACKENDS if b in rates):
        base = {"backend": b, "rate": rates[b], "extra_env": {}}
        plan += [{**base, "kind": "worker"}, {**base, "kind": "pipe"}]
        if extra_fetch_wait_ms is not None and b in (c.KP, c.CF):
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


def section_latency(ctx: pr.Ctx, rates: dict[str, float], seconds: float, seed: int, say: Say, *,
                    extra_fetch_wait_ms: int | None = LATENCY_EXTRA_FETCH_WAIT_MS, repeats: int = 1
                    ) -> dict[str, Any]:
    """Per backend: the worker at a steady rate (half its own maximum), and the bare pipe of the
    same client at the same rate (the broker's and the client's share of the latency). The whole
    plan runs ``repeats`` times, order c.rotated per repeat; the summary holds medians."""
    plan = latency_plan(rates, extra_fetch_wait_ms=extra_fetch_wait_ms)
    most = max(max(100, int(p["rate"] * seconds)) for p in plan)
    values, meta = dense_records(LATENCY_WARMUP + most, DEFAULT_D, seed=seed + 2)
    runs = []
    for rep in range(repeats):
        for k, p in c.rotated(list(enumerate(plan)), rep):
            vals = values[: LATENCY_WARMUP + max(100, int(p["rate"] * seconds))]
            label = f"lat{k}r{rep}-{c.SHORT[p['backend']]}-{p['kind']}"

            def start_pipe(in_topic: str, p: dict[str, Any] = p, label: str = label, count: int = len(vals)
                           ) -> tuple[subprocess.Popen[bytes], str, Path]:
                return pr.start_contender(ctx, "bench.pipe", label, in_topic, count,
                                          ["--client", p["backend"]])

            with ctx.scope():
                if p["kind"] == "worker":  # the prediction's offset field is the input offset
                    start = worker_starter(ctx, label, {**c.backend_env(p["backend"]), **p["extra_env"]})
                    res = latency_run(ctx, label, vals, p["rate"], start, lambda v: int(v["offset"]), say)
                else:  # the input's "id" is its index, its offset in the fresh one-partition topic
                    res = latency_run(ctx, label, vals, p["rate"], start_pipe, lambda v: int(v["id"]), say)
            runs.append({**p, "plan_index": k, "repeat": rep, **res})
    return {"target_rates": rates, "seconds": seconds, "repeats": repeats, "warmup_records": LATENCY_WARMUP,
            "runs": runs, "summary": latency_summaries(plan, runs), "input": meta}


EVENT_FORMATS = ("envelope", "json", "avro")


def event_env(fmt: str, hash_bits: int | None, registry: str | None) -> dict[str, str]:
    """A worker's settings for an input format (events: by ``inputs.EVENT_SPEC``) and hash bits."""
    env = {} if hash_bits is None else {"SP_MODEL__HASH_BITS": str(hash_bits)}
    if fmt != "envelope":
        env |= {"SP_INPUT__FORMAT": fmt, **{f"SP_FEATURES__{k.upper()}": v if isinstance(v, str)
                                            else json.dumps(v) for k, v in inputs.EVENT_SPEC.items()}}
    return env | ({"SP_REGISTRY__URL": registry} if fmt == "avro" and registry else {})


def section_events(ctx: pr.Ctx, n: int, repeats: int, seed: int, say: Say, backends: Sequence[str],
                   formats: Sequence[str], hash_bits: Sequence[int | None], registry: str | None,
                   profile: Sequence[str] = ()) -> dict[str, Any]:
    """Each worker on the same ``n`` examples in each format (the envelope and ``formats``) at each
    hash setting, every (backend, hash setting, format) once a repeat in an order rotated by the
    repeat; then each format's worker under the tools in ``profile`` at the first hash setting."""
    import orjson

    from bench.worker.profile import profile_backend
    from stream_perceptron.codec.avro import encode_wire
    from stream_perceptron.kafka.registry import SchemaRegistry

    events, envelopes, meta = inputs.event_records(n, seed=seed + 4)
    formats = [f for f in EVENT_FORMATS if f in ("envelope", *formats)]
    topics, meta["mean_bytes"] = {}, {}
    for fmt in formats:
        if fmt == "avro":
            schema = json.dumps(inputs.EVENT_SCHEMA)
            meta["schema_id"] = sid = SchemaRegistry(registry or "").register(f"{ctx.prefix}-events", schema)
        values = (envelopes if fmt == "envelope" else [orjson.dumps(e) for e in events] if fmt == "json"
                  else [encode_wire(sid, schema, e) for e in events])
        meta["mean_bytes"][fmt] = sum(map(len, values)) / n
        topics[fmt], _ = ctx.new_input(f"ev-{fmt}-in", values)
    order = [(b, h, f) for b in backends for h in hash_bits for f in formats]
    runs = []
    for rep in range(repeats):
        for b, h, fmt in c.rotated(order, rep):
            label = f"ev{rep}-{c.SHORT[b]}-{h}-{fmt}"
            with ctx.scope():
                r = pr.run_worker(ctx, topics[fmt], n, "all", label, b, event_env(fmt, h, registry))
            runs.append({**r, "hash_bits": h, "format": fmt, "repeat": rep})
            say(f"  repeat {rep + 1}/{repeats} {b:<16} hash bits {h!s:<4} {fmt:<8} {fmt_rate(r['rate']):>9} "
                f"rec/s, {r['mistakes']} mistakes" + ("" if r["complete"] else "  INCOMPLETE"))
    out = {"input": meta, "formats": formats, "hash_bits": list(hash_bits), "runs": runs,
           "rows": event_rows(runs)}
    for b, fmt in ((b, f) for b in backends for f in formats if profile):
        with ctx.scope():  # each format's worker under the profilers, at the first hash setting
            env = event_env(fmt, hash_bits[0], registry)
            got = profile_backend(ctx, topics[fmt], n, profile, b, say, env, pipe=False)
            out.setdefault("profile", {})[f"{b} {fmt}"] = {**got, "backend": f"{b}, {fmt} input"}
    return out


def event_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (backend, hash setting, format): the medians of its complete runs (rate, CPU per record),
    their mistakes, and the ratios to the envelope's of the same backend and hash setting (of the
    medians, and repeat by repeat)."""
    groups: dict[tuple[str, int | None, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["backend"], r["hash_bits"], r["format"]), []).append(r)
    rows = []
    for (b, h, f), mine in groups.items():
        envelope = groups.get((b, h, "envelope"), [])
        s, env = pr.summarize(mine), pr.summarize(envelope)
        by_repeat = {r["repeat"]: r["rate"] for r in envelope if r.get("complete")}
        done = [r for r in mine if r.get("complete")]
        rows.append({"backend": b, "hash_bits": h, "format": f, "summary": s,
                     "ratio": _over(s["median_rate"], env["median_rate"]),
                     "cpu_ratio": _over(s["median_cpu_us_per_record"], env["median_cpu_us_per_record"]),
                     "per_repeat": [_over(r["rate"], by_repeat.get(r["repeat"])) for r in done],
                     "mistakes": sorted({r.get("mistakes") for r in mine}, key=str)})
    return rows


def _over(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b
