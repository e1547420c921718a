"""The profile section: the worker (and its pipe) under py-spy, each sample put in one category of
the worker's or the client's work, by a :class:`Where` rule made of an imported object (a module
prefix or a function), so that a name renamed or gone fails here and in the unit test, by name.
"""

from __future__ import annotations

import functools
import importlib
import linecache
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.worker.contenders import BACKENDS, KP, KPP, ROOT, SHORT, backend_env
from bench.worker.formatting import Say, fmt_rate
from bench.worker.inputs import DEFAULT_D, dense_records
from bench.worker.measures import rate_from_timestamps
from bench.worker.processes import Ctx, finish_worker, start_contender, start_worker, wait_logged
from bench.worker.topics import read_back

PROFILE_RECORDS = 200_000
PYSPY_HZ = 250
# py-spy --idle: every thread at every sample, waits included (for the GIL, in poll), so wall time

START_UP = "start-up, imports, other"
POLL = "edge poll (client poll + column copies), incl. waiting"
SEND = "edge send (client send + loop)"
HAND_OFF = "hand-off to the producer process (msgpack + pipe write)"
OWN = "own code (everything else)"
KP_APPEND = "kafka-python producer: append_many (a poll at once)"
CF_CONSUME = "confluent-kafka poll + consume (C), incl. waiting"
CF_PRODUCE = "confluent-kafka produce (C)"
CF_FLUSH = "confluent-kafka flush (waiting for acks)"
CF_SERVE = "confluent-kafka poll(0) (delivery reports)"
# librdkafka's calls are C, so under py-spy the Python line making them is the leaf: in these
# functions the leaf's source line tells which call it is
LEAF_CALLS = (("consume_first(", CF_CONSUME), ("consume_batch(", CF_CONSUME), ("produce(", CF_PRODUCE),
              ("poll(0)", CF_SERVE), ("serve(", CF_SERVE), (".flush(", CF_FLUSH))
_IDLE_LEAVES = {"select", "wait", "sleep", "poll", "_poll_once", "acquire", "_run"}  # _run: a queue get


