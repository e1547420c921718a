"""The Kafka edge's contract, shared by both backends: what a poll returns, what the worker may
call (:class:`Edge`), the retry policy, and :class:`EdgeBase`, the lifecycle both edges share
(close, producer replacement, flush-and-resend, retries with backoff, the commit's choice of
partitions, running the rebalance callbacks and guarding what may be called inside them).

The backends are :class:`stream_perceptron.kafka.python_edge.KafkaEdge` (kafka-python, the default) and
:class:`stream_perceptron.kafka.confluent_edge.ConfluentEdge` (confluent-kafka). This module knows no
client library and no model.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from stream_perceptron.errors import KafkaEdgeError, UndeliveredError
from stream_perceptron.settings import KafkaSettings

_T = TypeVar("_T")


Partition = tuple[str, int]
"""A ``(topic, partition)`` pair."""

PartitionsCallback = Callable[[list[Partition]], None]

# Producer calls block at most this long for metadata or buffer space before they fail
# (and are retried by the edge); kafka-python's default is 60 s per call.
PRODUCER_MAX_BLOCK_MS = 5_000

@dataclass(frozen=True, slots=True)
class InRecord:
    """One consumed record, as raw bytes."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class Batch:
    """One partition's records from one poll, in offset order, held column by column: the
    worker decodes, scores and answers a whole batch without an object per record.

    >>> b = Batch.of([InRecord("in", 0, 7, b"k", b"{}", 1), InRecord("in", 0, 9, None, None, 2)])
    >>> len(b), b.offsets, b.record(1)
    (2, [7, 9], InRecord(topic='in', partition=0, offset=9, key=None, value=None, timestamp_ms=2))
    """

    topic: str
    partition: int
    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps_ms: list[int]

    @classmethod
    def of(cls, records: Sequence[InRecord]) -> Batch:
        """The batch of ``records`` (all of one partition, in offset order)."""
        topic, partition = (records[0].topic, records[0].partition) if records else ("", 0)
        if any((r.topic, r.partition) != (topic, partition) for r in records):
            raise ValueError("a batch holds the records of one partition")
        return cls(
            topic, partition, [r.offset for r in records], [r.key for r in records],
            [r.value for r in records], [r.timestamp_ms for r in records],
        )

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[InRecord]:
        return (self.record(i) for i in range(len(self.offsets)))

    def record(self, i: int) -> InRecord:
        """The ``i``-th record (position in the batch, not offset)."""
        return InRecord(
            self.topic, self.partition, self.offsets[i], self.keys[i], self.values[i], self.timestamps_ms[i]
        )

    def chunks(self, size: int) -> Iterator[Batch]:
        """The batch cut into consecutive batches of at most ``size`` records (itself if it fits).

        >>> b = Batch("in", 0, [5, 6, 7], [None] * 3, [b"a", b"b", b"c"], [1, 2, 3])
        >>> [c.offsets for c in b.chunks(2)], next(b.chunks(3)) is b
        ([[5, 6], [7]], True)
        """
        if len(self) <= size:
            yield self
            return
        for a in range(0, len(self), size):
            b = a + size
            yield Batch(
                self.topic, self.partition, self.offsets[a:b], self.keys[a:b], self.values[a:b],
                self.timestamps_ms[a:b],
            )


