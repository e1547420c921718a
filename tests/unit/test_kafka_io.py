"""``KafkaEdge`` inside a rebalance callback, without a broker: a coordinator that fails to give
the committed offsets of the partitions being assigned (the broker-backed contract is in
tests/integration/test_edge.py)."""

from __future__ import annotations

import asyncio

from kafka.errors import CoordinatorNotAvailableError
from kafka.structs import TopicPartition

from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka_io import KafkaEdge
from stream_perceptron.settings import KafkaSettings


class _Coordinator:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    async def fetch_committed_offsets_async(self, tps, timeout_ms):
        if self.error is not None:
            raise self.error
        return {}  # no offset committed for any of them


class _Consumer:
    def __init__(self, error: Exception | None) -> None:
        self._coordinator = _Coordinator(error)


def _assign(error: Exception | None) -> Exception | None:
    """Run on_assigned for in/0 as the client's I/O thread would; what committed() raised."""
    seen: list[Exception | None] = []

    def on_assigned(keys):
        try:
            edge.committed("in", 0)
            seen.append(None)
        except KafkaEdgeError as exc:
            seen.append(exc)

    edge = KafkaEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", on_assigned, print)
    edge._consumer = _Consumer(error)
    asyncio.run(edge._run_callback("on_assigned", [TopicPartition("in", 0)], lost=False))
    assert edge._callback_fetch_error is None  # nothing carried into the next rebalance
    return seen[0]


def test_a_failed_fetch_of_committed_offsets_is_named_as_the_cause():
    error = _assign(CoordinatorNotAvailableError("coordinator moving"))
    assert error is not None
    assert str(error).startswith("the committed offset of in/0 could not be fetched for its assignment: ")
    assert "CoordinatorNotAvailableError" in str(error)


def test_committed_in_on_assigned_answers_when_the_fetch_works():
    assert _assign(None) is None
