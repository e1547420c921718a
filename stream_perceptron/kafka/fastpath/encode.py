"""Encoding a run of records into kafka-python's open producer batch in one loop.

``ProducerBatch.try_append`` encodes one record per call: through ``MemoryRecordsBuilder.append``
and ``DefaultRecordBatchBuilder.append`` (type checks, a scratch buffer, five ``encode_varint``
calls), then a ``FutureRecordMetadata`` (three constructors, a lock, two lists, and a callback and
errback registered on the batch's future under its lock); the edge then adds its errback under
the record future's lock. ``bench/bench_fastpath.py encode`` times both ways: 5.28 µs per record that
way on the benchmark's host, 2.75 with :func:`append_run`.

:func:`append_run` appends records to an open batch in one loop, as long as they fit, and writes
exactly what the calls above write: the same bytes in the batch's buffer (each varint from a
table of the small ones), the same builder and batch counters, and for each record a future with
every field the constructors set, registered with the batch's future as they register it (under
that future's lock, taken once per run), and with the caller's errback already on it. Each
record's timestamp is read from the clock as it is appended, as ``try_append(None, ...)`` reads
it. A record is written only once its future is made, and counted as soon as it is written.

It reaches into kafka-python 3.0's producer batch, record builders and futures.
:func:`refusal` checks their fields and, on a probe batch, that :func:`append_run` writes the
same bytes and futures as ``try_append``. Where it does not, the caller appends through
``try_append``. The caller holds the partition's lock, as ``RecordAccumulator.append`` does
around ``try_append``. ``README.md`` beside this file says which kafka-python versions were
checked and what to re-run on an upgrade.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kafka.producer.future import FutureRecordMetadata
from kafka.record.util import encode_varint

_FUTURE_SLOTS = ("is_done", "value", "exception", "_callbacks", "_errbacks", "_lock")
_RECORD_FUTURE_SLOTS = ("_produce_future", "args")
_BUILDER_SLOTS = {"_buffer", "_batch_size", "_first_timestamp", "_max_timestamp", "_num_records",
                  "_last_offset"}  # fmt: skip
_SMALL = 8_192  # varints of -1 .. 8191 (one or two bytes) come from a table
_BYTES = (bytes, bytearray, memoryview)
_ZERO = b"\x00"  # a record's attributes, and its header count
_NONE = b"\x01"  # the varint of -1: a null key


def _varint(value: int) -> bytes:
    """``value`` as Kafka's zigzag varint, as kafka-python's ``encode_varint`` writes it."""
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


_VARINTS = tuple(_varint(v) for v in range(-1, _SMALL))  # _VARINTS[v + 1]


def append_run(
    batch: Any,
    rows: Sequence[int],
    k: int,
    keys: Sequence[bytes | None],
    values: Sequence[bytes],
    futures: list[Any],
    topic: str,
    errback: Callable[..., Any] | None,
    now: float,
    clock: Callable[[], float] = time.time,
) -> int:
    """Append records ``rows[k:]`` to the open ``batch`` while they fit, as
    ``batch.try_append(None, key, value, [], now)`` would one by one; each record's future goes to
    ``futures[row]``, with ``errback(topic, key, value, exc)`` on it. Returns the position in
    ``rows`` of the first record not appended (``len(rows)`` if all were).

    A record is ``length attributes timestamp_delta offset_delta key_length key value_length
    value header_count``, each integer a zigzag varint, the length that of the rest; the first
    record of a batch always goes in, any other only while the batch stays within its size.

    Keys and values must be bytes: a key or value of another type raises ``TypeError`` as
    ``try_append`` raises it, with the records before it appended and counted. Unlike
    ``try_append`` this takes no null value (a tombstone): the worker never sends one.
    """
    records = batch.records
    produce_future = batch.produce_future
    with produce_future._lock:  # as _add_cb_eb registers each record future: once per run here
        if records._closed or produce_future.is_done:
            return k
        builder = records._builder
        buf, limit = builder._buffer, builder._batch_size
        first, max_ts = builder._first_timestamp, builder._max_timestamp
        offset = start = records._next_offset
        record_futures = batch._record_futures
        callbacks, errbacks = produce_future._callbacks, produce_future._errbacks
        biggest = batch.max_record_size
        varints, small, join = _VARINTS, _SMALL, b"".join
        new, lock, partial = object.__new__, threading.Lock, functools.partial
        n = len(rows)
        try:
            while k < n:
                row = rows[k]
                key, value = keys[row], values[row]
                ts = int(clock() * 1000)
                opening = first is None  # the batch's first record always goes in
                delta = 0 if opening else ts - first
                if key is None:
                    key_size, key_head, key_body = -1, _NONE, b""
                elif type(key) in _BYTES:
                    key_size, key_body = len(key), key
                    key_head = varints[key_size + 1] if key_size < small else _varint(key_size)
                else:
                    raise TypeError(f"Not supported type for key: {type(key)}")
                if type(value) not in _BYTES:
                    raise TypeError(f"Not supported type for value: {type(value)}")
                value_size = len(value)
                record = join((
                    _ZERO,
                    varints[delta + 1] if -1 <= delta < small else _varint(delta),
                    varints[offset + 1] if offset < small else _varint(offset),
                    key_head, key_body,
                    varints[value_size + 1] if value_size < small else _varint(value_size), value,
                    _ZERO,
                ))  # fmt: skip
                size = len(record)
                head = varints[size + 1] if size < small else _varint(size)
                required = size + len(head)
                if required + len(buf) > limit and not opening:
                    break
                # FutureRecordMetadata(produce_future, offset, ts, None, key_size, value_size, -1), field
                # by field, and the caller's errback on it (supports() checks this against the constructor)
                future = new(FutureRecordMetadata)
                future.is_done, future.value, future.exception = False, None, None
                future._callbacks = []
                future._errbacks = [] if errback is None else [partial(errback, topic, key, value)]
                future._lock = lock()
                future._produce_future = produce_future
                future.args = (offset, ts, None, key_size, value_size, -1)
                futures[row] = future  # before the record is written: nothing half done if this raises
                buf += head + record
                offset += 1  # counted as soon as it is written
                k += 1
                if opening:
                    first = max_ts = ts
                elif max_ts < ts:
                    max_ts = ts
                if required > biggest:
                    biggest = required
                callbacks.append(future._produce_success)
                errbacks.append(future.failure)
                record_futures.append(future)
        finally:  # what went in stays counted, if a record raises partway
            if offset != start:
                builder._first_timestamp, builder._max_timestamp = first, max_ts
                builder._num_records += offset - start
                builder._last_offset = offset - 1
                records._next_offset = offset
                batch.max_record_size, batch.last_append = biggest, now
        return k


def supports(producer: Any) -> bool:
    """True if ``producer`` makes v2 batches whose builders and futures have the fields
    :func:`append_run` writes, and :func:`append_run` writes on a probe batch the bytes, counters
    and futures that ``try_append`` writes."""
    return refusal(producer) is None


def refusal(producer: Any) -> str | None:
    """Why ``producer``'s records are left to ``try_append`` (a shape check that failed, or the
    live probe's finding), or None where :func:`append_run` may write them."""
    try:
        from kafka.future import Future
        from kafka.producer.producer_batch import ProducerBatch
        from kafka.record.default_records import DefaultRecordBatchBuilder
        from kafka.record.memory_records import MemoryRecordsBuilder
    except ImportError as exc:
        return f"shape: {exc}"
    if producer._accumulator.config.get("message_version") != 2:
        return "the producer writes an older message format than v2"
    if Future.__slots__ != _FUTURE_SLOTS or FutureRecordMetadata.__slots__ != _RECORD_FUTURE_SLOTS:
        return "shape: kafka-python's record futures have other fields"
    if not _BUILDER_SLOTS <= set(DefaultRecordBatchBuilder.__slots__):
        return "shape: DefaultRecordBatchBuilder has other fields"
    try:
        same = _same_as_try_append(ProducerBatch, MemoryRecordsBuilder)
    except Exception as exc:  # another kafka-python: whatever broke, try_append stays the way
        return f"probe: appending to the probe batch failed ({type(exc).__name__}: {exc})"
    return None if same else "probe: append_run wrote the probe batch otherwise than try_append"


