"""The profile section: the worker (and its pipe) under py-spy or cProfile, with each sample put
in one category of the worker's or the client's work."""

from __future__ import annotations

import cProfile  # noqa: F401  (the profile runs ``python -m cProfile``; imported to fail early)
import pstats
import re
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.worker.contenders import BACKENDS, KP, KPP, ROOT, SHORT, backend_env
from bench.worker.formatting import Say, fmt_rate
from bench.worker.inputs import DEFAULT_D, dense_records
from bench.worker.measures import rate_from_timestamps
from bench.worker.processes import Ctx, clean_env, finish_worker, popen_logged, start_worker, wait_logged
from bench.worker.topics import read_back

PROFILE_RECORDS = 200_000


def categorize_stack(frames: Sequence[str]) -> str:
    """The cost category of one py-spy stack (root first), for the profile summary.

    A frame reads ``function (path:line)``. The first marker in priority order wins, so that e.g.
    the ``encode`` inside ``publish_stats`` counts as statistics, not as prediction encoding.

    >>> categorize_stack(["<module> (cli.py:1)", "run (stream_perceptron/worker/loop.py:150)",
    ...                   "process (stream_perceptron/worker/loop.py:240)",
    ...                   "BatchDecoder.decode_many (stream_perceptron/codec/inputs.py:80)"])
    'decode_many (msgspec, validated)'
    >>> categorize_stack(["process (stream_perceptron/worker/loop.py:240)",
    ...                   "BatchDecoder.decode_many (stream_perceptron/codec/inputs.py:80)",
    ...                   "DenseBatchReader.read (stream_perceptron/codec/dense_json.py:90)"])
    'decode_many: simdjson matrix (dense_json)'
    >>> categorize_stack(["_bootstrap (threading.py:1)", "run (kafka/x.py:2)"])
    'background threads (kafka-python I/O)'
    >>> categorize_stack(["Worker.run (stream_perceptron/worker/loop.py:1)",
    ...                   "ConfluentEdge.poll (stream_perceptron/kafka/confluent_edge.py:2)"])
    'edge poll (client poll + column copies), incl. waiting'
    """
    parsed = [_frame(f) for f in frames]
    if parsed and parsed[0][1].endswith("threading.py"):
        return "background threads (kafka-python I/O)"
    # py-spy names methods ``Class.method``; nested functions ``f.<locals>.g``
    # both Kafka edges (KafkaEdge, ConfluentEdge and their base, edge.EdgeBase) count as the edge
    names = {
        (fn.rsplit(".", 1)[-1], _EDGE_FILES.get(path.rsplit("/", 1)[-1], path.rsplit("/", 1)[-1]))
        for fn, path in parsed
    }
    for (fn, file), category in _MARKERS:
        if (fn, file) in names:
            return category
    return "start-up, imports, other"


_EDGE_FILES = {"confluent_edge.py": "python_edge.py", "edge.py": "python_edge.py"}

# the worker's (or the pipe's) side of SplitKafkaEdge.send_many: msgpack and the pipe's write
HAND_OFF = "hand-off to the producer process (msgpack + pipe write)"

