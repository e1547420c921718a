"""``kafka_fetch``: fetched record batches decoded in one loop give what kafka-python gives.

Each test builds record batches with kafka-python's own ``MemoryRecordsBuilder`` (no broker) and
reads them through kafka-python's ``Fetcher.PartitionRecords`` and through
:class:`BatchDecodingRecords`, taking records in pieces as the fetcher does: the records (every
field of ``ConsumerRecord``), the position after each piece and the read counters must be equal.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import calc_crc32c
from kafka.structs import TopicPartition

from stream_perceptron.kafka.fastpath import fetch as kafka_fetch
from stream_perceptron.kafka.fastpath.fetch import BatchDecodingRecords

TP = TopicPartition("in", 3)
T0 = 1_700_000_000_000
Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]


def _batch(
    records: list[Record], *, offset: int = 0, magic: int = 2, codec: int = 0
) -> bytes:
    builder = MemoryRecordsBuilder(magic=magic, compression_type=codec, batch_size=1 << 30, offset=offset)
    for key, value, headers, timestamp in records:
        kw: dict[str, Any] = {"headers": headers} if magic == 2 else {}
        assert builder.append(timestamp=timestamp, key=key, value=value, **kw) is not None
    builder.close()
    return bytes(builder.buffer())


def _with_attributes(batch: bytes, set_bits: int) -> bytes:
    """``batch`` with ``set_bits`` set in its attributes, and its CRC made right again."""
    buf = bytearray(batch)
    at = DefaultRecordBatch.ATTRIBUTES_OFFSET
    (attributes,) = struct.unpack_from(">h", buf, at)
    struct.pack_into(">h", buf, at, attributes | set_bits)
    struct.pack_into(">I", buf, DefaultRecordBatch.CRC_OFFSET, calc_crc32c(bytes(buf[at:])))
    return bytes(buf)


def _plain(n: int, *, start: int = 0) -> list[Record]:
    return [(None, b'{"x":[%d.5],"y":1}' % i, [], T0 + 3 * i) for i in range(start, start + n)]


def _read(cls: Any, data: bytes, fetch_offset: int = 0, piece: int = 7) -> tuple[Any, ...]:
    part = cls(fetch_offset, TP, MemoryRecords(data), check_crcs=True)
    records, positions = [], []
    while part:  # after each take: the position and the counters a drain reports
        taken = part.take(piece)
        records.extend(taken)
        positions.append((part.next_fetch_offset, part.records_read, part.bytes_read))
    return records, positions, part.leader_epoch


def _same_as_kafka_python(data: bytes, fetch_offset: int = 0, piece: int = 7) -> list[Any]:
    stock = _read(Fetcher.PartitionRecords, data, fetch_offset, piece)
    ours = _read(BatchDecodingRecords, data, fetch_offset, piece)
    assert ours == stock
    assert stock[0], "the batches held records"
    return list(stock[0])


def test_plain_batches_give_kafka_pythons_records_and_positions() -> None:
    data = _batch(_plain(300)) + _batch(_plain(200, start=300), offset=300)
    records = _same_as_kafka_python(data)
    assert [r.offset for r in records] == list(range(500))
    assert records[0].timestamp == T0 and records[-1].timestamp == T0 + 3 * 499


def test_keys_headers_tombstones_and_varint_edges_are_read_alike() -> None:
    sizes = [0, 1, 62, 63, 64, 65, 127, 128, 8191, 8192, 8193, 70_000]  # 1-, 2- and 3-byte varints
    records: list[Record] = []
    for i, size in enumerate(sizes * 12):  # offset deltas past 63 and 8191 too
        key = None if i % 4 == 0 else b"k" * (i % 70)
        value = None if i % 9 == 0 else bytes([i % 251]) * size
        headers = [] if i % 3 else [("trace", b"abc"), ("é-key", None), ("", b"")]
        records.append((key, value, headers, T0 - 5_000 + 97 * i))  # negative and long ts deltas
    records.append((None, b"later", [], T0 + 10**9))
    got = _same_as_kafka_python(_batch(records, offset=41))
    assert got[0].headers == [("trace", b"abc"), ("é-key", None), ("", b"")]
    assert got[0].serialized_header_size == len("trace") + 3 + len("é-key".encode())
    assert got[1].headers == [] and got[1].serialized_header_size == -1
    assert got[0].key is None and got[0].serialized_key_size == -1 and got[0].value is None


def test_a_compressed_batch_is_read_alike() -> None:
    _same_as_kafka_python(_batch(_plain(500), codec=1))  # gzip; the others decompress alike


def test_a_fetch_from_the_middle_of_a_batch_starts_at_the_fetch_offset() -> None:
    got = _same_as_kafka_python(_batch(_plain(100)) + _batch(_plain(50, start=100), offset=100), 37)
    assert got[0].offset == 37


@pytest.mark.parametrize("piece", [1, 64, 10_000])
def test_positions_move_alike_whatever_the_take_size(piece: int) -> None:
    _same_as_kafka_python(_batch(_plain(130)) + _batch(_plain(70, start=130), offset=130), 0, piece)


def test_log_append_time_gives_the_batchs_max_timestamp() -> None:
    data = _with_attributes(_batch(_plain(40)), 0x08)
    got = _same_as_kafka_python(data)
    assert {(r.timestamp, r.timestamp_type) for r in got} == {(T0 + 3 * 39, 1)}


def test_control_batches_are_skipped_and_passed_over() -> None:
    control = _with_attributes(_batch(_plain(5, start=10), offset=10), 0x30)
    data = _batch(_plain(10)) + control + _batch(_plain(10, start=15), offset=15)
    got = _same_as_kafka_python(data)
    assert [r.offset for r in got] == [*range(10), *range(15, 25)]
    _same_as_kafka_python(_batch(_plain(10)) + control)  # a control batch last moves the position


def test_an_older_format_batch_and_all_after_it_are_left_to_kafka_python() -> None:
    legacy = [(b"k", b"v%d" % i, [], T0 + i) for i in range(20)]
    data = _batch(_plain(20)) + _batch(legacy, offset=20, magic=1) + _batch(_plain(5, start=40), offset=40)
    got = _same_as_kafka_python(data)
    assert [r.offset for r in got] == [*range(40), *range(40, 45)]


def _outcome(cls: Any, data: bytes, piece: int = 2) -> list[tuple[Any, ...]]:
    """What each take gives (records, or the error raised) and the position after it."""
    part, got = cls(0, TP, MemoryRecords(data), check_crcs=True), []
    while part:
        try:
            got.append(("records", part.take(piece), part.next_fetch_offset))
        except CorruptRecordError as exc:  # kafka-python reads a bytearray, kafka_fetch bytes
            got.append(("error", str(exc).replace("bytearray index", "index"), part.next_fetch_offset))
            break
    return got


def _corrupt_alike(data: bytes, message: str) -> list[tuple[Any, ...]]:
    """Both ways take the same records, then raise the same error at the same position."""
    ours = _outcome(BatchDecodingRecords, data)
    assert ours == _outcome(Fetcher.PartitionRecords, data)
    assert ours[-1][0] == "error" and message in ours[-1][1], ours[-1]
    return ours


def _record_starts(batch: bytes) -> list[int]:
    """Where each record of ``batch`` starts, read by kafka-python itself."""
    reader = DefaultRecordBatch(batch)
    iter(reader)
    starts = []
    for _ in range(reader.records_count):
        starts.append(reader._pos)
        next(reader)
    return starts


def _resealed(buf: bytearray, length_change: int = 0) -> bytes:
    """``buf`` with its batch length moved by ``length_change`` and its CRC made right again."""
    (length,) = struct.unpack_from(">i", buf, 8)
    struct.pack_into(">i", buf, 8, length + length_change)
    return _with_attributes(bytes(buf), 0)


def test_a_bad_crc_raises_kafka_pythons_error_after_the_good_batches() -> None:
    buf = bytearray(_batch(_plain(10)) + _batch(_plain(10, start=10), offset=10))
    buf[-3] ^= 0xFF
    got = _corrupt_alike(bytes(buf), "failed crc check")
    assert got[-1][2] == 10


def test_a_record_whose_length_is_wrong_comes_after_the_records_before_it() -> None:
    buf = bytearray(_batch(_plain(5)))
    buf[_record_starts(bytes(buf))[3]] += 2  # the 4th record's length: one byte more in zigzag
    got = _corrupt_alike(_resealed(buf), "Invalid record size")
    assert [r.offset for step in got[:-1] for r in step[1]] == [0, 1, 2]
    assert got[-1][2] == 3  # the position stays at the corrupt record


def test_a_record_cut_short_is_corrupt_not_an_index_error() -> None:
    buf = bytearray(_batch(_plain(4)))
    del buf[-3:]  # the last record loses its value's end and its header count
    _corrupt_alike(_resealed(buf, -3), "Found invalid record structure")


def test_bytes_after_the_last_record_are_corrupt_once_every_record_is_taken() -> None:
    got = _corrupt_alike(_resealed(bytearray(_batch(_plain(3)) + b"\x00\x00"), 2), "2 unconsumed bytes")
    assert [r.offset for step in got[:-1] for r in step[1]] == [0, 1, 2]


def test_a_negative_header_count_is_corrupt() -> None:
    records = [(None, b"v", [], T0), (None, b"v", [("h", b"1")], T0)]
    buf = bytearray(_batch(records))
    count_at = len(buf) - len(b"h") - 1 - len(b"1") - 1 - 1  # ... count, key len, key, value len, value
    assert buf[count_at] == 2  # one header, zigzag
    buf[count_at] = 1  # -1
    _corrupt_alike(_resealed(buf), "invalid number of record headers -1")


def test_a_header_key_that_is_not_utf8_is_corrupt_after_the_records_before_it() -> None:
    records = [(None, b"v", [("h", b"1")], T0 + i) for i in range(3)]
    buf = bytearray(_batch(records))
    key_at = len(buf) - len(b"1") - 1 - len(b"h")  # the last record's ... key, value len, value
    assert buf[key_at] == ord("h")
    buf[key_at] = 0xFF  # never a byte of UTF-8
    got = _corrupt_alike(_resealed(buf), "Found invalid record structure: UnicodeDecodeError")
    assert [r.offset for step in got[:-1] for r in step[1]] == [0, 1]
    assert got[-1][2] == 2


def test_a_corrupt_batch_after_a_control_batch_leaves_the_position_past_it() -> None:
    control = _with_attributes(_batch(_plain(5, start=10), offset=10), 0x30)
    bad = bytearray(_batch(_plain(3, start=15), offset=15))
    bad[-3] ^= 0xFF
    got = _corrupt_alike(_batch(_plain(10)) + control + bytes(bad), "failed crc check")
    assert got[-1][2] == 15


def test_the_leader_epoch_and_unchecked_crcs_are_kept_alike() -> None:
    buf = bytearray(_batch(_plain(20)))
    struct.pack_into(">i", buf, 12, 7)  # the partition leader epoch, outside the CRC
    assert {r.leader_epoch for r in _same_as_kafka_python(bytes(buf))} == {7}
    buf[-3] ^= 0xFF
    unchecked = [
        [(r.offset, r.value) for r in cls(0, TP, MemoryRecords(bytes(buf)), check_crcs=False).take(100)]
        for cls in (Fetcher.PartitionRecords, BatchDecodingRecords)
    ]
    assert unchecked[0] == unchecked[1] and len(unchecked[0]) == 20


def _consumer(**config: Any) -> Any:
    fetcher = SimpleNamespace(PartitionRecords=Fetcher.PartitionRecords)
    base = {"key_deserializer": None, "value_deserializer": None, "isolation_level": "read_uncommitted"}
    return SimpleNamespace(_fetcher=fetcher, config={**base, **config})


def test_supports_a_consumer_of_this_kafka_python_and_install_takes_it() -> None:
    consumer = _consumer()
    assert kafka_fetch.supports(consumer)
    assert not kafka_fetch.installed(consumer)
    assert kafka_fetch.install(consumer)
    assert kafka_fetch.installed(consumer)
    assert kafka_fetch.supports(consumer)  # asking again is harmless
    assert Fetcher.PartitionRecords is kafka_fetch._STOCK_RECORDS  # the class itself is untouched


@pytest.mark.parametrize(
    "config",
    [
        {"key_deserializer": bytes.decode},
        {"value_deserializer": bytes.decode},
        {"isolation_level": "read_committed"},
    ],
)
def test_declines_deserialisers_and_read_committed(config: dict[str, Any]) -> None:
    consumer = _consumer(**config)
    assert not kafka_fetch.supports(consumer)
    assert not kafka_fetch.install(consumer)  # it keeps kafka-python's reading
    assert consumer._fetcher.PartitionRecords is Fetcher.PartitionRecords


def test_declines_a_fetcher_of_another_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    other = _consumer()
    other._fetcher.PartitionRecords = type("Other", (), {})
    assert not kafka_fetch.supports(other)
    assert not kafka_fetch.supports(SimpleNamespace(config={}))

    def unpack(self: Any, tp: Any, records: Any) -> None:  # another signature
        return None

    monkeypatch.setattr(Fetcher.PartitionRecords, "_unpack_records", unpack)
    assert not kafka_fetch.supports(_consumer())


def test_declines_where_the_probe_reads_other_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_fetch, "_headers", lambda buf, pos: ([], -1, pos + 7))  # headers lost
    assert not kafka_fetch.supports(_consumer())


def test_refusal_names_the_check_that_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    # what the edge's start line says when kafka-python's own reading is kept
    assert kafka_fetch.refusal(_consumer()) is None
    deserialiser = _consumer(value_deserializer=bytes.decode)
    assert kafka_fetch.refusal(deserialiser) == "the consumer has a deserialiser"
    assert kafka_fetch.refusal(_consumer(isolation_level="read_committed")) == (
        "the consumer reads committed records only")
    assert kafka_fetch.refusal(SimpleNamespace(config={})) == "shape: the consumer has no _fetcher or config"
    other = _consumer()
    other._fetcher.PartitionRecords = type("Other", (), {})
    assert kafka_fetch.refusal(other) == "shape: the fetcher's PartitionRecords is another class"
    keys_lost = lambda cls, fields: tuple.__new__(cls, (*fields[:6], None, *fields[7:]))  # noqa: E731
    with monkeypatch.context() as patched:
        patched.setattr(kafka_fetch, "_new", keys_lost)
        assert kafka_fetch.refusal(_consumer()) == (
            "probe: the probe batches read otherwise than by kafka-python")
    monkeypatch.setattr(kafka_fetch, "_headers", lambda buf, pos: ([], -1, pos + 7))  # headers lost
    assert (kafka_fetch.refusal(_consumer()) or "").startswith(
        "probe: reading the probe batches failed (CorruptRecordError: ")
