"""``stream-perceptron checkpoint show``: the stored states, as one JSON object; ``checkpoint
export``: one stored model as river's or scikit-learn's Perceptron, in a file.

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

A K-class state (``config.multiclass``) shows its ``weights`` as one row per class, its
``intercept`` as a list and its ``classes`` in row order; its ``stats`` are a K-class statistics
record's (``bound`` = 2(R/γ)², ``classes``, ``per_class``, ``confusion``), and a K-class mix
names its ``classes`` too.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from stream_perceptron.errors import CheckpointError, OutputError
from stream_perceptron.model.class_stats import MulticlassStats
from stream_perceptron.model.perceptron import Perceptron
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
    k_class = bool(ckpt.config.get("multiclass"))
    stats = (MulticlassStats if k_class else RunningStats)(ckpt.stats["window"], ckpt.stats["ewma_alpha"])
    stats.set_state(ckpt.stats)
    snapshot = stats.snapshot(ckpt.model.get("classes") or []) if isinstance(stats, MulticlassStats) else (
        stats.snapshot())
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
        "stats": snapshot,
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


EXPORT_TO = ("river", "sklearn")


def model_of(ckpt: StoredState) -> Perceptron:
    """The model a stored state holds, configured as it was stored."""
    config = ckpt.config
    model = Perceptron(n_features=config.get("n_features"), fit_intercept=config.get("fit_intercept", True),
                       average=config.get("average", False), hash_bits=config.get("hash_bits"),
                       hash_sign=config.get("hash_sign", False))
    model.set_state(ckpt.model)
    return model


def stored_one(directory: Path, partition: str | None = None) -> StoredState:
    """The state ``partition`` (``TOPIC:N``) stored in ``directory``; without it, the one
    partition's state the directory holds, or else its initial model (a ``fit`` checkpoint).
    :class:`CheckpointError` when that is not one state."""
    if not directory.is_dir():
        raise CheckpointError(f"{directory} is not a directory")
    store = DirectoryStore(directory)
    held = sorted(store.partitions())
    if partition is not None:
        topic, _, number = partition.rpartition(":")
        if not topic or not number.isdigit():
            raise CheckpointError(f"--partition is TOPIC:N, got {partition!r}")
        ckpt = store.load(topic, int(number))
        if ckpt is None:
            names = ", ".join(f"{t}:{p}" for t, p in held) or "none"
            raise CheckpointError(f"no valid state of {partition} in {directory} (it holds: {names})")
        return ckpt
    if len(held) > 1:
        names = ", ".join(f"{t}:{p}" for t, p in held)
        raise CheckpointError(f"{directory} holds the states of {len(held)} partitions ({names}):"
                              " name one with --partition TOPIC:N")
    ckpt = store.load(*held[0]) if held else StateFiles(directory).load()
    if ckpt is None:
        raise CheckpointError(f"no valid checkpoint in {directory}")
    return ckpt


def export(directory: Path, to: str, path: Path, partition: str | None = None) -> dict[str, Any]:
    """What ``checkpoint export`` does: the model served by a state of ``directory``
    (:func:`stored_one`) written to ``path`` as river's ``linear_model.Perceptron`` (a pickle) or
    scikit-learn's ``linear_model.Perceptron`` (a joblib file), with the same weights, intercept,
    feature order and classes (:mod:`~stream_perceptron.interop`); returns what was written."""
    from stream_perceptron import interop

    if to not in EXPORT_TO:
        raise CheckpointError(f"--to is one of {', '.join(EXPORT_TO)}, not {to!r}")
    ckpt = stored_one(directory, partition)
    model = model_of(ckpt)
    try:
        theirs = interop.to_river(model) if to == "river" else interop.to_sklearn(model)
    except ImportError as exc:
        raise CheckpointError(f"--to {to} needs {exc.name or to}: pip install scikit-learn") from None
    except ValueError as exc:
        raise CheckpointError(f"{directory}: {exc}") from None
    _write(theirs, path, to)
    return {"to": to, "file": str(path), "state": None if ckpt.path is None else str(ckpt.path),
            "features": len(model.weights), "named": len(model.feature_names),
            "classes": list(model.class_labels), "average": model.average}


def _write(obj: Any, path: Path, to: str) -> None:
    """``obj`` to ``path`` whole or not at all: written beside it, then renamed over it."""
    part = path.with_name(path.name + ".part")
    try:
        if to == "sklearn":
            import joblib

            joblib.dump(obj, part)
        else:
            with part.open("wb") as f:
                pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(part, path)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
