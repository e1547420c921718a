"""The one place a Kafka backend is chosen: the worker asks :func:`open_edge` for an edge and
never names a backend. Each backend is imported only when chosen, so the confluent-kafka edge
loads no kafka-python, and kafka-python's edge no librdkafka."""

from __future__ import annotations

from collections.abc import Callable

from stream_perceptron.errors import SettingsError
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.settings import KafkaSettings


def open_edge(
    kafka: KafkaSettings,
    input_topic: str,
    on_assigned: Callable[[list[Partition]], None],
    on_revoked: Callable[[list[Partition]], None],
) -> Edge:
    """The Kafka edge of the configured backend (``kafka.backend``); both have one interface."""
    if kafka.backend == "confluent-kafka":
        try:
            from stream_perceptron.kafka.confluent_edge import ConfluentEdge
        except ImportError as exc:
            raise SettingsError(
                "SP_KAFKA__BACKEND=confluent-kafka needs the confluent-kafka package"
                f" (pip install 'stream-perceptron[confluent]'): {exc}"
            ) from None
        edge: Edge = ConfluentEdge(kafka, input_topic, on_assigned, on_revoked)
        return edge
    if kafka.producer_process:
        from stream_perceptron.kafka.producer_process import SplitKafkaEdge

        return SplitKafkaEdge(kafka, input_topic, on_assigned, on_revoked)
    from stream_perceptron.kafka.python_edge import KafkaEdge

    return KafkaEdge(kafka, input_topic, on_assigned, on_revoked)
