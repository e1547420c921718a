"""The Kafka store's state topic through kafka-python: the
:class:`~stream_perceptron.state.kafka_store.StateLog` the store writes and reads through (it
matches that protocol by shape; this layer imports nothing of the state layer).

* Created when missing (``partitions`` given) with ``cleanup.policy=compact`` and that many
  partitions; an existing topic is used as it is (never change its partition count: input
  partition ``p`` lives in state partition ``p % N``).
* :meth:`KafkaStateLog.append` sends with ``acks=all`` (idempotent producer, kafka-python's
  default) to the partitions the records name and returns once every record is acknowledged.
* :meth:`KafkaStateLog.scan` reads one partition with ``isolation_level=read_committed`` from
  its beginning up to its end offset as asked when the scan starts (the last stable offset on
  Apache Kafka). Some brokers (tansu) answer that request with the base offset of the last
  batch + 1, short of the end; so, past it, the scan goes on to the high-water mark the fetch
  responses give, stopping at the first poll that brings nothing more (an open transaction
  holds the rest back).

Clients get the security settings (SASL, TLS) as every other client does
(:func:`~stream_perceptron.kafka.admin.client_config`); nothing logged here holds a secret.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Protocol

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, MessageSizeTooLargeError

from stream_perceptron.errors import CheckpointError, KafkaEdgeError
from stream_perceptron.kafka.admin import client_config, consumer_config, ensure_topics, reaching
from stream_perceptron.kafka.config import check_reachable, describe
from stream_perceptron.settings import KafkaSettings

log = logging.getLogger(__name__)


class Outgoing(Protocol):
    """A record to append (the store's ``StateRecord``): state-topic partition, key, value (None:
    a tombstone)."""

    @property
    def partition(self) -> int: ...

    @property
    def key(self) -> str: ...

    @property
    def value(self) -> bytes | None: ...


class Logged(NamedTuple):
    """A record read back: its offset, its key as text (None without one), its value."""

    offset: int
    key: str | None
    value: bytes | None

COMPACTED = {"cleanup.policy": "compact"}
SLACK_BYTES = 64 * 1024
"""Room in a request for a record's key and the batch's headers, above its value."""
POLL_MS = 200
SETTLE_MS = 1_000
"""How long a poll past the asked end waits for records the end did not count."""


class KafkaStateLog:
    """The state topic ``topic`` (see the module's docstring).

    ``partitions``: create the topic with that many partitions when it is missing; None: it must
    exist (:class:`KafkaEdgeError` otherwise). ``max_record_bytes``: the largest value appended
    (the store's chunk size). A scan that brings nothing new for ``stall_s`` fails. One consumer
    serves every scan: finish one before starting the next.
    """

    def __init__(self, kafka: KafkaSettings, topic: str, *, partitions: int | None,
                 max_record_bytes: int = 1_048_576, stall_s: float | None = None) -> None:
        self.name = topic
        self._kafka = kafka
        self._timeout_s = kafka.request_timeout_ms / 1000
        self._stall_s = stall_s if stall_s is not None else max(30.0, self._timeout_s)
        self._max_request = max(1_048_576, max_record_bytes + SLACK_BYTES)
        self._producer: Any = None
        if partitions is not None:
            ensure_topics(kafka, {topic: partitions}, self._timeout_s, configs=COMPACTED)
        check_reachable(kafka, self._timeout_s)
        with reaching(kafka):
            self._consumer: Any = KafkaConsumer(
                **consumer_config(kafka),
                group_id=None,
                enable_auto_commit=False,
                isolation_level="read_committed",
                auto_offset_reset="earliest",
                allow_auto_create_topics=False,
                fetch_max_wait_ms=kafka.fetch_max_wait_ms,
                max_partition_fetch_bytes=max(kafka.fetch_max_bytes, self._max_request),
            )
        try:
            self._count = self._partition_count(wait=partitions is not None)
        except BaseException:
            self._consumer.close(autocommit=False)
            raise
        log.info("state topic %s: %d partitions", topic, self._count)

    def _partition_count(self, *, wait: bool) -> int:
        """The topic's partition count; ``wait``: for the metadata of a topic just created."""
        deadline = time.monotonic() + (self._timeout_s if wait else 0)
        with reaching(self._kafka):
            while not (found := self._consumer.partitions_for_topic(self.name)):
                if time.monotonic() >= deadline:
                    raise KafkaEdgeError(f"the state topic {self.name} does not exist (SP_CHECKPOINT__TOPIC)")
                time.sleep(0.1)  # a topic just created: its metadata is on its way
        return len(found)

    def partitions(self) -> int:
        return self._count

    def append(self, records: Sequence[Outgoing]) -> None:
        if not records:
            return
        producer = self._producer or self._new_producer()
        try:
            futures = [producer.send(self.name, key=r.key.encode(), value=r.value, partition=r.partition)
                       for r in records]
            producer.flush(timeout=self._stall_s)
            for future in futures:
                future.get(timeout=0)
        except MessageSizeTooLargeError as exc:
            raise CheckpointError(
                f"the state topic {self.name} refused a record ({describe(exc)}): set"
                " SP_CHECKPOINT__CHUNK_BYTES below the topic's max.message.bytes"
            ) from None
        except KafkaError as exc:
            raise KafkaEdgeError(f"cannot write to the state topic {self.name}: {describe(exc)}") from None

    def _new_producer(self) -> Any:
        with reaching(self._kafka):
            self._producer = KafkaProducer(
                **client_config(self._kafka),
                acks="all",
                linger_ms=0,
                max_request_size=self._max_request,
                allow_auto_create_topics=False,
            )
        return self._producer

    def scan(self, partition: int, start: int = 0, stop: int | None = None) -> Iterator[Logged]:
        tp = TopicPartition(self.name, partition)
        consumer = self._consumer
        try:
            consumer.assign([tp])
            if start > 0:
                consumer.seek(tp, start)
            else:
                consumer.seek_to_beginning(tp)
            end = stop if stop is not None else consumer.end_offsets([tp])[tp]
            yield from self._read(tp, end, exact=stop is not None)
        except KafkaError as exc:
            raise KafkaEdgeError(
                f"cannot read partition {partition} of the state topic {self.name}: {describe(exc)}"
            ) from None
        finally:
            consumer.unsubscribe()  # fetches nothing more between scans

    def _read(self, tp: TopicPartition, end: int, *, exact: bool) -> Iterator[Logged]:
        """Records of ``tp`` up to ``end`` (excluded) when ``exact``, else at least up to it and
        on to the high-water mark while polls bring more."""
        consumer = self._consumer
        deadline = time.monotonic() + self._stall_s
        settled = False
        while True:
            position = consumer.position(tp)
            past = position >= end
            if past:
                highwater = consumer.highwater(tp)
                if exact or settled or highwater is None or position >= highwater:
                    return
            if time.monotonic() > deadline:
                raise KafkaEdgeError(
                    f"reading partition {tp.partition} of the state topic {self.name} made no progress"
                    f" at offset {position} (of {end}) for {self._stall_s:g} s"
                )
            batch = consumer.poll(timeout_ms=SETTLE_MS if past else POLL_MS).get(tp, [])
            if batch:
                deadline = time.monotonic() + self._stall_s
            settled = past and not batch
            for r in batch:
                if exact and r.offset >= end:
                    return
                key = None if r.key is None else r.key.decode("utf-8", errors="replace")
                yield Logged(r.offset, key, r.value)

    def close(self) -> None:
        for name, client, closing in (("producer", self._producer, {"timeout": self._timeout_s}),
                                      ("consumer", self._consumer, {"autocommit": False})):
            if client is None:
                continue
            try:
                client.close(**closing)
            except KafkaError as exc:
                log.warning("closing the state topic's %s: %s", name, describe(exc))
        self._producer = self._consumer = None
