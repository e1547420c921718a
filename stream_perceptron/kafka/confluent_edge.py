"""The Kafka edge on confluent-kafka (librdkafka): the contract of :mod:`.edge`, as the kafka-python edge.

:class:`ConfluentEdge` is a drop-in for :class:`stream_perceptron.kafka.python_edge.KafkaEdge`
(``SP_KAFKA__BACKEND=confluent-kafka``): one consumer in a group (eager ``range``
assignment: every rebalance revokes all partitions, then assigns the new set), one
producer (``acks=all``), raw bytes in and out, offsets committed only by :meth:`commit`
(``enable.auto.commit`` and ``enable.auto.offset.store`` are off).

Threading: librdkafka runs its network I/O on its own threads but calls the rebalance
callbacks *on the caller's thread*, inside :meth:`ConfluentEdge.poll` (or
:meth:`ConfluentEdge.close`). Inside ``on_assigned`` / ``on_revoked``:

* :meth:`~ConfluentEdge.seek` in ``on_assigned`` is recorded and applied by the
  assignment made when the callback returns (the partitions start fetching at that
  offset; no record before it is delivered); in ``on_revoked`` it is a plain seek;
* :meth:`~ConfluentEdge.assignment` returns, in ``on_assigned``, the partitions being
  assigned; in ``on_revoked``, those still assigned (all of them, the revocation is eager);
* :meth:`~ConfluentEdge.committed` works for any partition (for the partitions being
  assigned, one request fetches them all on the first call);
* :meth:`~ConfluentEdge.commit` is performed at once, synchronously (librdkafka allows it
  there), so offsets committed in ``on_revoked`` are in place before another member gets
  the partitions; in a revocation caused by lost membership (session timeout) nothing is
  committed (a warning is logged);
* :meth:`~ConfluentEdge.send`, :meth:`~ConfluentEdge.flush` and
  :meth:`~ConfluentEdge.highwater` work as usual;
* :meth:`~ConfluentEdge.poll` and :meth:`~ConfluentEdge.close` raise :class:`KafkaEdgeError`.

An exception raised by a callback propagates out of the :meth:`~ConfluentEdge.poll` that
ran it; the partitions are assigned (or revoked) all the same, and records fetched by that
same poll are not returned but rewound, so none is skipped.

Differences from the kafka-python edge (same contract otherwise):

* :meth:`~ConfluentEdge.poll` waits at most ``timeout_ms``, also while a group join is in
  flight (librdkafka joins in the background); kafka-python's may wait up to
  ``session_timeout_ms``.
* :meth:`~ConfluentEdge.commit` outside a rebalance callback returns at once: librdkafka
  sends it, and its result comes back on a later poll (a failure is a warning) or in
  :meth:`~ConfluentEdge.close`, which waits for it. librdkafka's synchronous commit has no
  timeout: it would hold the worker's loop for as long as the coordinator is frozen (row 3d
  of ``docs/reliability.md``). kafka-python's commit waits, ``request_timeout_ms`` an
  attempt.
* :meth:`~ConfluentEdge.close` leaves librdkafka's close behind once no callback has run in it
  for 2 × ``request_timeout_ms``: with a commit in flight and the broker frozen it would wait
  until the broker is back (row 3f of ``docs/reliability.md``). kafka-python's close has no
  commit in flight to wait for.
* :meth:`~ConfluentEdge.send` blocks only while librdkafka's local queue is full (at most
  :data:`~.edge.PRODUCER_MAX_BLOCK_MS` per attempt), never for metadata: a record
  for a topic that does not exist fails at delivery and :meth:`~ConfluentEdge.flush`
  re-sends it (transient), as kafka-python's retried send would.
* :meth:`~ConfluentEdge.highwater` is librdkafka's cached high-water mark from the last
  fetch response (``get_watermark_offsets(cached=True)``), which is correct on tansu
  (ListOffsets(latest) is not). librdkafka keeps that value across a revoke and re-assign
  of the same partition, so after an assignment it is reported only once a record of the
  partition has been returned, or 1.5 s later (a fetch has answered by then); until then
  None, as kafka-python's is until its next fetch.
* confluent-kafka (2.16) serializes the calls on one consumer: a call from another thread
  waits until a :meth:`~ConfluentEdge.poll` in progress returns (and may starve while one
  thread polls back to back). :meth:`~ConfluentEdge.assignment` and
  :meth:`~ConfluentEdge.highwater` answer from the edge's own records (what it assigned;
  the marks read at the end of each poll) and never wait.
* The callbacks run on the polling thread (kafka-python: its I/O thread), so
  :meth:`~ConfluentEdge.committed` is not limited to the partitions being assigned and
  commits made in a callback are not deferred.
* ``isolation.level`` is ``read_uncommitted``, like kafka-python (librdkafka's default is
  ``read_committed``). Idempotent producing stays off, like kafka-python: tansu accepts it,
  but a memory-only broker that restarts forgets producer ids and sequences. In the
  exactly-once mode (``transactional=True``; :mod:`.edge` says what raises when) the consumer
  reads ``read_committed`` and the producer is transactional (so idempotent), with librdkafka's
  ``init_transactions``, ``send_offsets_to_transaction`` (with the consumer's group metadata
  taken at the latest assignment, KIP-447) and ``commit_transaction``, each call bounded by
  ``request_timeout_ms`` and retried while librdkafka says it may be.

librdkafka's log lines and client errors go to this module's logger, throttled (one per
kind a minute, with a count of the suppressed ones); configurations are never logged.
"""

