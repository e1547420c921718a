"""Workers side by side in one group: predictions/s and CPU per record, by partition-state store,
worker count and mixing interval.

    .venv/bin/python -m bench.bench_scale                         # 1, 2, 4 workers, both stores
    .venv/bin/python -m bench.bench_scale --compare 464595b       # one worker: 464595b and this checkout
    .venv/bin/python -m bench.bench_scale --workers 1,2 --mix 0,1000,100   # mixing off, every 1000, every 100
    .venv/bin/python -m bench.bench_scale --workers 2 --mix 0,100,1000 --staleness 0,1,inf

How it measures, and the figures: docs/performance.md, "Scale" and "Mixing"; a row's paused seconds
are the ``waited_s`` its adoptions logged, summed; the tables give medians of interleaved repeats.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient

from bench.worker.contenders import BACKENDS, CF, KP, ROOT, backend_env, confluent_available, rotated
from bench.worker.formatting import fmt_ratio, fmt_value, format_table, write_json
from bench.worker.inputs import DEFAULT_D, dense_records
from bench.worker.machine import git_state, worktree
from bench.worker.measures import CLK_TCK, rate_from_timestamps
from bench.worker.processes import Ctx, RssSampler, broker_at, log_tail, popen_logged, worker_env
from bench.worker.topics import admin_client, produce_all, read_back
from stream_perceptron.state.model_topic import written

STORES = ("directory", "kafka")
SCALE_HEADERS = ["store", "workers", "mix E", "s", "predictions/s", "x 1 worker", "CPU us/record",
                 "CPU x off", "runs", "broker CPU us/record", "mixing points", "paused s"]
COMPARE_HEADERS = ["store (head)", "base CPU us/record", "head CPU us/record", "head / base",
                   "base predictions/s", "head predictions/s"]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    p.add_argument("--stores", default=",".join(STORES), help=f"comma-separated of {','.join(STORES)}")
    p.add_argument("--backend", default=KP, choices=BACKENDS)
    p.add_argument("--partitions", type=int, default=8, help="partitions of the input topic")
    p.add_argument("--records", type=int, default=200_000, help="input records per run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--mix", default="0", help="comma-separated SP_MIX__EVERY_EXAMPLES (0: mixing off)")
    p.add_argument("--staleness", default="inf", help="comma-separated SP_MIX__MAX_STALENESS (inf: unset)")
    p.add_argument("--compare", metavar="REF", help="one worker on REF and on this checkout, side by side")
    p.add_argument("--session-timeout-ms", type=int, default=6_000, help="tansu holds a join for half of it")
    p.add_argument("--bootstrap", help="host:port of a broker; default: start the embedded one")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    try:
        args.workers = sorted({int(w) for w in args.workers.split(",") if w})
    except ValueError:
        p.error("--workers takes comma-separated numbers")
    args.stores = [s for s in args.stores.split(",") if s]
    try:
        args.mix = sorted({int(v) for v in args.mix.split(",") if v.strip()})
        args.staleness = sorted({None if v.strip() == "inf" else int(v) for v in args.staleness.split(",")},
                                key=lambda v: float("inf") if v is None else v)
    except ValueError:
        args.mix = []
    problems = [
        "" if args.stores and set(args.stores) <= set(STORES) else f"--stores takes {', '.join(STORES)}",
        "confluent-kafka is not installed" if args.backend == CF and not confluent_available() else "",
        "--workers must be between 1 and --partitions"
        if not args.workers or min(args.workers) < 1 or max(args.workers) > args.partitions else "",
        "--records must be >= 10 per partition, --repeats >= 1"
        if args.records < 10 * args.partitions or args.repeats < 1 else "",
        "--mix takes comma-separated numbers >= 0 (SP_MIX__EVERY_EXAMPLES; 0 = off), --staleness"
        " numbers >= 0 or inf" if not args.mix or min([*args.mix, *(v or 0 for v in args.staleness)]) < 0
        else "",
        "--compare measures mixing off only: leave out --mix" if args.compare and args.mix != [0] else ""]
    if any(problems):
        p.error("; ".join(filter(None, problems)))
    args.workers = [1] if args.compare else args.workers
    return args


class GroupAdmin(KafkaAdminClient):  # type: ignore[misc]
    """kafka-python's admin client, minus its reading of a group's authorized operations: tansu
    answers DescribeGroups with an operation code kafka-python does not know (``15 is not a
    valid ACLOperation``), and only the group's state and members are wanted here."""

    def _process_acl_operations(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj.pop("authorized_operations", None)
        return obj


def run_env(side: str, store: str, group: str, mix: int, bound: int | None = None) -> dict[str, str]:
    """The settings that choose the store and mixing (``bound``: SP_MIX__MAX_STALENESS); none for
    the base side, whose code may not know them (``--compare`` runs no mixing)."""
    if side == "base":
        return {}
    mixing = {"SP_MIX__EVERY_EXAMPLES": str(mix), "SP_MIX__TOPIC": f"{group}-model"} if mix else {}
    mixing.update({"SP_MIX__MAX_STALENESS": str(bound)} if mix and bound is not None else {})
    return {"SP_CHECKPOINT__STORE": store, "SP_CHECKPOINT__TOPIC": f"{group}-state", **mixing}


def checkpoint_dir(workdir: Path, side: str, store: str, group: str, k: int) -> Path:
    """The directory store's one directory the group shares; else one empty directory per worker
    (the Kafka store keeps no state there; the base side's code may hold its directory alone)."""
    return workdir / (f"{group}-state" if side == "head" and store == "directory" else f"{group}-{k}")


def wait_settled(bootstrap: str, group: str, procs: Sequence[Any], logs: Sequence[Path],
                 timeout_s: float) -> float:
    """Until the group is ``Stable`` with every worker a member; the seconds it took."""
    started = time.monotonic()
    with admin_client(bootstrap, GroupAdmin) as admin:
        while True:
            exited = [(p.returncode, log) for p, log in zip(procs, logs, strict=True) if p.poll() is not None]
            if exited:
                raise RuntimeError(f"a worker exited ({exited[0][0]}) before the group settled; log: "
                                   f"{exited[0][1]}\n{log_tail(exited[0][1])}")
            try:
                desc = admin.describe_groups([group])[group]
                state, members = desc["group_state"], len(desc["members"])
            except Exception:  # the coordinator busy with the join: asked again
                state, members = "unknown", 0
            if state == "Stable" and members == len(procs):
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"group {group}: {state} with {members} of {len(procs)} members after "
                                   f"{timeout_s:g} s")
            time.sleep(0.1)


