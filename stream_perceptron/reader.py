"""Read an output topic from its beginning up to its high-water mark (edge: knows no model).

Used by ``demo`` and ``plot`` to collect statistics records, and by the tests. The end is taken
from fetch responses (``highwater``), not ``end_offsets``, which some brokers get wrong.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_perceptron.kafka_io import consumer_config
from stream_perceptron.records import decode
from stream_perceptron.settings import KafkaSettings

log = logging.getLogger(__name__)


def read_topic(
    kafka: KafkaSettings, topic: str, *, timeout_s: float = 30.0, idle_s: float = 2.0
) -> list[tuple[int, int, bytes | None, Any]]:
    """Every record of ``topic`` as (partition, offset, key, decoded JSON value), in offset order
    per partition. Stops at the high-water marks, or after ``idle_s`` with nothing new; at
    ``timeout_s`` it returns what it has read, with a warning."""
    consumer = KafkaConsumer(**consumer_config(kafka), enable_auto_commit=False, group_id=None)
    try:
        deadline = time.monotonic() + timeout_s
        parts = None
        while parts is None and time.monotonic() < deadline:
            parts = consumer.partitions_for_topic(topic)
            if parts is None:
                time.sleep(0.1)
        if not parts:
            return []
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[tuple[int, int, bytes | None, Any]] = []
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=200, max_records=5000)
            for tp, recs in got.items():
                out.extend((tp.partition, r.offset, r.key, decode(r.value)) for r in recs)
            if got:
                last_new = time.monotonic()
            done = all(
                (hw := consumer.highwater(tp)) is not None and consumer.position(tp) >= hw
                for tp in tps
            )
            if done or time.monotonic() - last_new > idle_s:
                break
        else:  # the deadline came first: say so, rather than pass a part off as the whole
            log.warning("read %d records of %s in %g s and stopped short of its end", len(out), topic,
                        timeout_s)
        return sorted(out, key=lambda r: (r[0], r[1]))
    finally:
        consumer.close()
