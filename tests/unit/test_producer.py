"""``produce_source``: what it returns is a count of acknowledged records.

A stand-in for kafka-python's producer reports failed deliveries as the client does (an errback
called before ``flush`` returns); the broker-backed run is in tests/integration/test_cli_commands.py.
"""

from __future__ import annotations

import pytest
from kafka.errors import KafkaTimeoutError, NotEnoughReplicasError
from kafka.future import Future

from stream_perceptron import producer as producer_module
from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.producer import produce_source
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.sources import open_source


class _Producer:
    """Fails the delivery of the records at ``fail_at`` (indices) when flushed; ``send`` raises
    at ``raise_at``."""

    fail_at: frozenset[int] = frozenset()
    raise_at: int | None = None

    def __init__(self, **config):
        self.futures: list[Future] = []
        self.closed = False

    def send(self, topic, key=None, value=None):
        if len(self.futures) == self.raise_at:
            raise KafkaTimeoutError("Failed to update metadata after 60.0 secs.")
        self.futures.append(Future())
        return self.futures[-1]

    def flush(self):
        for i, future in enumerate(self.futures):
            if i in self.fail_at:
                future.failure(NotEnoughReplicasError("acks=all"))
            else:
                future.success(None)

    def close(self):
        self.closed = True


def _produce(monkeypatch, **behaviour) -> int:
    fake = type("Fake", (_Producer,), behaviour)
    monkeypatch.setattr(producer_module, "KafkaProducer", fake)
    return produce_source(KafkaSettings(bootstrap_servers="127.0.0.1:1"),
                          open_source("separable:d=3,n=50"), "examples")


def test_every_record_acknowledged_is_counted(monkeypatch):
    assert _produce(monkeypatch) == 50


def test_failed_deliveries_are_an_error_that_says_how_many(monkeypatch):
    with pytest.raises(KafkaEdgeError, match=r"^2 of 50 records sent to examples were not delivered, "
                                             r"e\.g\. NotEnoughReplicasError"):
        _produce(monkeypatch, fail_at=frozenset({3, 40}))


def test_a_send_that_raises_is_an_error_naming_the_record(monkeypatch):
    with pytest.raises(KafkaEdgeError, match=r"^sending record 7 to examples failed: KafkaTimeoutError"):
        _produce(monkeypatch, raise_at=7)
