"""``stream-perceptron checkpoint show``: the stored states, as one JSON object.

Each partition's state is shown with the keys a version-1 checkpoint always had (``path``,
``seq``, ``created``, ``model_id``, ``config``, ``fingerprint``, the model's ``weights``,
``intercept``, ``mistakes``, ``features``…, ``seen``, ``labeled``, ``offsets``, ``stats``) and
its ``next_offset``; ``partitions`` maps ``"topic:partition"`` to it. With one partition its keys
are at the top level as well, so what read a version-1 checkpoint still reads it. A directory
holding only top-level checkpoints (a `fit` checkpoint, a version-1 worker's) shows its newest
as a version-1 build did. A state in the Kafka store has ``path`` null and says where it is under
``state_record``. A state of a worker mixing partitions (``SP_MIX__EVERY_EXAMPLES``) shows its
latest adoption under ``mixed``: the mixed ``weights`` and ``intercept``, its ``version`` (the
partition's mixing points so far), the input ``offset`` it was adopted at, the ``partitions``,
``epochs``, ``offsets`` and ``mistakes`` it came from, the ``mu`` given to each, the ``rule``, and
the partition's running ``sum_mu_k``; null before the first adoption.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stream_perceptron.errors import CheckpointError
from stream_perceptron.model.stats import RunningStats
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.state.kafka_store import KafkaStore, state_partition
from stream_perceptron.state.store import partition_of
from stream_perceptron.state.stored import StateFiles, StoredState, fingerprint
from stream_perceptron.worker.stores import open_kafka_store


def shown(ckpt: StoredState) -> dict[str, Any]:
    """One checkpoint as ``checkpoint show`` prints it (the keys of the module's docstring but
    ``next_offset``)."""
    stats = RunningStats(ckpt.stats["window"], ckpt.stats["ewma_alpha"])
    stats.set_state(ckpt.stats)
    mixing = ckpt.stats.get("mix")
    extra = {} if not isinstance(mixing, dict) else {"mixed": _mixed(mixing)}
    return {
        "path": None if ckpt.path is None else str(ckpt.path),
        "seq": ckpt.seq,
        "created": ckpt.created,
        "model_id": ckpt.model_id,
        "config": ckpt.config,
        "fingerprint": fingerprint(ckpt.config),
        **ckpt.model,
        "seen": stats.seen,
        "labeled": stats.labeled,
        "offsets": ckpt.body()["offsets"],
        "stats": stats.snapshot(),
        **extra,
    }


def _mixed(mixing: dict[str, Any]) -> dict[str, Any] | None:
    last = mixing.get("last")
    if not last:
        return None
    return {"version": last["epoch"], "offset": last["offset"], **last["mix"],
            "sum_mu_k": mixing.get("sum_mu_k")}


def partitions_shown(states: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    """``{"partitions": {"topic:partition": shown}}``, and the one partition's keys at the top
    level when there is one."""
    out: dict[str, Any] = {"partitions": {f"{t}:{p}": s for (t, p), s in sorted(states.items())}}
    if len(states) == 1:
        out = {**next(iter(states.values())), **out}
    return out


def _partition(ckpt: StoredState) -> dict[str, Any]:
    return {**shown(ckpt), "next_offset": partition_of(ckpt)[2]}


def show_directory(directory: Path) -> dict[str, Any]:
    """What ``checkpoint show DIRECTORY`` prints; :class:`CheckpointError` when it holds nothing
    valid (or a partition's files are all damaged)."""
    if not directory.is_dir():
        raise CheckpointError(f"{directory} is not a directory")
    store = DirectoryStore(directory)
    states = {}
    for topic, partition in store.partitions():
        ckpt = store.load(topic, partition)
        if ckpt is not None:
            states[(topic, partition)] = _partition(ckpt)
    initial = StateFiles(directory).load()
    if not states:
        if initial is None:
            raise CheckpointError(f"no valid checkpoint in {directory}")
        return shown(initial)
    out = partitions_shown(states)
    if initial is not None:
        described = {"path": str(initial.path), "seq": initial.seq, "created": initial.created,
                     "model_id": initial.model_id}
        out["initial_model"] = out["seed"] = described  # "seed": the field's old name, kept
    return out


def show_topic(kafka: KafkaSettings, topic: str) -> dict[str, Any]:
    """What ``checkpoint show --topic TOPIC`` prints: every partition stored in the Kafka store's
    state topic. :class:`CheckpointError` when it holds none;
    :class:`~stream_perceptron.errors.KafkaEdgeError` when it cannot be read."""
    store = open_kafka_store(kafka, topic, chunk_bytes=1024, partitions=None)  # reads only
    try:
        states = {}
        for key in store.stored():
            ckpt = store.load(*key)
            if ckpt is not None:
                states[key] = {**_partition(ckpt), "state_record": _where(store, *key)}
    finally:
        store.close()
    if not states:
        raise CheckpointError(f"no partition state in topic {topic}")
    return partitions_shown(states)


def _where(store: KafkaStore, topic: str, partition: int) -> dict[str, Any] | None:
    m = store.loaded(topic, partition)
    if m is None:
        return None
    return {"topic": store.log.name, "partition": state_partition(partition, store.partitions()),
            "offset": m.offset,
            "key": m.key, "epoch": m.epoch, "writer": m.writer}
