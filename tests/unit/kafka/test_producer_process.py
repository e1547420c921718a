"""The producer process's pipe against a stand-in pipe: from the worker's side, and the child's
once the worker is gone (the child itself runs against the broker in
tests/integration/kafka/test_producer_process.py)."""

from __future__ import annotations

import os

import msgspec
import pytest

from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka.producer_process import SplitKafkaEdge, _Child
from stream_perceptron.settings import KafkaSettings


class _Pipe:
    """Holds the replies the child would have written, in order."""

    def __init__(self, *replies: list) -> None:
        self.replies = [msgspec.msgpack.encode(r) for r in replies]
        self.sent: list[list] = []

    def send_bytes(self, data: bytes) -> None:
        self.sent.append(msgspec.msgpack.decode(data))

    def poll(self, timeout: float = 0.0) -> bool:
        return bool(self.replies)

    def recv_bytes(self) -> bytes:
        return self.replies.pop(0)


def _edge() -> SplitKafkaEdge:
    return SplitKafkaEdge(KafkaSettings(bootstrap_servers="127.0.0.1:1"), "in", print, print)


def test_a_late_reply_to_an_earlier_request_is_not_taken_for_the_next_ones():
    # a flush timed out; its reply comes after the next request was sent
    pipe = _Pipe(["f", True, []], ["c"])
    assert _edge()._call(pipe, ["c", True], 1.0, "closing the producer") == ["c"]  # type: ignore[arg-type]
    assert pipe.sent == [["c", True]] and pipe.replies == []


def test_a_loss_reported_before_the_reply_sticks():
    edge = _edge()
    pipe = _Pipe(["x", "sending to p failed: KafkaTimeoutError"], ["f", True, []])
    assert edge._call(pipe, ["f", 1.0], 1.0, "flushing")[0] == "f"  # type: ignore[arg-type]
    with pytest.raises(KafkaEdgeError, match="KafkaTimeoutError"):
        edge._check_child(pipe)  # type: ignore[arg-type]


class _GoneWorkerPipe:
    """The child's end of a pipe whose worker asked for a flush, then exited before the reply."""

    def __init__(self) -> None:
        self.requests = [msgspec.msgpack.encode(["f", 1.0])]

    def poll(self, timeout: float = 0.0) -> bool:
        return bool(self.requests)

    def recv_bytes(self) -> bytes:
        return self.requests.pop(0)

    def send_bytes(self, data: bytes) -> None:
        raise BrokenPipeError(32, "Broken pipe")


class _ProducerEdge:
    """The child's producer-only edge: flushes at once, notes how it was closed."""

    def __init__(self) -> None:
        self._producer, self._unsent, self.closed = self, [], []

    def _require(self, producer):
        return producer

    def flush(self, timeout=None) -> None:
        pass

    def _close_producer(self, producer, *, graceful=True) -> None:
        self.closed.append(graceful)


def test_a_child_whose_worker_exited_during_a_flush_ends_quietly(capsys):
    # the worker's shutdown deadline ended it while the child flushed: the reply finds the pipe
    # closed, and the child drops what is queued and ends, as when the worker is killed
    child = _Child(_GoneWorkerPipe())  # type: ignore[arg-type]
    child.edge = _ProducerEdge()  # type: ignore[assignment]
    child.serve(parent=os.getppid())
    assert child.worker_gone and child.edge.closed == [False]  # type: ignore[attr-defined]
    assert capsys.readouterr().err == ""
