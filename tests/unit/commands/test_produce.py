"""``produce_source``: what it returns is a count of acknowledged records.

A stand-in for kafka-python's producer reports failed deliveries as the client does (an errback
called before ``flush`` returns); the broker-backed run is in tests/integration/commands/test_cli_commands.py.
"""

from __future__ import annotations

import pytest
from kafka.errors import KafkaTimeoutError, NotEnoughReplicasError
from kafka.future import Future

from stream_perceptron.codec.limits import Limits
from stream_perceptron.commands import produce as producer_module
from stream_perceptron.commands.produce import check_source, produce_source
from stream_perceptron.errors import KafkaEdgeError, ProduceInterrupted, SourceError
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.sources import open_source


class _Producer:
    """Fails the delivery of the records at ``fail_at`` (indices) when flushed; ``send`` raises
    at ``raise_at``."""

    fail_at: frozenset[int] = frozenset()
    raise_at: int | None = None
    interrupt_at: int | None = None  # at this send, Ctrl+C
    sent: list[bytes]

    def __init__(self, **config):
        self.futures: list[Future] = []
        self.closed = False

    def send(self, topic, key=None, value=None):
        type(self).sent.append(value)
        if len(self.futures) == self.raise_at:
            raise KafkaTimeoutError("Failed to update metadata after 60.0 secs.")
        if len(self.futures) == self.interrupt_at:
            raise KeyboardInterrupt
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


def _produce(monkeypatch, spec="separable:d=3,n=50", limits=None, **behaviour) -> int:
    fake = type("Fake", (_Producer,), {"sent": [], **behaviour})
    monkeypatch.setattr(producer_module, "KafkaProducer", fake)
    return produce_source(KafkaSettings(bootstrap_servers="127.0.0.1:1"),
                          open_source(spec), "examples", limits=limits)


def test_every_record_acknowledged_is_counted(monkeypatch):
    assert _produce(monkeypatch) == 50


def test_failed_deliveries_are_an_error_that_says_how_many(monkeypatch):
    with pytest.raises(KafkaEdgeError, match=r"^2 of 50 records sent to examples were not delivered, "
                                             r"e\.g\. NotEnoughReplicasError"):
        _produce(monkeypatch, fail_at=frozenset({3, 40}))


def test_ctrl_c_says_how_many_were_sent(monkeypatch):
    with pytest.raises(ProduceInterrupted, match=r"^interrupted: examples 0 to 11 were sent to examples;"
                                                 r" sending the source again sends them again$"):
        _produce(monkeypatch, interrupt_at=12)
    with pytest.raises(ProduceInterrupted, match="; 1 of them were not delivered;"):
        _produce(monkeypatch, interrupt_at=12, fail_at=frozenset({4}))


def test_a_send_that_raises_is_an_error_naming_the_record(monkeypatch):
    with pytest.raises(KafkaEdgeError, match=r"^sending record 7 to examples failed: KafkaTimeoutError"):
        _produce(monkeypatch, raise_at=7)


def test_a_record_the_worker_would_refuse_stops_the_run_and_says_how_many_went(monkeypatch, tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,y\n1,1\n2,-1\n3e13,1\n4,1\n")
    sent: list[bytes] = []
    with pytest.raises(SourceError, match=r"d\.csv: example 3: x has a value of magnitude 3e\+13, over the "
                                          r"limit of 1e\+12 .*dead-letter it \(2 records before it were"
                                          r" sent to examples\)$"):
        _produce(monkeypatch, spec=str(csv), limits=Limits(), sent=sent)
    assert len(sent) == 2 and all(b'"id":%d' % i in v for i, v in enumerate(sent))  # the first two
    assert _produce(monkeypatch, spec=str(csv)) == 4  # without limits: sent as read


def test_a_file_is_checked_through_before_anything_is_sent(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,y\n1,1\n2,-1\n3,1\n")
    assert check_source(open_source(str(csv)), Limits()) == 3
    csv.write_text("a,y\n1,1\n2,-1\nfoo,1\n")
    with pytest.raises(SourceError, match=r"d\.csv:4: column 'a' is not a number"):
        check_source(open_source(str(csv)), Limits())
    csv.write_text("a,y\n1,1\n" + "2," * 5 + "-1\n")
    with pytest.raises(SourceError, match="expected 2 fields"):
        check_source(open_source(str(csv)), Limits())
    with pytest.raises(SourceError, match="x has 2 features, over the limit of 1"):
        check_source(open_source("separable:d=2,n=5"), Limits(max_features=1))
    csv.write_text("a,y\n1,ham\n2,eggs\n")
    with pytest.raises(SourceError, match="no label is the positive class 'spam'"):  # misspelt: all -1
        check_source(open_source(str(csv), positive_class="spam"), Limits(positive_class="spam"))
