"""Read an output topic from its beginning up to its high-water mark (edge: knows no model).

Used by ``demo`` and ``plot`` to collect statistics records, and by the tests; ``plot`` reads
through :func:`iter_topic`, which holds nothing. The end is taken
from fetch responses (``highwater``), not ``end_offsets``, which some brokers get wrong.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_perceptron.codec.outputs import decode
from stream_perceptron.kafka.admin import consumer_config, reaching
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
    bound = {} if connect_timeout_s is None else {"bootstrap_timeout_ms": int(connect_timeout_s * 1000)}
    with reaching(kafka):
        consumer = KafkaConsumer(**consumer_config(kafka), enable_auto_commit=False, group_id=None, **bound)
    try:
        deadline = time.monotonic() + timeout_s
        parts = consumer.partitions_for_topic(topic)  # an empty set when the topic does not exist
        if not parts:
            return
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        count = not_json = 0
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=200, max_records=5000)
            for tp, recs in got.items():
                for r in recs:
                    try:
                        value = decode(r.value)
                    except ValueError:
                        value, not_json = None, not_json + 1
                    count += 1
                    yield tp.partition, r.offset, r.key, value
            # a position is asked only where a fetch has answered: before, it can block
            ends = [(hw, consumer.position(tp) if hw is not None else None)
                    for tp in tps for hw in (consumer.highwater(tp),)]
            now = time.monotonic()
            if got or all(hw is None for hw, _ in ends):
                last_new = now  # idle time counts from the first fetch answered
            if all(hw is not None and pos >= hw for hw, pos in ends):
                break
            more = any(hw is not None and pos < hw for hw, pos in ends)
            if not more and now - last_new > idle_s:
                unknown = [tp.partition for tp, (hw, _) in zip(tps, ends, strict=True) if hw is None]
                log.warning("read %d records of %s; partitions %s sent nothing in %g s, their end"
                            " unknown", count, topic, unknown, idle_s)
                break
        else:  # the deadline came first: say so, rather than pass a part off as the whole
            log.warning("read %d records of %s in %g s and stopped short of its end", count, topic,
                        timeout_s)
        if not_json:
            log.warning("%d records of %s are not JSON: given as None", not_json, topic)
    finally:
        consumer.close()