def cpu_seconds(samplers: Sequence[RssSampler], t0: float, t1: float) -> float | None:
    """CPU seconds the sampled processes used together between wall times ``t0`` and ``t1``;
    None when not measured: the samples do not cover the window, or the total is under one tick
    of the kernel's CPU counters (``1 / CLK_TCK`` s), which cannot be told from nothing (a run of
    a few hundred records)."""
    cores = [s.cores_between(t0, t1) for s in samplers]
    total = None if None in cores else sum(cores) * (t1 - t0)  # type: ignore[arg-type]
    return total if total is not None and total >= 1 / CLK_TCK else None


def one_run(ctx: Ctx, side: str, store: str, backend: str, workers: int, mix: tuple[int, int | None],
            partitions: int, values: Sequence[bytes], settle_timeout_s: float = 120) -> dict[str, Any]:
    """``workers`` workers of ``side`` in a fresh group on a fresh input topic, mixing every
    ``mix[0]`` labeled examples of a partition (0: not) with SP_MIX__MAX_STALENESS ``mix[1]``:
    their rate, CPU and time paused."""
    mix, bound = mix
    n = len(values)
    with ctx.scope():
        (in_topic,) = ctx.new_topics("in", partitions=partitions)
        pred, stats, dead = ctx.new_topics("pred", "stats", "dead")
        group = ctx.name(f"{side}-{store}-w{workers}-mix{mix}-s{bound}")
        ctx.topics += [f"{group}-state"] + ([f"{group}-model"] if mix else [])
        topics = {"input": in_topic, "predictions": pred, "stats": stats, "dead_letter": dead}
        procs, cpus, logs = [], [], []
        for k in range(workers):
            extra = {**backend_env(backend), **run_env(side, store, group, mix, bound),
                     "SP_KAFKA__CLIENT_ID": f"{group}-{k}"}
            ckpt = checkpoint_dir(ctx.workdir, side, store, group, k)
            env = worker_env(ctx, topics, ckpt, "all", group, extra)
            logs.append(ctx.workdir / f"{group}-{k}.log")
            procs.append(popen_logged([sys.executable, "-m", "stream_perceptron.cli", "run"], env, logs[-1],
                                      ctx.code_root))
            cpus.append(RssSampler(procs[-1].pid))
            cpus[-1].start()
        broker = None
        try:
            settle_s = wait_settled(ctx.bootstrap, group, procs, logs, settle_timeout_s)
            broker = ctx.broker_sampler()
            while broker is not None and not broker.samples and broker.is_alive():
                time.sleep(0.01)  # its first sample before the window opens
            t0 = time.time()
            produce_all(ctx.bootstrap, in_topic, values)  # keyed: the default partitioner spreads them
            back = read_back(ctx.bootstrap, pred, expected=n, timeout_s=120 + n / 1000)
            t1 = max(back.timestamps, default=0) / 1000
            deadline = time.monotonic() + 2  # until the broker's sampler has a sample past the window
            while broker is not None and broker.is_alive() and broker.samples[-1][0] <= t1 \
                    and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            codes = []
            for proc in procs:
                try:
                    codes.append(proc.wait(90))
                except subprocess.TimeoutExpired:  # a worker that hangs past its shutdown: killed, an error
                    proc.kill()
                    codes.append(proc.wait(10))
            for sampler in [*cpus, *([broker] if broker else [])]:
                sampler.stop()
        model = read_back(ctx.bootstrap, f"{group}-model", values=True, idle_s=1.0) if mix else None
        pairs = [] if model is None else [(k and k.decode(), v)
                                          for k, v in zip(model.keys, model.values, strict=True)]
        adoptions = {(r["partition"], e["offset"]): e for r in written(pairs) for e in r["log"]}
    if len(back.offsets) != n or any(codes):
        raise RuntimeError(f"{group}: {len(back.offsets)} predictions of {n}, exit codes {codes}; logs: "
                           f"{[str(log) for log in logs]}\n{log_tail(logs[0])}")
    cpu = cpu_seconds(cpus, t0, t1)
    broker_cpu = cpu_seconds([broker], t0, t1) if broker is not None else None
    return {"side": side, "store": store, "workers": workers, "mix": mix, "staleness": bound,
            "mixing_points": len(adoptions),
            "paused_s": sum(e.get("waited_s", 0) for e in adoptions.values()),
            "backend": backend, "records": n, "rate": rate_from_timestamps(back.timestamps),
            "cpu_us_per_record": None if cpu is None else cpu * 1e6 / n,
            "broker_cpu_us_per_record": None if broker_cpu is None else broker_cpu * 1e6 / n,
            "settle_s": settle_s, "seconds_to_last_prediction": t1 - t0, "group": group}