_MARKERS: list[tuple[tuple[str, str], str]] = [
    # checking the topics and connecting, before the loop: start-up, however long the broker takes
    (("_start_edge", "loop.py"), "start-up, imports, other"),
    (("checkpoint", "checkpointing.py"), "checkpoint (flush + write + fsync + commit)"),
    (("publish_stats", "progress.py"), "statistics records"),
    (("_shutdown", "loop.py"), "shutdown"),
    (("poll", "python_edge.py"), "edge poll (client poll + column copies), incl. waiting"),
    (("decode_example", "inputs.py"), "decode_example (fallback: reference decoder)"),
    (("read", "dense_json.py"), "decode_many: simdjson matrix (dense_json)"),
    (("decode_many", "inputs.py"), "decode_many (msgspec, validated)"),
    (("vectorize_many", "perceptron.py"), "vectorize_many (lists -> matrix)"),
    (("learn_many", "perceptron.py"), "learn_many"),
    (("step", "learner.py"), "statistics update (margins, norms, update_many)"),
    (("prediction_record", "outputs.py"), "prediction_record (build dict)"),
    (("encode", "outputs.py"), "encode (orjson.dumps)"),
    (("encode_predictions", "outputs.py"), "encode_predictions (structs + msgspec)"),
    (("send", "python_edge.py"), "edge send (client send + loop)"),
    (("send_many", "python_edge.py"), "edge send (client send + loop)"),
    (("send_many", "producer_process.py"), HAND_OFF),
    (("_flush", "producer_process.py"), "producer process: flush (for a checkpoint)"),
    (("run", "producer_process.py"), "producer process: reading the pipe, its loop"),
    (("_learn_and_publish", "loop.py"), "publish loop: other (tolist, cumsum, loop)"),
    (("process", "loop.py"), "batch loop: other (decode loop, bookkeeping)"),
    (("run", "loop.py"), "run loop: other (policies, caught_up)"),
]


def _frame(text: str) -> tuple[str, str]:
    m = re.match(r"^(.*?) \((.*?)(?::\d+)?\)$", text.strip())
    if not m:
        return text.strip(), ""
    return m.group(1), m.group(2)


PYSPY_HZ = 250

# py-spy's two ways of sampling. --idle: every thread at every sample, waits included (for the GIL,
# in poll), so wall time. --gil: only the thread holding the GIL, so the samples share out the one
# core that a Python process's own work gets, busy background threads included.
PYSPY_MODES = {"pyspy": "--idle", "pyspy-gil": "--gil"}


def _pyspy() -> str | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return spy if Path(spy).exists() else None


def section_profile(
    ctx: Ctx, n: int, tools: Sequence[str], seed: int, say: Say, backends: Sequence[str] = (KP,)
) -> dict[str, Any]:
    """Per backend, the worker (predictions=all) on ``n`` records under cProfile and/or py-spy; with
    py-spy also the bare pipe of the same client on the same records, so the two can be compared
    per record."""
    values, meta = dense_records(n, DEFAULT_D, seed=seed + 3)
    in_topic, _ = ctx.new_input("prof-in", values)
    del values
    out: dict[str, Any] = {"records": n, "input": meta, "backends": {}}
    for b in BACKENDS:
        if b in backends:
            with ctx.scope():
                out["backends"][b] = _profile_backend(ctx, in_topic, n, tools, b, say)
    return out


def _profile_backend(
    ctx: Ctx, in_topic: str, n: int, tools: Sequence[str], backend: str, say: Say
) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": backend}
    tag, env = SHORT[backend], backend_env(backend)
    if backend == KPP:
        # two processes: only py-spy --gil --subprocesses tells each process's GIL apart
        tools = [t for t in tools if t == "pyspy-gil"]
    if "cprofile" in tools:
        prof = ctx.workdir / f"worker-{tag}.prof"
        wp = start_worker(
            ctx,
            in_topic,
            "all",
            f"prof-cp-{tag}",
            python_args=["-m", "cProfile", "-o", str(prof)],
            env_extra=env,
        )
        res = finish_worker(ctx, wp, n, "all", timeout_s=300 + n / 200)
        res.pop("_rss_samples", None)
        res.pop("_stats", None)
        out["cprofile"] = {"run": res, **summarize_cprofile(prof)}
        say(f"  cProfile worker ({backend}): {fmt_rate(res['rate'])} rec/s under the profiler; {prof}")
    for tool in PYSPY_MODES:
        if tool in tools:
            spy = _pyspy()
            if spy is None:
                out[tool.replace("-", "_")] = {"error": "py-spy not installed (.venv/bin/pip install py-spy)"}
                return out
            out.update(_pyspy_pair(ctx, spy, tool, in_topic, n, backend, say))
    return out


