"""Read an output topic from its beginning up to its high-water mark (edge: knows no model).

Used by ``demo`` and ``plot`` to collect statistics records, and by the tests; ``plot`` reads
through :func:`iter_topic`, which holds nothing. The reading, and where a partition ends, are
:class:`~stream_perceptron.kafka.reader.TopicReader`'s; this decodes the values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from stream_perceptron.codec.outputs import decode
from stream_perceptron.kafka.reader import ReadShort, TopicReader
from stream_perceptron.settings import KafkaSettings

log = logging.getLogger(__name__)


def read_topic(
    kafka: KafkaSettings, topic: str, *, timeout_s: float = 30.0, idle_s: float = 2.0,
) -> list[tuple[int, int, bytes | None, Any]]:
    """Every record of ``topic`` as (partition, offset, key, decoded JSON value), in offset order
    per partition; a value that is not JSON is given as None, with a warning. How the read stops
    is :func:`iter_topic`'s."""
    return sorted(iter_topic(kafka, topic, timeout_s=timeout_s, idle_s=idle_s), key=lambda r: (r[0], r[1]))


def iter_topic(
    kafka: KafkaSettings, topic: str, *, timeout_s: float = 30.0, idle_s: float = 2.0,
    connect_timeout_s: float | None = None,
) -> Iterator[tuple[int, int, bytes | None, Any]]:
    """Every record of ``topic`` as (partition, offset, key, decoded JSON value), as fetched: in
    offset order per partition, the partitions interleaved. A value that is not JSON is given as
    None, with a warning at the end. Nothing is held, so a long topic can be read in bounded
    memory.

    Stops at the high-water marks. A partition known to hold more is read until ``timeout_s``;
    partitions whose end is not known yet (no fetch answered) end the read once nothing came for
    ``idle_s``. A read that stops either way before every end says so in a warning.
    ``connect_timeout_s`` bounds the client's first connection (by default the request timeout,
    which a port that accepts and does not answer as Kafka takes in full).
    """
    reader = TopicReader(kafka, topic, connect_timeout_s=connect_timeout_s)
    not_json = 0
    try:
        for record in reader.read_to_end(timeout_s=timeout_s, idle_s=idle_s):
            try:
                value = decode(record.value if record.value is not None else b"")
            except ValueError:  # a tombstone (no value) too
                value, not_json = None, not_json + 1
            yield record.partition, record.offset, record.key, value
    except ReadShort as short:  # say so, rather than pass a part off as the whole
        log.warning("%s", short)
    finally:
        reader.close()
    if not_json:
        log.warning("%d records of %s are not JSON: given as None", not_json, topic)
