"""One contender as a process (pipe, worker or peer): its environment, its resident memory and CPU
sampled while it runs, its rate from the records it put out; and the summary of repeated runs."""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.worker import measures as m
from bench.worker.contenders import KP, ROOT, SHORT, SPECS, backend_env, peer_python
from bench.worker.topics import create_topics, delete_topics, produce_all, read_back, topic_count

SESSION_TIMEOUT_MS = 6_000  # a group join: the embedded broker holds one for half of it


class RssSampler(threading.Thread):
    """Samples ``VmRSS``, ``VmHWM`` and CPU time of a process and its children (the producer
    process) every ``interval`` seconds until it exits or :meth:`stop`; the summary's ``vm_hwm_mb``
    is the highest sum sampled (a child's VmHWM is its own peak, and a child that exits first drops
    out of the later sums)."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, int, int, float]] = []  # time.time(), VmRSS kB, VmHWM kB, CPU s
        self.max_processes = 1
        self._stop_event = threading.Event()

    def run(self) -> None:
        ticks_of: dict[int, int] = {}  # CPU ticks per process; a child that exited keeps its last
        while not self._stop_event.is_set():
            try:
                rss, hwm, ticks_of[self.pid] = self._read(self.pid)
            except (OSError, ValueError, IndexError, KeyError):
                return  # exited (or a zombie: exited, not yet reaped)
            children = _children(self.pid)
            for child in children:
                with contextlib.suppress(OSError, ValueError, IndexError, KeyError):
                    c_rss, c_hwm, ticks_of[child] = self._read(child)
                    rss, hwm = rss + c_rss, hwm + c_hwm
            self.max_processes = max(self.max_processes, 1 + len(children))
            self.samples.append((time.time(), rss, hwm, sum(ticks_of.values()) / m.CLK_TCK))
            self._stop_event.wait(self.interval)

    @staticmethod
    def _read(pid: int) -> tuple[int, int, int]:
        """(VmRSS kB, VmHWM kB, CPU ticks) of ``pid``."""
        st = m.parse_status(Path(f"/proc/{pid}/status").read_text(errors="replace"))
        return st["VmRSS"], st.get("VmHWM", st["VmRSS"]), m.parse_stat_cpu_ticks(
            Path(f"/proc/{pid}/stat").read_text(errors="replace"))

    def stop(self) -> None:
        self._stop_event.set()
        self.join(2)

    def cores_between(self, t0: float | None, t1: float | None) -> float | None:
        """Average CPU cores used between wall times ``t0`` and ``t1``."""
        if t0 is None or t1 is None:
            return None
        return m.cores_in_window([(s[0], s[3]) for s in self.samples], t0, t1)

    def summary(self) -> dict[str, Any]:
        if not self.samples:
            return {"samples": 0}
        return {"samples": len(self.samples), "processes": self.max_processes,
                "peak_rss_mb": max(s[1] for s in self.samples) / 1024,
                "last_rss_mb": self.samples[-1][1] / 1024,
                "vm_hwm_mb": max(s[2] for s in self.samples) / 1024, "cpu_s_total": self.samples[-1][3]}


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux ``/proc/PID/task/TID/children``)."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return out


def popen_logged(cmd: list[str], env: dict[str, str], log: Path, code_root: Path = ROOT
                 ) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in ``code_root``, output to ``log``. ``python -m`` puts its working directory
    first on ``sys.path``, so the checkout it starts in is the code it runs."""
    with open(log, "wb") as fh:
        return subprocess.Popen(cmd, env=env, cwd=code_root, stdout=fh, stderr=subprocess.STDOUT)


def wait_logged(proc: subprocess.Popen[bytes], timeout_s: float, log: Path, what: str) -> int:
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise RuntimeError(f"{what} did not finish within {timeout_s:.0f} s; log: {log}\n"
                           f"{log_tail(log)}") from None


