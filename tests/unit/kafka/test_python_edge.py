"""kafka-python's edge without a broker: ``KafkaEdge`` inside a rebalance callback, with a
coordinator that fails to give the committed offsets of the partitions being assigned, and
``check_reachable`` against listeners that are not Kafka (the broker-backed contract is in
tests/integration/kafka/test_edge.py)."""

from __future__ import annotations

import asyncio
import time

import pytest
from kafka.errors import CoordinatorNotAvailableError
from kafka.structs import TopicPartition

from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka.config import check_reachable
from stream_perceptron.kafka.python_edge import KafkaEdge
from stream_perceptron.settings import KafkaSettings
from tests.unit.kafka.listeners import listener


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

    def paused(self):
        return set()


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


def test_a_tls_handshake_nobody_answers_is_not_reachable_and_says_so():
    # neither client bounds it: the constructor would wait for good, deaf to SIGTERM
    with listener(None) as port:
        kafka = KafkaSettings(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SSL")
        started = time.monotonic()
        said = (r"cannot reach Kafka \(127.0.0.1:\d+: TimeoutError: no answer to a TLS handshake"
                r" within 0.3 s \(SP_KAFKA__SECURITY_PROTOCOL")
        with pytest.raises(KafkaEdgeError, match=said):
            check_reachable(kafka, 0.3)
        assert time.monotonic() - started < 5
        check_reachable(kafka.model_copy(update={"security_protocol": "PLAINTEXT"}), 0.3)  # TCP is enough


def test_a_tls_handshake_refused_is_an_answer_left_to_the_client_to_name():
    with listener(b"\x00\x00\x00\x04nope") as port:  # not TLS: the handshake fails at once
        check_reachable(KafkaSettings(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_SSL",
                                      sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p"), 2.0)


def test_closing_writes_the_client_lines_still_held_back(capsys):
    # as the confluent-kafka edge does with librdkafka's: the held lines come before the
    # worker's last line, whatever the backend
    import logging

    from stream_perceptron.logs import setup_logging

    setup_logging("INFO", "text")
    for node in range(1, 4):
        logging.getLogger("kafka.conn").warning("node %d refused", node)
    KafkaEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print).close()  # no client yet
    err = [ln for ln in capsys.readouterr().err.splitlines() if "kafka.conn" in ln or "edge closed" in ln]
    assert [ln.split(": ", 1)[1] for ln in err] == [
        "node 1 refused", "node 3 refused (1 similar suppressed)", "kafka edge closed"]
