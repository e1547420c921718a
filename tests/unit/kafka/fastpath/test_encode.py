"""``kafka_encode.append_run`` writes what kafka-python's ``ProducerBatch.try_append`` writes.

Each test appends the same records to two producer batches, one by ``try_append`` per record
(as ``KafkaProducer.send`` ends up doing) and one by ``append_run``, on the same clock: the
batches' bytes, counters and record futures must be equal, and the futures must resolve alike
when the batch is acknowledged, fails, or is split.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError, NotLeaderForPartitionError
from kafka.future import Future
from kafka.producer.producer_batch import ProducerBatch
from kafka.producer.record_accumulator import RecordAccumulator
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.structs import TopicPartition

from stream_perceptron.kafka.fastpath import encode as kafka_encode
from stream_perceptron.kafka.fastpath.encode import append_run

TP = TopicPartition("out", 0)
T0 = 1_700_000_000.0


def _clock(steps_ms: list[int]) -> Callable[[], float]:
    """A clock that moves by each of ``steps_ms`` in turn, then by 1 ms (it may go backwards)."""
    moves = iter(steps_ms)
    now = [T0]

    def clock() -> float:
        now[0] += next(moves, 1) / 1000
        return now[0]

    return clock


def _batch(batch_size: int = 16_384) -> ProducerBatch:
    return ProducerBatch(TP, MemoryRecordsBuilder(2, 0, batch_size), now=1.0)


def _by_try_append(
    keys: list[Any], values: list[Any], clock: Callable[[], float], batch_size: int
) -> list[Any]:
    batches, futures, i = [_batch(batch_size)], [], 0
    while i < len(values):
        future = batches[-1].try_append(int(clock() * 1000), keys[i], values[i], [], now=2.0)
        if future is None:
            batches.append(_batch(batch_size))  # the next record reads the clock again, as send does
            continue
        futures.append(future)
        i += 1
    return [batches, futures]


def _by_append_run(
    keys: list[Any], values: list[Any], clock: Callable[[], float], batch_size: int,
    errback: Callable[..., Any] | None = None,
) -> list[Any]:  # fmt: skip
    batches, futures, k = [_batch(batch_size)], [None] * len(values), 0
    while True:
        k = append_run(batches[-1], range(len(values)), k, keys, values, futures, "out", errback, 2.0, clock)
        if k == len(values):
            return [batches, futures]
        batches.append(_batch(batch_size))


def _state(batch: ProducerBatch) -> tuple[Any, ...]:
    batch.records.close()
    futures = [_future(f) for f in batch._record_futures]
    produce = batch.produce_future
    registered = [
        (cb.__func__, eb.__func__) for cb, eb in zip(produce._callbacks, produce._errbacks, strict=True)
    ]
    counters = batch.max_record_size, batch.last_append, batch.record_count
    return bytes(batch.records.buffer()), counters, futures, registered


def _future(future: Any) -> tuple[Any, ...]:
    return (
        type(future), future.is_done, future.value, future.exception, future._callbacks,
        future._errbacks, type(future._lock), future.args,
    )  # fmt: skip


def _same(keys: list[Any], values: list[Any], steps_ms: list[int], batch_size: int = 16_384) -> list[Any]:
    theirs = _by_try_append(keys, values, _clock(steps_ms), batch_size)
    ours = _by_append_run(keys, values, _clock(steps_ms), batch_size)
    assert [_future(f) for f in ours[1]] == [_future(f) for f in theirs[1]]
    assert [_state(b) for b in ours[0]] == [_state(b) for b in theirs[0]]
    return ours


def test_records_of_every_varint_width_are_written_alike() -> None:
    sizes = [0, 1, 62, 63, 64, 65, 127, 128, 8_190, 8_191, 8_192, 8_193, 70_000]  # 1- to 3-byte
    values = [bytes([i % 251]) * sizes[i % len(sizes)] for i in range(60)]
    keys = [None if i % 3 == 0 else b"k" * (i * 149 % 9_000) for i in range(60)]
    batches, futures = _same(keys, values, [0, 5, 0, 9_000, -3, 70_000, 2])  # deltas of every width
    assert len(batches) > 5 and all(f is not None for f in futures)
    records = [r for b in batches for batch in MemoryRecords(bytes(b.records.buffer())) for r in batch]
    assert [(r.key, r.value) for r in records] == list(zip(keys, values, strict=True))


def test_offsets_past_the_table_of_small_varints_are_written_alike() -> None:
    values = [b"%d" % i for i in range(9_000)]  # offset deltas up to 8,999 in one batch
    batches, _ = _same([None] * 9_000, values, [], batch_size=1 << 20)
    assert len(batches) == 1


def test_a_run_stops_where_the_batch_is_full_and_a_record_larger_than_a_batch_opens_one() -> None:
    values = [b"x" * 700] * 10 + [b"y" * 5_000] + [b"z"] * 3
    batches, _ = _same([b"k"] * 14, values, [], batch_size=2_000)
    assert [b.record_count for b in batches] == [2, 2, 2, 2, 2, 1, 3]  # the 5,000 bytes alone


def test_bytearray_and_memoryview_keys_and_values_are_written_alike() -> None:
    kinds = (bytes, bytearray, memoryview)
    keys = [None if i % 4 == 0 else kinds[i % 3](b"k%d" % i) for i in range(30)]
    values = [kinds[(i + 1) % 3](b"v" * (i * 37)) for i in range(30)]
    batches, _ = _same(keys, values, [0, 3])
    records = [r for b in batches for batch in MemoryRecords(bytes(b.records.buffer())) for r in batch]
    assert [(r.key, r.value) for r in records] == [
        (None if k is None else bytes(k), bytes(v)) for k, v in zip(keys, values, strict=True)
    ]


def test_a_closed_batch_takes_nothing() -> None:
    batch = _batch()
    batch.records.close()
    futures: list[Any] = [None]
    assert append_run(batch, [0], 0, [b"k"], [b"v"], futures, "out", None, 2.0) == 0
    assert futures == [None]


@pytest.mark.parametrize(("key", "value", "message"), [
    ("text", b"v", "Not supported type for key: <class 'str'>"),
    (b"k", 3, "Not supported type for value: <class 'int'>"),
])  # fmt: skip
def test_a_key_or_value_that_is_not_bytes_raises_what_try_append_raises(
    key: Any, value: Any, message: str
) -> None:
    with pytest.raises(TypeError) as theirs:
        _batch().try_append(None, key, value, [])
    assert str(theirs.value) == message
    batch = _batch()
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        append_run(batch, [0, 1], 0, [b"ok", key], [b"ok", value], [None, None], "out", None, 2.0)
    batch.records.close()  # the record before it stays appended, with its counters
    written = next(iter(MemoryRecords(bytes(batch.records.buffer()))))
    assert batch.record_count == 1 and [r.value for r in written] == [b"ok"]


def _acknowledged(batches: list[ProducerBatch]) -> None:
    for n, batch in enumerate(batches):
        batch.done(base_offset=100 * n, timestamp_ms=-1)


def test_futures_resolve_alike_when_the_batches_are_acknowledged() -> None:
    keys, values = [b"a", None, b"c"] * 40, [b"v" * 300] * 120
    theirs = _by_try_append(keys, values, _clock([]), 4_000)
    ours = _by_append_run(keys, values, _clock([]), 4_000)
    _acknowledged(theirs[0])
    _acknowledged(ours[0])
    assert [f.get(timeout=0) for f in ours[1]] == [f.get(timeout=0) for f in theirs[1]]
    assert ours[1][-1].get(timeout=0).offset == 100 * (len(ours[0]) - 1) + ours[0][-1].record_count - 1


def test_every_record_of_a_failed_batch_reaches_the_errback_with_its_key_and_value() -> None:
    heard: list[tuple[Any, ...]] = []
    keys, values = [b"k%d" % i for i in range(50)], [b"v%d" % i for i in range(50)]
    batches, futures = _by_append_run(keys, values, _clock([]), 300, lambda *a: heard.append(a))
    assert len(batches) > 2
    error = KafkaTimeoutError("expired")
    for batch in batches:  # as the sender fails a batch
        batch.complete_exceptionally(error, lambda _index: error)
    assert heard == [("out", k, v, error) for k, v in zip(keys, values, strict=True)]
    assert all(f.failed() and f.exception is error for f in futures)


def test_each_record_of_a_failed_batch_hears_its_own_error() -> None:
    heard: list[Any] = []
    batches, futures = _by_append_run([b"a", b"b", b"c"], [b"1", b"2", b"3"], _clock([]), 16_384,
                                      lambda topic, key, value, exc: heard.append((key, exc)))  # fmt: skip
    errors = [NotLeaderForPartitionError(f"record {i}") for i in range(3)]
    batches[0].complete_exceptionally(errors[0], lambda i: errors[i])
    assert heard == list(zip([b"a", b"b", b"c"], errors, strict=True))
    assert [f.exception for f in futures] == errors


def test_a_batch_split_as_too_large_takes_its_futures_along() -> None:
    batches, futures = _by_append_run([b"k"] * 4, [b"a", b"b", b"c", b"d"], _clock([]), 16_384)
    accumulator = RecordAccumulator(batch_size=16_384)
    batches[0].records.close()
    assert accumulator.split_and_reenqueue(batches[0]) == 2  # as the sender on MESSAGE_TOO_LARGE
    for n, half in enumerate(accumulator._batches[TP]):
        half.records.close()
        half.done(base_offset=10 * (n + 1), timestamp_ms=-1)
    assert [f.get(timeout=0).offset for f in futures] == [10, 11, 20, 21]


def _producer(message_version: int = 2) -> Any:
    return SimpleNamespace(_accumulator=SimpleNamespace(config={"message_version": message_version}))


def test_supports_this_kafka_python() -> None:
    assert kafka_encode.supports(_producer())


def test_declines_older_batches_other_futures_and_other_encodings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not kafka_encode.supports(_producer(message_version=1))
    with monkeypatch.context() as patched:
        patched.setattr(Future, "__slots__", (*Future.__slots__, "extra"))
        assert not kafka_encode.supports(_producer())
    with monkeypatch.context() as patched:
        patched.setattr(kafka_encode, "_ZERO", b"\x02")  # bytes that try_append does not write
        assert not kafka_encode.supports(_producer())
    with monkeypatch.context() as patched:
        patched.setattr(ProducerBatch, "try_append", lambda *a, **k: 1 / 0)  # another try_append
        assert not kafka_encode.supports(_producer())
    assert kafka_encode.supports(_producer())


def test_a_record_whose_future_cannot_be_stored_is_not_written() -> None:
    batch = _batch()
    short: list[Any] = [None, None]  # room for two futures of three records
    with pytest.raises(IndexError):
        append_run(batch, [0, 1, 2], 0, [b"a", b"b", b"c"], [b"1", b"2", b"3"], short, "out", None, 2.0)
    batch.records.close()
    written = next(iter(MemoryRecords(bytes(batch.records.buffer()))))
    assert [r.value for r in written] == [b"1", b"2"] and len(batch._record_futures) == 2


def test_a_null_value_is_refused_before_anything_is_written() -> None:
    batch = _batch()
    with pytest.raises(TypeError, match="Not supported type for value: <class 'NoneType'>"):
        append_run(batch, [0], 0, [b"k"], [None], [None], "out", None, 2.0)  # type: ignore[list-item]
    assert batch.record_count == 0 and batch.records._builder._first_timestamp is None


def test_a_batch_whose_future_is_done_takes_nothing() -> None:
    batch = _batch()
    batch.produce_future.success((0, -1, None))
    futures: list[Any] = [None]
    assert append_run(batch, [0], 0, [b"k"], [b"v"], futures, "out", None, 2.0) == 0
    assert futures == [None] and batch.record_count == 0


def test_refusal_names_the_check_that_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    # what the edge's start line says (under append) when try_append is kept
    assert kafka_encode.refusal(_producer()) is None
    older = "the producer writes an older message format than v2"
    assert kafka_encode.refusal(_producer(message_version=1)) == older
    with monkeypatch.context() as patched:
        patched.setattr(Future, "__slots__", (*Future.__slots__, "extra"))
        assert kafka_encode.refusal(_producer()) == "shape: kafka-python's record futures have other fields"
    with monkeypatch.context() as patched:
        patched.setattr(kafka_encode, "_ZERO", b"\x02")
        assert kafka_encode.refusal(_producer()) == (
            "probe: append_run wrote the probe batch otherwise than try_append")
    with monkeypatch.context() as patched:
        patched.setattr(ProducerBatch, "try_append", lambda *a, **k: 1 / 0)
        assert (kafka_encode.refusal(_producer()) or "").startswith(
            "probe: appending to the probe batch failed (ZeroDivisionError: ")
