"""The partition store the settings name (``SP_CHECKPOINT__STORE``), composed from its parts.

``directory``: :class:`~stream_perceptron.state.directory.DirectoryStore` under
``SP_CHECKPOINT__DIR``. ``kafka``: :class:`~stream_perceptron.state.kafka_store.KafkaStore` over
the compacted topic ``SP_CHECKPOINT__TOPIC`` (:class:`~stream_perceptron.kafka.state_log.KafkaStateLog`),
in records of at most ``SP_CHECKPOINT__CHUNK_BYTES``.
"""

from __future__ import annotations

from stream_perceptron.kafka.state_log import KafkaStateLog
from stream_perceptron.settings import KafkaSettings, Settings
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.state.kafka_store import KafkaStore
from stream_perceptron.state.store import PartitionStore


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
