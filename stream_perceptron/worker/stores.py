"""The partition store the settings name (``SP_CHECKPOINT__STORE``), composed from its parts.

``directory``: :class:`~stream_perceptron.state.directory.DirectoryStore` under
``SP_CHECKPOINT__DIR``. ``kafka``: :class:`~stream_perceptron.state.kafka_store.KafkaStore` over
the compacted topic ``SP_CHECKPOINT__TOPIC`` (:class:`~stream_perceptron.kafka.state_log.KafkaStateLog`),
in records of at most ``SP_CHECKPOINT__CHUNK_BYTES``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stream_perceptron.errors import CheckpointError
from stream_perceptron.kafka.admin import partition_count
from stream_perceptron.kafka.state_log import KafkaStateLog
from stream_perceptron.settings import KafkaSettings, Settings
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.state.kafka_store import KafkaStore, StateRecord
from stream_perceptron.state.store import PartitionStore
from stream_perceptron.state.stored import StoredState


class OnOpen:
    """A Kafka store made when the worker opens it (:meth:`open`, in the worker's loop that
    reaches Kafka with retries), with as many state partitions as the input topic has."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self.store: KafkaStore | None = None

    def _made(self) -> KafkaStore:
        if self.store is None:
            raise CheckpointError("the Kafka store is used before it was opened")
        return self.store

    def open(self) -> None:
        if self.store is None:
            s = self._settings
            count = partition_count(s.kafka, s.topics.input, s.kafka.request_timeout_ms / 1000)
            self.store = open_kafka_store(s.kafka, s.checkpoint.topic,
                                          chunk_bytes=s.checkpoint.chunk_bytes, partitions=count or 1)
        self.store.open()

    def preflight(self, config: dict[str, Any]) -> None:
        """Nothing: the state topic is read only once Kafka answers, at each assignment."""

    def claim(self, topic: str, partition: int) -> int:
        return self._made().claim(topic, partition)

    def load(self, topic: str, partition: int) -> StoredState | None:
        return self._made().load(topic, partition)

    def save(self, state: StoredState, epoch: int) -> str:
        return self._made().save(state, epoch)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    # the exactly-once mode writes a state's records in its own transaction
    @property
    def topic(self) -> str:
        """The state topic's name."""
        return self._made().log.name

    def encode(self, state: StoredState, epoch: int) -> list[StateRecord]:
        return self._made().encode(state, epoch)

    def durable(self, records: Sequence[StateRecord]) -> None:
        self._made().durable(records)


def worker_store(settings: Settings) -> PartitionStore | OnOpen:
    """The worker's store: the directory store, or the Kafka store made when opened (the one
    the exactly-once mode needs: a :class:`~stream_perceptron.state.store.TransactionalStore`)."""
    if settings.checkpoint.store == "directory":
        ck = settings.checkpoint
        return DirectoryStore(ck.dir, ck.keep)
    return OnOpen(settings)


def open_store(settings: Settings, *, partitions: int | None) -> PartitionStore:
    """The store ``settings.checkpoint.store`` names.

    ``partitions``: the input topic's partition count, which the Kafka store's state topic is
    created with when it is missing; None: the state topic must exist (to read it only). Raises
    :class:`~stream_perceptron.errors.KafkaEdgeError` when the cluster cannot be reached.
    """
    checkpoint = settings.checkpoint
    if checkpoint.store == "directory":
        return DirectoryStore(checkpoint.dir, checkpoint.keep)
    return open_kafka_store(settings.kafka, checkpoint.topic, chunk_bytes=checkpoint.chunk_bytes,
                            partitions=partitions)


def open_kafka_store(kafka: KafkaSettings, topic: str, *, chunk_bytes: int, partitions: int | None
                     ) -> KafkaStore:
    """A :class:`KafkaStore` on the state topic ``topic`` (``partitions`` as :func:`open_store`'s)."""
    return KafkaStore(KafkaStateLog(kafka, topic, partitions=partitions, max_record_bytes=chunk_bytes),
                      chunk_bytes=chunk_bytes)
