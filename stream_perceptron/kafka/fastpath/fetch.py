"""Decoding a fetched record batch in one loop, for kafka-python's consumer.

kafka-python reads a fetched v2 record batch (``DefaultRecordBatch``) one record at a time: per
record it makes a ``DefaultRecord`` through about fifteen property reads and seven calls of
``decode_varint``, then the fetcher turns it into a ``ConsumerRecord`` after two deserialiser
calls and a header-size sum. That is most of ``KafkaConsumer.poll``'s cost per record (about
5 µs on the benchmark's host; ``bench/bench_fastpath.py fetch`` times it).

:func:`decode_batch` reads a whole batch in one loop: each varint of one byte, the common case, is
read inline, a longer one by kafka-python's ``decode_varint``. It builds the same
``ConsumerRecord`` tuples, with the same offsets, timestamps (create time, or the batch's max
timestamp under log-append time), keys, values, headers and sizes, and raises the same
``CorruptRecordError`` where kafka-python would, after the records before it. :func:`install`
makes a consumer's fetcher read its batches this way (:class:`BatchDecodingRecords`); everything
else about fetching, positions and the records a poll returns stays kafka-python's.

It reaches into kafka-python's internals: the fetcher's ``PartitionRecords`` class and its
``_unpack_records`` generator, and the batch's ``_buffer``, ``_pos`` and ``_header_data``.
:func:`refusal` checks them and runs a live probe, once per consumer; where either fails, the
consumer keeps kafka-python's reading. A batch of an older message format (magic 0 or 1) is left
to kafka-python, with every batch after it in that fetch. ``README.md`` beside this file says what
is checked, which kafka-python versions were checked, and what to re-run on an upgrade.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from kafka.consumer.fetcher import ConsumerRecord, Fetcher
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.util import decode_varint

_STOCK_RECORDS: Any = getattr(Fetcher, "PartitionRecords", object)  # object: another kafka-python
_FIELDS = (
    "topic", "partition", "leader_epoch", "offset", "timestamp", "timestamp_type", "key", "value",
    "headers", "checksum", "serialized_key_size", "serialized_value_size", "serialized_header_size",
)  # fmt: skip
_HEADER_FORMAT = ">qiibIhiqqqhii"  # base offset ... record count, as kafka-python 3.0 unpacks it
_TIMESTAMP_TYPE_MASK = 0x08
_CONTROL_MASK = 0x20
_LOG_APPEND_TIME = 1
_new = tuple.__new__


def supports(consumer: Any) -> bool:
    """True if ``consumer``'s fetcher and record batches have every internal this module uses (as
    in kafka-python 3.0), it has no deserialiser and it reads uncommitted records."""
    return refusal(consumer) is None


def refusal(consumer: Any) -> str | None:
    """Why :func:`install` leaves ``consumer`` to kafka-python's own reading (a shape check that
    failed, or the live probe's finding), or None where it installs."""
    fetcher = getattr(consumer, "_fetcher", None)
    config = getattr(consumer, "config", None)
    if fetcher is None or not isinstance(config, dict):
        return "shape: the consumer has no _fetcher or config"
    if config.get("key_deserializer") is not None or config.get("value_deserializer") is not None:
        return "the consumer has a deserialiser"
    if config.get("isolation_level") != "read_uncommitted":
        return "the consumer reads committed records only"
    if _STOCK_RECORDS is object:
        return "shape: kafka-python's Fetcher has no PartitionRecords"
    if getattr(fetcher, "PartitionRecords", None) not in (_STOCK_RECORDS, BatchDecodingRecords):
        return "shape: the fetcher's PartitionRecords is another class"
    if ConsumerRecord._fields != _FIELDS:
        return "shape: ConsumerRecord has other fields"
    if DefaultRecordBatch.HEADER_STRUCT.format != _HEADER_FORMAT:
        return "shape: DefaultRecordBatch has another header"
    if not {"_buffer", "_pos", "_header_data", "_next_record_index"} <= set(
        DefaultRecordBatch.__slots__
    ) or not callable(getattr(DefaultRecordBatch, "_maybe_uncompress", None)):
        return "shape: DefaultRecordBatch has other internals"
    if parameter_names(_STOCK_RECORDS._unpack_records) != [
        "self", "tp", "records", "key_deserializer", "value_deserializer",
    ] or not {"check_crcs", "on_drain", "metric_aggregator"} <= set(  # fmt: skip
        parameter_names(_STOCK_RECORDS.__init__)
    ):
        return "shape: PartitionRecords takes other arguments"
    try:
        same = _same_as_kafka_python()
    except Exception as exc:  # another kafka-python: whatever broke, its own reading stays the way
        return f"probe: reading the probe batches failed ({type(exc).__name__}: {exc})"
    return None if same else "probe: the probe batches read otherwise than by kafka-python"