def module_of(path: str) -> str:
    """The dotted name of the module in a source file, from its path as py-spy prints it (relative
    to its entry of ``sys.path``, or ``<frozen name>``) or absolute (code objects).

    >>> module_of("stream_perceptron/kafka/python_edge.py"), module_of("<frozen importlib._bootstrap>")
    ('stream_perceptron.kafka.python_edge', 'importlib._bootstrap')
    >>> import json; module_of(json.__file__), module_of(str(ROOT / "bench" / "pipe.py"))
    ('json', 'bench.pipe')
    """
    if path.startswith("<frozen "):
        return path[len("<frozen ") : -1]
    p = Path(path)
    if p.is_absolute():  # the deepest root holding it: site-packages lies inside the checkout
        roots = sorted({Path(e) for e in (str(ROOT), *sys.path) if Path(e).is_absolute()},
                       key=lambda r: -len(r.parts))
        p = next((p.relative_to(r) for r in roots if p.is_relative_to(r)), p)
    parts = list(p.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass(frozen=True)
class Where:
    """A module with its submodules (``qualname`` None), or one function with the functions
    defined in it. Made only by :meth:`package` and :meth:`of`, which fail on a name that is gone."""

    module: str
    qualname: str | None = None

    @classmethod
    def package(cls, name: str) -> Where:
        importlib.import_module(name)  # ImportError on a module renamed or removed
        return cls(name)

    @classmethod
    def of(cls, function: Callable[..., Any]) -> Where:
        code = function.__code__
        return cls(module_of(code.co_filename), code.co_qualname)

    def holds(self, module: str, qualname: str) -> bool:
        if self.qualname is None:
            return module == self.module or module.startswith(self.module + ".")
        return module == self.module and (qualname == self.qualname
                                          or qualname.startswith(self.qualname + ".<locals>."))


Rules = list[tuple[str, Where]]


@functools.cache
def rules() -> tuple[Rules, Rules, list[Where]]:
    """(the worker's stages, the client-library calls, the leaf-line functions), each rule a
    (category, where) in priority order: the first rule holding any frame of a stack names it."""
    from kafka import KafkaConsumer, KafkaProducer

    import bench.pipe
    from stream_perceptron.codec.native import DenseReader
    from stream_perceptron.codec.outputs import encode_predictions
    from stream_perceptron.contract import json_object
    from stream_perceptron.kafka.edge import EdgeBase
    from stream_perceptron.kafka.fastpath.append import append_many
    from stream_perceptron.kafka.producer_process import SplitKafkaEdge
    from stream_perceptron.kafka.python_edge import KafkaEdge
    from stream_perceptron.worker.loop import Worker

    module, of = Where.package, Where.of
    first = [(START_UP, module("importlib._bootstrap")), (START_UP, of(Worker._start_edge))]
    cf_stages: Rules = []
    cf_library: Rules = []
    leaves = [of(bench.pipe.confluent_pipe)]
    try:
        from stream_perceptron.kafka.confluent_edge import ConfluentEdge
    except ImportError:  # confluent-kafka not installed: its rules would match nothing
        pass
    else:
        cf_stages = [(POLL, of(ConfluentEdge.poll)), (SEND, of(ConfluentEdge.send_many)),
                     ("edge commit (checkpoints)", of(ConfluentEdge.commit))]
        cf_library = [
            (CF_CONSUME, of(ConfluentEdge._consume)),
            (CF_FLUSH, of(ConfluentEdge._flush_once)),
            (CF_PRODUCE, of(ConfluentEdge._send_retrying)),  # the slow path: waiting out a full queue
            ("ConfluentEdge.send_many: Python around produce (loop, counter)", of(ConfluentEdge.send_many)),
            ("ConfluentEdge.poll: Python around consume (column copies, highwater)", of(ConfluentEdge.poll)),
        ]
        leaves.append(of(ConfluentEdge.send_many))
    stages: Rules = [
        *first,
        ("state store (checkpoints)", module("stream_perceptron.state")),
        ("edge commit (checkpoints)", of(KafkaEdge.commit)),
        ("edge flush (waiting for acks)", of(EdgeBase.flush)),
        (POLL, of(KafkaEdge.poll)),
        (HAND_OFF, of(SplitKafkaEdge.send_many)),
        (SEND, of(KafkaEdge.send_many)),
        (SEND, of(EdgeBase.send)),
        *cf_stages,
        ("decode: the compiled reader (native)", of(DenseReader.read)),
        ("decode: simdjson matrix (dense_json)", module("stream_perceptron.codec.dense_json")),
        ("decode (msgspec, validated)", module("stream_perceptron.codec.inputs")),
        ("decode events: JSON (orjson)", of(json_object)),
        ("decode events: Avro (schema ids, fastavro)", module("stream_perceptron.codec.avro")),
        ("decode events: the feature spec (compiled)", module("stream_perceptron.features")),
        ("decode events: the batch loop (EventDecoder)", module("stream_perceptron.codec.events")),
        ("encode predictions (compiled, or structs + msgspec)", of(encode_predictions)),
        ("encode other records (statistics, dead letters)", module("stream_perceptron.codec")),
        ("drift detector", module("stream_perceptron.model.drift")),
        ("statistics update (margins, norms)", module("stream_perceptron.model.stats")),
        ("learn_many", module("stream_perceptron.model")),
        ("producer process: reading the pipe, its loop", module("stream_perceptron.kafka.producer_process")),
        ("the worker's own Python (loop, plan, bookkeeping)", module("stream_perceptron.worker")),
        ("edge: other", module("stream_perceptron.kafka")),
    ]
    library: Rules = [
        *first,
        ("kafka-python KafkaProducer.send", of(KafkaProducer.send)),
        (KP_APPEND, of(append_many)),
        ("kafka-python KafkaConsumer.poll (incl. waiting)", of(KafkaConsumer.poll)),
        ("kafka-python KafkaProducer.flush (waiting for acks)", of(KafkaProducer.flush)),
        *cf_library,
        (HAND_OFF, of(SplitKafkaEdge.send_many)),
        (OWN, module("stream_perceptron")),
        (OWN, module("bench")),
    ]
    return stages, library, leaves


Frame = tuple[str, str, int | None]  # module, qualified name, line


def _frame(text: str) -> Frame:
    """A py-spy frame, ``qualname (path:line)``.

    >>> _frame("KafkaEdge.poll (stream_perceptron/kafka/python_edge.py:423)")
    ('stream_perceptron.kafka.python_edge', 'KafkaEdge.poll', 423)
    """
    m = re.match(r"^(.*?) \((.*?)(?::(\d+))?\)$", text.strip())
    if not m:
        return "", text.strip(), None
    return module_of(m.group(2)), m.group(1), int(m.group(3)) if m.group(3) else None


def _first(rules_: Rules, frames: Sequence[Frame]) -> str | None:
    return next((cat for cat, where in rules_ if any(where.holds(m, q) for m, q, _ in frames)), None)


def categorize_stack(frames: Sequence[str]) -> str:
    """The worker's stage a py-spy stack (root first) was sampled in."""
    return _first(rules()[0], [_frame(f) for f in frames]) or START_UP


def library_category(frames: Sequence[str]) -> str:
    """The client-library call a py-spy stack was sampled in, the same for the worker and the pipe
    of a client: background threads apart, then the leaf's source line where a C call is made
    (:data:`LEAF_CALLS`), then the first library rule."""
    parsed = [_frame(f) for f in frames]
    if parsed and parsed[0][0] == "threading":
        idle = parsed[-1][1].rsplit(".", 1)[-1] in _IDLE_LEAVES
        return "background threads: " + ("idle (select, wait)" if idle else "busy")
    _, library, leaves = rules()
    if parsed and any(w.holds(*parsed[-1][:2]) for w in leaves):
        text = _source_line(frames[-1], parsed[-1][2])
        for call, category in LEAF_CALLS:
            if call in text:
                return category
    return _first(library, parsed) or START_UP


def _source_line(frame: str, lineno: int | None) -> str:
    """The source line a py-spy frame stands at (its path relative to the checkout, or absolute)."""
    path = re.sub(r"^.*? \((.*?)(?::\d+)?\)$", r"\1", frame.strip())
    for cand in (Path(path), ROOT / path):
        if lineno and cand.is_file():
            return linecache.getline(str(cand), lineno)
    return ""


def summarize_pyspy(path: Path, hz: int, records: int, *, wall_s: float, join_s: float | None
                    ) -> dict[str, Any]:
    """Samples per category (the worker's stages, the client-library calls), in seconds and µs per
    record. Every thread is in every sample, and samples become seconds at the effective rate
    (main-thread samples / the process's wall time: py-spy falls behind on a busy machine); the
    group join (``join_s``) comes out of the poll categories, and start-up out of the shares."""
    fine: dict[str, int] = {}
    coarse: dict[str, int] = {}
    for line in path.read_text(errors="replace").splitlines():
        stack, _, num = line.rpartition(" ")
        if not stack or not num.isdigit():
            continue
        frames = stack.split(";")
        lib = library_category(frames)
        coarse[lib] = coarse.get(lib, 0) + int(num)
        cat = lib if lib.startswith(("background", START_UP)) else categorize_stack(frames)
        fine[cat] = fine.get(cat, 0) + int(num)
    main = sum(v for k, v in coarse.items() if not k.startswith("background"))
    eff_hz = main / wall_s if wall_s > 0 and main else float(hz)
    join = int(round((join_s or 0.0) * eff_hz))

    def table(counts: dict[str, int]) -> list[dict[str, Any]]:
        adj = {k: max(0, v - join) if "incl. waiting" in k else v for k, v in counts.items()}
        steady = {k: v for k, v in adj.items() if not k.startswith(("background", START_UP))}
        processing = sum(steady.values())
        return [{"category": k, "samples": v, "seconds": v / eff_hz,
                 "us_per_record": v / eff_hz / records * 1e6,
                 "share_of_processing": v / processing if processing and k in steady else None}
                for k, v in sorted(adj.items(), key=lambda kv: -kv[1])]

    return {"raw_file": str(path), "mode": "--idle", "hz": hz,
            "effective_hz_main_thread": eff_hz, "process_wall_s": wall_s, "records": records,
            "group_join_s": join_s, "group_join_samples_removed_from_poll": join,
            "categories": table(fine), "library": table(coarse)}


def _pyspy() -> str | None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return spy if Path(spy).exists() else None


def section_profile(ctx: Ctx, n: int, tools: Sequence[str], seed: int, say: Say,
                    backends: Sequence[str] = (KP,)) -> dict[str, Any]:
    """Per backend, the worker (predictions=all) on ``n`` records under py-spy; with
    py-spy also the bare pipe of the same client on the same records, so the two can be compared
    per record."""
    rules()  # a rule naming what is gone fails here, before anything runs
    values, meta = dense_records(n, DEFAULT_D, seed=seed + 3)
    in_topic, _ = ctx.new_input("prof-in", values)
    del values
    out: dict[str, Any] = {"records": n, "input": meta, "backends": {}}
    for b in (b for b in BACKENDS if b in backends):
        with ctx.scope():
            out["backends"][b] = profile_backend(ctx, in_topic, n, tools, b, say)
    return out


def profile_backend(ctx: Ctx, in_topic: str, n: int, tools: Sequence[str], backend: str, say: Say,
                    env: dict[str, str] | None = None, pipe: bool = True) -> dict[str, Any]:
    """The worker of ``backend`` (with ``env`` besides) under each of ``tools``; with ``pipe``, the
    bare pipe of its client under py-spy too."""
    out: dict[str, Any] = {"backend": backend}
    env = {**backend_env(backend), **(env or {})}
    tag, spy = SHORT[backend], _pyspy()
    if not tools or backend == KPP:  # two processes: py-spy --idle would see the first alone
        return out
    if spy is None:
        return {**out, "pyspy": {"error": "py-spy not installed (.venv/bin/pip install py-spy)"}}
    # --nonblocking: never pause the process to sample it
    base = [spy, "record", "--idle", "--nonblocking", "-r", str(PYSPY_HZ), "-f", "raw", "-o"]
    raw = ctx.workdir / f"worker-{tag}.pyspy.txt"
    wp = start_worker(ctx, in_topic, "all", f"prof-pyspy-{tag}", wrap=[*base, str(raw), "--"],
                      sample_rss=False, env_extra=env)
    res = finish_worker(ctx, wp, n, "all", timeout_s=300 + n / 200)
    out["pyspy"] = {"run": res, **summarize_pyspy(raw, PYSPY_HZ, n, wall_s=res["process_wall_s"],
                                                  join_s=res.get("group_join_s"))}
    say(f"  py-spy --idle worker ({backend}): {fmt_rate(res['rate'])} rec/s while sampled; {raw}")
    if not pipe:
        return out
    raw_pipe = ctx.workdir / f"pipe-{tag}.pyspy.txt"
    t0 = time.time()
    proc, out_topic, log = start_contender(ctx, "bench.pipe", f"prof-pipe-{tag}", in_topic, n,
                                           ["--client", backend], wrap=[*base, str(raw_pipe), "--"])
    wait_logged(proc, 120 + n / 500, log, "the profiled pipe")
    wall = time.time() - t0
    rate = rate_from_timestamps(read_back(ctx.bootstrap, out_topic, expected=n).timestamps)
    out["pyspy_pipe"] = {"rate": rate, **summarize_pyspy(raw_pipe, PYSPY_HZ, n, wall_s=wall, join_s=None)}
    say(f"  py-spy --idle pipe ({backend}): {fmt_rate(rate)} rec/s; {raw_pipe}")
    return out
