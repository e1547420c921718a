"""Appending a poll's records to kafka-python's producer in one call.

``KafkaProducer.send`` does, for every record, work that is the same for the whole batch: it
checks the headers and serialises nothing (the worker's keys and values are bytes already), looks
up the topic's metadata, validates the partition, estimates the record's size against
``max_request_size``, formats a debug line's argument (``str(self)``) whether or not debug is on,
reads the clock, counts the append in progress and takes the partition's lock. Only then does it
append the record to the partition's open batch (``ProducerBatch.try_append``), which encodes it
into the batch's buffer and returns the record's future.

:func:`append_many` does the batch-wide part once per call and then, under the partition's lock
as ``RecordAccumulator.append`` takes it around ``try_append``, appends the records to the open
batch in one loop (:func:`~stream_perceptron.kafka.fastpath.encode.append_run`, which writes what
``try_append`` would). When a batch is full, or a partition has none open, the record goes
through ``RecordAccumulator.append`` itself, which opens the next batch exactly as ``send``
would. The records, their order in each partition, their futures (with batch splits and
per-record errors) are those of ``send``, and the sender is woken whenever a batch fills or
opens, as ``send`` wakes it. ``bench/bench_fastpath.py append`` times it against ``send``.

This reaches into kafka-python's producer internals (``_accumulator``, ``_metadata``,
``_sender``, ``_transaction_manager``). :func:`refusal` checks that each one used here is there
and takes the arguments it passes, and that ``append_run`` writes what ``try_append`` writes. The
edge asks once per producer. Where a check fails (another kafka-python), the edge sends every
record with ``send``. Where a batch is not one it can take exactly as ``send`` would (an unknown
topic, records that would be too large, a partition to be chosen by the sticky partitioner),
:func:`append_many` returns None and the caller sends the records one by one. A transactional
producer's records are appended too: each partition is first added to the open transaction
(``TransactionManager.maybe_add_partition_to_transaction``), as ``send`` adds it; a producer whose
transaction has failed refuses that with a :class:`KafkaError`, and the records are left to
``send``, which raises it. ``README.md`` beside this file says which kafka-python versions were
checked and what to re-run on an upgrade.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from stream_perceptron.kafka.fastpath import encode as kafka_encode

# The producer internals append_many uses, as (holder, attribute) paths from the producer.
_NEEDED = (
    ("_closed",),
    ("_metadata", "partitions_for_topic"),
    ("_partition",),
    ("_estimate_size_in_bytes",),
    ("_transaction_manager",),
    ("_sender", "wakeup"),
    ("_accumulator", "append"),
    ("_accumulator", "_tp_lock"),
    ("_accumulator", "_batches"),
    ("_accumulator", "_closed"),
    ("_accumulator", "_appends_in_progress", "increment"),
    ("_accumulator", "_appends_in_progress", "decrement"),
)
_NO_HEADERS: list[tuple[str, bytes]] = []


def supports(producer: Any) -> bool:
    """True if ``producer`` has every internal :func:`append_many` uses, called as it calls them
    (as in kafka-python 3.0), and no serialiser."""
    return refusal(producer) is None


def refusal(producer: Any) -> str | None:
    """Why ``producer``'s records go through ``send`` one by one (a shape check that failed, or
    the live probe of :mod:`.encode`), or None where :func:`append_many` may take them."""
    for path in _NEEDED:
        obj = producer
        for name in path:
            if not hasattr(obj, name):
                return f"shape: the producer has no {'.'.join(path)}"
            obj = getattr(obj, name)
    try:
        from kafka.producer.record_accumulator import ProducerBatch

        opens = inspect.signature(producer._accumulator.append).parameters
        appends = inspect.signature(ProducerBatch.try_append).parameters
    except (ImportError, AttributeError, TypeError, ValueError) as exc:  # another kafka-python
        return f"shape: {type(exc).__name__}: {exc}"
    config = getattr(producer, "config", {})
    if "max_request_size" not in config:
        return "shape: the producer has no max_request_size"
    # send passes keys and values through these; append_many takes them as bytes
    if config.get("key_serializer") is not None or config.get("value_serializer") is not None:
        return "the producer has a serialiser"
    if not hasattr(producer._accumulator._batches, "default_factory"):
        return "shape: the accumulator's batches are not a defaultdict"
    # RecordAccumulator.append(tp, timestamp_ms, key, value, headers, now, ...) of 3.0, which
    # gives (future, batch_is_full, new_batch_created, ...); try_append(..., headers, now)
    if list(opens)[:6] != ["tp", "timestamp_ms", "key", "value", "headers", "now"] or (
        "abort_on_new_batch" not in opens
    ):
        return "shape: RecordAccumulator.append takes other arguments"
    if list(appends)[:6] != ["self", "timestamp_ms", "key", "value", "headers", "now"]:
        return "shape: ProducerBatch.try_append takes other arguments"
    manager = producer._transaction_manager
    if manager is not None and not all(
        callable(getattr(manager, name, None))
        for name in ("is_transactional", "maybe_add_partition_to_transaction")
    ):
        return "shape: the transaction manager has no maybe_add_partition_to_transaction"
    encoding = kafka_encode.refusal(producer)
    return None if encoding is None else f"encode: {encoding}"


def append_many(
    producer: Any,
    topic: str,
    partition: int | None,
    keys: Sequence[bytes | None],
    values: Sequence[bytes],
    errback: Callable[..., Any] | None = None,
) -> list[Any] | None:
    """Append ``(key, value)`` pairs to ``topic`` as ``producer.send`` would. Returns each
    record's future, in order, or None if this batch must go through ``send`` (nothing is
    appended then).

    ``partition``: the partition for every record, or None to have the producer's partitioner
    choose one per record from its key (every key must then be bytes: records without a key go
    to the sticky partitioner, which only ``send`` drives). ``errback(topic, key, value, exc)`` is
    added to each record's future as soon as the record is appended, so that a record appended
    before an exception is never left without it.

    If the producer refuses a record with a :class:`KafkaError` partway (it was closed meanwhile,
    or its transaction failed), the records not appended have None for a future: the caller
    sends those through ``send``, which raises or retries as it does for any record. Any other
    exception propagates (a key or value that is not bytes raises ``TypeError``; unlike
    ``send``, a null value too).
    """
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} values")
    groups = _groups(producer, topic, partition, keys, values)
    if groups is None:
        return None
    futures: list[Any] = [None] * len(values)
    manager = producer._transaction_manager
    transactional = manager is not None and manager.is_transactional()
    for p, rows in groups.items():
        tp = TopicPartition(topic, p)
        try:
            if transactional:  # as send does before appending (a failed transaction refuses)
                manager.maybe_add_partition_to_transaction(tp)
            _append_to(producer, tp, rows, keys, values, futures, errback)
        except KafkaError:  # producer or accumulator closed meanwhile: send says what it is
            break
    return futures


def _groups(
    producer: Any,
    topic: str,
    partition: int | None,
    keys: Sequence[bytes | None],
    values: Sequence[bytes],
) -> Mapping[int, Sequence[int]] | None:
    """The rows of each partition, in order; None where ``send`` must take the batch."""
    if producer._closed or producer._accumulator._closed or not values:
        return None
    known = producer._metadata.partitions_for_topic(topic)
    if not known or (partition is not None and partition not in known):
        return None
    if partition is None and any(key is None for key in keys):
        return None
    longest_key = max(keys, key=_length)
    longest_value = max(values, key=len)
    size = producer._estimate_size_in_bytes(longest_key, longest_value, _NO_HEADERS)
    if size > producer.config["max_request_size"]:
        return None  # send raises MessageSizeTooLargeError for the records that are too large
    if partition is not None:
        return {partition: range(len(values))}
    choose, chosen = producer._partition, dict[int, list[int]]()
    for i, (key, value) in enumerate(zip(keys, values, strict=True)):
        chosen.setdefault(choose(topic, None, key, value, key, value), []).append(i)
    if not set(chosen) <= known:  # the metadata changed meanwhile: send raises ValueError
        return None
    return chosen


def _length(key: bytes | None) -> int:
    return -1 if key is None else len(key)


def _append_to(
    producer: Any,
    tp: TopicPartition,
    rows: Sequence[int],
    keys: Sequence[bytes | None],
    values: Sequence[bytes],
    futures: list[Any],
    errback: Callable[..., Any] | None,
) -> None:
    """Append records ``rows`` to partition ``tp``, in order, as ``RecordAccumulator.append``
    does: into the open batch under the partition's lock while it has room (one
    :func:`~stream_perceptron.kafka.fastpath.encode.append_run`), else through ``append``, which opens the
    next batch. Each future goes to ``futures[row]``, with ``errback`` added. Wakes the sender
    when a batch is full or new, as ``send`` does."""
    accumulator, topic = producer._accumulator, tp.topic
    lock, batches = accumulator._tp_lock(tp), accumulator._batches
    n, k = len(rows), 0
    counter = accumulator._appends_in_progress
    counter.increment()  # before looking at the batches, as RecordAccumulator.append does
    try:
        while k < n:
            with lock:
                dq = batches[tp]
                if dq and not accumulator._closed:  # closed meanwhile: append() below raises
                    k = kafka_encode.append_run(
                        dq[-1], rows, k, keys, values, futures, topic, errback, time.monotonic()
                    )
                    full = len(dq) > 1 or dq[-1].records.is_full()
                else:
                    full = False
            if full:
                producer._sender.wakeup()
            if k < n:
                row = rows[k]
                key, value = keys[row], values[row]
                result = accumulator.append(tp, None, key, value, _NO_HEADERS)
                future, full, new = result[0], result[1], result[2]
                if errback is not None:
                    future.add_errback(errback, topic, key, value)
                futures[row] = future
                k += 1
                if full or new:
                    producer._sender.wakeup()
    finally:
        counter.decrement()
