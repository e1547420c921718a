"""Workers side by side in one group: aggregate predictions/s and CPU per record, by store and
mixing interval.

Run from the repository root::

    .venv/bin/python -m bench.bench_scale                         # 1, 2, 4 workers, both stores
    .venv/bin/python -m bench.bench_scale --backend confluent-kafka --records 400000 --repeats 5
    .venv/bin/python -m bench.bench_scale --compare 464595b       # one worker: 464595b and this checkout
    .venv/bin/python -m bench.bench_scale --workers 1,2 --mix 0,1000,100   # mixing off, every 1000, every 100

Each run makes a fresh ``--partitions``-partition input topic (8) and a fresh group, starts
``W`` worker processes (``stream-perceptron run``) in that group, waits until the group is
stable with all ``W`` as members (DescribeGroups), and only then produces ``--records`` keyed
records (the client's default partitioner spreads the keys), as fast as the producer goes
(confluent-kafka when installed). What it measures:

* **predictions/s**: (count − 1) / (last − first) over the predictions' CreateTime, all workers
  together, once every input record has its prediction;
* **CPU µs per record**: the user + system CPU of every worker process (and its children: the
  producer process of ``kafka-python+process``), from the moment the input starts to the last
  prediction, summed over the workers, divided by the records; the embedded broker's CPU per
  record beside it.

With the directory store the workers share one ``SP_CHECKPOINT__DIR``; with the Kafka store each
has an empty one and the group its own state topic. Repeats are interleaved (every store, worker
count and mixing interval once per repeat, in an order rotated by the repeat) and the table gives
medians.

``--mix E1,E2,...`` runs each store and worker count at each value of ``SP_MIX__EVERY_EXAMPLES``
(0, the default, is off; every record is labeled, so ``E > 0`` mixes every ``E`` records of a
partition), each run with ``E > 0`` through a fresh model topic (``SP_MIX__TOPIC``). The table
adds **CPU × off**: a row's median CPU µs per record over the median of the row with the same
store and worker count and ``E = 0``; and the mixing points the run made (records of its model
topic, ``bench/worker/mixing.py``).

``--compare REF`` runs the single-worker measurement on REF (checked out into a temporary git
worktree as ``bench.bench_ab`` does) and on this checkout, side by side in rotated order, and
reports CPU per record of this checkout over REF's. REF runs as it is, with its own default
checkpoint layout (a code that knows no ``SP_CHECKPOINT__STORE`` is not given one).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient

from bench.bench_ab import _git, worktree
from bench.worker.contenders import BACKENDS, CF, KP, ROOT, backend_env, confluent_available, rotated
from bench.worker.formatting import format_table, write_json
from bench.worker.inputs import DEFAULT_D, dense_records
from bench.worker.measures import CLK_TCK, rate_from_timestamps
from bench.worker.mixing import mix_env, mix_values, mixing_points
from bench.worker.processes import Ctx, RssSampler, broker_at, log_tail, popen_logged, worker_env
from bench.worker.topics import LoadProducer, read_back

STORES = ("directory", "kafka")
SIDES = ("base", "head")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    p.add_argument("--stores", default=",".join(STORES), help=f"comma-separated of {','.join(STORES)}")
    p.add_argument("--backend", default=KP, choices=BACKENDS)
    p.add_argument("--partitions", type=int, default=8, help="partitions of the input topic")
    p.add_argument("--records", type=int, default=200_000, help="input records per run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--mix", default="0",
                   help="comma-separated values of SP_MIX__EVERY_EXAMPLES to run at (0 = mixing off)")
    p.add_argument("--compare", metavar="REF", help="one worker on REF and on this checkout, side by side")
    p.add_argument("--session-timeout-ms", type=int, default=6_000,
                   help="the workers' group session timeout (tansu holds a join for half of it)")
    p.add_argument("--bootstrap", help="host:port of a broker; default: start the embedded one")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    try:
        args.workers = sorted({int(w) for w in args.workers.split(",") if w})
    except ValueError:
        p.error("--workers takes comma-separated numbers")
    args.stores = [s for s in args.stores.split(",") if s]
    if not args.stores or not set(args.stores) <= set(STORES):
        p.error(f"--stores takes {', '.join(STORES)}")
    if args.backend == CF and not confluent_available():
        p.error("confluent-kafka is not installed")
    if not args.workers or min(args.workers) < 1 or max(args.workers) > args.partitions:
        p.error("--workers must be between 1 and --partitions")
    if args.records < 10 * args.partitions or args.repeats < 1:
        p.error("--records must be >= 10 per partition, --repeats >= 1")
    try:
        args.mix = mix_values(args.mix)
    except ValueError:
        p.error("--mix takes comma-separated numbers >= 0 (SP_MIX__EVERY_EXAMPLES; 0 = off)")
    if args.compare and args.mix != [0]:
        p.error("--compare measures mixing off only: leave out --mix")
    if args.compare:
        args.workers = [1]
    return args


# -- the group, from outside -----------------------------------------------------------------------

class GroupAdmin(KafkaAdminClient):  # type: ignore[misc]
    """kafka-python's admin client, minus its reading of a group's authorized operations: tansu
    answers DescribeGroups with an operation code kafka-python does not know (``15 is not a
    valid ACLOperation``), and only the group's state and members are wanted here."""

    def _process_acl_operations(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj.pop("authorized_operations", None)
        return obj


def group_members(admin: KafkaAdminClient, group: str) -> tuple[str, frozenset[str]]:
    """The group's state (``Stable`` once every member has its partitions) and member ids."""
    desc = admin.describe_groups([group])[group]
    return desc["group_state"], frozenset(m["member_id"] for m in desc["members"])


# -- one run -----------------------------------------------------------------------------------------

@dataclass
class Worker:
    proc: Any
    log: Path
    cpu: RssSampler


def store_env(side: str, store: str, group: str) -> dict[str, str]:
    """The settings that choose the store; none for the base side, whose code may not know them.

    >>> store_env("head", "kafka", "g")
    {'SP_CHECKPOINT__STORE': 'kafka', 'SP_CHECKPOINT__TOPIC': 'g-state'}
    >>> store_env("base", "kafka", "g")
    {}
    """
    if side == "base":
        return {}
    return {"SP_CHECKPOINT__STORE": store, "SP_CHECKPOINT__TOPIC": f"{group}-state"}


def checkpoint_dir(workdir: Path, side: str, store: str, group: str, k: int) -> Path:
    """The directory store's one directory the group shares; else one empty directory per worker
    (the Kafka store keeps no state there; the base side's code may hold its directory alone).

    >>> [checkpoint_dir(Path("w"), s, st, "g", 1).as_posix() for s, st in
    ...  (("head", "directory"), ("head", "kafka"), ("base", "directory"))]
    ['w/g-state', 'w/g-1', 'w/g-1']
    """
    if side == "head" and store == "directory":
        return workdir / f"{group}-state"
    return workdir / f"{group}-{k}"


def start_workers(ctx: Ctx, side: str, store: str, backend: str, topics: dict[str, str], group: str,
                  workers: int, settings: dict[str, str]) -> list[Worker]:
    out = []
    for k in range(workers):
        extra = {**backend_env(backend), **store_env(side, store, group), **settings,
                 "SP_KAFKA__CLIENT_ID": f"{group}-{k}"}
        env = worker_env(ctx, topics, checkpoint_dir(ctx.workdir, side, store, group, k), "all", group,
                         extra)
        log = ctx.workdir / f"{group}-{k}.log"
        proc = popen_logged([sys.executable, "-m", "stream_perceptron.cli", "run"], env, log, ctx.code_root)
        cpu = RssSampler(proc.pid)
        cpu.start()
        out.append(Worker(proc, log, cpu))
    return out


def wait_settled(bootstrap: str, group: str, workers: list[Worker], timeout_s: float) -> float:
    """Until the group is ``Stable`` with every worker a member; the seconds it took."""
    from stream_perceptron.kafka.admin import client_config
    from stream_perceptron.settings import KafkaSettings

    admin = GroupAdmin(**client_config(KafkaSettings(bootstrap_servers=bootstrap)))
    started = time.monotonic()
    try:
        while True:
            for w in workers:
                if w.proc.poll() is not None:
                    raise RuntimeError(f"a worker exited ({w.proc.returncode}) before the group "
                                       f"settled; log: {w.log}\n{log_tail(w.log)}")
            try:
                state, members = group_members(admin, group)
            except Exception:  # the coordinator busy with the join: asked again
                state, members = "unknown", frozenset()
            if state == "Stable" and len(members) == len(workers):
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"group {group}: {state} with {len(members)} of {len(workers)} "
                                   f"members after {timeout_s:g} s")
            time.sleep(0.1)
    finally:
        admin.close()