def _same_as_kafka_python() -> bool:
    """Read probe batches (plain and gzip; keys, none and empty; headers; a null value; timestamp
    deltas of two bytes) both ways, from an offset inside the first, two records at a time: the
    records, positions, counters and leader epoch after each take must be equal."""
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
    from kafka.structs import TopicPartition

    data = b""
    for base, codec in ((0, 0), (3, 1)):
        builder = MemoryRecordsBuilder(2, codec, 1 << 20, offset=base)
        for i, (key, value, headers) in enumerate(
            [(b"k", b"v" * 200, []), (None, b"", [("h", b"x"), ("n", None)]), (b"", None, [])]
        ):
            builder.append(timestamp=1_700_000_000_000 + 5_000 * i, key=key, value=value, headers=headers)
        builder.close()
        data += bytes(builder.buffer())
    tp = TopicPartition("probe", 0)

    def read(cls: Any) -> list[Any]:
        part, taken = cls(1, tp, MemoryRecords(data), check_crcs=True), []
        while part:
            records = part.take(2)
            counters = part.records_read, part.bytes_read, part.leader_epoch
            taken.append((records, part.next_fetch_offset, counters))
        return taken

    return read(_STOCK_RECORDS) == read(BatchDecodingRecords)


def parameter_names(function: Any) -> list[str]:
    """The names of ``function``'s parameters, or none where it has no signature to read (what
    the checks of kafka-python's internals compare with the shape they expect)."""
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


def install(consumer: Any) -> bool:
    """Make ``consumer``'s fetcher decode each fetched batch with :func:`decode_batch` where
    :func:`supports` holds; returns whether it does (else it keeps kafka-python's reading)."""
    if not supports(consumer):
        return False
    consumer._fetcher.PartitionRecords = BatchDecodingRecords
    return True


def installed(consumer: Any) -> bool:
    """True if ``consumer``'s fetcher decodes its batches with :func:`decode_batch`."""
    fetcher = getattr(consumer, "_fetcher", None)
    return getattr(fetcher, "PartitionRecords", None) is BatchDecodingRecords


class BatchDecodingRecords(_STOCK_RECORDS):  # type: ignore[misc]
    """kafka-python's ``Fetcher.PartitionRecords``, reading each v2 batch with :func:`decode_batch`.

    The fetcher builds one per fetched partition and takes records from it as before; this only
    replaces the generator behind it. The batch CRC is checked as kafka-python checks it, control
    batches are skipped, and ``next_fetch_offset``, ``leader_epoch``, ``records_read`` and
    ``bytes_read`` move record by record as kafka-python moves them.
    """

    def _unpack_records(
        self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any
    ) -> Iterator[Any]:
        topic, partition = tp.topic, tp.partition
        batch = records.next_batch()
        last_batch = None
        while batch is not None:
            if type(batch) is not DefaultRecordBatch or batch.magic != 2:
                yield from super()._unpack_records(
                    tp, _Resumed(batch, records), key_deserializer, value_deserializer
                )
                return
            last_batch = batch
            if self.check_crcs and not batch.validate_crc():
                raise CorruptRecordError(
                    f"Record batch for partition {tp} at offset {batch.base_offset} failed crc check"
                )
            self.leader_epoch = batch.leader_epoch
            if batch.attributes & _CONTROL_MASK:
                self.next_fetch_offset = batch.next_offset
            else:
                decoded, sizes, error = decode_batch(batch, topic, partition, self.leader_epoch)
                for record, size in zip(decoded, sizes, strict=True):
                    self.records_read += 1
                    self.bytes_read += size
                    self.next_fetch_offset = record[3] + 1
                    yield record
                if error is not None:
                    raise error
            batch = records.next_batch()
        if last_batch is not None:
            self.next_fetch_offset = last_batch.next_offset
        self.drain()


class _Resumed:
    """``records`` with ``batch`` put back in front: what kafka-python's own generator reads."""

    def __init__(self, batch: Any, records: Any) -> None:
        self._batch, self._records = batch, records

    def next_batch(self) -> Any:
        batch, self._batch = self._batch, None
        return batch if batch is not None else self._records.next_batch()


