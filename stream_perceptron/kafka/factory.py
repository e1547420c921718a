"""The one place a Kafka backend is chosen: the worker asks :func:`open_edge` for an edge and
never names a backend. Each backend is imported only when chosen, so the confluent-kafka edge
loads no kafka-python, and kafka-python's edge no librdkafka."""

from __future__ import annotations

import logging
from collections.abc import Callable

from stream_perceptron.errors import SettingsError
from stream_perceptron.kafka.edge import Edge, Partition, never_stopping, no_heartbeat
from stream_perceptron.settings import KafkaSettings

log = logging.getLogger(__name__)


def open_edge(
    kafka: KafkaSettings,
    input_topic: str,
    on_assigned: Callable[[list[Partition]], None],
    on_revoked: Callable[[list[Partition]], None],
    *,
    transactional: bool = False,
    heartbeat: Callable[[], None] = no_heartbeat,
    stopping: Callable[[], bool] = never_stopping,
) -> Edge:
    """The Kafka edge of the configured backend (``kafka.backend``); both have one interface.

    ``transactional`` (``SP_OUTPUT__GUARANTEE=exactly-once``) gives an edge whose producer is
    transactional and whose consumer reads ``read_committed`` (:mod:`.edge`). Both backends
    support it. On kafka-python its producer then runs in the worker's process even with
    ``SP_KAFKA__PRODUCER_PROCESS`` (said in a log line): the transaction's offsets carry the
    consumer's group membership, and the producer process carries no transactions.

    ``heartbeat`` and ``stopping`` are the edge's (:class:`~stream_perceptron.kafka.edge.Edge`).
    """
    if kafka.backend == "confluent-kafka":
        try:
            from stream_perceptron.kafka.confluent_edge import ConfluentEdge
        except ImportError as exc:
            raise SettingsError(
                "SP_KAFKA__BACKEND=confluent-kafka needs the confluent-kafka package"
                f" (pip install 'stream-perceptron[confluent]'): {exc}"
            ) from None
        edge: Edge = ConfluentEdge(kafka, input_topic, on_assigned, on_revoked, transactional=transactional,
                                   heartbeat=heartbeat, stopping=stopping)
        return edge
    if kafka.producer_process and transactional:
        log.info("exactly-once: the producer runs in the worker's process (SP_KAFKA__PRODUCER_PROCESS"
                 " carries no transactions)")
    elif kafka.producer_process:
        from stream_perceptron.kafka.producer_process import SplitKafkaEdge

        return SplitKafkaEdge(kafka, input_topic, on_assigned, on_revoked, heartbeat=heartbeat,
                              stopping=stopping)
    from stream_perceptron.kafka.python_edge import KafkaEdge

    return KafkaEdge(kafka, input_topic, on_assigned, on_revoked, transactional=transactional,
                     heartbeat=heartbeat, stopping=stopping)
