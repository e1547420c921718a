"""Iterative parameter mixing in a benchmark run (``bench.bench_scale --mix``): the intervals asked
for, the settings that turn mixing on, and how many mixing points a run made.

At a mixing point a partition publishes its state to the model topic and adopts the mix of every
partition's newest state (``stream_perceptron/worker/mixing.py``, docs/mixing.md), so with mixing
every ``E`` labeled examples of a partition the worker makes one mixing point per ``E`` of them.
"""

from __future__ import annotations

from bench.worker.topics import read_back


def mix_values(text: str) -> list[int]:
    """``--mix``: comma-separated values of ``SP_MIX__EVERY_EXAMPLES`` (0 = off), each once, in
    increasing order; ValueError for anything but whole numbers >= 0.

    >>> mix_values("0,1000,100,0")
    [0, 100, 1000]
    >>> mix_values("10,-1")
    Traceback (most recent call last):
    ...
    ValueError: -1 is below 0
    """
    values = {int(v) for v in text.split(",") if v.strip()}
    if not values:
        raise ValueError("no value")
    if min(values) < 0:
        raise ValueError(f"{min(values)} is below 0")
    return sorted(values)


def mix_env(every: int, topic: str) -> dict[str, str]:
    """The settings of a run that mixes every ``every`` labeled examples of a partition through
    the model topic ``topic`` (the worker creates it when missing); none for 0, the default (off).

    >>> mix_env(1000, "run-7-model")
    {'SP_MIX__EVERY_EXAMPLES': '1000', 'SP_MIX__TOPIC': 'run-7-model'}
    >>> mix_env(0, "run-7-model")
    {}
    """
    if every == 0:
        return {}
    return {"SP_MIX__EVERY_EXAMPLES": str(every), "SP_MIX__TOPIC": topic}


def mixing_points(bootstrap: str, topic: str) -> int:
    """The records of the model topic ``topic``: one per mixing point of any partition, since each
    point publishes one record before its adoption. The topic has one partition and is compacted,
    but a run's few records stay in the open segment, which Apache Kafka does not compact (the
    embedded broker never compacts)."""
    return len(read_back(bootstrap, topic, idle_s=1.0).offsets)