def decode_batch(  # noqa: C901 (one loop with its varints inline is the point: no call per field)
    batch: DefaultRecordBatch, topic: str, partition: int, leader_epoch: int
) -> tuple[list[Any], list[int], CorruptRecordError | None]:
    """The records of a (not yet read) v2 ``batch`` as kafka-python's ``ConsumerRecord``, each
    one's size as kafka-python counts it (its length field), and the ``CorruptRecordError`` that
    kafka-python would raise after them, or None (all were read).

    A record is ``length attributes timestamp_delta offset_delta key_length key value_length value
    header_count (header_key_length header_key header_value_length header_value)*``, every integer
    a zigzag varint; its offset is the batch's base offset plus its delta, its timestamp the
    batch's first timestamp plus its delta (or the batch's max timestamp under log-append time).
    """
    batch._maybe_uncompress()
    buf = bytes(batch._buffer)  # slices of bytes are the record's bytes in one copy
    pos = batch._pos
    base_offset, _, _, _, _, attributes, _, first_ts, max_ts, _, _, _, count = batch._header_data
    ts_type = _LOG_APPEND_TIME if attributes & _TIMESTAMP_TYPE_MASK else 0
    log_append = ts_type == _LOG_APPEND_TIME
    out: list[Any] = []
    sizes: list[int] = []
    append, sized = out.append, sizes.append
    try:
        for _ in range(count):
            b = buf[pos]  # each field: a one-byte varint inline, else decode_varint
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                u = (b & 0x7F) | (buf[pos + 1] << 7)
                length, pos = (u >> 1) ^ -(u & 1), pos + 2
            else:
                length, pos = decode_varint(buf, pos)
            start = pos
            if buf[pos] < 0x80:  # attributes, unused
                pos += 1
            else:
                pos = decode_varint(buf, pos)[1]
            b = buf[pos]
            if b < 0x80:
                ts_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                ts_delta, pos = decode_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                offset_delta, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                u = (b & 0x7F) | (buf[pos + 1] << 7)
                offset_delta, pos = (u >> 1) ^ -(u & 1), pos + 2
            else:
                offset_delta, pos = decode_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                key_size, pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                key_size, pos = decode_varint(buf, pos)
            if key_size >= 0:
                key: bytes | None = buf[pos : pos + key_size]
                pos += key_size
            else:
                key, key_size = None, -1
            b = buf[pos]
            if b < 0x80:
                value_size, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif buf[pos + 1] < 0x80:
                u = (b & 0x7F) | (buf[pos + 1] << 7)
                value_size, pos = (u >> 1) ^ -(u & 1), pos + 2
            else:
                value_size, pos = decode_varint(buf, pos)
            if value_size >= 0:
                value: bytes | None = buf[pos : pos + value_size]
                pos += value_size
            else:
                value, value_size = None, -1
            if buf[pos] == 0:  # no headers
                pos += 1
                headers: list[tuple[str, bytes | None]] = []
                header_size = -1
            else:
                headers, header_size, pos = _headers(buf, pos)
            if pos - start != length:
                raise CorruptRecordError(
                    f"Invalid record size: expected to read {length} bytes in record payload, but "
                    f"instead read {pos - start}"
                )
            sized(length)
            append(
                _new(
                    ConsumerRecord,
                    (
                        topic, partition, leader_epoch, base_offset + offset_delta,
                        max_ts if log_append else first_ts + ts_delta, ts_type, key, value,
                        headers, None, key_size, value_size, header_size,
                    ),  # fmt: skip
                )
            )
    except CorruptRecordError as err:
        return out, sizes, err
    except (ValueError, IndexError) as err:
        return out, sizes, CorruptRecordError(f"Found invalid record structure: {err!r}")
    batch._pos = pos
    batch._next_record_index = count
    if pos != len(buf):
        unread = len(buf) - pos
        return out, sizes, CorruptRecordError(f"{unread} unconsumed bytes after all records consumed")
    return out, sizes, None


def _headers(buf: bytes, pos: int) -> tuple[list[tuple[str, bytes | None]], int, int]:
    """A record's headers from ``pos`` (at its header count): the list, their size as kafka-python
    counts it (key bytes plus value bytes), and the position after them."""
    count, pos = decode_varint(buf, pos)
    if count < 0:
        raise CorruptRecordError(f"Found invalid number of record headers {count}")
    headers: list[tuple[str, bytes | None]] = []
    size = 0
    for _ in range(count):
        key_size, pos = decode_varint(buf, pos)
        if key_size < 0:
            raise CorruptRecordError(f"Invalid negative header key size {key_size}")
        key = buf[pos : pos + key_size].decode("utf-8")
        pos += key_size
        value_size, pos = decode_varint(buf, pos)
        value: bytes | None = None
        if value_size >= 0:
            value = buf[pos : pos + value_size]
            pos += value_size
        headers.append((key, value))
        size += len(key.encode("utf-8")) + (len(value) if value is not None else 0)
    return headers, (size if headers else -1), pos