def produce_keyed(bootstrap: str, topic: str, values: Sequence[bytes]) -> None:
    """``values[i]`` with key ``str(i)``, the default partitioner choosing the partition."""
    producer = LoadProducer(bootstrap)
    try:
        send = producer.sender(topic)
        for i, value in enumerate(values):
            send(value, str(i).encode())
        producer.flush()
    finally:
        producer.close()


def stop_workers(workers: list[Worker], timeout_s: float = 90) -> list[int | None]:
    """SIGTERM every worker, then wait for each; their exit codes."""
    for w in workers:
        if w.proc.poll() is None:
            w.proc.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for w in workers:
        try:
            codes.append(w.proc.wait(timeout=timeout_s))
        except Exception:
            w.proc.kill()
            codes.append(w.proc.wait(10))
        w.cpu.stop()
    return codes


def sampled_past(sampler: RssSampler, t: float, timeout_s: float = 2.0) -> None:
    """Until ``sampler`` has a sample taken after wall time ``t`` (or the deadline), so that a
    window ending at ``t`` is covered."""
    deadline = time.monotonic() + timeout_s
    while sampler.is_alive() and time.monotonic() < deadline and (
            not sampler.samples or sampler.samples[-1][0] <= t):
        time.sleep(0.02)


def cpu_seconds(samplers: Sequence[RssSampler], t0: float, t1: float) -> float | None:
    """CPU seconds the sampled processes used together between wall times ``t0`` and ``t1``;
    None when not measured: the samples do not cover the window, or the total is under one tick
    of the kernel's CPU counters (``1 / CLK_TCK`` s), which cannot be told from nothing (a run of
    a few hundred records).

    >>> busy, idle = RssSampler(0), RssSampler(0)
    >>> busy.samples = [(0.0, 1, 1, 0.0), (1.0, 1, 1, 0.5)]
    >>> idle.samples = [(0.0, 1, 1, 0.0), (1.0, 1, 1, 0.0)]
    >>> cpu_seconds([busy, idle], 0.0, 1.0), cpu_seconds([idle], 0.0, 1.0), cpu_seconds([busy], 0.0, 2.0)
    (0.5, None, None)
    """
    total = 0.0
    for s in samplers:
        cores = s.cores_between(t0, t1)
        if cores is None:
            return None
        total += cores * (t1 - t0)
    return total if total >= 1 / CLK_TCK else None


