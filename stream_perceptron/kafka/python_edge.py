"""The Kafka edge on kafka-python: one consumer in a group, one producer, raw bytes in and out.

This module knows no model: it moves :class:`~stream_perceptron.kafka.edge.Batch` values in and
``bytes`` out, commits the offsets it is given and reports partition assignment changes to two
callbacks. The contract and the scaffolding it shares with the confluent-kafka edge are in
:mod:`stream_perceptron.kafka.edge`; the kafka-python client settings and the topic checks the
worker makes at start are in :mod:`stream_perceptron.kafka.admin`.

Threading (kafka-python 3.x): the client runs its network I/O on a background thread and
calls rebalance listeners *on that thread* while :meth:`KafkaEdge.poll` (or
:meth:`KafkaEdge.close`) waits for it. Blocking consumer calls are not allowed there, so
inside ``on_assigned`` / ``on_revoked`` this edge behaves as follows:

* :meth:`~KafkaEdge.seek`, :meth:`~KafkaEdge.assignment`, :meth:`~KafkaEdge.highwater`,
  :meth:`~KafkaEdge.send` and :meth:`~KafkaEdge.flush` work as usual;
* :meth:`~KafkaEdge.commit` is recorded and performed as soon as the callback returns,
  before the rebalance goes on (so offsets committed in ``on_revoked`` are in place
  before another member gets the partitions);
* :meth:`~KafkaEdge.committed` works in ``on_assigned`` for the partitions being assigned
  (their committed offsets are fetched just before the callback);
* :meth:`~KafkaEdge.poll` and :meth:`~KafkaEdge.close` raise :class:`KafkaEdgeError`.

An exception raised by a callback propagates out of the :meth:`~KafkaEdge.poll` that ran it.

The exactly-once mode (``transactional=True``; :mod:`stream_perceptron.kafka.edge` says what raises
when) uses kafka-python's transactional producer (3.0: ``init_transactions``,
``send_offsets_to_transaction`` with the consumer's :class:`~kafka.structs.ConsumerGroupMetadata`,
KIP-447) in this process; its waits are bounded here (kafka-python's own ``commit_transaction``
and ``send_offsets_to_transaction`` wait without a bound). The membership sent with the offsets
is the one taken at the latest assignment, not the consumer's current one: a kafka-python member
whose poll interval ran out leaves the group and forgets its generation, and offsets sent with
no generation (-1) and no member id are accepted by the group coordinator whoever holds the
partitions (measured on Apache Kafka 4.1.1; see ``tests/integration/kafka/test_transactions.py``).
Records are appended as in the other mode (:mod:`~stream_perceptron.kafka.fastpath.append` adds
each partition to the transaction first, as ``send`` does); fetched batches are read by
kafka-python's own code (the fetch fast path reads ``read_uncommitted`` only).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
from kafka.errors import (
    CommitFailedError,
    FencedInstanceIdError,
    IllegalGenerationError,
    IllegalStateError,
    InvalidProducerEpochError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kafka.errors import TransactionAbortedError as ClientTransactionAborted
from kafka.structs import MemberState, OffsetAndMetadata, TopicPartition

from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka.admin import client_config, consumer_config, consumer_fetch_config, explained
from stream_perceptron.kafka.config import check_reachable, describe, servers_text
from stream_perceptron.kafka.edge import (
    PRODUCER_MAX_BLOCK_MS,
    TRANSACTION_TIMEOUT_MS,
    Batch,
    EdgeBase,
    Partition,
    Unsent,
)
from stream_perceptron.kafka.fastpath import described
from stream_perceptron.kafka.fastpath import fetch as kafka_fetch
from stream_perceptron.kafka.fastpath import wake as kafka_wake
from stream_perceptron.kafka.fastpath.append import append_many
from stream_perceptron.kafka.fastpath.append import refusal as append_refusal
from stream_perceptron.logs import report_suppressed

log = logging.getLogger(__name__)

LISTED_END_EVERY_S = 1.0
"""How often, at most, the edge asks the broker for the end offsets of assigned partitions whose
fetches have given no high-water mark (:meth:`KafkaEdge._listed_end`)."""
LISTED_END_TIMEOUT_MS = 1_000
"""How long the loop waits for that answer, at most (a broker that does not answer: no mark)."""

# Membership changed under us: the partitions are (being) reassigned, a retry cannot
# succeed and the next poll rejoins the group.
_MEMBERSHIP_ERRORS = (
    CommitFailedError,
    RebalanceInProgressError,
    IllegalGenerationError,
    UnknownMemberIdError,
)

# A transaction's offsets refused by the group coordinator: the member lost its partitions.
_FENCED_MEMBER = (*_MEMBERSHIP_ERRORS, FencedInstanceIdError)
# The transactional producer was fenced: another took its id, or its epoch was bumped.
_FENCED_PRODUCER = (ProducerFencedError, InvalidProducerEpochError)


class _Listener(AsyncConsumerRebalanceListener):  # type: ignore[misc]
    """Bridges kafka-python's (async, I/O-thread) listener to the edge's callbacks."""

    def __init__(self, edge: KafkaEdge) -> None:
        self._edge = edge

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self._edge._run_callback("on_revoked", revoked, lost=False)

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        await self._edge._run_callback("on_assigned", assigned, lost=False)

    async def on_partitions_lost(self, lost: Iterable[TopicPartition]) -> None:
        await self._edge._run_callback("on_revoked", lost, lost=True)


class KafkaEdge(EdgeBase):
    """One group consumer of ``input_topic`` plus one producer, both raw bytes.

    ``on_assigned`` / ``on_revoked`` receive sorted ``(topic, partition)`` lists; see the
    module docstring for what they may call. Offsets are committed only by :meth:`commit`.
    """

    _log = log
    _client_errors = (KafkaError,)

    def _init_client_state(self) -> None:
        self._appends = False  # whether fastpath.append.append_many takes the producer's records
        # Each fast path's refusal (None: installed), for the start line (fastpath/README.md).
        self._fast_paths: dict[str, str | None] = {}
        self._callback_committed: dict[Partition, int | None] = {}
        self._callback_fetch_error: str | None = None  # why _callback_committed is empty
        self._deferred_commit: dict[TopicPartition, OffsetAndMetadata] = {}
        self._listed: dict[TopicPartition, int]  # end offsets listed (_listed_end), and when
        self._listed_at: float
        self._forget_listed()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Connect: join the group (on the next polls) and start the producer.

        A refused login or TLS handshake raises :class:`KafkaAuthError`; anything else that
        keeps the cluster out of reach raises :class:`KafkaEdgeError`.
        """
        with explained(self._kafka):
            self._start()

    def _start(self) -> None:
        if self._consumer is not None:
            return
        check_reachable(self._kafka, self._timeout_ms / 1000)
        consumer: Any = None
        try:
            consumer = KafkaConsumer(
                **self._with_timeout(consumer_config(self._kafka)),
                group_id=self._kafka.group_id,
                enable_auto_commit=False,
                isolation_level="read_committed" if self.transactional else "read_uncommitted",
                auto_offset_reset="earliest",
                session_timeout_ms=self._kafka.session_timeout_ms,
                heartbeat_interval_ms=self._kafka.heartbeat_interval_ms,
                **consumer_fetch_config(self._kafka),
                allow_auto_create_topics=False,  # a missing input topic is an error, not a default
            )
            self._install_fast_paths(consumer)
            consumer.subscribe([self._input_topic], listener=_Listener(self))
            producer = self._new_producer()
        except (KafkaError, KafkaEdgeError) as exc:
            if consumer is not None:
                consumer.close(autocommit=False)
            if isinstance(exc, KafkaEdgeError):
                raise
            raise KafkaEdgeError(
                f"cannot connect to Kafka at {servers_text(self._kafka)}: {describe(exc)}"
            ) from None
        self._consumer, self._producer = consumer, producer
        log.info(
            "kafka edge started: group %s, input topic %s, brokers %s; %s",
            self._kafka.group_id,
            self._input_topic,
            servers_text(self._kafka),
            described(self._fast_paths),
        )

    def _install_fast_paths(self, consumer: Any) -> None:
        """Each fetched batch decoded in one loop; a response landing mid-poll read, not slept on:
        where they fit this kafka-python, else its own path, and why (for the start line)."""
        for name, module in (("fetch", kafka_fetch), ("wake", kafka_wake)):
            installed = module.install(consumer)
            self._fast_paths[name] = None if installed else module.refusal(consumer) or "refused"

    def _with_timeout(self, config: dict[str, Any]) -> dict[str, Any]:
        return {**config, "bootstrap_timeout_ms": self._timeout_ms}

    def _new_producer(self) -> Any:
        """The producer (transactional, its transactions initialised, in the exactly-once mode);
        whether :func:`append_many` takes its records is checked here, once."""
        transactions: dict[str, Any] = {}
        if self.transactional:
            transactions = {"transactional_id": self.transactional_id,
                            "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS}
        producer = KafkaProducer(
            **self._with_timeout(client_config(self._kafka)),
            acks="all",
            linger_ms=self._kafka.linger_ms,
            batch_size=self._kafka.batch_size,
            max_block_ms=PRODUCER_MAX_BLOCK_MS,
            # the worker creates its output topics at start; one deleted since is an error, not
            # a topic silently recreated with the broker's defaults
            allow_auto_create_topics=False,
            **transactions,
        )
        if self.transactional:
            try:  # waits max_block_ms an attempt; a retry waits on for the same answer
                self._retrying("initialising transactions", producer.init_transactions)
            except BaseException:
                producer.close(timeout=0)
                raise
        refusal = append_refusal(producer)
        self._appends, self._fast_paths["append"] = refusal is None, refusal
        return producer

    def log_suppressed(self) -> None:
        """kafka-python's lines still held back: its loggers' lines are held by the filter on
        the CLI's log handler (:class:`stream_perceptron.logs.RepeatedClientLines`)."""
        report_suppressed()

    def _close_consumer(self, consumer: Any) -> None:
        try:
            consumer.close(autocommit=False, timeout_ms=self._timeout_ms)
        except KafkaError as exc:
            log.warning("closing the Kafka consumer: %s", describe(exc))

    def _close_producer(self, producer: Any, *, graceful: bool = True) -> None:
        """Close ``producer``; unless ``graceful``, drop its unacknowledged records first."""
        timeout_s = self._timeout_ms / 1000
        if graceful:
            try:
                producer.close(timeout=timeout_s)
                return
            except KafkaError:
                pass
        # kafka-python's close() flushes first and gives up on a timeout, leaving the
        # producer running: abort its pending batches, then close.
        log.warning("dropping unacknowledged records to close the producer")
        producer._sender.force_close()
        producer.close(timeout=timeout_s)

    # -- consuming -------------------------------------------------------------------------

    def poll(self, timeout_ms: int, max_records: int) -> list[Batch]:
        """Records fetched within ``timeout_ms``: one :class:`Batch` per partition.

        Partitions are sorted by ``(topic, partition)``. Returns ``[]`` while the broker is
        unreachable (the client reconnects by itself). Rebalance callbacks run inside this
        call, which waits for a group join in progress for up to ``session_timeout_ms``.
        """
        self._refuse_in_callback("poll")
        consumer = self._require(self._consumer)
        try:
            batches = self._poll_through_joins(consumer, timeout_ms, max_records)
        except KafkaError as exc:
            self._raise_callback_error()
            if exc.retriable:
                log.warning("poll failed, will retry: %s", describe(exc))
                return []
            raise KafkaEdgeError(f"poll failed: {describe(exc)}") from None
        return [
            Batch(
                tp.topic, tp.partition, [r.offset for r in recs], [r.key for r in recs],
                [r.value for r in recs], [r.timestamp for r in recs],
            )
            for tp, recs in sorted(batches.items())
            if recs
        ]

    def _poll_through_joins(self, consumer: Any, timeout_ms: int, max_records: int) -> Any:
        """``consumer.poll``, repeated while a group join is in flight (bounded).

        kafka-python 3.0.12 drops a JoinGroup/SyncGroup result that arrives while no
        ``poll`` is waiting for it and starts a new join, i.e. another rebalance round.
        Polling on until the member is stable keeps a waiter there.
        """
        join_deadline = time.monotonic() + self._kafka.session_timeout_ms / 1000
        while True:
            batches = consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
            if batches or time.monotonic() >= join_deadline:
                return batches
            if consumer.group_metadata().state != MemberState.REBALANCING:
                return batches
            timeout_ms = max(timeout_ms, 100)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Fetch ``topic``/``partition`` from ``offset`` next (it must be assigned)."""
        consumer = self._require(self._consumer)
        try:
            consumer.seek(TopicPartition(topic, partition), offset)
        except ValueError as exc:
            raise KafkaEdgeError(f"cannot seek {topic}/{partition} to {offset}: {exc}") from None

    def pause(self, topic: str, partition: int) -> None:
        """Return no record of ``topic``/``partition`` until :meth:`resume` (it must be assigned):
        the fetcher drops what it holds of it and fetches none. An assignment resumes it."""
        consumer = self._require(self._consumer)
        try:
            consumer.pause(TopicPartition(topic, partition))
        except KeyError:
            raise KafkaEdgeError(f"cannot pause {topic}/{partition}: partition not assigned") from None

    def resume(self, topic: str, partition: int, offset: int) -> None:
        """Fetch ``topic``/``partition`` again, from ``offset``.

        kafka-python (3.0) parks what it had fetched of a paused partition and hands it back
        after the resume, one parked partition per poll; after the seek that data is obsolete,
        and a partition whose parked data is never handed back is never fetched again (seen
        with eight partitions paused and resumed in turn). So the parked data goes here."""
        consumer = self._require(self._consumer)
        tp = TopicPartition(topic, partition)
        try:
            consumer.seek(tp, offset)
            consumer.resume(tp)
        except (KeyError, ValueError) as exc:
            raise KafkaEdgeError(f"cannot resume {topic}/{partition} at {offset}: {exc}") from None
        fetcher = getattr(consumer, "_fetcher", None)
        for parked in ("_paused_partition_records", "_paused_completed_fetches"):
            held = getattr(fetcher, parked, None)
            if isinstance(held, dict):
                held.pop(tp, None)

    def assignment(self) -> list[Partition]:
        """The partitions assigned to this member, sorted."""
        consumer = self._require(self._consumer)
        return sorted((tp.topic, tp.partition) for tp in consumer.assignment())

    def highwater(self, topic: str, partition: int) -> int | None:
        """The partition's end offset as of the last fetch; where the fetches have given none for
        an assigned partition, the end offset the broker lists (:meth:`_listed_end`); None if
        unassigned, or while neither is known."""
        consumer = self._require(self._consumer)
        tp = TopicPartition(topic, partition)
        try:
            value: int | None = consumer.highwater(tp)
        except IllegalStateError:
            return None
        if value is None and not self._in_callback():
            value = self._listed_end(consumer, tp)
        return value

    def _listed_end(self, consumer: Any, tp: TopicPartition) -> int | None:
        """``tp``'s end offset as the broker lists it (ListOffsets), asked for every assigned
        partition without a high-water mark at once, at most every :data:`LISTED_END_EVERY_S`.

        kafka-python (3.0.12) keeps a partition's high-water mark on its assignment's state and
        sets it only from a fetch response it parses for that state. A partition lost and
        assigned again whose records it had fetched before the loss (a rebalance callback that
        outlasted the session) is served from those records, parsed for the old state, and at
        the end of the log the broker's incremental fetch session leaves the unchanged partition
        out of its answers: its mark stays unknown, so its lag could never be told and a
        ``--until-caught-up`` worker never saw itself caught up."""
        now = time.monotonic()
        if now - self._listed_at >= LISTED_END_EVERY_S:
            self._listed_at = now
            missing = [p for p in consumer.assignment() if consumer.highwater(p) is None]
            try:
                self._listed = {} if not missing else consumer.end_offsets(
                    missing, timeout_ms=LISTED_END_TIMEOUT_MS)
            except KafkaError as exc:
                log.debug("end offsets of %s not listed: %s", missing, describe(exc))
                self._listed = {}
        listed: int | None = self._listed.get(tp)
        return listed

    def _forget_listed(self) -> None:
        """Drop the listed end offsets, so that the next ``_listed_end`` lists them again."""
        self._listed, self._listed_at = {}, float("-inf")

    def committed(self, topic: str, partition: int) -> int | None:
        """The group's committed offset for the partition, or None if there is none."""
        consumer = self._require(self._consumer)
        key = (topic, partition)
        if self._in_callback():
            if key not in self._callback_committed:
                if self._callback_fetch_error is not None:
                    raise KafkaEdgeError(
                        f"the committed offset of {topic}/{partition} could not be fetched for its"
                        f" assignment: {self._callback_fetch_error}"
                    )
                raise KafkaEdgeError(
                    f"committed({topic}, {partition}) inside a rebalance callback is only "
                    "available in on_assigned, for the partitions being assigned"
                )
            return self._callback_committed[key]
        tp = TopicPartition(topic, partition)
        value: int | None = self._retrying(
            f"fetching the committed offset of {topic}/{partition}",
            lambda: consumer.committed(tp, timeout_ms=self._timeout_ms),
        )
        return value

    def commit(self, offsets: Mapping[Partition, int]) -> None:
        """Commit next-offsets (last processed + 1) for the partitions currently assigned.

        Partitions not assigned are skipped. Transient failures are retried with backoff,
        then :class:`KafkaEdgeError` is raised. If the group has rebalanced meanwhile (the
        commit is refused for the old generation) a warning is logged instead: the
        partitions are being reassigned and the next poll rejoins. A transactional edge
        raises :class:`KafkaEdgeError`: its offsets go with :meth:`commit_transaction`.
        """
        self._refuse_if_transactional("commit")
        consumer = self._require(self._consumer)
        request = {
            TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)
            for (topic, partition), offset in self._assigned_offsets(offsets).items()
        }
        if not request:
            return
        if self._in_callback():
            self._deferred_commit.update(request)
            return

        def attempt() -> None:
            try:
                consumer.commit(offsets=request, timeout_ms=self._timeout_ms)
            except _MEMBERSHIP_ERRORS as exc:
                log.warning("commit refused after a group rebalance: %s", describe(exc))

        self._retrying("committing offsets", attempt)

    # -- producing -------------------------------------------------------------------------

    def send_many(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None:
        """:meth:`send` each ``(key, value)`` pair, in order.

        To a topic of one partition records are sent to partition 0 explicitly: where the
        partition is known, kafka-python skips hashing the key (murmur2, in Python). The records
        are appended to the producer's batches in one call (:mod:`~stream_perceptron.kafka.fastpath.append`)
        where that is exactly what ``KafkaProducer.send`` would do, else sent one by one.
        """
        self._check_sending()
        producer = self._require(self._producer)
        partition = self._only_partition(producer, topic)
        send, unsent = producer.send, self._record_unsent
        if self._appends:
            futures = append_many(producer, topic, partition, keys, values, errback=unsent)
            if futures is not None:
                if None not in futures:
                    return
                rest = [(k, v) for f, k, v in zip(futures, keys, values, strict=True) if f is None]
                keys, values = [k for k, _ in rest], [v for _, v in rest]
        for key, value in zip(keys, values, strict=True):
            try:
                future = send(topic, value=value, key=key, partition=partition)
            except KafkaError:
                future = self._send_retrying(producer, topic, key, value)
            future.add_errback(unsent, topic, key, value)

    def _send_retrying(self, producer: Any, topic: str, key: bytes | None, value: bytes,
                       partition: int | None = None) -> Any:
        return self._retrying(
            f"sending to {topic}", lambda: producer.send(topic, value=value, key=key, partition=partition),
            sending=True,
        )

    def _send_to(self, topic: str, key: bytes | None, value: bytes, partition: int) -> None:
        producer = self._require(self._producer)
        try:
            future = producer.send(topic, value=value, key=key, partition=partition)
        except KafkaError:
            future = self._send_retrying(producer, topic, key, value, partition)
        future.add_errback(self._record_unsent_to, partition, topic, key, value)

    @staticmethod
    def _only_partition(producer: Any, topic: str) -> int | None:
        """0 if ``topic`` is known to have exactly one partition, else None (the partitioner's
        choice). Never blocks: an unknown topic is left to ``send``."""
        try:
            partitions = producer._metadata.partitions_for_topic(topic)
        except Exception:  # kafka-python internals; the partitioner is always right
            return None
        return 0 if partitions == {0} else None

    def _record_unsent(self, topic: str, key: bytes | None, value: bytes, exc: Any) -> None:
        if isinstance(exc, ClientTransactionAborted):
            return  # dropped by an abort: its transaction has ended, it is no failure of the next
        retriable = bool(getattr(exc, "retriable", False))
        self._unsent.append(Unsent(topic, key, value, retriable, describe(exc)))

    def _record_unsent_to(
        self, partition: int, topic: str, key: bytes | None, value: bytes, exc: Any
    ) -> None:
        """:meth:`_record_unsent` for a record sent to ``partition`` explicitly."""
        if isinstance(exc, ClientTransactionAborted):
            return
        retriable = bool(getattr(exc, "retriable", False))
        self._unsent.append(Unsent(topic, key, value, retriable, describe(exc), partition=partition))

    def _flush_once(self) -> str | None:
        """One flush round; a description of what is still unacknowledged, or None."""
        producer = self._require(self._producer)
        try:
            producer.flush(timeout=self._timeout_ms / 1000)
        except KafkaTimeoutError:
            return f"records not acknowledged within {self._timeout_ms} ms"
        except KafkaError as exc:
            # a batch failed in a transaction: kafka-python 3.0.12's flush may raise
            # UnknownError("Future not done") before the records' errbacks have run
            if not self._in_transaction:
                raise
            self._settle_unsent()  # raises, naming the failed delivery, when one is known
            kept = producer._transaction_manager.last_error  # what failed the transaction
            raise self._failed_transaction(
                "records of the transaction were not delivered", kept if kept is not None else exc
            ) from None
        return self._settle_unsent()

    # -- transactions ------------------------------------------------------------------------

    def _membership(self) -> Any:
        return self._require(self._consumer).group_metadata()

    def _txn_begin(self, producer: Any) -> None:
        producer.begin_transaction()

    def _txn_send_offsets(self, producer: Any, offsets: dict[Partition, int], membership: Any) -> None:
        request = {
            TopicPartition(t, p): OffsetAndMetadata(offset, "", -1) for (t, p), offset in offsets.items()
        }
        # KafkaProducer.send_offsets_to_transaction, with a bounded wait
        result = producer._transaction_manager.send_offsets_to_transaction(request, membership)
        producer._sender.wakeup()
        self._answered("sending the offsets to the transaction",
                       lambda: bool(result.wait(timeout_ms=self._timeout_ms)))

    def _txn_end(self, producer: Any, *, commit: bool) -> None:
        # KafkaProducer.commit_transaction / abort_transaction, with a bounded wait
        manager = producer._transaction_manager
        result = manager.begin_commit() if commit else manager.begin_abort()
        producer._sender.wakeup()
        self._answered("committing the transaction" if commit else "aborting the transaction",
                       lambda: bool(result.wait(timeout_ms=self._timeout_ms)))

    def _txn_kind(self, exc: Exception) -> str | None:
        if not isinstance(exc, KafkaError):
            return None
        # a call made in an error state raises a plain KafkaError naming the error it keeps
        manager = getattr(self._producer, "_transaction_manager", None)
        kept = manager.last_error if manager is not None and type(exc) is KafkaError else None
        for error in (exc, kept):
            if isinstance(error, _FENCED_PRODUCER):
                return "producer"
            if isinstance(error, _FENCED_MEMBER):
                return "member"
        return "abortable"

    # -- helpers ---------------------------------------------------------------------------

    def _retriable(self, exc: Exception) -> bool | None:
        return bool(exc.retriable) if isinstance(exc, KafkaError) else None

    _describe = staticmethod(describe)

    def _raise_callback_error(self) -> None:
        error, self._callback_error = self._callback_error, None
        if error is not None:
            raise error

    async def _run_callback(
        self, name: str, partitions: Iterable[TopicPartition], *, lost: bool
    ) -> None:
        """Run a user callback on the I/O thread; then perform the commits it asked for."""
        tps = sorted(partitions)
        keys = [(tp.topic, tp.partition) for tp in tps]
        if not keys and name == "on_revoked":
            return  # kafka-python announces an empty revocation before every join
        self._announce(name, keys, lost=lost)
        if name == "on_assigned":
            # kafka-python keeps the state, its pause included, of a partition assigned again
            paused = [tp for tp in tps if tp in self._consumer.paused()]
            if paused:
                self._consumer.resume(*paused)
            # an end offset listed for an earlier assignment may be behind this one's
            self._forget_listed()
            self._callback_committed = await self._fetch_committed(tps)
        try:
            error = self._call_back(name, keys, lost=lost)
        finally:
            self._callback_committed = {}
            self._callback_fetch_error = None
            deferred, self._deferred_commit = self._deferred_commit, {}
        if error is not None:  # kafka-python raises it from the poll that ran the callback
            self._callback_error = error
            raise error
        if deferred and lost:
            log.warning("not committing offsets of lost partitions %s", keys)
        elif deferred:
            await self._commit_now(deferred)

    async def _fetch_committed(self, tps: list[TopicPartition]) -> dict[Partition, int | None]:
        """Committed offsets of ``tps`` for :meth:`committed` inside a callback (best effort)."""
        if not tps:
            return {}
        try:
            coordinator = self._consumer._coordinator
            found = await coordinator.fetch_committed_offsets_async(
                tps, timeout_ms=self._timeout_ms
            )
        except Exception as exc:  # kafka-python internals; the callback may not need it
            self._callback_fetch_error = describe(exc)
            log.warning("could not fetch committed offsets for the callback: %s", describe(exc))
            return {}
        return {(tp.topic, tp.partition): _offset(found.get(tp)) for tp in tps}

    async def _commit_now(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit from the I/O thread (inside a callback); failures are logged.

        ``commit_async`` returns a kafka-python Future, which the I/O loop can await.
        """
        try:
            await self._consumer.commit_async(offsets=offsets)
        except KafkaError as exc:
            log.warning("commit from a rebalance callback failed: %s", describe(exc))


def _offset(found: Any) -> int | None:
    if found is None or found.offset is None or found.offset < 0:
        return None
    offset: int = found.offset
    return offset


__all__ = ["KafkaEdge"]
