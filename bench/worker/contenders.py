"""The contenders of the worker benchmark: their labels, what each runs (pipe, worker or peer, on
which client backend), and the run's defaults."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the repository

DEFAULT_RECORDS = 100_000
QUICK_RECORDS = 10_000
DEFAULT_REPEATS = 3
DEFAULT_SEED = 20_260_521

KP = "kafka-python"
KPP = "kafka-python+process"  # kafka-python, SP_KAFKA__PRODUCER_PROCESS=true
CF = "confluent-kafka"
BACKENDS = (KP, KPP, CF)
SHORT = {KP: "kp", KPP: "kpp", CF: "cf"}  # in topic and group names

PIPE_KP = "pipe: bare kafka-python consume->produce"
PIPE_KP_APPEND = "pipe: kafka-python, batch decode and append"  # the worker's client paths
WORKER_KP = "worker (kafka-python), predictions=all"
WORKER_KP_NONE = "worker (kafka-python), predictions=none"
PIPE_KPP = "pipe: bare kafka-python, producer in a 2nd process"
WORKER_KPP = "worker (kafka-python+process), predictions=all"
WORKER_KPP_NONE = "worker (kafka-python+process), predictions=none"
PIPE_CF = "pipe: bare confluent-kafka consume->produce"
PIPE_CF_CODEC = "pipe: confluent-kafka, the worker's codec, fixed model"  # decode, score, encode
WORKER_CF = "worker (confluent-kafka), predictions=all"
WORKER_CF_NONE = "worker (confluent-kafka), predictions=none"
PEER = "peer: kafka-python + json + river loop"
# the names of the single-backend benchmark, kept for the size section and old reports
LIMIT, WORKER_ALL, WORKER_NONE = PIPE_KP, WORKER_KP, WORKER_KP_NONE


@dataclass(frozen=True)
class Spec:
    """What a contender label runs: ``kind`` pipe / worker / peer, on ``backend``."""

    kind: str
    backend: str
    predictions: str = "all"
    pipe_args: tuple[str, ...] = ()  # a pipe's options besides --client
    tag: str = ""  # in topic and group names, if not SHORT[backend]


SPECS: dict[str, Spec] = {
    PIPE_KP: Spec("pipe", KP),
    PIPE_KP_APPEND: Spec("pipe", KP, pipe_args=("--decode", "--append"), tag="kpa"),
    WORKER_KP: Spec("worker", KP, "all"),
    WORKER_KP_NONE: Spec("worker", KP, "none"),
    PIPE_KPP: Spec("pipe", KPP),
    WORKER_KPP: Spec("worker", KPP, "all"),
    WORKER_KPP_NONE: Spec("worker", KPP, "none"),
    PIPE_CF: Spec("pipe", CF),
    PIPE_CF_CODEC: Spec("pipe", CF, pipe_args=("--codec",), tag="cfc"),
    WORKER_CF: Spec("worker", CF, "all"),
    WORKER_CF_NONE: Spec("worker", CF, "none"),
    PEER: Spec("peer", KP),
}
PIPE_OF = {KP: PIPE_KP, KPP: PIPE_KPP, CF: PIPE_CF}
WORKER_OF = {KP: WORKER_KP, KPP: WORKER_KPP, CF: WORKER_CF}
WORKER_NONE_OF = {KP: WORKER_KP_NONE, KPP: WORKER_KPP_NONE, CF: WORKER_CF_NONE}
CONTENDERS = (
    PIPE_KP, PIPE_KP_APPEND, WORKER_KP, WORKER_KP_NONE, PIPE_KPP, WORKER_KPP, WORKER_KPP_NONE, PIPE_CF,
    PIPE_CF_CODEC, WORKER_CF, WORKER_CF_NONE, PEER,
)
# per backend, the pipes beside its bare one: the worker's own work shows against them alone
EXTRA_PIPES = {KP: (PIPE_KP_APPEND,), KPP: (), CF: (PIPE_CF_CODEC,)}
SECTIONS = ("throughput", "memory", "latency", "sizes", "profile")


def offline_parser(doc: str, *, records: int, repeats: int) -> argparse.ArgumentParser:
    """The options of every offline benchmark (no Kafka): ``--records``, ``--repeats``,
    ``--seed`` and ``--json``; described by the first paragraph of ``doc``.

    >>> offline_parser("Times things.", records=10, repeats=3).parse_args([])
    Namespace(records=10, repeats=3, seed=1, json=None)
    """
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=records)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    return parser


def rotated(items: Sequence[Any], k: int) -> list[Any]:
    """``items`` rotated left by ``k`` (the interleaving order of repeat ``k``).

    >>> rotated(["a", "b", "c"], 1), rotated(["a", "b", "c"], 4)
    (['b', 'c', 'a'], ['b', 'c', 'a'])
    """
    if not items:
        return []
    k %= len(items)
    return list(items[k:]) + list(items[:k])


def contenders_for(backends: Sequence[str]) -> list[str]:
    """The throughput contenders for ``backends``: per backend its pipe, its other pipes
    (kafka-python's with the worker's way of appending, confluent-kafka's with the worker's codec)
    and its worker (predictions all and none), then the river peer; the interleaving order of
    repeat 0.

    >>> [c.split(":")[0].split(",")[0] for c in contenders_for(["kafka-python"])]
    ['pipe', 'pipe', 'worker (kafka-python)', 'worker (kafka-python)', 'peer']
    >>> len(contenders_for(BACKENDS))
    12
    """
    out: list[str] = []
    for b in BACKENDS:
        if b in backends:
            out += [PIPE_OF[b], *EXTRA_PIPES[b], WORKER_OF[b], WORKER_NONE_OF[b]]
    return [*out, PEER]


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
