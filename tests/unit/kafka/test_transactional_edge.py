"""The exactly-once mode's choices that need no broker: which edge the factory gives, and what a
transactional or non-transactional edge refuses before it touches a client (the transactions
themselves run against Apache Kafka in tests/integration/kafka/test_transactions.py)."""

from __future__ import annotations

import pytest

from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka.config import transactional_id
from stream_perceptron.kafka.factory import open_edge
from stream_perceptron.kafka.producer_process import SplitKafkaEdge
from stream_perceptron.kafka.python_edge import KafkaEdge
from stream_perceptron.settings import KafkaSettings

SERVERS = "127.0.0.1:1"  # never connected to: nothing here starts an edge


def _ignore(_partitions: list[tuple[str, int]]) -> None:
    return None


@pytest.mark.parametrize("producer_process", [False, True])
def test_an_exactly_once_kafka_python_edge_keeps_its_producer_in_the_workers_process(producer_process):
    kafka = KafkaSettings(bootstrap_servers=SERVERS, producer_process=producer_process)
    edge = open_edge(kafka, "in", _ignore, _ignore, transactional=True)
    assert type(edge) is KafkaEdge and edge.transactional
    assert edge.transactional_id == transactional_id(kafka)
    plain = open_edge(kafka, "in", _ignore, _ignore)
    assert not plain.transactional
    assert type(plain) is (SplitKafkaEdge if producer_process else KafkaEdge)


def test_an_exactly_once_confluent_edge_is_transactional():
    pytest.importorskip("confluent_kafka")
    from stream_perceptron.kafka.confluent_edge import ConfluentEdge

    kafka = KafkaSettings(bootstrap_servers=SERVERS, backend="confluent-kafka")
    edge = open_edge(kafka, "in", _ignore, _ignore, transactional=True)
    assert type(edge) is ConfluentEdge and edge.transactional
    config = edge._producer_config()
    assert config["transactional.id"] == transactional_id(kafka) and config["enable.idempotence"] is True
    assert edge._consumer_config()["isolation.level"] == "read_committed"
    plain = open_edge(kafka, "in", _ignore, _ignore)
    assert plain._consumer_config()["isolation.level"] == "read_uncommitted"


def test_the_producer_process_refuses_to_carry_transactions():
    kafka = KafkaSettings(bootstrap_servers=SERVERS, producer_process=True)
    with pytest.raises(KafkaEdgeError, match="carries no transactions"):
        SplitKafkaEdge(kafka, "in", _ignore, _ignore, transactional=True)


def test_transactions_on_an_edge_that_is_not_transactional_are_refused():
    edge = KafkaEdge(KafkaSettings(bootstrap_servers=SERVERS), "in", _ignore, _ignore)
    for call in (edge.begin_transaction, lambda: edge.commit_transaction({}), edge.abort_transaction):
        with pytest.raises(KafkaEdgeError, match="not transactional"):
            call()


def test_a_transactional_edge_sends_only_inside_a_transaction():
    edge = KafkaEdge(KafkaSettings(bootstrap_servers=SERVERS), "in", _ignore, _ignore, transactional=True)
    with pytest.raises(KafkaEdgeError, match="only inside a transaction"):
        edge.send("out", None, b"v")
    with pytest.raises(KafkaEdgeError, match="only inside a transaction"):
        edge.send("out", None, b"v", partition=1)
    with pytest.raises(KafkaEdgeError, match="commits offsets with commit_transaction"):
        edge.commit({("in", 0): 1})
    with pytest.raises(KafkaEdgeError, match="no transaction is open"):
        edge.commit_transaction({})
    edge.abort_transaction()  # none open: nothing to do


def test_the_transactional_id_names_the_group_the_client_and_the_host():
    a = transactional_id(KafkaSettings(group_id="g", client_id="worker-1"))
    b = transactional_id(KafkaSettings(group_id="g", client_id="worker-2"))
    assert a.startswith("g:worker-1:") and b.startswith("g:worker-2:")
    assert a.split(":", 2)[2] == b.split(":", 2)[2] != ""  # the same host