def log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def clean_env(code_root: Path = ROOT) -> dict[str, str]:
    """The environment without ``SP_*`` settings, ``code_root`` first on ``PYTHONPATH``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SP_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(code_root), env.get("PYTHONPATH")) if p)
    return env


@contextlib.contextmanager
def broker_at(bootstrap: str | None) -> Iterator[tuple[str, int | None]]:
    """``(bootstrap, broker pid)`` for the block: ``bootstrap`` as given (pid None), or, when it is
    None, the embedded broker, started for the block and stopped after it."""
    if bootstrap is not None:
        yield bootstrap, None
        return
    from stream_perceptron.commands.broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        yield broker.bootstrap, broker.pid


@dataclass
class Ctx:
    """What every run needs: the broker, a name prefix, a scratch directory, the group-join setting."""

    bootstrap: str
    prefix: str
    workdir: Path
    session_timeout_ms: int
    broker_pid: int | None = None
    worker_env: dict[str, str] = field(default_factory=dict)
    code_root: Path = ROOT  # the checkout whose pipe, peer and worker run (bench_scale --compare sets it)
    topics: list[str] = field(default_factory=list)
    counter: int = 0

    def name(self, label: str) -> str:
        self.counter += 1
        return f"{self.prefix}-{self.counter:03d}-{label}"

    def broker_sampler(self) -> RssSampler | None:
        """CPU and memory of the embedded broker while a contender runs (None for an external one)."""
        if self.broker_pid is None:
            return None
        sampler = RssSampler(self.broker_pid, interval=0.1)
        sampler.start()
        return sampler

    def new_topics(self, *labels: str, partitions: int = 1) -> list[str]:
        names = [self.name(lab) for lab in labels]
        create_topics(self.bootstrap, names, partitions)
        self.topics += names
        return names

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """Delete the topics created inside the block when it ends: on the embedded broker every
        client knows every topic, and kafka-python's ``send`` costs more with each (about 25 us per
        record with one topic, 41 with 300), so the broker holds a handful whenever a contender runs."""
        mark = len(self.topics)
        try:
            yield
        finally:
            made = self.topics[mark:]
            del self.topics[mark:]
            if made:
                delete_topics(self.bootstrap, made)

    def new_input(self, label: str, values: Sequence[bytes]) -> tuple[str, float]:
        """A fresh input topic holding ``values``, and the seconds it took to produce them."""
        (topic,) = self.new_topics(label)
        return topic, produce_all(self.bootstrap, topic, values)


def _window(timestamps_ms: Sequence[int]) -> tuple[float | None, float | None]:
    return (min(timestamps_ms) / 1000, max(timestamps_ms) / 1000) if timestamps_ms else (None, None)


def start_contender(ctx: Ctx, module: str, label: str, in_topic: str, n: int, args: Sequence[str] = (),
                    wrap: Sequence[str] = (), python: str | None = None
                    ) -> tuple[subprocess.Popen[bytes], str, Path]:
    """``bench.pipe`` or ``bench.peer_quix`` (``wrap``-ped, run by ``python``, this interpreter by
    default) started on ``n`` records of ``in_topic`` into a fresh output topic: the process, that
    topic, its log."""
    (out_topic,) = ctx.new_topics(f"{label}-out")
    log = ctx.workdir / f"{out_topic}.log"
    cmd = [*wrap, python or sys.executable, "-m", module, "--bootstrap", ctx.bootstrap, "--input", in_topic,
           "--output", out_topic, "--records", str(n), *args]
    return popen_logged(cmd, clean_env(ctx.code_root), log, ctx.code_root), out_topic, log


def run_contender_process(ctx: Ctx, module: str, label: str, in_topic: str, n: int,
                          extra_args: Sequence[str] = (), python: str | None = None) -> dict[str, Any]:
    """Run ``bench.pipe`` or ``bench.peer_quix`` on ``in_topic``; its rate from its output topic."""
    from bench.pipe import parse_result

    t0, broker = time.time(), ctx.broker_sampler()
    proc, out_topic, log = start_contender(ctx, module, label, in_topic, n, extra_args, python=python)
    rss = RssSampler(proc.pid)
    rss.start()
    code = wait_logged(proc, 120 + n / 500, log, module)
    rss.stop()
    if broker is not None:
        broker.stop()
    if code != 0:
        raise RuntimeError(f"{module} exited with {code}; log: {log}\n{log_tail(log)}")
    own = parse_result(log.read_text(errors="replace")) or {}
    if "--codec" in extra_args and own.get("codec") is not True:  # never time the bare pipe as the codec's
        raise RuntimeError(f"{module} {' '.join(extra_args)}: the pipe reports codec={own.get('codec')}; "
                           f"log: {log}")
    back = read_back(ctx.bootstrap, out_topic, expected=n)
    w0, w1 = _window(back.timestamps)
    return {"records": n, "output_records": len(back.offsets), "complete": len(back.offsets) == n,
            "rate": m.rate_from_timestamps(back.timestamps), "process_wall_s": time.time() - t0,
            "own_rate_first_poll_to_flush": own.get("own_rate_first_poll_to_flush"),
            "mistakes": own.get("mistakes"),
            "rates_per_100k_records": m.chunk_rates(back.timestamps, 100_000) if n >= 200_000 else [],
            "memory": rss.summary(), "cpu_cores_in_window": rss.cores_between(w0, w1),
            "broker_cpu_cores_in_window": broker.cores_between(w0, w1) if broker is not None else None}


def worker_env(ctx: Ctx, topics: dict[str, str], ckpt_dir: Path, predictions: str, group: str,
               extra: dict[str, str] | None = None) -> dict[str, str]:
    """``SP_*`` for one worker run: fresh group, topics and checkpoint directory; defaults otherwise.
    ``extra`` (the contender's backend) wins over ``ctx.worker_env`` (``--worker-env``)."""
    env = clean_env(ctx.code_root)
    env.update({
        "SP_KAFKA__BOOTSTRAP_SERVERS": ctx.bootstrap, "SP_KAFKA__GROUP_ID": group,
        "SP_KAFKA__CLIENT_ID": group, "SP_KAFKA__SESSION_TIMEOUT_MS": str(ctx.session_timeout_ms),
        "SP_KAFKA__HEARTBEAT_INTERVAL_MS": str(max(100, min(1000, ctx.session_timeout_ms // 3))),
        "SP_TOPICS__INPUT": topics["input"], "SP_TOPICS__PREDICTIONS": topics["predictions"],
        "SP_TOPICS__STATS": topics["stats"], "SP_TOPICS__DEAD_LETTER": topics["dead_letter"],
        # a state topic of its own too, for a run on the Kafka store not to restore another's
        "SP_CHECKPOINT__DIR": str(ckpt_dir), "SP_CHECKPOINT__TOPIC": f"{group}-state",
        "SP_OUTPUT__PREDICTIONS": predictions,
        "SP_OBSERVE__ENABLED": "false", "SP_LOG_FORMAT": "json", "SP_LOG_LEVEL": "INFO",
        **ctx.worker_env, **(extra or {}),
    })
    return env


@dataclass
class WorkerProc:
    proc: subprocess.Popen[bytes]
    rss: RssSampler | None
    log: Path
    topics: dict[str, str]
    t_start: float
    broker: RssSampler | None = None


def start_worker(ctx: Ctx, in_topic: str, predictions: str, label: str, *, until_caught_up: bool = True,
                 wrap: Sequence[str] = (), python_args: Sequence[str] = (), sample_rss: bool = True,
                 env_extra: dict[str, str] | None = None) -> WorkerProc:
    pred, stats, dead = ctx.new_topics(f"{label}-pred", f"{label}-stats", f"{label}-dead")
    topics = {"input": in_topic, "predictions": pred, "stats": stats, "dead_letter": dead}
    group = ctx.name(f"{label}-group")
    env = worker_env(ctx, topics, ctx.workdir / f"{group}-ckpt", predictions, group, env_extra)
    if env.get("SP_CHECKPOINT__STORE") == "kafka":
        ctx.topics.append(env["SP_CHECKPOINT__TOPIC"])  # the worker makes it; the scope deletes it
    cmd = [*wrap, sys.executable, *python_args, "-m", "stream_perceptron.cli", "run"]
    cmd += ["--until-caught-up"] if until_caught_up else []
    log = ctx.workdir / f"{group}.log"
    t0, broker = time.time(), ctx.broker_sampler()
    proc = popen_logged(cmd, env, log, ctx.code_root)
    rss = RssSampler(proc.pid) if sample_rss else None
    if rss is not None:
        rss.start()
    return WorkerProc(proc, rss, log, topics, t0, broker)


def group_join(lines: Sequence[str]) -> tuple[float | None, int]:
    """From the worker's JSON log lines: its group join, from "kafka edge ... started" to the first
    "on_assigned", and how many assignments it logged (more than 1: a rebalance)."""
    records: list[dict[str, Any]] = []
    for ln in lines:
        with contextlib.suppress(ValueError):  # a line cut short when the process ended
            records += [json.loads(ln)] if ln.startswith("{") else []
    msgs = [(r.get("ts"), r.get("msg", "")) for r in records]
    started = next((ts for ts, msg in msgs if re.match(r"kafka edge.* started", msg)), None)
    assigned = [ts for ts, msg in msgs if msg.startswith("on_assigned")]
    return (None if started is None or not assigned else float(assigned[0] - started)), len(assigned)


def finish_worker(ctx: Ctx, wp: WorkerProc, n: int, predictions: str, *, timeout_s: float,
                  keep_samples: bool = False) -> dict[str, Any]:
    """Wait for a ``--until-caught-up`` worker, then read back its outputs and compute its rates;
    with ``keep_samples``, its statistics records (``_stats``) and memory samples (``_rss_samples``)."""
    import orjson

    code = wait_logged(wp.proc, timeout_s, wp.log, "the worker")
    for sampler in (wp.rss, wp.broker):
        if sampler is not None:
            sampler.stop()
    wall = time.time() - wp.t_start
    if code != 0:
        raise RuntimeError(f"the worker exited with {code}; log: {wp.log}\n{log_tail(wp.log)}")
    stats = [orjson.loads(v) for v in read_back(ctx.bootstrap, wp.topics["stats"], values=True).values]
    expected = n if predictions == "all" else 0
    preds = read_back(ctx.bootstrap, wp.topics["predictions"], expected=expected)
    by_stats = m.rate_from_stats(stats)
    join_s, assigned = group_join(wp.log.read_text(errors="replace").splitlines())
    last = max(stats, key=lambda s: s.get("seen", 0)) if stats else {}
    by_stats_rate = by_stats["rate"] if by_stats else None
    if predictions == "all" and preds.timestamps:
        w0, w1 = _window(preds.timestamps)
    else:
        w0, w1 = (by_stats["t_first"], by_stats["t_last"]) if by_stats else (None, None)
    result: dict[str, Any] = {
        "records": n, "predictions_mode": predictions, "output_records": len(preds.offsets),
        "seen": last.get("seen"), "complete": last.get("seen") == n and len(preds.offsets) == expected,
        "rate_stats": by_stats_rate,
        "rate": m.rate_from_timestamps(preds.timestamps) if predictions == "all" else by_stats_rate,
        "rates_per_100k_records": m.chunk_rates(preds.timestamps, 100_000) if n >= 200_000 else [],
        "mistakes": last.get("mistakes"), "dead_letters": last.get("dead_letters"),
        "group_join_s": join_s, "rebalanced": assigned > 1, "process_wall_s": wall,
        "memory": wp.rss.summary() if wp.rss is not None else None,
        "cpu_cores_in_window": wp.rss.cores_between(w0, w1) if wp.rss is not None else None,
        "broker_cpu_cores_in_window": wp.broker.cores_between(w0, w1) if wp.broker is not None else None,
    }
    if keep_samples:
        result.update(_stats=stats, _rss_samples=wp.rss.samples if wp.rss is not None else [])
    return result


def run_worker(ctx: Ctx, in_topic: str, n: int, predictions: str, label: str, backend: str = KP,
               env: dict[str, str] | None = None) -> dict[str, Any]:
    wp = start_worker(ctx, in_topic, predictions, label, env_extra={**backend_env(backend), **(env or {})})
    return {**finish_worker(ctx, wp, n, predictions, timeout_s=120 + n / 300), "backend": backend}


def run_one(ctx: Ctx, contender: str, in_topic: str, n: int, label: str) -> dict[str, Any]:
    """One run of ``contender`` on ``n`` records of ``in_topic``; its own topics are deleted after."""
    spec = SPECS[contender]
    tag = f"{label}-{spec.tag or SHORT[spec.backend]}"
    topics_before = topic_count(ctx.bootstrap)  # see Ctx.scope: kafka-python's send depends on it
    with ctx.scope():
        if spec.kind == "pipe":
            args = ["--client", spec.backend, *spec.pipe_args]
            r = run_contender_process(ctx, "bench.pipe", f"{tag}-pipe", in_topic, n, args)
        elif spec.kind == "peer":
            python = peer_python()
            if python is None:
                raise RuntimeError("the peer needs Quix Streams: make peer-venv (bench/README.md)")
            r = run_contender_process(ctx, "bench.peer_quix", f"{label}-peer", in_topic, n, python=python)
        else:
            r = run_worker(ctx, in_topic, n, spec.predictions, f"{tag}-w{spec.predictions}", spec.backend)
    return {**r, "backend": spec.backend, "broker_topics_at_start": topics_before}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the runs that completed with a rate: a run with outputs missing or twice, or
    without a rate, is left out (and counted in ``runs_left_out``), never averaged in."""
    counted = [r for r in runs if r.get("complete") and r.get("rate")]
    rates = [r["rate"] for r in counted]
    out: dict[str, Any] = {"runs": len(rates), "runs_left_out": len(runs) - len(rates), "rates": rates,
                           "all_complete": len(rates) == len(runs), "median_rate": None}
    if rates:
        med, spread = m.median_spread(rates)
        out.update(median_rate=med, spread=spread, min_rate=min(rates), max_rate=max(rates))

    def median_of(values: list[Any]) -> float | None:
        got = [v for v in values if v is not None]
        return statistics.median(got) if got else None

    def each(key: str) -> list[Any]:
        return [r.get(key) for r in counted]

    # pipes and peer: median_rate_incl_flush, their own clock from the first poll that returned records
    # to the end of the final flush (the CreateTime window ends at the last send, before the flush)
    out.update(median_cpu_cores=median_of(each("cpu_cores_in_window")),
               median_broker_cpu_cores=median_of(each("broker_cpu_cores_in_window")),
               median_cpu_us_per_record=median_of([r["cpu_cores_in_window"] * 1e6 / r["rate"] for r in counted
                                                   if r.get("cpu_cores_in_window")]),
               median_peak_rss_mb=median_of([(r.get("memory") or {}).get("peak_rss_mb") for r in counted]),
               median_rate_incl_flush=median_of(each("own_rate_first_poll_to_flush")),
               median_rate_stats_method=median_of(each("rate_stats")))
    return out