def _pyspy_pair(
    ctx: Ctx, spy: str, tool: str, in_topic: str, n: int, backend: str, say: Say
) -> dict[str, Any]:
    """The worker, then the bare pipe of its client, on ``in_topic`` under py-spy in ``tool``'s
    mode; their summaries under ``key`` (``pyspy``, ``pyspy_gil``) and ``key + "_pipe"``. With
    the producer process (``kafka-python+process``, ``--gil`` only), also its child's, under
    ``key + "_child"`` and ``key + "_child_pipe"``."""
    gil, tag, key = tool == "pyspy-gil", SHORT[backend], tool.replace("-", "_")
    # --nonblocking: never pause the process to sample it; --subprocesses: the producer process too
    base = [spy, "record", PYSPY_MODES[tool], "--nonblocking", "-r", str(PYSPY_HZ)]
    base += ["--subprocesses"] if backend == KPP else []
    base += ["-f", "raw", "-o"]
    processes = {key: 1, f"{key}_child": 2} if backend == KPP else {key: 1}
    raw = ctx.workdir / f"worker-{tag}.{tool}.txt"
    wp = start_worker(
        ctx,
        in_topic,
        "all",
        f"prof-{tool}-{tag}",
        wrap=[*base, str(raw), "--"],
        sample_rss=False,
        env_extra=backend_env(backend),
    )
    res = finish_worker(ctx, wp, n, "all", timeout_s=300 + n / 200)
    res.pop("_stats", None)
    join_s = res.get("group_join_s")
    out: dict[str, Any] = {
        name: {
            "run": res,
            **summarize_pyspy(
                raw, PYSPY_HZ, n, wall_s=res["process_wall_s"], join_s=join_s, gil=gil, process=depth
            ),
        }
        for name, depth in processes.items()
    }
    mode = PYSPY_MODES[tool]
    say(f"  py-spy {mode} worker ({backend}): {fmt_rate(res['rate'])} rec/s while sampled; {raw}")
    raw_pipe = ctx.workdir / f"pipe-{tag}.{tool}.txt"
    (out_topic,) = ctx.new_topics(f"prof-pipe-{tag}-out")
    log = ctx.workdir / f"pipe-{tag}-{tool}.log"
    cmd = [*base, str(raw_pipe), "--", sys.executable, "-m", "bench.pipe", "--client", backend]
    cmd += ["--bootstrap", ctx.bootstrap, "--input", in_topic, "--output", out_topic, "--records", str(n)]
    t0 = time.time()
    wait_logged(popen_logged(cmd, clean_env(), log), 120 + n / 500, log, "the profiled pipe")
    wall = time.time() - t0
    back = read_back(ctx.bootstrap, out_topic, expected=n)
    rate = rate_from_timestamps(back.timestamps)
    for name, depth in processes.items():
        out[f"{name}_pipe"] = {
            "rate": rate,
            **summarize_pyspy(raw_pipe, PYSPY_HZ, n, wall_s=wall, join_s=None, gil=gil, process=depth),
        }
    say(f"  py-spy {mode} pipe ({backend}): {fmt_rate(rate)} rec/s; {raw_pipe}")
    return out