def _same_as_try_append(batch_class: Any, builder_class: Any) -> bool:
    """Append the same records to two probe batches, by ``try_append`` and by :func:`append_run`,
    on the same clock: a key and none, a small and a large value, until the second batch is full."""
    from kafka.structs import TopicPartition

    tp = TopicPartition("probe", 0)
    keys = [b"k", None, b"", b"k3", b"key-4"]
    values = [b"v", b"w" * 300, b"", b"y" * 20, b"x" * 9_800]  # the last one no longer fits
    ticks = iter(range(10**6))

    def clock() -> float:
        return 1_700_000_000 + next(ticks) / 1000

    def probe() -> Any:
        return batch_class(tp, builder_class(2, 0, 10_000), now=5.0)

    theirs, ours = probe(), probe()
    their_futures = []
    for key, value in zip(keys, values, strict=True):
        future = theirs.try_append(int(clock() * 1000), key, value, [], now=7.0)
        if future is None:
            break
        their_futures.append(future.add_errback(_probe_errback, "probe", key, value))
    ticks = iter(range(10**6))
    futures: list[Any] = [None] * len(keys)
    rows = range(len(keys))
    appended = append_run(ours, rows, 0, keys, values, futures, "probe", _probe_errback, 7.0, clock)
    if appended != len(their_futures) or appended in (0, len(keys)):
        return False
    return _state(theirs) == _state(ours) and [_fields(f) for f in their_futures] == [
        _fields(f) for f in futures[:appended]
    ]


def _probe_errback(*_args: Any) -> None:
    return None


def _state(batch: Any) -> tuple[Any, ...]:
    """A probe batch once closed: bytes, counters, record futures and their registrations."""
    produce = batch.produce_future
    batch.records.close()
    return (
        bytes(batch.records.buffer()), batch.records.next_offset(), batch.max_record_size,
        batch.last_append, [_fields(f) for f in batch._record_futures],
        [(cb.__func__, eb.__func__) for cb, eb in zip(produce._callbacks, produce._errbacks, strict=True)],
    )  # fmt: skip


def _fields(future: Any) -> tuple[Any, ...]:
    errbacks = [(e.func, e.args) for e in future._errbacks]
    return (
        type(future), future.is_done, future.value, future.exception, future._callbacks, errbacks,
        type(future._lock), future.args,
    )  # fmt: skip