class Edge(Protocol):
    """What the worker needs of a Kafka client: :class:`KafkaEdge` and
    :class:`stream_perceptron.kafka.confluent_edge.ConfluentEdge` both provide it.

    ``heartbeat`` is called before each attempt of a flush, commit or send that retries, so
    the caller can tell a worker waiting on a slow broker from one that hangs. ``stopping`` is
    asked before a flush retries: when it answers True the flush gives up at once, for a caller
    about to stop that flushes once more itself. ``log_held`` writes the client's log lines the
    edge still holds back (with their counts), from any thread: for a process about to end
    without :meth:`close`.
    """

    heartbeat: Callable[[], None]
    stopping: Callable[[], bool]

    def start(self) -> None: ...
    def poll(self, timeout_ms: int, max_records: int) -> list[Batch]: ...
    def send(self, topic: str, key: bytes | None, value: bytes) -> None: ...
    def send_many(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None: ...
    def flush(self) -> None: ...
    def commit(self, offsets: Mapping[Partition, int]) -> None: ...
    def seek(self, topic: str, partition: int, offset: int) -> None: ...
    def committed(self, topic: str, partition: int) -> int | None: ...
    def assignment(self) -> list[Partition]: ...
    def highwater(self, topic: str, partition: int) -> int | None: ...
    def close(self) -> None: ...
    def log_held(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Retry:
    """Bounded exponential backoff for flush, commit, committed and send.

    >>> list(Retry(attempts=4, backoff_s=0.5, max_backoff_s=1.5).delays())
    [0.5, 1.0, 1.5]
    """

    attempts: int = 5
    backoff_s: float = 0.25
    max_backoff_s: float = 4.0

    def delays(self) -> Iterable[float]:
        """The sleeps between attempts (one fewer than ``attempts``)."""
        delay = self.backoff_s
        for _ in range(self.attempts - 1):
            yield min(delay, self.max_backoff_s)
            delay *= 2


@dataclass(frozen=True, slots=True)
class Unsent:
    """A record whose delivery failed and that may be sent again."""

    topic: str
    key: bytes | None
    value: bytes
    retriable: bool
    error: str  # described, not kept: an exception's traceback would pin sockets and frames
    code: int | None = None  # the client's error code, where it has one


def _nothing() -> None:
    """The default heartbeat."""


def _never() -> bool:
    """The default ``stopping``."""
    return False


class EdgeBase:
    """The lifecycle both edges share, with a hook per client. A subclass sets its own state up
    in :meth:`_init_client_state`, builds the clients in ``start``, and provides the hooks:
    :meth:`_new_producer`, :meth:`_close_producer` and :meth:`_close_consumer` (with
    :attr:`_client_errors`, what its client raises), :meth:`send_many`, :meth:`_flush_once` (one
    flush round, ending with :meth:`_settle_unsent`), :meth:`assignment`, :meth:`_retriable` and
    :meth:`_describe`. Its rebalance callbacks go through :meth:`_announce` and
    :meth:`_call_back`; its commits through :meth:`_assigned_offsets`.
    """

    _log = logging.getLogger(__name__)
    # What the client raises when it refuses to make a producer (kept, logged, by a replacement).
    _client_errors: tuple[type[Exception], ...] = ()

    def __init__(
        self,
        kafka: KafkaSettings,
        input_topic: str,
        on_assigned: PartitionsCallback,
        on_revoked: PartitionsCallback,
        *,
        retry: Retry | None = None,
    ) -> None:
        self._kafka = kafka
        self._input_topic = input_topic
        self._callbacks: dict[str, PartitionsCallback] = {
            "on_assigned": on_assigned,
            "on_revoked": on_revoked,
        }
        self._retry = retry or Retry()
        self._timeout_ms = kafka.request_timeout_ms
        # Deliveries that failed, appended by the client's delivery report.
        self._unsent: list[Unsent] = []
        self._consumer: Any = None
        self._producer: Any = None
        # Set while a rebalance callback runs: its thread, and whether its partitions were lost.
        self._callback_thread: int | None = None
        self._callback_lost = False
        # What a callback raised, for the poll that ran it.
        self._callback_error: Exception | None = None
        self._closing = False
        self.heartbeat: Callable[[], None] = _nothing
        self.stopping: Callable[[], bool] = _never
        self._init_client_state()

    def _init_client_state(self) -> None:
        """The subclass's own fields (its clients are built later, by ``start``)."""

    def log_held(self) -> None:
        """Write the client's log lines still held back, with their counts (each edge knows
        where its client's lines are held)."""

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Flush the producer, leave the group (``on_revoked`` runs) and close both clients.

        Nothing is committed here. Errors are logged, not raised. The producer closed is the one
        the edge holds at the end: a flush here that meets a permanent delivery failure replaces
        it (:meth:`_settle_unsent`), and the one it replaced is closed by then.
        """
        self._refuse_in_callback("close")
        flushed = self._producer is None or self._flush_quietly()
        consumer = self._consumer
        if consumer is not None:
            self._closing = True
            try:
                self._close_consumer(consumer)
            finally:
                self._closing = False
                self._consumer = None
        if self._producer is not None:
            flushed = flushed and self._flush_quietly()  # records sent by on_revoked
            producer, self._producer = self._producer, None
            self._close_producer(producer, graceful=flushed)
            if self._unsent:
                self._log.error("closed with %d undelivered records", len(self._unsent))
                self._unsent = []
        self.log_held()
        self._log.info("kafka edge closed")

    def _close_consumer(self, consumer: Any) -> None:
        """Leave the group and close ``consumer`` (``on_revoked`` runs inside); a client error
        is logged."""
        raise NotImplementedError

    def _new_producer(self) -> Any:
        """A producer, started (raising one of :attr:`_client_errors` if the client refuses)."""
        raise NotImplementedError

    def _close_producer(self, producer: Any, *, graceful: bool = True) -> None:
        """Close ``producer``; unless ``graceful``, drop its unacknowledged records first."""
        raise NotImplementedError

    def _replace_producer(self) -> None:
        """Start a fresh producer and close the old one: one that saw a permanent error may be
        unusable. If no fresh one starts, the old one is kept."""
        try:
            producer = self._new_producer()
        except self._client_errors as exc:
            self._log.warning("could not restart the producer, keeping the old one: %s", self._describe(exc))
            return
        old, self._producer = self._producer, producer
        if old is not None:
            self._close_producer(old)
        self._log.warning("producer restarted after a permanent delivery error")

    # -- producing -------------------------------------------------------------------------

    def send(self, topic: str, key: bytes | None, value: bytes) -> None:
        """Queue a record; delivery is confirmed by :meth:`flush`.

        Blocks at most :data:`PRODUCER_MAX_BLOCK_MS` per attempt while the producer's buffer
        is full (or, with kafka-python, the topic's metadata is unknown); retries with
        backoff, then raises :class:`KafkaEdgeError`.
        """
        self.send_many(topic, (key,), (value,))

    def send_many(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        """Block until every record sent so far is acknowledged (acks=all).

        Records whose delivery failed with a transient error are sent again. Raises
        :class:`KafkaEdgeError` after the retries (the records are still queued), or
        :class:`UndeliveredError` at once for a permanent error: every record that failed in
        that round is then given up, and the producer replaced. Once ``stopping()`` answers
        True, the first failed attempt raises :class:`KafkaEdgeError` without a retry.
        """
        delays = iter(self._retry.delays())
        for attempt in itertools.count(1):
            self.heartbeat()
            problem = self._flush_once()
            if problem is None:
                return
            delay = next(delays, None)
            if delay is None:
                raise KafkaEdgeError(f"flush failed after {self._retry.attempts} attempts: {problem}")
            if self.stopping():
                raise KafkaEdgeError(f"flush given up after {attempt} of {self._retry.attempts}"
                                     f" attempts, a stop was asked: {problem}")
            self._log.warning("flush: %s; retrying in %.2f s", problem, delay)
            time.sleep(delay)

    def _flush_once(self) -> str | None:
        """One flush round; a description of what is still unacknowledged, or None."""
        raise NotImplementedError

    def _settle_unsent(self) -> str | None:
        """After a flush: give up on the round's failures if any is permanent (raising
        :class:`UndeliveredError`, with a fresh producer), else send them again; what happened,
        or None when every record was delivered."""
        failed, self._unsent = self._unsent, []
        if not failed:
            return None
        permanent = [u for u in failed if not u.retriable]
        if permanent:
            self._replace_producer()
            transient = len(failed) - len(permanent)
            raise UndeliveredError(
                f"{len(permanent)} records could not be delivered, e.g. to "
                f"{permanent[0].topic}: {permanent[0].error}"
                + (f" ({transient} more failed transiently)" if transient else "")
            )
        for i, unsent in enumerate(failed):
            try:
                self.send(unsent.topic, unsent.key, unsent.value)
            except BaseException:
                # this record and the rest were not sent again: keep them ahead of any failure
                # reported meanwhile, so the next flush resends them and no checkpoint covers them
                self._unsent[:0] = failed[i:]
                raise
        return f"{len(failed)} records failed ({failed[0].error}) and were resent"

    def _flush_quietly(self) -> bool:
        """One flush attempt (close must stay bounded while the broker is away)."""
        try:
            problem = self._flush_once()
        except KafkaEdgeError as exc:
            problem = str(exc)
        if problem is not None:
            self._log.error("closing with unacknowledged records: %s", problem)
        return problem is None

    # -- consuming -------------------------------------------------------------------------

    def assignment(self) -> list[Partition]:
        """The partitions assigned to this member, sorted."""
        raise NotImplementedError

    def _assigned_offsets(self, offsets: Mapping[Partition, int]) -> dict[Partition, int]:
        """What a commit of ``offsets`` commits: those of the partitions assigned to this member
        (the others are skipped, said at DEBUG)."""
        assigned = set(self.assignment())
        kept = {key: offset for key, offset in offsets.items() if key in assigned}
        if len(kept) < len(offsets):
            self._log.debug("commit: skipping %d unassigned partitions", len(offsets) - len(kept))
        return kept

    def _announce(self, name: str, keys: list[Partition], *, lost: bool) -> None:
        self._log.info("%s%s: %s", name, " (partitions lost)" if lost else "", keys)

    def _call_back(self, name: str, keys: list[Partition], *, lost: bool) -> Exception | None:
        """Run the worker's ``name`` callback with ``keys`` on this thread, known meanwhile as
        the callback's (:meth:`_in_callback`, and ``_callback_lost``). Returns what it raised, or
        None; while closing that is logged instead: close() raises nothing, and the client's
        close would skip its cleanup."""
        self._callback_thread = threading.get_ident()
        self._callback_lost = lost
        try:
            self._callbacks[name](keys)
        except Exception as exc:
            if not self._closing:
                return exc
            self._log.exception("%s failed while closing", name)
        finally:
            self._callback_thread = None
            self._callback_lost = False
        return None

    # -- helpers ---------------------------------------------------------------------------

    def _retrying(self, what: str, operation: Callable[[], _T]) -> _T:
        """Run ``operation``, retrying the client's transient errors with bounded backoff."""
        delays = iter(self._retry.delays())
        while True:
            self.heartbeat()
            try:
                return operation()
            except Exception as exc:
                retriable = self._retriable(exc)
                if retriable is None:
                    raise
                delay = next(delays, None) if retriable else None
                if delay is None:
                    raise KafkaEdgeError(f"{what} failed: {self._describe(exc)}") from None
                self._log.warning("%s failed (%s); retrying in %.2f s", what, self._describe(exc), delay)
                time.sleep(delay)

    def _retriable(self, exc: Exception) -> bool | None:
        """Whether the client's error ``exc`` is transient; None when it is not the client's."""
        raise NotImplementedError

    @staticmethod
    def _describe(exc: BaseException) -> str:
        return f"{type(exc).__name__}: {exc}"

    @staticmethod
    def _require(client: _T | None) -> _T:
        if client is None:
            raise KafkaEdgeError("the Kafka edge is not started (or already closed)")
        return client

    def _in_callback(self) -> bool:
        return self._callback_thread == threading.get_ident()

    def _refuse_in_callback(self, what: str) -> None:
        if self._in_callback():
            raise KafkaEdgeError(f"{what}() cannot be called from a rebalance callback")


__all__ = [
    "PRODUCER_MAX_BLOCK_MS",
    "Batch",
    "Edge",
    "EdgeBase",
    "InRecord",
    "Partition",
    "PartitionsCallback",
    "Retry",
    "Unsent",
]