from __future__ import annotations

import itertools
import logging
import operator
import threading
import time
import warnings
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from stream_perceptron.errors import KafkaEdgeError, UndeliveredError
from stream_perceptron.kafka.config import check_reachable, path_text, reveal, servers, servers_text
from stream_perceptron.kafka.edge import (
    PRODUCER_MAX_BLOCK_MS,
    TRANSACTION_TIMEOUT_MS,
    Batch,
    EdgeBase,
    Partition,
    Unsent,
)
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.throttle import Throttle, kind, suppressed

log = logging.getLogger(__name__)

# librdkafka wants socket.timeout.ms >= fetch.wait.max.ms + 1000 (else it warns).
_SOCKET_OVER_FETCH_WAIT_MS = 1_000

# librdkafka keeps a partition's cached high-water mark across a revoke and re-assign: after
# an assignment it is trusted once a record of the partition came, or after fetch.wait.max.ms
# plus this long (a fetch answers within fetch.wait.max.ms when the broker is reachable).
_HIGHWATER_SETTLE_EXTRA_S = 1.0

# The consumer's prefetch. librdkafka's defaults fetch ahead until a partition's queue holds
# 100,000 messages (queued.min.messages) or 64 MB, then wait fetch.queue.backoff.ms = 1 s before
# fetching again: measured on 1M records, about 40 MB of resident memory that came and went, and
# a long run paced at about 100k records/s by the one-second waits. Ten polls' worth of records
# (at most 32 MB), refilled 10 ms after the queue falls below that, keeps the next polls' records
# at hand without either.
_PREFETCH_POLLS = 10
_PREFETCH_MAX_KBYTES = 32_768
_PREFETCH_BACKOFF_MS = 10

# Serve the producer's events (failed deliveries, errors, logs) every this many sends.
_PRODUCER_POLL_EVERY = 1_000

# How often close() looks at the consumer's close running on its own thread.
_CLOSE_WAIT_STEP_S = 0.05

# Errors a retry may cure (librdkafka flags few of them ``retriable()``).
_TRANSIENT = frozenset(
    {
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TIMED_OUT_QUEUE,
        KafkaError._TRANSPORT,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._WAIT_COORD,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.NOT_COORDINATOR,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
)

# Membership changed under us: the partitions are (being) reassigned, a retry cannot
# succeed and the next poll rejoins the group.
_MEMBERSHIP = frozenset(
    {
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.FENCED_INSTANCE_ID,
        KafkaError._ASSIGNMENT_LOST,
    }
)

# A transaction's offsets refused by the group coordinator: the member lost its partitions.
_FENCED_MEMBER = _MEMBERSHIP | {KafkaError.FENCED_INSTANCE_ID}
# The transactional producer was fenced: another took its id, or its epoch was bumped.
_FENCED_PRODUCER = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)

# Delivery reports of records dropped by purge() (when a producer is closed).
_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})

# Consumed-message errors that no waiting cures: poll raises them.
_CONSUME_FATAL = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
    }
)


def confluent_config(kafka: KafkaSettings) -> dict[str, Any]:
    """librdkafka properties common to the consumer and the producer, unset options omitted.

    Secrets (SASL and SSL key passwords) are revealed here and nowhere else: never log
    the returned dict.

    >>> cfg = confluent_config(KafkaSettings(bootstrap_servers="a:9092, b:9092", ssl_check_hostname=False))
    >>> cfg["bootstrap.servers"], cfg["security.protocol"], cfg["ssl.endpoint.identification.algorithm"]
    ('a:9092,b:9092', 'PLAINTEXT', 'none')
    >>> "sasl.password" in cfg
    False
    """
    config: dict[str, Any] = {
        "bootstrap.servers": ",".join(servers(kafka)),
        "client.id": kafka.client_id,
        "security.protocol": kafka.security_protocol,
        "socket.timeout.ms": kafka.request_timeout_ms,
    }
    optional: dict[str, Any] = {
        "sasl.mechanism": kafka.sasl_mechanism,
        "sasl.username": kafka.sasl_username,
        "sasl.password": reveal(kafka.sasl_password),
        "ssl.ca.location": path_text(kafka.ssl_cafile),
        "ssl.certificate.location": path_text(kafka.ssl_certfile),
        "ssl.key.location": path_text(kafka.ssl_keyfile),
        "ssl.key.password": reveal(kafka.ssl_password),
        # librdkafka verifies the broker's host name by default ("https")
        "ssl.endpoint.identification.algorithm": None if kafka.ssl_check_hostname else "none",
    }
    config.update({name: value for name, value in optional.items() if value is not None})
    return config


def drop_and_close(producer: Producer) -> None:
    """Drop every record ``producer`` still holds and close it, never waiting on the broker.

    The dropped records' delivery reports (``_PURGE_QUEUE``, ``_PURGE_INFLIGHT``) are served
    before the close, so a delivery callback sees each of them. ``close()`` runs even when the
    purge raises; the error then propagates. Without the purge, ``close()`` would wait up to
    ``message.timeout.ms`` for records queued to a broker that may be gone; left to the collector,
    the producer would go on reconnecting to it, logging each attempt.
    """
    try:
        if len(producer) > 0:  # records not yet acknowledged, and events not yet served
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            producer.flush(0)  # serve the purge reports
    finally:
        close = getattr(producer, "close", None)  # confluent-kafka >= 2.10
        if close is not None:
            close()