def median_of(runs: Sequence[dict[str, Any]], key: str) -> float | None:
    """The median of ``key`` over the runs that have it."""
    got = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(got) if got else None


def scale_rows(runs: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Per (store, workers, mixing interval E, staleness bound s), the columns of
    ``SCALE_HEADERS``: median predictions/s and its multiple of the one-worker median (same store,
    E and s); median CPU µs per record and its multiple of the median with mixing off (same store
    and workers), every run's CPU, the broker's median, the median number of mixing points and of
    seconds paused."""
    def of(store: str, workers: int, mix: int, s: int) -> list[dict[str, Any]]:
        return [r for r in runs
                if (r["store"], r["workers"], r["mix"], r["staleness"]) == (store, workers, mix, s)]

    def cell(store: str, workers: int, mix: int, s: int, key: str) -> float | None:
        return median_of(of(store, workers, mix, s), key)

    rows, inf = [], float("inf")
    keys = {(r["store"], r["workers"], r["mix"], inf if r["staleness"] is None else r["staleness"])
            for r in runs}
    for store, w, e, s in sorted(keys):
        s = None if s == inf else s
        rate, cpu, each = cell(store, w, e, s, "rate"), cell(store, w, e, s, "cpu_us_per_record"), \
            of(store, w, e, s)
        rows.append([store, str(w), str(e), "inf" if s is None else str(s), fmt_value(rate, ",.0f"),
                     fmt_ratio(rate, cell(store, 1, e, s, "rate")),
                     fmt_value(cpu, ".1f"), fmt_ratio(cpu, cell(store, w, 0, None, "cpu_us_per_record")),
                     ", ".join(fmt_value(r["cpu_us_per_record"], ".1f") for r in each),
                     fmt_value(cell(store, w, e, s, "broker_cpu_us_per_record"), ".1f"),
                     fmt_value(cell(store, w, e, s, "mixing_points"), ",.0f"),
                     fmt_value(cell(store, w, e, s, "paused_s"), ",.1f") if e else ""])
    return rows


def compare_rows(runs: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Per head store: base's and head's median CPU µs per record, head over base, and their
    predictions/s."""
    base = [r for r in runs if r["side"] == "base"]
    b_cpu, b_rate = median_of(base, "cpu_us_per_record"), median_of(base, "rate")
    rows = []
    for store in sorted({r["store"] for r in runs if r["side"] == "head"}):
        head = [r for r in runs if r["side"] == "head" and r["store"] == store]
        h_cpu, h_rate = median_of(head, "cpu_us_per_record"), median_of(head, "rate")
        rows.append([store, fmt_value(b_cpu, ".1f"), fmt_value(h_cpu, ".1f"),
                     fmt_value(h_cpu / b_cpu if h_cpu and b_cpu else None, ".3f"),
                     fmt_value(b_rate, ",.0f"), fmt_value(h_rate, ",.0f")])
    return rows


def plan(args: argparse.Namespace) -> Iterator[tuple[int, str, str, int, tuple[int, int | None]]]:
    """(repeat, side, store, workers, (mixing interval, staleness bound)) of every run,
    interleaved: each repeat runs every combination once, in an order rotated by the repeat. The
    base side runs once per repeat (its code has one layout), under the first store's name."""
    mixes = [(e, b) for e in args.mix for b in (args.staleness if e else [None])]
    combos = [("head", s, w, m) for s in args.stores for w in args.workers for m in mixes]
    combos = [("base", args.stores[0], 1, (0, None)), *combos] if args.compare else combos
    for k in range(args.repeats):
        for side, store, workers, mix in rotated(combos, k):
            yield k, side, store, workers, mix


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    values, meta = dense_records(args.records, DEFAULT_D, seed=args.seed)
    runs: list[dict[str, Any]] = []
    t_start = time.time()
    base = worktree(args.compare) if args.compare else nullcontext((ROOT, ""))
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp, base as (base_root, base_commit), \
            broker_at(args.bootstrap) as (bootstrap, broker_pid):
        ctx = Ctx(bootstrap, f"scale-{int(t_start)}", Path(tmp), args.session_timeout_ms, broker_pid)
        for k, side, store, workers, mix in plan(args):
            ctx.code_root = {"base": base_root, "head": ROOT}[side]
            run = one_run(ctx, side, store, args.backend, workers, mix, args.partitions, values)
            run["repeat"] = k
            runs.append(run)
            print(f"  {k} {side} {store} {workers} worker(s), E, s {mix}: {fmt_value(run['rate'], ',.0f')} "
                  f"predictions/s, {fmt_value(run['cpu_us_per_record'], '.1f')} CPU us/record, "
                  f"{run['mixing_points']} mixing points, paused {run['paused_s']:.1f} s",
                  file=sys.stderr, flush=True)
    src = git_state()
    head_commit, dirty = src["commit"], bool(src["tracked_changed"])
    print(f"{args.records:,} records of {DEFAULT_D} features on {args.partitions} partitions, "
          f"{args.backend}; head {head_commit[:7]}{' with changes' if dirty else ''}"
          + (f", base {base_commit[:7]} ({args.compare})" if args.compare else "")
          + f"; medians of {args.repeats} interleaved repeats; {time.time() - t_start:,.0f} s")
    rows = scale_rows([r for r in runs if r["side"] == "head"])
    print(format_table(SCALE_HEADERS, rows))
    report: dict[str, Any] = {"records": args.records, "partitions": args.partitions, "backend": args.backend,
                              "repeats": args.repeats, "mix": args.mix,
                              "staleness": args.staleness, "input": meta, "runs": runs,
                              "head": {"commit": head_commit, "uncommitted_changes": dirty},
                              "scale": [dict(zip(SCALE_HEADERS, row, strict=True)) for row in rows]}
    if args.compare:
        crows = compare_rows(runs)
        print(f"one worker, {args.compare} ({base_commit[:7]}) against this checkout:")
        print(format_table(COMPARE_HEADERS, crows))
        report["base"] = {"ref": args.compare, "commit": base_commit}
        report["compare"] = [dict(zip(COMPARE_HEADERS, row, strict=True)) for row in crows]
    if any(r["rate"] is None or r["cpu_us_per_record"] is None for r in runs):
        print(f"n/a: not measured (a run too short for its timestamps or the CPU counters' 1/{CLK_TCK} s)")
    write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