def one_run(ctx: Ctx, side: str, store: str, backend: str, workers: int, mix: int, partitions: int,
            values: Sequence[bytes], settle_timeout_s: float = 120) -> dict[str, Any]:
    """``workers`` workers of ``side`` in a fresh group on a fresh input topic, mixing every ``mix``
    labeled examples of a partition (0: not): their rate and CPU."""
    from stream_perceptron.kafka.admin import ensure_topics
    from stream_perceptron.settings import KafkaSettings

    n = len(values)
    with ctx.scope():
        in_topic = ctx.name("in")
        ensure_topics(KafkaSettings(bootstrap_servers=ctx.bootstrap), {in_topic: partitions})
        pred, stats, dead = ctx.new_topics("pred", "stats", "dead")
        group = ctx.name(f"{side}-{store}-w{workers}-mix{mix}")
        model = f"{group}-model"
        ctx.topics += [in_topic, f"{group}-state"] + ([model] if mix else [])
        topics = {"input": in_topic, "predictions": pred, "stats": stats, "dead_letter": dead}
        procs = start_workers(ctx, side, store, backend, topics, group, workers, mix_env(mix, model))
        try:
            settle_s = wait_settled(ctx.bootstrap, group, procs, settle_timeout_s)
            broker = ctx.broker_sampler()
            while broker is not None and not broker.samples and broker.is_alive():
                time.sleep(0.01)  # its first sample before the window opens
            t0 = time.time()
            produce_keyed(ctx.bootstrap, in_topic, values)
            produced_s = time.time() - t0
            back = read_back(ctx.bootstrap, pred, expected=n, timeout_s=120 + n / 1000)
            if broker is not None:
                sampled_past(broker, max(back.timestamps, default=0) / 1000)
                broker.stop()
        finally:
            codes = stop_workers(procs)
        points = mixing_points(ctx.bootstrap, model) if mix else 0
    if len(back.offsets) != n or any(c != 0 for c in codes):
        raise RuntimeError(f"{group}: {len(back.offsets)} predictions of {n}, exit codes {codes}; "
                           f"logs: {[str(w.log) for w in procs]}\n{log_tail(procs[0].log)}")
    t1 = max(back.timestamps) / 1000
    cpu = cpu_seconds([w.cpu for w in procs], t0, t1)
    broker_cpu = cpu_seconds([broker], t0, t1) if broker is not None else None
    return {
        "side": side, "store": store, "workers": workers, "mix": mix, "mixing_points": points,
        "backend": backend, "records": n,
        "rate": rate_from_timestamps(back.timestamps),
        "cpu_us_per_record": None if cpu is None else cpu * 1e6 / n,
        "broker_cpu_us_per_record": None if broker_cpu is None else broker_cpu * 1e6 / n,
        "settle_s": settle_s, "produce_s": produced_s, "seconds_to_last_prediction": t1 - t0,
        "group": group,
    }