_CPROFILE_FUNCS = [
    ("worker/loop.py", "run", "Worker.run (everything after start-up)"),
    ("worker/loop.py", "process", "Worker.process (per batch)"),
    ("python_edge.py", "poll", "KafkaEdge.poll (incl. waiting, group join)"),
    ("inputs.py", "decode_many", "BatchDecoder.decode_many"),
    ("dense_json.py", "read", "DenseBatchReader.read (simdjson matrix)"),
    ("inputs.py", "decode_example", "decode_example (fallback)"),
    ("perceptron.py", "vectorize_many", "vectorize_many"),
    ("learner.py", "step", "Learner.step (learn_many + statistics)"),
    ("perceptron.py", "learn_many", "learn_many"),
    ("stats.py", "update_many", "RunningStats.update_many"),
    ("worker/loop.py", "_learn_and_publish", "_learn_and_publish"),
    ("outputs.py", "prediction_record", "prediction_record"),
    ("outputs.py", "encode", "encode (orjson.dumps)"),
    ("outputs.py", "encode_predictions", "encode_predictions"),
    ("python_edge.py", "send_many", "KafkaEdge.send_many"),
    ("kafka.py", "send", "KafkaProducer.send"),
    ("fastpath/append.py", "append_many", "append_many (kafka-python producer, a poll at once)"),
    ("confluent_edge.py", "poll", "ConfluentEdge.poll (incl. waiting, group join)"),
    ("confluent_edge.py", "_consume", "ConfluentEdge._consume (poll + consume, C)"),
    ("confluent_edge.py", "send_many", "ConfluentEdge.send_many"),
    ("kafka/edge.py", "_retrying", "EdgeBase._retrying (either edge)"),
    ("confluent_edge.py", "attempt", "ConfluentEdge._send_retrying.attempt (produce, slow path)"),
    ("kafka/edge.py", "flush", "EdgeBase.flush (either edge)"),
    ("future.py", "add_errback", "Future.add_errback"),
    ("checkpointing.py", "checkpoint", "Worker.checkpoint"),
    ("state/checkpoint.py", "save", "CheckpointStore.save"),
    ("progress.py", "publish_stats", "Worker.publish_stats"),
]


def summarize_cprofile(path: Path, top: int = 25) -> dict[str, Any]:
    st = pstats.Stats(str(path))
    raw: dict[Any, Any] = st.stats  # type: ignore[attr-defined]
    picked = []
    for file, func, label in _CPROFILE_FUNCS:
        best = None
        for (filename, _line, fn), (cc, nc, tt, ct, _) in raw.items():
            if (
                fn == func
                and filename.endswith(file)
                and (file != "kafka.py" or "producer" in filename)
                and (best is None or ct > best[3])
            ):
                best = (nc, cc, tt, ct)
        if best is not None:
            picked.append({"what": label, "calls": best[0], "tottime_s": best[2], "cumtime_s": best[3]})
    # confluent-kafka's C methods (e.g. "<method 'produce' of 'cimpl.Producer' objects>")
    c_calls = [
        {"what": f"{fn} (C)", "calls": nc, "tottime_s": tt, "cumtime_s": ct}
        for (filename, _line, fn), (cc, nc, tt, ct, _) in raw.items()
        if filename == "~" and "cimpl." in fn
    ]
    picked += sorted(c_calls, key=lambda e: -e["tottime_s"])[:6]
    rows = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    top_tottime = [
        {"function": f"{Path(f).name}:{ln}({fn})", "calls": v[1], "tottime_s": v[2], "cumtime_s": v[3]}
        for (f, ln, fn), v in rows
    ]
    return {"profile_file": str(path), "functions": picked, "top_by_tottime": top_tottime}


KP_APPEND = "kafka-python producer: append_many (a poll at once)"
CF_CONSUME = "confluent-kafka poll + consume (C), incl. waiting"
CF_PRODUCE = "confluent-kafka produce (C)"
CF_FLUSH = "confluent-kafka flush (waiting for acks)"
CF_SERVE = "confluent-kafka poll(0) (delivery reports)"


def _source_line(path: str, lineno: int | None) -> str:
    """The text of line ``lineno`` of the file a py-spy frame names (relative to the repository
    or absolute); ``""`` when it cannot be read."""
    import linecache

    if not lineno:
        return ""
    for cand in (Path(path), ROOT / path):
        if cand.is_file():
            return linecache.getline(str(cand), lineno)
    return ""


def _frame_line(text: str) -> int | None:
    m = re.search(r":(\d+)\)$", text.strip())
    return int(m.group(1)) if m else None