def _error_of(exc: BaseException) -> KafkaError | None:
    """The :class:`KafkaError` a :class:`KafkaException` carries, if any."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def _describe_error(err: KafkaError) -> str:
    """One line naming the error; librdkafka messages carry no secrets."""
    text = " ".join(str(err.str()).split())
    return f"{err.name()}: {text}" if text else str(err.name())


def _describe(exc: BaseException) -> str:
    err = _error_of(exc)
    if err is not None:
        return _describe_error(err)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _security_words(kafka: KafkaSettings, err: KafkaError) -> str:
    """What a TLS failure or a refused login involves, to put before librdkafka's words (whose
    own name for a certificate that does not name its broker is only "could not be verified").

    >>> kafka = KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u")
    >>> _security_words(kafka, KafkaError(KafkaError._AUTHENTICATION))
    'SASL authentication failed (mechanism PLAIN, user u): '
    >>> print(_security_words(kafka, KafkaError(KafkaError._SSL)) + "…")
    TLS failed (SP_KAFKA__SSL_CAFILE not set; host name checked: the broker's): …
    """
    if err.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
        return f"SASL authentication failed (mechanism {kafka.sasl_mechanism}, user {kafka.sasl_username}): "
    if err.code() == KafkaError._SSL:
        cafile = ("SP_KAFKA__SSL_CAFILE not set" if kafka.ssl_cafile is None
                  else f"SP_KAFKA__SSL_CAFILE={kafka.ssl_cafile}")
        checked = ("the broker's" if kafka.ssl_check_hostname
                   else "none, SP_KAFKA__SSL_CHECK_HOSTNAME=false")
        return f"TLS failed ({cafile}; host name checked: {checked}): "
    return ""


def _refused_after_a_rebalance(err: KafkaError) -> bool:
    """Whether a commit failed because the group rebalanced meanwhile (refused for the old
    generation), which is said in a warning: the partitions are being reassigned and the next
    poll rejoins."""
    if err.code() not in _MEMBERSHIP:
        return False
    log.warning("commit refused after a group rebalance: %s", _describe_error(err))
    return True


def _transient(err: KafkaError | None) -> bool:
    if err is None:
        return False
    return bool(err.retriable()) or err.code() in _TRANSIENT


class _QueueFull(Exception):
    """The producer's local queue stayed full for PRODUCER_MAX_BLOCK_MS."""


def _log_counted(level: int, line: str, held: int, *, late: bool = False) -> None:
    """``line``, with the count of the lines of its kind held back since the last one written
    (text and the ``suppressed`` field), and ``held_back`` when it is itself one of them."""
    extra: dict[str, Any] = {"suppressed": held} if held else {}
    if late:
        extra["held_back"] = True
    log.log(level, "%s%s", line, suppressed(held), extra=extra)


class _LogBridge:
    """librdkafka's ``logger``: its lines go to this module's logger, throttled per kind.

    confluent-kafka calls ``log(level, "%s [%s] %s", facility, client_name, text)`` with
    a :mod:`logging` level, from the thread that polls the client.
    """

    def __init__(self, throttle: Throttle) -> None:
        self._throttle = throttle

    def log(self, level: int, fmt: str, *args: Any) -> None:
        if len(args) == 3:
            facility, name, text = (str(a) for a in args)
        else:
            facility, name, text = "", "", " ".join(str(a) for a in (fmt, *args))
        line = f"librdkafka {name} {facility}: {text}"
        held = self._throttle.allow(("log", facility, kind(text)), (level, line))
        if held is not None:
            _log_counted(level, line, held)


class ConfluentEdge(EdgeBase):
    """One group consumer of ``input_topic`` plus one producer, both raw bytes (librdkafka).

    ``on_assigned`` / ``on_revoked`` receive sorted ``(topic, partition)`` lists; see the
    module docstring for what they may call. Offsets are committed only by :meth:`commit`.
    """

    _log = log
    _client_errors = (KafkaException, ValueError)

    def _init_client_state(self) -> None:
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._throttle = Throttle()
        self._sends = 0
        self._fatal: str | None = None  # a fatal consumer error, raised by the next poll
        self._producer_fatal: str | None = None
        self._producer_fatal_error: KafkaError | None = None
        self._assigning: list[Partition] | None = None  # the partitions being assigned
        # What this edge assigned last (librdkafka's assignment changes only through the
        # assign()/unassign() calls the rebalance callbacks make).
        self._assigned: list[Partition] = []
        # Partitions assigned (at monotonic time) whose cached high-water mark may be stale.
        self._unconfirmed: dict[Partition, float] = {}
        # High-water marks of the assigned partitions, read from librdkafka after each poll.
        self._highwater: dict[Partition, int] = {}
        self._seeks: dict[Partition, int] = {}
        self._callback_committed: dict[Partition, int | None] | None = None
        self._paused: set[Partition] = set()  # paused by pause(), until resume() or a revocation

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Connect: subscribe (the group is joined in the background) and start the producer."""
        if self._consumer is not None:
            return
        check_reachable(self._kafka, self._timeout_ms / 1000)
        consumer: Consumer | None = None
        try:
            consumer = Consumer(self._consumer_config())
            consumer.subscribe(
                [self._input_topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            producer = self._new_producer()
        except (KafkaException, ValueError, TypeError) as exc:
            if consumer is not None:
                consumer.close()
            raise KafkaEdgeError(
                f"cannot connect to Kafka at {servers_text(self._kafka)}: {_describe(exc)}"
            ) from None
        self._consumer, self._producer = consumer, producer
        log.info(
            "kafka edge (confluent-kafka) started: group %s, input topic %s, brokers %s",
            self._kafka.group_id,
            self._input_topic,
            servers_text(self._kafka),
        )

    def _consumer_config(self) -> dict[str, Any]:
        config = confluent_config(self._kafka)
        config.update(
            {
                "socket.timeout.ms": max(
                    self._timeout_ms, self._kafka.fetch_max_wait_ms + _SOCKET_OVER_FETCH_WAIT_MS
                ),
                "group.id": self._kafka.group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": self._kafka.session_timeout_ms,
                "heartbeat.interval.ms": self._kafka.heartbeat_interval_ms,
                "partition.assignment.strategy": "range",
                "isolation.level": "read_committed" if self.transactional else "read_uncommitted",
                "fetch.wait.max.ms": self._kafka.fetch_max_wait_ms,
                "fetch.max.bytes": self._kafka.fetch_max_bytes,
                "queued.min.messages": _PREFETCH_POLLS * self._kafka.max_poll_records,
                "queued.max.messages.kbytes": _PREFETCH_MAX_KBYTES,
                "fetch.queue.backoff.ms": _PREFETCH_BACKOFF_MS,
                "logger": _LogBridge(self._throttle),
                "error_cb": self._on_consumer_error,
                "on_commit": self._on_commit,
            }
        )
        return config

    def _producer_config(self) -> dict[str, Any]:
        config = confluent_config(self._kafka)
        config.update(
            {
                "acks": "all",
                "enable.idempotence": False,
                "max.in.flight.requests.per.connection": 5,
                "linger.ms": self._kafka.linger_ms,
                "batch.size": self._kafka.batch_size,
                "request.timeout.ms": self._timeout_ms,
                "allow.auto.create.topics": False,  # as kafka-python's producer (python_edge.py)
                "delivery.report.only.error": True,
                "on_delivery": self._on_delivery,
                "logger": _LogBridge(self._throttle),
                "error_cb": self._on_producer_error,
            }
        )
        if self.transactional:
            config.update({"transactional.id": self.transactional_id, "enable.idempotence": True,
                           "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS})
        return config

    def _new_producer(self) -> Producer:
        """The producer (transactional, its transactions initialised, in the exactly-once mode)."""
        producer = Producer(self._producer_config())
        self._producer_fatal = self._producer_fatal_error = None  # the replaced producer's
        if self.transactional:
            try:
                self._retrying("initialising transactions",
                               lambda: producer.init_transactions(self._timeout_ms / 1000))
            except BaseException:
                drop_and_close(producer)
                raise
        return producer

    def _close_consumer(self, consumer: Consumer) -> None:
        """``consumer.close()``, left behind once it outlasts its bound.

        librdkafka's close has no timeout, and with a commit in flight and the coordinator not
        answering it waits until the broker is back, however long that is (librdkafka #3740).
        So it runs on a thread of its own (``on_revoked`` runs there, inside it, while this
        thread waits), and once no callback has run for ``2 × request_timeout_ms`` it is left
        behind with an error line: the consumer's threads end with the process. (Closing
        without a commit in flight takes one request_timeout_ms with the broker frozen, so
        the bound is two.) Nothing is lost by it: offsets are committed only after a
        checkpoint, which stands, and the next owner of the partitions replays from the last
        commit.
        """
        try:
            outcome: list[BaseException] = []

            def run() -> None:
                try:
                    consumer.close()
                except BaseException as exc:  # handed to the waiting thread
                    outcome.append(exc)

            closing = threading.Thread(target=run, name="sp-consumer-close", daemon=True)
            closing.start()
            bound_s = 2 * self._timeout_ms / 1000
            quiet_since = time.monotonic()
            while closing.is_alive():
                closing.join(_CLOSE_WAIT_STEP_S)
                if self._callback_thread is not None:  # on_revoked runs: it has bounds of its own
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since > bound_s and closing.is_alive():
                    log.error(
                        "closing the Kafka consumer: not done %.1f s after its last callback"
                        " (librdkafka waits for a broker that does not answer, e.g. for a commit"
                        " in flight); left behind, the checkpoint stands", bound_s,
                    )
                    return
            if not outcome:
                return
            if isinstance(outcome[0], KafkaException | RuntimeError):
                log.warning("closing the Kafka consumer: %s", _describe(outcome[0]))
                return
            raise outcome[0]
        finally:
            self._assigned = []  # nothing is, once closed (or left behind)

    def _close_producer(self, producer: Producer, *, graceful: bool = True) -> None:
        """Close ``producer``; unless ``graceful``, drop its unacknowledged records at once."""
        try:
            if graceful and len(producer) > 0:
                producer.flush(self._timeout_ms / 1000)
        except KafkaException as exc:
            log.warning("flushing the producer before closing it: %s", _describe(exc))
        # confluent-kafka's close() aborts an open transaction and warns (RuntimeWarning) when it
        # cannot, as for a fenced producer: said here, as one line
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                drop_and_close(producer)
            except KafkaException as exc:
                log.warning("closing the producer: %s", _describe(exc))
        for warning in seen:
            log.warning("closing the producer: %s", warning.message)
        kept = [u for u in self._unsent if u.code not in _PURGED]
        dropped = len(self._unsent) - len(kept)  # one purge report per record
        self._unsent = kept
        if dropped:
            log.warning("dropped %d unacknowledged records to close the producer", dropped)

    # -- rebalance callbacks (librdkafka calls them inside consume() and close()) ----------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        keys = sorted((tp.topic, tp.partition) for tp in partitions)
        self._assigning, self._seeks, self._callback_committed = keys, {}, None
        self._unconfirmed = dict.fromkeys(keys, time.monotonic())
        try:
            self._run_callback("on_assigned", keys, lost=False)
        finally:
            seeks, self._seeks = self._seeks, {}
            self._assigning, self._callback_committed = None, None
            # Offsets seeked in the callback, else the committed offset (or the reset policy).
            consumer.assign([TopicPartition(t, p, seeks.get((t, p), OFFSET_INVALID)) for t, p in keys])
            self._assigned = keys
            self._unconfirmed = dict.fromkeys(keys, time.monotonic())

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._revoke(consumer, partitions, lost=False)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._revoke(consumer, partitions, lost=True)

    def _revoke(self, consumer: Consumer, partitions: list[TopicPartition], *, lost: bool) -> None:
        keys = sorted((tp.topic, tp.partition) for tp in partitions)
        try:
            if keys:  # nothing to tell about an empty revocation
                self._run_callback("on_revoked", keys, lost=lost)
        finally:
            paused, self._paused = self._paused, set()
            if paused:  # librdkafka keeps a partition's pause across unassign() and assign()
                try:
                    consumer.resume([TopicPartition(t, p) for t, p in sorted(paused)])
                except KafkaException as exc:
                    log.warning("could not resume the paused partitions %s: %s", sorted(paused),
                                _describe(exc))
            consumer.unassign()
            self._assigned = []

    def _run_callback(self, name: str, keys: list[Partition], *, lost: bool) -> None:
        """Run a user callback; its exception is kept for :meth:`poll` (or logged by close).

        Nothing propagates into librdkafka: an exception there would abandon the records
        the same ``consume()`` call had already taken from the queue.
        """
        self._announce(name, keys, lost=lost)
        error = self._call_back(name, keys, lost=lost)
        if self._callback_error is None:  # the first one of the poll
            self._callback_error = error

    # -- consuming -------------------------------------------------------------------------

    def poll(self, timeout_ms: int, max_records: int) -> list[Batch]:
        """Records fetched within ``timeout_ms``: one :class:`~.edge.Batch` per partition.

        Returns as soon as records are there (up to ``max_records``, whatever librdkafka
        has fetched), like kafka-python. Partitions are sorted by ``(topic, partition)``.
        Returns ``[]`` while the broker is unreachable (librdkafka reconnects by itself)
        and while the group is being joined. Rebalance callbacks run inside this call.
        """
        self._refuse_in_callback("poll")
        consumer = self._require(self._consumer)
        self._log_overdue()
        if self._fatal is not None:
            raise KafkaEdgeError(f"poll failed: {self._fatal}")
        try:
            messages = self._consume(consumer, timeout_ms, max_records)
        except KafkaException as exc:
            self._raise_callback_error([])
            if _transient(_error_of(exc)):
                log.warning("poll failed, will retry: %s", _describe(exc))
                return []
            raise KafkaEdgeError(f"poll failed: {_describe(exc)}") from None
        self._raise_callback_error(messages)
        if self._paused:  # fetched before the pause
            messages = [m for m in messages if (m.topic(), m.partition()) not in self._paused]
        batches, errors = batches_of(messages)
        for err in errors:
            self._consume_error(err)
        for batch in batches:
            # fetched since the assignment: highwater is fresh
            self._unconfirmed.pop((batch.topic, batch.partition), None)
        self._read_highwater(consumer)
        return batches

    @staticmethod
    def _consume(consumer: Consumer, timeout_ms: int, max_records: int) -> list[Any]:
        """Wait up to ``timeout_ms`` for a first message, then take what is queued (<= max).

        ``consume(n, timeout)`` alone would wait for ``n`` messages until the timeout,
        delaying a trickle of records by ``timeout_ms`` each poll.
        """
        first = consumer.poll(timeout_ms / 1000)
        if first is None:
            return []
        if max_records <= 1:
            return [first]
        return [first, *consumer.consume(num_messages=max_records - 1, timeout=0)]

    def _read_highwater(self, consumer: Consumer) -> None:
        """Copy librdkafka's cached high-water marks (from fetch responses) for highwater()."""
        marks: dict[Partition, int] = {}
        for topic, partition in self._assigned:
            try:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
            except KafkaException:
                continue
            if high is not None and high >= 0:
                marks[(topic, partition)] = int(high)
        self._highwater = marks

    def _consume_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.fatal() or err.code() in _CONSUME_FATAL:
            raise KafkaEdgeError(f"poll failed: {_describe_error(err)}")
        self._log_throttled(logging.WARNING, ("consume", err.code()), "consumer: %s", _describe_error(err))

    def _raise_callback_error(self, messages: list[Any]) -> None:
        """Raise the exception of a callback that ran in this poll, rewinding its records."""
        error, self._callback_error = self._callback_error, None
        if error is None:
            return
        consumer = self._require(self._consumer)
        first: dict[Partition, int] = {}
        for m in messages:
            if m.error() is None:
                first.setdefault((m.topic(), m.partition()), m.offset())
        assigned = set(self.assignment())
        for (topic, partition), offset in first.items():
            if (topic, partition) in assigned:
                try:
                    consumer.seek(TopicPartition(topic, partition, offset))
                except KafkaException as exc:
                    log.warning("could not rewind %s/%d to %d: %s", topic, partition, offset, _describe(exc))
        raise error

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Fetch ``topic``/``partition`` from ``offset`` next (it must be assigned)."""
        consumer = self._require(self._consumer)
        key = (topic, partition)
        if offset < 0 or key not in self.assignment():
            why = "negative offset" if offset < 0 else "partition not assigned"
            raise KafkaEdgeError(f"cannot seek {topic}/{partition} to {offset}: {why}")
        if self._assigning is not None and self._in_callback():
            self._seeks[key] = offset  # applied by the assign() after on_assigned
            return
        try:
            consumer.seek(TopicPartition(topic, partition, offset))
        except KafkaException as exc:
            raise KafkaEdgeError(f"cannot seek {topic}/{partition} to {offset}: {_describe(exc)}") from None

    def pause(self, topic: str, partition: int) -> None:
        """Return no record of ``topic``/``partition`` until :meth:`resume` (it must be assigned):
        librdkafka fetches none, and a poll drops those it had queued."""
        consumer = self._require(self._consumer)
        key = (topic, partition)
        if key not in self.assignment():
            raise KafkaEdgeError(f"cannot pause {topic}/{partition}: partition not assigned")
        try:
            consumer.pause([TopicPartition(topic, partition)])
        except KafkaException as exc:
            raise KafkaEdgeError(f"cannot pause {topic}/{partition}: {_describe(exc)}") from None
        self._paused.add(key)

    def resume(self, topic: str, partition: int, offset: int) -> None:
        """Fetch ``topic``/``partition`` again, from ``offset`` (a seek after the resume: librdkafka
        would otherwise go on from the last record it returned)."""
        consumer = self._require(self._consumer)
        try:
            consumer.resume([TopicPartition(topic, partition)])
        except KafkaException as exc:
            raise KafkaEdgeError(f"cannot resume {topic}/{partition}: {_describe(exc)}") from None
        self._paused.discard((topic, partition))
        self.seek(topic, partition, offset)

    def assignment(self) -> list[Partition]:
        """The partitions assigned to this member, sorted.

        Answered from the edge's own record, so it never waits: confluent-kafka serializes
        the calls on one consumer, and another thread's call would wait for a poll in
        progress (and can starve while one thread polls back to back).
        """
        self._require(self._consumer)
        if self._assigning is not None and self._in_callback():
            return list(self._assigning)
        return list(self._assigned)

    def highwater(self, topic: str, partition: int) -> int | None:
        """The partition's end offset as of the last fetch; None before one or if unassigned.

        Read from librdkafka at the end of each :meth:`poll` (so it never waits, like
        :meth:`assignment`).
        """
        self._require(self._consumer)
        key = (topic, partition)
        if key not in self.assignment():
            return None
        since = self._unconfirmed.get(key)
        if since is not None:
            settle_s = self._kafka.fetch_max_wait_ms / 1000 + _HIGHWATER_SETTLE_EXTRA_S
            if time.monotonic() - since < settle_s:
                return None  # maybe the value cached before a revoke and re-assign
            self._unconfirmed.pop(key, None)
        return self._highwater.get(key)

    def committed(self, topic: str, partition: int) -> int | None:
        """The group's committed offset for the partition, or None if there is none."""
        consumer = self._require(self._consumer)
        key = (topic, partition)
        if self._assigning is not None and self._in_callback() and key in self._assigning:
            if self._callback_committed is None:
                self._callback_committed = self._fetch_committed(consumer, self._assigning)
            return self._callback_committed[key]
        return self._fetch_committed(consumer, [key])[key]

    def _fetch_committed(self, consumer: Consumer, keys: list[Partition]) -> dict[Partition, int | None]:
        tps = [TopicPartition(t, p) for t, p in keys]
        what = (
            f"fetching the committed offset of {keys[0][0]}/{keys[0][1]}"
            if len(keys) == 1
            else f"fetching the committed offsets of {len(keys)} partitions"
        )

        def attempt() -> list[TopicPartition]:
            found = consumer.committed(tps, timeout=self._timeout_ms / 1000)
            for tp in found:
                if tp.error is not None:
                    raise KafkaException(tp.error)
            return found

        found = self._retrying(what, attempt)
        return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in found}

    def commit(self, offsets: Mapping[Partition, int]) -> None:
        """Commit next-offsets (last processed + 1) for the partitions currently assigned.

        Partitions not assigned are skipped. In a rebalance callback the commit is synchronous,
        so offsets committed in ``on_revoked`` are in place before another member gets the
        partitions; transient failures are retried with backoff, then :class:`KafkaEdgeError`
        is raised. Anywhere else it is handed to librdkafka and this returns at once: its result
        comes back on a later :meth:`poll`, or in :meth:`close` (librdkafka's close waits for
        the commits in flight), and a failure is logged as a warning
        (:meth:`_on_commit`). librdkafka's synchronous commit has no timeout: while the
        coordinator is frozen it would hold the worker's loop for as long (row 3d of
        ``docs/reliability.md``). Either way, if the group has rebalanced meanwhile (the
        commit is refused for the old generation) a warning is logged instead: the partitions
        are being reassigned and the next poll rejoins.
        """
        self._refuse_if_transactional("commit")
        consumer = self._require(self._consumer)
        request = [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in self._assigned_offsets(offsets).items()
        ]
        if not request:
            return
        if not self._in_callback():
            self._retrying(
                "committing offsets", lambda: consumer.commit(offsets=request, asynchronous=True)
            )
            return
        if self._callback_lost:
            log.warning("not committing offsets of lost partitions %s", self.assignment())
            return

        def attempt() -> None:
            error: KafkaError | None = None
            try:
                result = consumer.commit(offsets=request, asynchronous=False)
            except KafkaException as exc:
                error = _error_of(exc)
                if error is None:
                    raise
            else:
                error = next((tp.error for tp in result if tp.error is not None), None)
            if error is not None and not _refused_after_a_rebalance(error):
                raise KafkaException(error)

        self._retrying("committing offsets", attempt)

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The result of an asynchronous :meth:`commit` (librdkafka calls this inside a poll or
        close): a failure is a warning, like a failed commit of the kafka-python edge."""
        error = err or next((tp.error for tp in partitions or () if tp.error is not None), None)
        if error is None or _refused_after_a_rebalance(error):
            return
        offsets = sorted((tp.topic, tp.partition, tp.offset) for tp in partitions or ())
        log.warning(
            "commit of offsets %s failed (the checkpoint stands; the group's offsets stay"
            " older until a later commit): %s",
            offsets, _describe_error(error),
        )

    # -- producing -------------------------------------------------------------------------

    def send_many(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None:
        """:meth:`send` each ``(key, value)`` pair, in order, in one loop (the slow path, with its
        waits and retries, only for a record that ``produce`` refuses).

        ``produce`` is called with positional arguments ``(topic, value, key)``: the binding
        parses keywords more slowly, 1.00 against 0.77 µs a record (``docs/performance.md``,
        "Decisions")."""
        self._check_sending()
        producer = self._require(self._producer)
        produce = producer.produce
        for key, value in zip(keys, values, strict=True):
            try:
                produce(topic, value, key)
            except (BufferError, KafkaException):
                self._send_retrying(producer, topic, key, value)
        before, self._sends = self._sends, self._sends + len(values)
        if before // _PRODUCER_POLL_EVERY != self._sends // _PRODUCER_POLL_EVERY:
            producer.poll(0)  # serve delivery reports now and then

    def _send_retrying(self, producer: Producer, topic: str, key: bytes | None, value: bytes,
                       partition: int | None = None) -> None:
        def produce() -> None:
            if partition is None:
                producer.produce(topic, value, key)
            else:
                producer.produce(topic, value, key, partition, on_delivery=self._on_delivery_to)

        def attempt() -> None:
            deadline = time.monotonic() + PRODUCER_MAX_BLOCK_MS / 1000
            while True:
                try:
                    produce()
                    return
                except BufferError:
                    if time.monotonic() >= deadline:
                        raise _QueueFull(
                            f"the producer queue stayed full for {PRODUCER_MAX_BLOCK_MS} ms"
                        ) from None
                    producer.poll(0.05)  # serve delivery reports: frees queue space

        self._retrying(f"sending to {topic}", attempt, sending=True)

    def _send_to(self, topic: str, key: bytes | None, value: bytes, partition: int) -> None:
        self._send_retrying(self._require(self._producer), topic, key, value, partition)

    def _on_delivery(self, err: KafkaError | None, msg: Any, *, explicit: bool = False) -> None:
        """Delivery report (only failures are reported), served by flush() / poll(); the
        partition is kept for a record sent to one explicitly (``explicit``)."""
        if err is None or self.transactional and err.code() in _PURGED:
            return  # a record an abort dropped: its transaction has ended, no failure of the next
        value = msg.value()
        self._unsent.append(
            Unsent(
                msg.topic(),
                msg.key(),
                b"" if value is None else value,
                _transient(err),
                _describe_error(err),
                err.code(),
                msg.partition() if explicit else None,
            )
        )

    def _on_delivery_to(self, err: KafkaError | None, msg: Any) -> None:
        """The delivery report of a record sent to an explicit partition."""
        self._on_delivery(err, msg, explicit=True)

    def _flush_once(self) -> str | None:
        """One flush round; a description of what is still unacknowledged, or None."""
        producer = self._require(self._producer)
        try:
            remaining = producer.flush(self._timeout_ms / 1000)
        except KafkaException as exc:  # a transactional producer's fatal error
            if not self._in_transaction:
                raise
            raise self._failed_transaction("flush failed", exc) from None
        if self._producer_fatal_error is not None and self._in_transaction:
            raise self._failed_transaction("flush failed", KafkaException(self._producer_fatal_error))
        if self._producer_fatal is not None:
            fatal = self._producer_fatal
            self._replace_producer()
            raise UndeliveredError(f"the producer failed: {fatal}")
        if remaining > 0:
            return f"{remaining} records not acknowledged within {self._timeout_ms} ms"
        return self._settle_unsent()

    # -- client errors ---------------------------------------------------------------------

    def _on_consumer_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = _describe_error(err)
            log.error("Kafka consumer: fatal error: %s", self._fatal)
        else:
            self._client_error("consumer", err)

    def _on_producer_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._producer_fatal, self._producer_fatal_error = _describe_error(err), err
            log.error("Kafka producer: fatal error: %s", self._producer_fatal)
        else:
            self._client_error("producer", err)

    def _client_error(self, client: str, err: KafkaError) -> None:
        # librdkafka logs connection failures itself (throttled by the log bridge); wrong
        # credentials and a refused certificate are retried too (they may be rotated) but
        # deserve an error line that says which settings are involved
        if err.code() == KafkaError._TRANSPORT:
            level = logging.DEBUG
        elif err.code() in _CONSUME_FATAL or err.code() == KafkaError._SSL:
            level = logging.ERROR
        else:
            level = logging.WARNING
        self._log_throttled(level, (client, err.code()), "Kafka %s: %s%s", client,
                            _security_words(self._kafka, err), _describe_error(err))

    def _log_throttled(self, level: int, key: Hashable, fmt: str, *args: Any) -> None:
        line = fmt % args
        held = self._throttle.allow(key, (level, line))
        if held is not None:
            _log_counted(level, line, held)

    def _log_overdue(self, *, every: bool = False) -> None:
        """Write the last line held of each kind past its minute (of every kind holding one,
        with ``every``), late, with the count of the others: a kind that stopped recurring has
        no later line to count them."""
        for _, (level, line), others in self._throttle.overdue(every=every):
            _log_counted(level, line, others, late=True)

    def log_suppressed(self) -> None:
        """librdkafka's lines and this edge's own, still held back: all written, with counts."""
        self._log_overdue(every=True)

    # -- transactions ------------------------------------------------------------------------

    def _membership(self) -> Any:
        if self._closing:
            # an assignment made inside close(): confluent-kafka's consumer calls wait for the
            # close in progress (a deadlock on its own thread), and nothing commits after it
            return self._membership_at_assignment
        return self._require(self._consumer).consumer_group_metadata()

    def _txn_begin(self, producer: Producer) -> None:
        producer.begin_transaction()

    def _txn_send_offsets(self, producer: Producer, offsets: dict[Partition, int], membership: Any) -> None:
        request = [TopicPartition(t, p, offset) for (t, p), offset in offsets.items()]
        self._answered("sending the offsets to the transaction", lambda: self._answer(
            lambda: producer.send_offsets_to_transaction(request, membership, self._timeout_ms / 1000)))

    def _txn_end(self, producer: Producer, *, commit: bool) -> None:
        end = producer.commit_transaction if commit else producer.abort_transaction
        self._answered("committing the transaction" if commit else "aborting the transaction",
                       lambda: self._answer(lambda: end(self._timeout_ms / 1000)))

    @staticmethod
    def _answer(call: Any) -> bool:
        """Make a transactional call: True once done, False when librdkafka says it may be made
        again (it timed out); any other error is raised."""
        try:
            call()
        except KafkaException as exc:
            err = _error_of(exc)
            if err is not None and err.retriable() and not err.txn_requires_abort() and not err.fatal():
                return False
            raise
        return True

    def _txn_kind(self, exc: Exception) -> str | None:
        if not isinstance(exc, KafkaException):
            return None
        err = _error_of(exc)
        code = None if err is None else err.code()
        if code in _FENCED_PRODUCER:
            return "producer"
        if code in _FENCED_MEMBER:
            return "member"
        return "abortable"

    # -- helpers ---------------------------------------------------------------------------

    def _retriable(self, exc: Exception) -> bool | None:
        if isinstance(exc, _QueueFull):
            return True
        return _transient(_error_of(exc)) if isinstance(exc, KafkaException) else None

    _describe = staticmethod(_describe)


_second = operator.itemgetter(1)  # a timestamp's milliseconds, from (type, ms)


def batches_of(messages: Sequence[Message]) -> tuple[list[Batch], list[KafkaError]]:
    """``messages`` as one :class:`~.edge.Batch` per partition, sorted by ``(topic, partition)``,
    and the errors among them.

    Each column is read with one ``map`` of the accessor over every message (a C loop, no
    bytecode per record); the messages are split by partition only when a poll returned more
    than one. A poll with an error in it has its errors set apart first.

    >>> ms = [Message(topic="a", partition=p, offset=o, key=None, value=b"v%d" % o, timestamp=(1, o))
    ...       for p, o in [(1, 7), (0, 3), (1, 8)]]
    >>> [(b.partition, b.offsets, b.values, b.timestamps_ms) for b in batches_of(ms)[0]]
    [(0, [3], [b'v3'], [3]), (1, [7, 8], [b'v7', b'v8'], [7, 8])]
    """
    n = len(messages)
    if not n:
        return [], []
    errors = list(map(Message.error, messages))
    # identity, not list.count(None): a KafkaError compared with None raises
    if not all(map(operator.is_, errors, itertools.repeat(None))):
        # rare: the errors apart, then the other messages as any poll's
        clean = [m for m, e in zip(messages, errors, strict=True) if e is None]
        return batches_of(clean)[0], [e for e in errors if e is not None]
    # a message with no error has its topic, partition and offset (the stubs allow None)
    topics: list[Any] = list(map(Message.topic, messages))
    partitions: list[Any] = list(map(Message.partition, messages))
    offsets: list[Any] = list(map(Message.offset, messages))
    keys = list(map(Message.key, messages))
    values = list(map(Message.value, messages))
    stamps = list(map(_second, map(Message.timestamp, messages)))
    first = (topics[0], partitions[0])
    if topics.count(first[0]) == n and partitions.count(first[1]) == n:  # one partition
        return [Batch(first[0], first[1], offsets, keys, values, stamps)], []
    # Several partitions: a poll returns each partition's messages in runs; cut where the
    # partition changes (found in C), and join each partition's runs in order.
    tps = list(zip(topics, partitions, strict=True))
    cuts = [0, *itertools.compress(range(1, n), map(operator.ne, tps[1:], tps)), n]
    spans: dict[Partition, list[slice]] = {}
    for start, end in itertools.pairwise(cuts):
        spans.setdefault(tps[start], []).append(slice(start, end))

    def joined(column: list[Any], parts: list[slice]) -> list[Any]:
        return list(itertools.chain.from_iterable(column[part] for part in parts))

    batches = []
    for (topic, partition), parts in sorted(spans.items()):
        columns = (joined(column, parts) for column in (offsets, keys, values, stamps))
        batches.append(Batch(topic, partition, *columns))
    return batches, []


__all__ = ["ConfluentEdge", "batches_of", "confluent_config"]
