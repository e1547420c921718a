"""The Kafka edge's contract, shared by both backends: what a poll returns, what the worker may
call (:class:`Edge`), the retry policy, and :class:`EdgeBase`, the lifecycle both edges share
(close, producer replacement, flush-and-resend, retries with backoff, the commit's choice of
partitions, running the rebalance callbacks and guarding what may be called inside them, and the
transactions of the exactly-once mode).

Exactly-once (``transactional=True``, for ``SP_OUTPUT__GUARANTEE=exactly-once``): the producer is
transactional, its ``transactional.id`` is :func:`~.config.transactional_id` (stable for a worker
on one host, so a restarted worker's ``init_transactions`` aborts what its killed predecessor
left open), and the consumer reads ``read_committed``. The worker brackets each checkpoint
interval with :meth:`EdgeBase.begin_transaction` and :meth:`EdgeBase.commit_transaction`, which
sends the input offsets with the consumer's group membership as of the latest assignment
(KIP-447): the group coordinator refuses them once another member holds the partitions (a newer
generation), so a worker that lost its partitions while stalled cannot commit. What raises when:

* :class:`~stream_perceptron.errors.TransactionFencedError` (from ``commit_transaction``): the
  group refused the offsets, the partitions were revoked while the transaction was open, the
  commit was asked for partitions not assigned, or inside a revocation of lost partitions; or
  the producer was fenced (another producer took the transactional id, or the transaction
  outlived :data:`TRANSACTION_TIMEOUT_MS`). The transaction is aborted; nothing of it is visible.
* :class:`~stream_perceptron.errors.TransactionAbortedError` (its parent; from
  ``commit_transaction``, and from ``flush`` or a send inside a transaction): the transaction
  failed otherwise (a record not delivered; from a send or flush, also a fenced producer, where
  the client does not say so) and was aborted; nothing of it is visible.
* :class:`~stream_perceptron.errors.KafkaEdgeError`: the broker did not answer within the
  retries; after ``commit_transaction`` the outcome is unknown until the producer is replaced,
  which the next ``begin_transaction`` does (its ``init_transactions`` finishes or aborts it).

After either of the first two the edge is usable: the next ``begin_transaction`` starts a new
transaction (on a fresh producer under the same id after a fencing of the producer).

The backends are :class:`stream_perceptron.kafka.python_edge.KafkaEdge` (kafka-python, the default) and
:class:`stream_perceptron.kafka.confluent_edge.ConfluentEdge` (confluent-kafka). This module knows no
client library and no model.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from stream_perceptron.errors import (
    KafkaEdgeError,
    TransactionAbortedError,
    TransactionFencedError,
    UndeliveredError,
)
from stream_perceptron.kafka.config import transactional_id
from stream_perceptron.settings import KafkaSettings

_T = TypeVar("_T")


Partition = tuple[str, int]
"""A ``(topic, partition)`` pair."""

PartitionsCallback = Callable[[list[Partition]], None]

# Producer calls block at most this long for metadata or buffer space before they fail
# (and are retried by the edge); kafka-python's default is 60 s per call.
PRODUCER_MAX_BLOCK_MS = 5_000

# How long a transaction may stay open before the broker aborts it (``transaction.timeout.ms``;
# both clients' default): longer than a checkpoint interval, short enough that a transaction a
# killed worker left open stops holding back read_committed readers within a minute.
TRANSACTION_TIMEOUT_MS = 60_000

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

    def slice(self, start: int, stop: int) -> Batch:
        """Its records at positions ``[start, stop)``: itself when that is all of them.

        >>> b = Batch("in", 0, [5, 6, 7], [None] * 3, [b"a", b"b", b"c"], [1, 2, 3])
        >>> b.slice(1, 9).offsets, b.slice(0, 3) is b
        ([6, 7], True)
        """
        start, stop = max(start, 0), min(stop, len(self))
        if start == 0 and stop == len(self):
            return self
        return Batch(self.topic, self.partition, self.offsets[start:stop], self.keys[start:stop],
                     self.values[start:stop], self.timestamps_ms[start:stop])

    def after(self, offset: int | None) -> Batch:
        """Its records at ``offset`` or later (all of them for None).

        >>> Batch("in", 0, [5, 6, 7], [None] * 3, [b"a", b"b", b"c"], [1, 2, 3]).after(6).offsets
        [6, 7]
        """
        if offset is None or not self.offsets or self.offsets[0] >= offset:
            return self
        return self.slice(bisect.bisect_left(self.offsets, offset), len(self))

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

    Its constructor takes ``heartbeat``, called before each attempt of a flush, commit or send
    that retries, so the caller can tell a worker waiting on a slow broker from one that hangs,
    and ``stopping``, asked before a flush retries: when it answers True the flush gives up at
    once, for a caller about to stop that flushes once more itself. ``log_suppressed`` writes the
    client's log lines the edge still suppresses (with their counts), from any thread: for a
    process about to end without :meth:`close`.

    ``transactional`` says whether the edge runs the exactly-once mode: then every send happens
    between ``begin_transaction`` and ``commit_transaction`` (or ``abort_transaction``), and
    offsets are committed only by ``commit_transaction`` (``commit`` raises). ``in_transaction``
    says whether a transaction is open: the edge is the one owner of that fact.

    ``pause`` stops an assigned partition's records: no poll returns one of them (those already
    fetched included) until ``resume(topic, partition, offset)``, which fetches it again from
    ``offset``. A revocation ends a pause: a partition assigned again is fetched as usual.
    """

    transactional: bool

    @property
    def in_transaction(self) -> bool: ...

    def start(self) -> None: ...
    def poll(self, timeout_ms: int, max_records: int) -> list[Batch]: ...
    def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None = None) -> None: ...
    def send_many(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None: ...
    def flush(self) -> None: ...
    def commit(self, offsets: Mapping[Partition, int]) -> None: ...
    def begin_transaction(self) -> None: ...
    def commit_transaction(self, offsets: Mapping[Partition, int]) -> None: ...
    def abort_transaction(self) -> None: ...
    def seek(self, topic: str, partition: int, offset: int) -> None: ...
    def pause(self, topic: str, partition: int) -> None: ...
    def resume(self, topic: str, partition: int, offset: int) -> None: ...
    def committed(self, topic: str, partition: int) -> int | None: ...
    def assignment(self) -> list[Partition]: ...
    def highwater(self, topic: str, partition: int) -> int | None: ...
    def close(self) -> None: ...
    def log_suppressed(self) -> None: ...


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
    partition: int | None = None  # the partition it was sent to explicitly (None: the partitioner's)


class NoAnswer(KafkaEdgeError):
    """A transaction's request had no answer within the retries (the broker is away); raised by
    a backend's transaction hooks, turned into the error of the call by :class:`EdgeBase`."""


def no_heartbeat() -> None:
    """The default heartbeat: nobody listens."""


def never_stopping() -> bool:
    """The default ``stopping``: no stop is ever pending."""
    return False


class EdgeBase:
    """The lifecycle both edges share, with a hook per client. A subclass sets its own state up
    in :meth:`_init_client_state`, builds the clients in ``start``, and provides the hooks:
    :meth:`_new_producer`, :meth:`_close_producer` and :meth:`_close_consumer` (with
    :attr:`_client_errors`, what its client raises), :meth:`send_many`, :meth:`_flush_once` (one
    flush round, ending with :meth:`_settle_unsent`), :meth:`assignment`, :meth:`_retriable` and
    :meth:`_describe`. Its rebalance callbacks go through :meth:`_announce` and
    :meth:`_call_back`; its commits through :meth:`_assigned_offsets`. A send to an explicit
    partition goes through :meth:`_send_to`. For the exactly-once mode it provides
    :meth:`_membership`, :meth:`_txn_begin`, :meth:`_txn_send_offsets`, :meth:`_txn_end` and
    :meth:`_txn_kind`, and builds a transactional producer (``transactional.id``
    :attr:`transactional_id`, transactions initialised) and a ``read_committed`` consumer when
    :attr:`transactional` is set.
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
        transactional: bool = False,
        heartbeat: Callable[[], None] = no_heartbeat,
        stopping: Callable[[], bool] = never_stopping,
    ) -> None:
        self._kafka = kafka
        # The exactly-once mode (see the module's docstring).
        self.transactional = transactional
        self.transactional_id = transactional_id(kafka) if transactional else None
        self._in_transaction = False
        self._transactions = 0  # begun so far
        self._doomed: str | None = None  # why the open transaction cannot commit
        self._membership_at_assignment: Any = None  # the group membership of the latest assignment
        self._broken: str | None = None  # why the producer is replaced before the next transaction
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
        self.heartbeat = heartbeat
        self.stopping = stopping
        self._init_client_state()

    @property
    def in_transaction(self) -> bool:
        """A transaction is open (exactly-once): begun, and neither committed nor aborted yet."""
        return self._in_transaction

    def _init_client_state(self) -> None:
        """The subclass's own fields (its clients are built later, by ``start``)."""

    def log_suppressed(self) -> None:
        """Write the client's log lines still held back, with their counts (each edge knows
        where its client's lines are held)."""

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Flush the producer, leave the group (``on_revoked`` runs) and close both clients.

        Nothing is committed here. Errors are logged, not raised. The producer closed is the one
        the edge holds at the end: a flush here that meets a permanent delivery failure replaces
        it (:meth:`_settle_unsent`), and the one it replaced is closed by then. A transaction still
        open once ``on_revoked`` has run is aborted.
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
        if self._in_transaction:  # not committed by on_revoked: never to be visible
            self._abort_quietly()
        if self._producer is not None:
            flushed = flushed and self._flush_quietly()  # records sent by on_revoked
            producer, self._producer = self._producer, None
            self._close_producer(producer, graceful=flushed)
            if self._unsent:
                self._log.error("closed with %d undelivered records", len(self._unsent))
                self._unsent = []
        self.log_suppressed()
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

    def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None = None) -> None:
        """Queue a record, to ``partition`` when given (else the partitioner's choice by key);
        delivery is confirmed by :meth:`flush`.

        Blocks at most :data:`PRODUCER_MAX_BLOCK_MS` per attempt while the producer's buffer
        is full (or, with kafka-python, the topic's metadata is unknown); retries with
        backoff, then raises :class:`KafkaEdgeError`. A record whose delivery fails transiently
        is sent again by :meth:`flush` to the same explicit partition.
        """
        if partition is None:
            self.send_many(topic, (key,), (value,))
        else:
            self._check_sending()
            self._send_to(topic, key, value, partition)

    def send_many(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None:
        raise NotImplementedError

    def _send_to(self, topic: str, key: bytes | None, value: bytes, partition: int) -> None:
        """Queue one record to ``partition`` of ``topic`` (a failed delivery is kept with its
        partition, for :meth:`flush` to send again)."""
        raise NotImplementedError

    def _check_sending(self) -> None:
        """In the exactly-once mode records are sent only inside a transaction."""
        if self.transactional and not self._in_transaction:
            raise KafkaEdgeError("a transactional edge sends only inside a transaction"
                                 " (begin_transaction first)")

    def flush(self) -> None:
        """Block until every record sent so far is acknowledged (acks=all).

        Records whose delivery failed with a transient error are sent again. Raises
        :class:`KafkaEdgeError` after the retries (the records are still queued), or
        :class:`UndeliveredError` at once for a permanent error: every record that failed in
        that round is then given up, and the producer replaced. Once ``stopping()`` answers
        True, the first failed attempt raises :class:`KafkaEdgeError` without a retry. Inside a
        transaction a failed delivery is not sent again: the transaction is aborted and
        :class:`TransactionAbortedError` raised (:class:`TransactionFencedError` where the
        client reports its producer fenced).
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
        if self._in_transaction:  # the transaction cannot commit: it goes, none of it resent
            self._abort_quietly()
            self._renew_after("records of the transaction were not delivered")
            raise TransactionAbortedError(
                f"records of the transaction were not delivered ({len(failed)}, e.g. to"
                f" {failed[0].topic}: {failed[0].error}); the transaction was aborted"
            )
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
                self.send(unsent.topic, unsent.key, unsent.value, unsent.partition)
            except BaseException:
                # this record and the rest were not sent again: keep them ahead of any failure
                # reported meanwhile, so the next flush resends them and no checkpoint covers them
                self._unsent[:0] = failed[i:]
                raise
        return f"{len(failed)} records failed ({failed[0].error}) and were resent"

    def _flush_quietly(self) -> bool:
        """One flush attempt (close must stay bounded while the broker is away); none for a
        producer whose transaction broke (nothing it holds is to be delivered)."""
        if self._broken is not None:
            return False
        try:
            problem = self._flush_once()
        except KafkaEdgeError as exc:
            problem = str(exc)
        if problem is not None:
            self._log.error("closing with unacknowledged records: %s", problem)
        return problem is None

    # -- transactions (the exactly-once mode) ----------------------------------------------

    def begin_transaction(self) -> None:
        """Open a transaction: what is sent until :meth:`commit_transaction` is visible to a
        ``read_committed`` reader only once committed, with the offsets committed in it.

        A producer fenced or failed in an earlier transaction is replaced first, under the same
        transactional id (its ``init_transactions`` aborts what the old one left open). Raises
        :class:`KafkaEdgeError` when the edge is not transactional, a transaction is open
        already, or no producer can be started.
        """
        self._require_transactional("begin_transaction")
        if self._in_transaction:
            raise KafkaEdgeError("begin_transaction: a transaction is open already")
        producer = self._require(self._producer)
        if self._broken is not None:
            producer = self._restart_producer()
        try:
            self._txn_begin(producer)
        except Exception as exc:
            if self._txn_kind(exc) is None:
                raise
            self._broken = self._describe(exc)
            raise KafkaEdgeError(f"begin_transaction failed: {self._broken}") from None
        self._in_transaction, self._doomed = True, None
        self._transactions += 1

    def commit_transaction(self, offsets: Mapping[Partition, int]) -> None:
        """Flush, add ``offsets`` (next offsets, last processed + 1) to the transaction with the
        consumer's group membership as of its latest assignment, and commit; returns once the
        broker has committed it, records and offsets together.

        Refused without asking the broker (the transaction is aborted, and
        :class:`TransactionFencedError` raised) inside a revocation of lost partitions, when a
        partition of ``offsets`` is not assigned to this member, or when partitions were revoked
        while the transaction was open (the worker commits or aborts it in ``on_revoked``). The
        group coordinator refuses the offsets once the partitions belong to a newer generation:
        :class:`TransactionFencedError` too. Any other failure aborts the transaction:
        :class:`TransactionAbortedError`. When the broker does not answer within the retries
        (each ``request_timeout_ms``), :class:`KafkaEdgeError`: the outcome is unknown until the
        next :meth:`begin_transaction` replaces the producer. May be called inside
        ``on_revoked``, before the partitions go.
        """
        self._require_transactional("commit_transaction")
        if not self._in_transaction:
            raise KafkaEdgeError("commit_transaction: no transaction is open")
        refused = self._refusal(offsets)
        if refused is not None:
            self._abort_quietly()
            raise TransactionFencedError(f"the transaction was aborted: {refused}")
        self.flush()
        producer = self._require(self._producer)
        try:
            if offsets:
                self._txn_send_offsets(producer, dict(offsets), self._membership_at_assignment)
            self._txn_end(producer, commit=True)
        except NoAnswer as exc:
            self._in_transaction, self._broken = False, str(exc)
            raise KafkaEdgeError(
                f"commit_transaction: {exc}; whether it committed is unknown until the producer"
                " is replaced (the next begin_transaction does it)"
            ) from None
        except Exception as exc:
            if self._txn_kind(exc) is None:
                raise
            raise self._failed_transaction("commit_transaction failed", exc) from None
        self._in_transaction = False

    def abort_transaction(self) -> None:
        """Abort the open transaction (none open: nothing to do); none of it is ever visible.

        Raises nothing of the client's: where the abort cannot be confirmed (a fenced producer,
        a broker that does not answer) the producer is replaced before the next transaction,
        and the transaction is aborted by that producer's ``init_transactions`` or by the
        broker's transaction timeout, never committed.
        """
        self._require_transactional("abort_transaction")
        if self._in_transaction:
            self._abort_quietly()

    def _abort_quietly(self) -> None:
        """Abort the open transaction; a failure is logged, and the producer replaced later."""
        self._in_transaction = False
        producer = self._producer
        if self._broken is not None or producer is None:
            return
        try:
            self._txn_end(producer, commit=False)
        except Exception as exc:
            if not isinstance(exc, NoAnswer) and self._txn_kind(exc) is None:
                raise
            self._broken = str(exc) if isinstance(exc, NoAnswer) else self._describe(exc)
            self._log.warning("could not abort the transaction (%s): the producer is replaced"
                              " before the next one", self._broken)
        else:
            # the aborted records' failed deliveries are theirs, not the next transaction's (a
            # backend drops the reports of records an abort discards, arriving later)
            self._unsent = []

    def _refusal(self, offsets: Mapping[Partition, int]) -> str | None:
        """Why the open transaction must not commit ``offsets``, seen from here; None if it may."""
        if self._doomed is not None:
            return self._doomed
        if self._callback_lost and self._in_callback():
            return "its partitions were lost (the group moved on without this member)"
        unassigned = sorted(set(offsets) - set(self.assignment()))
        if unassigned:
            return f"partitions {unassigned} are not assigned to this member"
        return None

    def _failed_transaction(self, what: str, exc: Exception) -> TransactionAbortedError:
        """The error to raise for the client's ``exc`` (its kind known), described as ``what``
        (what failed), the transaction aborted where the producer still can."""
        kind, text = self._txn_kind(exc), self._describe(exc)
        if kind == "producer":
            self._in_transaction, self._broken = False, text
            return TransactionFencedError(
                f"{what}: the producer was fenced ({text}): another producer took transactional id"
                f" {self.transactional_id!r} (a second worker of this group with the same client"
                f" id on this host?), or the transaction outlived {TRANSACTION_TIMEOUT_MS} ms;"
                " nothing of it is visible"
            )
        self._abort_quietly()
        if kind == "member":
            return TransactionFencedError(
                f"{what}: the group refused this member's offsets ({text}): its partitions belong"
                " to a newer generation; the transaction was aborted"
            )
        self._renew_after(f"{what} ({text})")
        return TransactionAbortedError(f"{what} ({text}); the transaction was aborted")

    def _renew_after(self, failure: str) -> None:
        """Have the next transaction start on a fresh producer after ``failure``: librdkafka
        (2.16) fails the transaction after one aborted for a refused record too ("skipped
        sequence numbers", until its producer epoch is bumped); a fresh producer's
        ``init_transactions`` bumps it at once."""
        if self._broken is None:
            self._broken = f"its transaction failed: {failure}"

    def _restart_producer(self) -> Any:
        """A fresh transactional producer in place of the broken one (closed, its records
        dropped); :class:`KafkaEdgeError` if none starts (the broken one is kept, to retry)."""
        failures: tuple[type[Exception], ...] = (*self._client_errors, KafkaEdgeError)
        try:
            producer = self._new_producer()
        except failures as exc:
            raise KafkaEdgeError(
                f"cannot restart the transactional producer: {self._describe(exc)}"
            ) from None
        old, self._producer = self._producer, producer
        self._log.warning("transactional producer %r restarted (the last one: %s)",
                          self.transactional_id, self._broken)
        self._broken = None
        if old is not None:
            self._close_producer(old, graceful=False)
        self._unsent = []  # the dead transaction's records, dropped with the old producer
        return producer

    def _require_transactional(self, what: str) -> None:
        if not self.transactional:
            raise KafkaEdgeError(f"{what}: this edge is not transactional (the exactly-once mode)")

    def _refuse_if_transactional(self, what: str) -> None:
        if self.transactional:
            raise KafkaEdgeError(f"{what}: a transactional edge commits offsets with commit_transaction")

    def _membership(self) -> Any:
        """The consumer's group membership now (generation and member id), for the offsets of a
        transaction (KIP-447); taken when partitions are assigned."""
        raise NotImplementedError

    def _txn_begin(self, producer: Any) -> None:
        """Begin a transaction on ``producer``."""
        raise NotImplementedError

    def _txn_send_offsets(self, producer: Any, offsets: dict[Partition, int], membership: Any) -> None:
        """Add ``offsets`` to the open transaction as ``membership``'s; waits at most the retries
        (else :class:`NoAnswer`)."""
        raise NotImplementedError

    def _txn_end(self, producer: Any, *, commit: bool) -> None:
        """Commit or abort the open transaction; waits at most the retries (else :class:`NoAnswer`)."""
        raise NotImplementedError

    def _answered(self, what: str, attempt: Callable[[], bool]) -> None:
        """Call ``attempt`` (one wait of at most ``request_timeout_ms``: True once answered, False
        when it timed out) until answered, at most ``retry.attempts`` times, with a heartbeat
        before each; then :class:`NoAnswer`."""
        for _ in range(self._retry.attempts):
            self.heartbeat()
            if attempt():
                return
        raise NoAnswer(f"{what}: no answer in {self._retry.attempts} waits of {self._timeout_ms} ms")

    def _txn_kind(self, exc: Exception) -> str | None:
        """What the client's error ``exc`` means for a transaction: ``"producer"`` (the producer
        was fenced), ``"member"`` (the group refused this member's offsets), ``"abortable"``
        (anything else of the client's); None when it is not the client's."""
        raise NotImplementedError

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
        open_before = self._transactions if self._in_transaction else None
        if name == "on_assigned" and self.transactional:
            self._membership_at_assignment = self._membership()
        try:
            self._callbacks[name](keys)
        except Exception as exc:
            if not self._closing:
                return exc
            self._log.exception("%s failed while closing", name)
        finally:
            self._callback_thread = None
            self._callback_lost = False
            if name == "on_revoked" and keys and self._in_transaction and self._transactions == open_before:
                # open across a revocation: its offsets may be another member's by now
                self._doomed = f"partitions {keys} were revoked while it was open"
        return None

    # -- helpers ---------------------------------------------------------------------------

    def _retrying(self, what: str, operation: Callable[[], _T], *, sending: bool = False) -> _T:
        """Run ``operation``, retrying the client's transient errors with bounded backoff. A
        send (``sending``) that fails for good inside a transaction aborts it (the producer
        refuses sends once its transaction has failed): :class:`TransactionAbortedError`."""
        delays = iter(self._retry.delays())
        while True:
            self.heartbeat()
            try:
                return operation()
            except Exception as exc:
                retriable = self._retriable(exc)
                if retriable is None:
                    raise
                if sending and not retriable and self._in_transaction:
                    raise self._failed_transaction(f"{what} failed", exc) from None
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
    "TRANSACTION_TIMEOUT_MS",
    "Batch",
    "Edge",
    "EdgeBase",
    "InRecord",
    "NoAnswer",
    "Partition",
    "PartitionsCallback",
    "Retry",
    "Unsent",
]
