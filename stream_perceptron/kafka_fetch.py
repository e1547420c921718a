"""Decoding a fetched record batch in one loop, for kafka-python's consumer.

kafka-python reads a fetched v2 record batch (``DefaultRecordBatch``) one record at a time: per
record it makes a ``DefaultRecord`` through about fifteen property reads and seven calls of
``decode_varint``, then the fetcher turns it into a ``ConsumerRecord`` after two deserialiser
calls and a header-size sum. That is most of ``KafkaConsumer.poll``'s cost per record (about
6 µs on the benchmark's host; ``bench/bench_fetch_decode.py`` times it).

:func:`decode_batch` reads a whole batch in one loop: each varint of one byte, the common case, is
read inline, a longer one by kafka-python's ``decode_varint``. It builds the same
``ConsumerRecord`` tuples, with the same offsets, timestamps (create time, or the batch's max
timestamp under log-append time), keys, values, headers and sizes, and raises the same
``CorruptRecordError`` where kafka-python would. :func:`install` makes a consumer's fetcher read
its batches this way (:class:`BatchDecodingRecords`); everything else about fetching, positions
and the records a poll returns stays kafka-python's.

It reaches into kafka-python's internals: the fetcher's ``PartitionRecords`` class and its
``_unpack_records`` generator, and the batch's ``_buffer``, ``_pos`` and ``_header_data``.
:func:`supports` checks that each is there, in the shape this module reads (kafka-python 3.0),
and that the consumer has no deserialiser and reads uncommitted records; the edge asks once per
consumer. A batch of an older message format (magic 0 or 1) is left to kafka-python, with every
batch after it in that fetch.

One difference: a batch with a corrupt record yields none of its records, where kafka-python
yields those before the corrupt one. Either way the next poll raises the same error at the same
position.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from kafka.consumer.fetcher import ConsumerRecord, Fetcher
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.util import decode_varint

_STOCK_RECORDS: Any = Fetcher.PartitionRecords
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
    fetcher = getattr(consumer, "_fetcher", None)
    config = getattr(consumer, "config", None)
    if fetcher is None or not isinstance(config, dict):
        return False
    if config.get("key_deserializer") is not None or config.get("value_deserializer") is not None:
        return False
    if config.get("isolation_level") != "read_uncommitted":
        return False
    if getattr(fetcher, "PartitionRecords", None) not in (_STOCK_RECORDS, BatchDecodingRecords):
        return False
    if ConsumerRecord._fields != _FIELDS:
        return False
    if DefaultRecordBatch.HEADER_STRUCT.format != _HEADER_FORMAT:
        return False
    if not {"_buffer", "_pos", "_header_data", "_next_record_index"} <= set(
        DefaultRecordBatch.__slots__
    ) or not callable(getattr(DefaultRecordBatch, "_maybe_uncompress", None)):
        return False
    return _parameters(_STOCK_RECORDS._unpack_records) == [
        "self", "tp", "records", "key_deserializer", "value_deserializer",
    ] and {"check_crcs", "on_drain", "metric_aggregator"} <= set(  # fmt: skip
        _parameters(_STOCK_RECORDS.__init__)
    )


def _parameters(function: Any) -> list[str]:
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


def install(consumer: Any) -> None:
    """Make ``consumer``'s fetcher decode each fetched batch with :func:`decode_batch` (only where
    :func:`supports` holds)."""
    consumer._fetcher.PartitionRecords = BatchDecodingRecords


def installed(consumer: Any) -> bool:
    """True if ``consumer``'s fetcher decodes its batches with :func:`decode_batch`."""
    fetcher = getattr(consumer, "_fetcher", None)
    return getattr(fetcher, "PartitionRecords", None) is BatchDecodingRecords


class BatchDecodingRecords(_STOCK_RECORDS):  # type: ignore[misc]
    """kafka-python's ``Fetcher.PartitionRecords``, reading each v2 batch with :func:`decode_batch`.

    The fetcher builds one per fetched partition and takes records from it as before; this only
    replaces the generator behind it. The batch CRC is checked as kafka-python checks it, control
    batches are skipped, and ``next_fetch_offset``, ``leader_epoch``, ``records_read`` and
    ``bytes_read`` move as kafka-python moves them.
    """

    def _unpack_records(
        self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any
    ) -> Iterator[Any]:
        topic, partition = tp.topic, tp.partition
        batch = records.next_batch()
        last_batch = None
        while batch is not None:
            if not isinstance(batch, DefaultRecordBatch):
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
            if not batch.attributes & _CONTROL_MASK:
                decoded, size = decode_batch(batch, topic, partition, self.leader_epoch)
                self.records_read += len(decoded)
                self.bytes_read += size
                for record in decoded:
                    self.next_fetch_offset = record[3] + 1
                    yield record
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
) -> tuple[list[Any], int]:
    """Every record of a (not yet read) v2 ``batch`` as kafka-python's ``ConsumerRecord``, and the
    records' size in bytes as kafka-python counts it (each record's length field).

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
    append = out.append
    size = 0
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
            size += length
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
    except (ValueError, IndexError) as err:
        raise CorruptRecordError(f"Found invalid record structure: {err!r}") from None
    if pos != len(buf):
        raise CorruptRecordError(f"{len(buf) - pos} unconsumed bytes after all records consumed")
    batch._pos = pos
    batch._next_record_index = count
    return out, size


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
