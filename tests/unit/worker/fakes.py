"""In-memory stand-ins for the worker's parts' collaborators: an edge that records what it is
asked to do, and a model topic over a list of sent records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from stream_perceptron.errors import TransactionAbortedError
from stream_perceptron.state.model_topic import written


class FakeEdge:
    """An edge holding ``assigned`` partitions: every record sent is kept in ``sent`` (values
    decoded), commits in ``commits``, seeks in ``seeks``; ``highwaters`` and ``committed_`` are
    the broker's answers. With ``transactional``, sends must fall inside a transaction and
    ``commit_transaction`` keeps its offsets in ``transactions`` (or raises ``abort_next``)."""

    def __init__(self, assigned: Sequence[tuple[str, int]] = (("in", 0),), *, transactional: bool = False,
                 committed: Mapping[tuple[str, int], int] | None = None) -> None:
        self.assigned = list(assigned)
        self.transactional = transactional
        self.in_transaction = False
        self.sent: list[tuple[str, bytes | None, Any]] = []
        self.commits: list[dict[tuple[str, int], int]] = []
        self.seeks: dict[tuple[str, int], int] = {}
        self.highwaters: dict[tuple[str, int], int] = {}
        self.committed_ = dict(committed or {})
        self.flushes = 0
        self.flush_error: Exception | None = None
        self.transactions: list[dict[tuple[str, int], int]] = []
        self.aborts = 0
        self.abort_next = False

    def send(self, topic, key, value, partition=None):
        if self.transactional and not self.in_transaction:
            raise AssertionError("a send outside a transaction")
        try:
            decoded = orjson.loads(value)
        except orjson.JSONDecodeError:
            decoded = value
        self.sent.append((topic, key, decoded))

    def send_many(self, topic, keys, values):
        for key, value in zip(keys, values, strict=True):
            self.send(topic, key, value)

    def flush(self):
        self.flushes += 1
        if self.flush_error is not None:
            error, self.flush_error = self.flush_error, None
            raise error

    def commit(self, offsets):
        self.commits.append(dict(offsets))
        self.committed_.update(offsets)

    def committed(self, topic, partition):
        return self.committed_.get((topic, partition))

    def seek(self, topic, partition, offset):
        self.seeks[(topic, partition)] = offset

    def assignment(self):
        return list(self.assigned)

    def highwater(self, topic, partition):
        return self.highwaters.get((topic, partition))

    def begin_transaction(self):
        assert self.transactional and not self.in_transaction
        self.in_transaction = True

    def commit_transaction(self, offsets):
        assert self.in_transaction
        self.in_transaction = False
        if self.abort_next:
            self.abort_next = False
            raise TransactionAbortedError("the transaction was aborted: fenced")
        self.transactions.append(dict(offsets))
        self.committed_.update(offsets)

    def abort_transaction(self):
        self.in_transaction = False
        self.aborts += 1

    def records(self, topic: str) -> list[Any]:
        """The values sent to ``topic``, in order."""
        return [v for t, _, v in self.sent if t == topic]


class MemoryModelTopic:
    """A model topic in memory: records appended to ``log`` (a list several workers may share,
    each topic object reading it from its own position)."""

    def __init__(self, log: list[tuple[str | None, bytes | None]] | None = None) -> None:
        self.log = [] if log is None else log
        self._read = 0
        self.blind = False  # True: a reader that has not read what was appended since (it lags)

    def newer(self) -> list[tuple[str | None, bytes | None]]:
        if self.blind:
            return []
        out = self.log[self._read:]
        self._read = len(self.log)
        return out

    def append(self, records) -> None:
        self.log.extend((r.key, r.value) for r in records)

    def close(self) -> None:
        pass

    def written(self) -> list[dict[str, Any]]:
        """Every mixing record written, in order."""
        return written(self.log)
