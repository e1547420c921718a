"""The worker benchmark's contenders (what each label runs: a pipe, the worker or the Quix Streams +
river application, on which client backend) and the defaults of a run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the repository
DEFAULT_RECORDS, QUICK_RECORDS, DEFAULT_REPEATS, DEFAULT_SEED = 100_000, 10_000, 3, 20_260_521
KP, KPP, CF = "kafka-python", "kafka-python+process", "confluent-kafka"  # KPP: SP_KAFKA__PRODUCER_PROCESS
BACKENDS = (KP, KPP, CF)
SHORT = {KP: "kp", KPP: "kpp", CF: "cf"}  # in topic and group names
SECTIONS = ("throughput", "memory", "latency", "sizes", "events", "profile")  # the last two when asked for


@dataclass(frozen=True)
class Spec:
    """What a contender label runs: ``kind`` pipe / worker / peer, on ``backend``."""

    kind: str
    backend: str
    predictions: str = "all"
    pipe_args: tuple[str, ...] = ()  # a pipe's options besides --client
    tag: str = ""  # in topic and group names, if not SHORT[backend]


PIPE_KP = "pipe: bare kafka-python consume->produce"
PIPE_KP_APPEND = "pipe: kafka-python, batch decode and append"  # the worker's client paths
PIPE_KPP = "pipe: bare kafka-python, producer in a 2nd process"
PIPE_CF = "pipe: bare confluent-kafka consume->produce"
PIPE_CF_CODEC = "pipe: confluent-kafka, the worker's codec, fixed model"  # decode, score, encode
PEER = "peer: Quix Streams + river application"
PIPE_OF = {KP: PIPE_KP, KPP: PIPE_KPP, CF: PIPE_CF}
WORKER_OF = {b: f"worker ({b}), predictions=all" for b in BACKENDS}
WORKER_NONE_OF = {b: f"worker ({b}), predictions=none" for b in BACKENDS}
WORKER_KP, WORKER_KPP, WORKER_CF = (WORKER_OF[b] for b in BACKENDS)
WORKER_KP_NONE, WORKER_KPP_NONE, WORKER_CF_NONE = (WORKER_NONE_OF[b] for b in BACKENDS)
# per backend, the pipes beside its bare one: the worker's own work shows against them alone
EXTRA_PIPES = {KP: (PIPE_KP_APPEND,), KPP: (), CF: (PIPE_CF_CODEC,)}
SPECS: dict[str, Spec] = {
    PIPE_KP: Spec("pipe", KP), PIPE_KPP: Spec("pipe", KPP), PIPE_CF: Spec("pipe", CF),
    PIPE_KP_APPEND: Spec("pipe", KP, pipe_args=("--decode", "--append"), tag="kpa"),
    PIPE_CF_CODEC: Spec("pipe", CF, pipe_args=("--codec",), tag="cfc"), PEER: Spec("peer", CF),
    **{WORKER_OF[b]: Spec("worker", b) for b in BACKENDS},
    **{WORKER_NONE_OF[b]: Spec("worker", b, "none") for b in BACKENDS},
}


def contenders_for(backends: Sequence[str]) -> list[str]:
    """The throughput contenders for ``backends``, in the interleaving order of repeat 0: per
    backend its bare pipe, its other pipes and its worker (predictions all and none), then the peer."""
    out = [c for b in BACKENDS if b in backends for c in (PIPE_OF[b], *EXTRA_PIPES[b], WORKER_OF[b],
                                                           WORKER_NONE_OF[b])]
    return [*out, PEER]


def rotated(items: Sequence[Any], k: int) -> list[Any]:
    """``items`` rotated left by ``k`` (the interleaving order of repeat ``k``)."""
    k = k % len(items) if items else 0
    return [*items[k:], *items[:k]]


def interleaved_ways(ways: Sequence[str], sizes: Sequence[int], repeats: int,
                     run: Callable[[str, int], tuple[float, str]], differ: str
                     ) -> dict[tuple[str, int], list[float]]:
    """Every (way, size) once per repeat, in rotated order; ``run(way, size)`` gives its seconds
    and what it ended with. The seconds by (way, size); exits 1, printing ``differ`` with the
    size, when the ways of a size did not all end with the same."""
    runs: dict[tuple[str, int], list[float]] = {(w, n): [] for n in sizes for w in ways}
    ends: dict[tuple[str, int], set[str]] = {key: set() for key in runs}
    for rep in range(repeats):
        for key in rotated(list(runs), rep):
            spent, end = run(*key)
            runs[key].append(spent)
            ends[key].add(end)
    for n in sizes:
        if len(set().union(*(ends[(w, n)] for w in ways))) != 1:
            print(differ.format(n), file=sys.stderr)
            sys.exit(1)
    return runs


def peer_python() -> str | None:
    """The interpreter that runs the peer (``bench/peer_quix.py``): ``.venv-peer`` where it exists
    (``make peer-venv``; Quix Streams pins confluent-kafka below the worker's), else this one when
    it has Quix Streams; None without either."""
    import importlib.util
    import sys

    venv = ROOT / ".venv-peer" / "bin" / "python"
    if venv.exists():
        return str(venv)
    return sys.executable if importlib.util.find_spec("quixstreams") else None


def backend_env(backend: str) -> dict[str, str]:
    """The worker's settings that pick its client library (and where its producer runs)."""
    if backend == KPP:
        return {"SP_KAFKA__BACKEND": KP, "SP_KAFKA__PRODUCER_PROCESS": "true"}
    return {"SP_KAFKA__BACKEND": backend}


def confluent_available() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def offline_parser(doc: str, *, records: int, repeats: int) -> argparse.ArgumentParser:
    """The options of an offline benchmark (no Kafka): ``--records``, ``--repeats``, ``--seed``
    and ``--json``; described by the first paragraph of ``doc``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=records)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    return parser