def library_category(frames: Sequence[str]) -> str:
    """The coarse category of a py-spy stack, the same for the worker and the pipe of a client.

    librdkafka's calls are C, so under py-spy the Python line that makes them is the leaf; for the
    confluent-kafka pipe (the loops of ``confluent_pipe`` in ``bench/pipe.py``) and the edge's
    ``send`` closure the leaf's source line tells which call it is.

    >>> library_category(["<module> (x.py:1)", "Worker.run (stream_perceptron/worker/loop.py:1)",
    ...                   "KafkaProducer.send (kafka/producer/kafka.py:9)"])
    'kafka-python KafkaProducer.send'
    >>> library_category(["<module> (x.py:1)", "consume_produce (bench/pipe.py:1)", "f (y.py:2)"])
    'own code (everything else)'
    >>> library_category(["KafkaEdge.send_many (stream_perceptron/kafka/python_edge.py:1)",
    ...                   "append_many (stream_perceptron/kafka/fastpath/append.py:2)"])
    'kafka-python producer: append_many (a poll at once)'
    >>> library_category(["Worker.run (stream_perceptron/worker/loop.py:1)",
    ...                   "ConfluentEdge.poll (stream_perceptron/kafka/confluent_edge.py:2)",
    ...                   "ConfluentEdge._consume (stream_perceptron/kafka/confluent_edge.py:3)"])
    'confluent-kafka poll + consume (C), incl. waiting'
    """
    parsed = [_frame(f) for f in frames]
    if parsed and parsed[0][1].endswith("threading.py"):
        return "background threads (kafka-python I/O)"
    names = {fn for fn, _ in parsed}
    if "Worker._start_edge" in names:  # checking the topics and connecting, before the loop
        return "start-up, imports, other"
    if "KafkaProducer.send" in names:
        return "kafka-python KafkaProducer.send"
    if "append_many" in names:  # the edge's stand-in for send, kafka-python's producer internals
        return KP_APPEND
    if "KafkaConsumer.poll" in names:
        return "kafka-python KafkaConsumer.poll (incl. waiting)"
    if "KafkaProducer.flush" in names:
        return "kafka-python KafkaProducer.flush (waiting for acks)"
    leaf_fn, leaf_path = parsed[-1] if parsed else ("", "")
    leaf_text = _source_line(leaf_path, _frame_line(frames[-1])) if frames else ""
    if "ConfluentEdge._consume" in names:
        return CF_CONSUME
    if "ConfluentEdge._flush_once" in names or "ConfluentEdge.flush" in names:
        return CF_FLUSH
    if "ConfluentEdge.send_many" in names:
        if leaf_fn.endswith("attempt"):  # the slow path's closure: produce, waiting out a full queue
            return CF_PRODUCE
        if leaf_fn.endswith("send_many") and "produce(" in leaf_text:
            return CF_PRODUCE
        if leaf_fn.endswith("send_many") and ".poll(0)" in leaf_text:
            return CF_SERVE
        return "ConfluentEdge.send_many: Python around produce (loop, counter)"
    if "ConfluentEdge.poll" in names:
        return "ConfluentEdge.poll: Python around consume (column copies, highwater)"
    if "SplitKafkaEdge.send_many" in names:
        return HAND_OFF
    if leaf_fn == "confluent_pipe":
        if "consume_first(" in leaf_text or "consume_batch(" in leaf_text:
            return CF_CONSUME
        if "produce(" in leaf_text:
            return CF_PRODUCE
        if ".flush(" in leaf_text:
            return CF_FLUSH
        if "serve(" in leaf_text:
            return CF_SERVE
    if names & {"Worker.run", "consume_produce", "confluent_pipe", "split_pipe", "_Child.run"}:
        return "own code (everything else)"
    return "start-up, imports, other"


_IDLE_LEAVES = {"select", "wait", "sleep", "poll", "_poll_once", "acquire"}


def split_process(frames: Sequence[str]) -> tuple[int, list[str]]:
    """How deep in the process tree a py-spy stack was sampled (1: the process started, 2: its
    child, ...) and the stack without the ``process PID:"cmdline"`` frames that ``--subprocesses``
    puts at its root (a stack without them is the process started).

    >>> split_process(['process 7:"python -m w"', 'process 9:"python -m c 3"', "run (c.py:1)"])
    (2, ['run (c.py:1)'])
    >>> split_process(["run (w.py:1)"])
    (1, ['run (w.py:1)'])
    """
    k = 0
    while k < len(frames) and frames[k].startswith("process ") and ':"' in frames[k]:
        k += 1
    return max(k, 1), list(frames[k:])


