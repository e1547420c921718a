"""The Kafka store's state topic through kafka-python: the
:class:`~stream_perceptron.state.kafka_store.StateLog` the store writes and reads through (it
matches that protocol by shape; this layer imports nothing of the state layer).

* Created when missing (``partitions`` given) with ``cleanup.policy=compact`` and that many
  partitions; an existing topic is used as it is (never change its partition count: input
  partition ``p`` lives in state partition ``p % N``).
* :meth:`KafkaStateLog.append` sends with ``acks=all`` (idempotent producer, kafka-python's
  default) to the partitions the records name and returns once every record is acknowledged.
* :meth:`KafkaStateLog.scan` reads one partition's committed records from an offset up to its
  end as the scan finds it, or to an exact stop, through a
  :class:`~stream_perceptron.kafka.reader.TopicReader` (where a committed read ends, on brokers
  that answer the asked end short of it too, is the reader's).

Clients get the security settings (SASL, TLS) as every other client does
(:func:`~stream_perceptron.kafka.admin.client_config`); nothing logged here holds a secret.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Protocol

from kafka import KafkaProducer
from kafka.errors import KafkaError, MessageSizeTooLargeError

from stream_perceptron.errors import CheckpointError, KafkaEdgeError
from stream_perceptron.kafka.admin import client_config, ensure_topics, reaching
from stream_perceptron.kafka.config import check_reachable, describe
from stream_perceptron.kafka.reader import ReadShort, TopicReader
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
        self._reader: TopicReader | None = TopicReader(
            kafka, topic, committed=True, max_record_bytes=self._max_request,
            fetch_max_wait_ms=kafka.fetch_max_wait_ms,
        )
        try:
            self._count = self._partition_count(self._reader, wait=partitions is not None)
        except BaseException:
            self._reader.close()
            raise
        log.info("state topic %s: %d partitions", topic, self._count)

    def _partition_count(self, reader: TopicReader, *, wait: bool) -> int:
        """The topic's partition count; ``wait``: for the metadata of a topic just created."""
        deadline = time.monotonic() + (self._timeout_s if wait else 0)
        with reaching(self._kafka):
            while not (found := reader.partitions()):
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
        reader = self._reader
        if reader is None:
            raise KafkaEdgeError(f"the state topic {self.name} is closed")
        try:
            reader.assign({partition: start}, [partition])
            ends = None if stop is None else {partition: stop}
            for r in reader.read_to_end(stall_s=self._stall_s, idle_s=self._stall_s, stop=ends):
                yield Logged(r.offset, r.key_text(), r.value)
        except ReadShort as short:
            position, end = short.short.get(partition, (None, None))
            raise KafkaEdgeError(
                f"reading partition {partition} of the state topic {self.name} made no progress"
                f" at offset {position} (of {end}) for {self._stall_s:g} s"
            ) from None
        except KafkaError as exc:
            raise KafkaEdgeError(
                f"cannot read partition {partition} of the state topic {self.name}: {describe(exc)}"
            ) from None
        finally:
            reader.unassign()  # fetches nothing more between scans

    def close(self) -> None:
        producer, reader, self._producer, self._reader = self._producer, self._reader, None, None
        for name, client, closing in (("producer", producer, {"timeout": self._timeout_s}),
                                      ("consumer", reader, {})):
            if client is None:
                continue
            try:
                client.close(**closing)
            except KafkaError as exc:
                log.warning("closing the state topic's %s: %s", name, describe(exc))