# -- the report --------------------------------------------------------------------------------------

def median_of(runs: Sequence[dict[str, Any]], key: str) -> float | None:
    """The median of ``key`` over the runs that have it.

    >>> median_of([{"rate": 3.0}, {"rate": None}, {"rate": 1.0}, {"rate": 2.0}], "rate")
    2.0
    >>> median_of([{"rate": None}], "rate") is None
    True
    """
    got = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(got) if got else None


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "n/a" if value is None else format(value, spec)


def _ratio(num: float | None, den: float | None, spec: str = ".2f", unit: str = "x") -> str:
    return f"{num / den:{spec}}{unit}" if num and den else "n/a"


SCALE_HEADERS = ["store", "workers", "mix E", "predictions/s", "x 1 worker", "CPU us/record", "CPU x off",
                 "runs", "broker CPU us/record", "mixing points"]


def scale_rows(runs: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Per (store, workers, mixing interval E), the columns of ``SCALE_HEADERS``: median
    predictions/s and its multiple of the one-worker median (same store and E); median CPU µs per
    record and its multiple of the median with mixing off (same store and workers), every run's
    CPU, the broker's median, the median number of mixing points.

    >>> runs = [{"store": "directory", "workers": w, "mix": e, "rate": r, "cpu_us_per_record": c,
    ...          "broker_cpu_us_per_record": 2.0, "mixing_points": m}
    ...         for w, e, r, c, m in ((1, 0, 100.0, 10.0, 0), (2, 0, 180.0, 11.0, 0),
    ...                               (2, 100, 90.0, 22.0, 40), (2, 100, 80.0, 33.0, 40))]
    >>> scale_rows(runs)[1]
    ['directory', '2', '0', '180', '1.80x', '11.0', '1.00x', '11.0', '2.0', '0']
    >>> scale_rows(runs)[2]  # no one-worker run with E = 100
    ['directory', '2', '100', '85', 'n/a', '27.5', '2.50x', '22.0, 33.0', '2.0', '40']
    """
    def cell(store: str, workers: int, mix: int) -> list[dict[str, Any]]:
        return [r for r in runs if (r["store"], r["workers"], r["mix"]) == (store, workers, mix)]

    rows = []
    for store, w, e in sorted({(r["store"], r["workers"], r["mix"]) for r in runs}):
        mine = cell(store, w, e)
        rate, cpu = median_of(mine, "rate"), median_of(mine, "cpu_us_per_record")
        rows.append([store, str(w), str(e), _fmt(rate), _ratio(rate, median_of(cell(store, 1, e), "rate")),
                     _fmt(cpu, ".1f"), _ratio(cpu, median_of(cell(store, w, 0), "cpu_us_per_record")),
                     ", ".join(_fmt(r["cpu_us_per_record"], ".1f") for r in mine),
                     _fmt(median_of(mine, "broker_cpu_us_per_record"), ".1f"),
                     _fmt(median_of(mine, "mixing_points"))])
    return rows


def compare_rows(runs: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Per head store: base's and head's median CPU µs per record and predictions/s, and head
    over base.

    >>> runs = [{"side": "base", "store": "directory", "rate": 100.0, "cpu_us_per_record": 10.0},
    ...         {"side": "head", "store": "kafka", "rate": 90.0, "cpu_us_per_record": 10.5}]
    >>> compare_rows(runs)
    [['kafka', '10.0', '10.5', '1.050', '100', '90']]
    """
    base = [r for r in runs if r["side"] == "base"]
    b_cpu, b_rate = median_of(base, "cpu_us_per_record"), median_of(base, "rate")
    rows = []
    for store in sorted({r["store"] for r in runs if r["side"] == "head"}):
        head = [r for r in runs if r["side"] == "head" and r["store"] == store]
        h_cpu, h_rate = median_of(head, "cpu_us_per_record"), median_of(head, "rate")
        rows.append([store, _fmt(b_cpu, ".1f"), _fmt(h_cpu, ".1f"), _ratio(h_cpu, b_cpu, ".3f", ""),
                     _fmt(b_rate), _fmt(h_rate)])
    return rows


def plan(args: argparse.Namespace) -> Iterator[tuple[int, str, str, int, int]]:
    """(repeat, side, store, workers, mixing interval) of every run, interleaved: each repeat runs
    every combination once, in an order rotated by the repeat. The base side runs once per repeat
    (its code has one layout, and ``--compare`` takes no ``--mix``), under the first store's name.

    >>> a = argparse.Namespace(repeats=2, stores=["directory", "kafka"], workers=[1, 2], mix=[0],
    ...                        compare=None)
    >>> [(k, st, w) for k, _, st, w, _ in plan(a)][:5]
    [(0, 'directory', 1), (0, 'directory', 2), (0, 'kafka', 1), (0, 'kafka', 2), (1, 'directory', 2)]
    >>> a = argparse.Namespace(repeats=2, stores=["kafka"], workers=[1], mix=[0, 100], compare=None)
    >>> [(k, e) for k, _, _, _, e in plan(a)]
    [(0, 0), (0, 100), (1, 100), (1, 0)]
    >>> a = argparse.Namespace(repeats=1, stores=["directory", "kafka"], workers=[1], mix=[0],
    ...                        compare="HEAD")
    >>> [(s, st) for _, s, st, _, _ in plan(a)]
    [('base', 'directory'), ('head', 'directory'), ('head', 'kafka')]
    """
    combos = [("head", s, w, e) for s in args.stores for w in args.workers for e in args.mix]
    if args.compare:
        combos = [("base", args.stores[0], 1, 0), *combos]
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
        roots = {"base": base_root, "head": ROOT}
        for k, side, store, workers, mix in plan(args):
            ctx.code_root = roots[side]
            run = one_run(ctx, side, store, args.backend, workers, mix, args.partitions, values)
            run["repeat"] = k
            runs.append(run)
            print(f"  {k} {side} {store} {workers} worker(s), mix {mix}: {_fmt(run['rate'])} predictions/s, "
                  f"{_fmt(run['cpu_us_per_record'], '.1f')} CPU us/record, {run['mixing_points']} mixing "
                  f"points", file=sys.stderr, flush=True)
    head_commit = _git("rev-parse", "HEAD").strip()
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no").strip())
    print(f"{args.records:,} records of {DEFAULT_D} features on {args.partitions} partitions, "
          f"{args.backend}; head {head_commit[:7]}{' with changes' if dirty else ''}"
          + (f", base {base_commit[:7]} ({args.compare})" if args.compare else "")
          + f"; medians of {args.repeats} interleaved repeats; {time.time() - t_start:,.0f} s")
    report: dict[str, Any] = {"records": args.records, "partitions": args.partitions,
                              "backend": args.backend, "repeats": args.repeats, "mix": args.mix,
                              "input": meta,
                              "head": {"commit": head_commit, "uncommitted_changes": dirty},
                              "runs": runs}
    head_runs = [r for r in runs if r["side"] == "head"]
    rows = scale_rows(head_runs)
    print(format_table(SCALE_HEADERS, rows))
    report["scale"] = [dict(zip(SCALE_HEADERS, row, strict=True)) for row in rows]
    if args.compare:
        cheaders = ["store (head)", "base CPU us/record", "head CPU us/record", "head / base",
                    "base predictions/s", "head predictions/s"]
        crows = compare_rows(runs)
        print(f"one worker, {args.compare} ({base_commit[:7]}) against this checkout:")
        print(format_table(cheaders, crows))
        report["base"] = {"ref": args.compare, "commit": base_commit}
        report["compare"] = [dict(zip(cheaders, row, strict=True)) for row in crows]
    if any(r["rate"] is None or r["cpu_us_per_record"] is None for r in runs):
        print("n/a: not measured (a run too short for its timestamps or for the CPU counters' "
              f"1/{CLK_TCK} s)")
    if args.json:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main()