def summarize_pyspy(
    path: Path,
    hz: int,
    records: int,
    *,
    wall_s: float,
    join_s: float | None,
    gil: bool = False,
    process: int = 1,
) -> dict[str, Any]:
    """Samples per category (worker-level and library-level), in seconds and µs per record.

    Sampled with ``--idle`` (``gil`` false), every thread is in every sample. py-spy falls behind
    its nominal rate on a busy machine, so samples become seconds at the effective rate:
    main-thread samples / the process's wall time. ``join_s`` (the worker's group join, from its
    log) is taken out of the poll categories, and start-up is left out of the shares, so that the
    shares describe steady processing.

    Sampled with ``--gil``, a sample holds only the thread that held the GIL, and none is taken
    while no thread held it. There is no wall clock to calibrate against, so samples become seconds
    at the nominal ``hz``, a lower bound where py-spy fell behind. Nothing is taken out of poll: a
    group join waits without the GIL, so it leaves no samples.

    Recorded with ``--subprocesses``, only the stacks of ``process`` (1: the process started, 2:
    its child; see :func:`split_process`) are counted.
    """
    fine: dict[str, int] = {}
    coarse: dict[str, int] = {}
    in_send: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, num = line.rpartition(" ")
        if not stack or not num.isdigit():
            continue
        k = int(num)
        depth, frames = split_process(stack.split(";"))
        if depth != process or not frames:
            continue
        lib = library_category(frames)
        if lib.startswith("background") and _frame(frames[-1])[0].rsplit(".", 1)[-1] in _IDLE_LEAVES:
            lib = "background threads: idle (select, wait)"
        elif lib.startswith("background"):
            lib = "background threads: busy"
        coarse[lib] = coarse.get(lib, 0) + k
        cat = lib if lib.startswith(("background", "start-up")) else categorize_stack(frames)
        fine[cat] = fine.get(cat, 0) + k
        names = [_frame(f)[0] for f in frames]
        if "KafkaProducer.send" in names:
            i = names.index("KafkaProducer.send")
            child = names[i + 1] if i + 1 < len(names) else "KafkaProducer.send (itself)"
            in_send[child] = in_send.get(child, 0) + k
    main = sum(v for k, v in coarse.items() if not k.startswith("background"))
    eff_hz = main / wall_s if wall_s > 0 and main and not gil else float(hz)
    join = 0 if gil else int(round((join_s or 0.0) * eff_hz))

    def table(counts: dict[str, int]) -> list[dict[str, Any]]:
        adj = dict(counts)
        for key in adj:
            if "incl. waiting" in key and join:  # the one category per table that waits in poll
                adj[key] = max(0, adj[key] - join)
        processing = sum(v for k, v in adj.items() if not k.startswith(("background", "start-up")))
        rows = []
        for key, v in sorted(adj.items(), key=lambda kv: -kv[1]):
            steady = not key.startswith(("background", "start-up"))
            rows.append(
                {
                    "category": key,
                    "samples": v,
                    "seconds": v / eff_hz,
                    "us_per_record": v / eff_hz / records * 1e6,
                    "share_of_processing": v / processing if processing and steady else None,
                }
            )
        return rows

    total_send = sum(in_send.values())
    return {
        "raw_file": str(path),
        "mode": "--gil" if gil else "--idle",
        "process": process,
        "hz": hz,
        "effective_hz_main_thread": eff_hz,
        "process_wall_s": wall_s,
        "records": records,
        "group_join_s": join_s,
        "group_join_samples_removed_from_poll": join,
        "categories": table(fine),
        "library": table(coarse),
        "inside_producer_send": [
            {"callee": k, "samples": v, "share_of_send": v / total_send}
            for k, v in sorted(in_send.items(), key=lambda kv: -kv[1])[:8]
        ],
    }
