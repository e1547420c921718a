"""The worker: one consumer, one state per assigned input partition, five output topics, one
store; composed of parts that own their state (docs/architecture.md):

* :class:`~stream_perceptron.worker.assignment.Partitions`: the partitions' states, opened on
  assignment, released on revocation;
* :class:`~stream_perceptron.worker.process.BatchProcessor`: decode → score → learn → publish,
  one partition's batch at a time, through a plan (:mod:`~stream_perceptron.worker.plan`);
* :class:`~stream_perceptron.worker.checkpointer.Checkpointer` (or its exactly-once kind):
  outputs confirmed → states stored → offsets committed;
* :class:`~stream_perceptron.worker.publisher.StatsPublisher`: the statistics records, lag;
* :class:`~stream_perceptron.worker.mixer.Mixer`, :class:`~stream_perceptron.worker.joiner.LabelJoiner`,
  :class:`~stream_perceptron.worker.drift_reporter.DriftReporter`: mixing, late labels, drift
  alarms;
* the edge (:func:`~stream_perceptron.kafka.factory.open_edge`), the store, the observer.

Guarantees (README, "Guarantees"): a partition's outputs and model are a function of its records
in offset order, whichever worker holds it; a state is stored only once the outputs of the input
it covers are acknowledged, and offsets are committed only after the state holding them is
stored, never below the group's commit; bad input never stops the loop; the shutdown of
``stream-perceptron run`` is bounded (``SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S``): past it the process
exits 1 where it stands, as a SIGKILL would, which by the points above loses nothing.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, cast

from stream_perceptron.codec import native
from stream_perceptron.errors import (
    CheckpointError,
    KafkaAuthError,
    KafkaEdgeError,
    RegistryUnavailable,
    SettingsError,
)
from stream_perceptron.kafka.admin import ensure_topics, missing_topics
from stream_perceptron.kafka.edge import Batch, Edge, Partition
from stream_perceptron.kafka.factory import open_edge
from stream_perceptron.kafka.registry import SchemaRegistry
from stream_perceptron.model.learner import Learner
from stream_perceptron.runtime import tune_gc
from stream_perceptron.settings import Settings, redacted
from stream_perceptron.signals import stopping_on_signals
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.state.store import PartitionStore, TransactionalStore
from stream_perceptron.state.stored import Offsets
from stream_perceptron.throttle import Throttle
from stream_perceptron.worker.assignment import Partitions
from stream_perceptron.worker.checkpointer import Checkpointer, TransactionalCheckpointer
from stream_perceptron.worker.deadline import Shutdown, ShutdownDeadline
from stream_perceptron.worker.drift_reporter import DriftReporter
from stream_perceptron.worker.joiner import ClassJoiner, LabelJoiner
from stream_perceptron.worker.mixer import Mixer, ModelTopic
from stream_perceptron.worker.observe import NullObserver, Observer, observer_for
from stream_perceptron.worker.outputs import DeadLetters, Outputs
from stream_perceptron.worker.partition import PartitionState
from stream_perceptron.worker.policy import Counters, Every
from stream_perceptron.worker.process import BatchProcessor
from stream_perceptron.worker.publisher import StatsPublisher
from stream_perceptron.worker.stores import worker_store

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


def _log_aside(level: int, msg: str, *args: object) -> threading.Thread | None:
    """Log ``msg`` from a thread of its own (for a signal handler); returns the thread, started,
    or None when no thread could start (at a process limit: the line is lost, nothing else)."""
    thread = threading.Thread(target=log.log, args=(level, msg, *args), name="sp-signal-log", daemon=True)
    try:
        thread.start()
    except RuntimeError:
        return None
    return thread


class Worker:
    """One consumer, one state per assigned input partition, the output topics, one store.

    ``edge``, ``store``, ``model_topic`` and ``observer`` stand in for Kafka and for the
    settings' store and observer in tests; ``owns_process``: the worker is
    ``stream-perceptron run``'s, whose shutdown is bounded and may end the process."""

    def __init__(self, settings: Settings, edge: Edge | None = None, *, owns_process: bool = False,
                 store: PartitionStore | None = None, model_topic: ModelTopic | None = None,
                 observer: Observer | NullObserver | None = None) -> None:
        self.settings = settings
        self.observer = observer or observer_for(settings.observe)
        # a worker run by another program (the demo, a test) leaves its process to it: unbounded
        bound = settings.checkpoint.shutdown_timeout_s if owns_process else math.inf
        self.shutdown = Shutdown(ShutdownDeadline(bound, self._overran))
        exactly_once = settings.output.guarantee == "exactly-once"
        self.edge = edge or open_edge(
            settings.kafka, settings.topics.input, self._on_assigned, self._on_revoked,
            transactional=exactly_once,
            # a checkpoint's flush can retry for minutes while the broker is away; /healthz must
            # keep hearing from the worker, which is waiting, not hung
            heartbeat=self.observer.polled, stopping=lambda: self.shutdown.pending,
        )
        self.store = store or worker_store(settings)
        self.counters = Counters()
        # At INFO, one progress line and one interval checkpoint's line per SP_LOG_EVERY_SECONDS;
        # the others at DEBUG. At full speed both come due every few ms, and a worker runs for
        # months.
        lines = Throttle(settings.log_every_seconds)
        started = time.monotonic()
        outputs = Outputs(self.edge)
        self.mixer = Mixer(settings, model_topic, edge=self.edge, observer=self.observer)
        self.partitions = Partitions(settings, self.store, self.edge, self.mixer, self.observer,
                                     started=started)
        drifts = DriftReporter(outputs, self.observer, topic=settings.topics.stats,
                               client_id=settings.kafka.client_id, lines=lines)
        dead_letters = DeadLetters(outputs, settings.topics.dead_letter, settings.codec_limits(),
                                   self.counters)
        self.processor = BatchProcessor(
            settings, self.partitions, outputs, dead_letters,
            (ClassJoiner if settings.model.k_class() else LabelJoiner)(
                outputs, dead_letters, drifts, topic=settings.topics.outcomes), self.mixer, drifts,
            observer=self.observer, counters=self.counters,
            registry=SchemaRegistry.from_settings(settings.registry) if settings.input.format == "avro"
            else None)
        self.publisher = StatsPublisher(settings, self.edge, outputs, self.partitions, self.observer,
                                        lines=lines, started=started)
        policy = Every(settings.checkpoint.every_examples, settings.checkpoint.every_seconds)
        self.checkpointer = (
            # exactly-once runs on the Kafka store only (the settings refuse any other)
            TransactionalCheckpointer(self.edge, cast(TransactionalStore, self.store), self.partitions,
                                      outputs, policy=policy, deadline=self.shutdown.deadline,
                                      observer=self.observer, counters=self.counters, lines=lines,
                                      stop=self.stop)
            if exactly_once else
            Checkpointer(self.edge, self.store, self.partitions, outputs, policy=policy,
                         deadline=self.shutdown.deadline, observer=self.observer, counters=self.counters,
                         lines=lines, stop=self.stop,
                         # files are written on a thread of their own; the Kafka store sends
                         # through the edge, on the loop's thread
                         background=isinstance(self.store, DirectoryStore)))
        # Why an assigned partition could not be opened (its stored states all damaged, another
        # configuration's): raised by the loop after the poll whose rebalance met it.
        self._refused: CheckpointError | SettingsError | None = None

    # ------------------------------------------------------------------ views
    @property
    def held(self) -> dict[Partition, PartitionState]:
        """The partitions' states held: those assigned, and those released since (readable,
        never reused)."""
        return self.partitions.held

    @property
    def learner(self) -> Learner:
        """The learner of the one partition held (assigned, else the last released)."""
        held = self.partitions.assigned or self.partitions.released
        if len(held) != 1:
            raise LookupError(f"the worker holds {len(held)} partitions' states, not one")
        return next(iter(held.values())).learner

    @property
    def offsets(self) -> Offsets:
        """The next offset of each partition held (assigned, or released last) that has one."""
        return self.partitions.offsets()

    @property
    def checkpoint_ok(self) -> bool:
        """The last checkpoint succeeded (or none was tried yet)."""
        return self.checkpointer.ok

    def caught_up(self) -> bool:
        """Every assigned partition processed up to its high-water mark."""
        return self.publisher.caught_up()

    def stats_record(self) -> dict[str, Any]:
        """The statistics record of the one partition assigned."""
        assigned = self.partitions.assigned
        if len(assigned) != 1:
            raise LookupError(f"the worker holds {len(assigned)} partitions, not one")
        return self.publisher.record(next(iter(assigned.values())))

    def publish_stats(self) -> list[dict[str, Any]]:
        """Send one statistics record per assigned partition now."""
        return self.publisher.publish(loud=self.shutdown.begun)

    def process(self, batch: Batch) -> int:
        """Process one partition's batch (offset order); returns how many of its records were
        processed: all, unless its partition stopped at a mixing point to wait for others (the
        rest is to be read again once it goes on: :meth:`Mixer.release`). A batch that raises
        half-way leaves the worker's state one not to resume from: no checkpoint stores it. What
        decoding it needs from outside (Avro schemas) is fetched first:
        :class:`RegistryUnavailable` then leaves everything as it was."""
        self.processor.prepare(batch)
        done = 0
        while done < len(batch):
            # with mixing on, in pieces that end at the partition's next mixing point at the latest
            st = self.partitions.state(batch.topic, batch.partition)
            piece = batch.slice(done, done + self.mixer.piece(st, len(batch) - done))
            with self.checkpointer.batch(f"the batch of {batch.topic}[{batch.partition}] from offset"
                                         f" {piece.offsets[0]}"):
                n = self.processor.process(piece)
            done += n
            if n < len(piece) or self.mixer.waiting(st):
                break
        self.checkpointer.tick(done)
        self.publisher.tick(done)
        return done

    def checkpoint(self, reason: str, handover: list[Partition] | None = None) -> bool:
        """Checkpoint now (:meth:`Checkpointer.checkpoint`)."""
        return self.checkpointer.checkpoint(reason, handover)

    # ------------------------------------------------------------------ lifecycle
    def restore(self) -> None:
        """Before connecting: check the stored states the store can read now and read the initial
        model, if any (fails clearly otherwise). Partitions' own states are restored when they
        are assigned."""
        self.partitions.preflight()

    def stop(self) -> None:
        """Ask the loop to finish its batch, checkpoint and return (safe from any thread)."""
        self.shutdown.ask()

    def run(self, until: Callable[[Worker], bool] | None = None) -> int:
        """Run until stopped (or ``until(self)`` is true); returns the process exit code."""
        log.info("effective settings: %s", redacted(self.settings))
        log.info("record paths: %s", native.description())
        try:
            return self._run(until)
        finally:
            self.shutdown.deadline.disarm()
            self.mixer.close()
            self.store.close()

    def _run(self, until: Callable[[Worker], bool] | None) -> int:
        self.restore()
        with self._signals():
            self._serve()
            try:
                if not self._start_edge():
                    return 0
                tune_gc()
                try:
                    self._loop(until)
                finally:
                    code = self._shut_down()
                return code
            finally:
                self.observer.stop()

    def _serve(self) -> None:
        """Serve /metrics, /healthz and /readyz, when enabled."""
        if isinstance(self.observer, NullObserver):
            return
        try:
            self.observer.start()
        except OSError as exc:
            raise SettingsError(
                f"cannot serve /metrics on {self.observer.host}:{self.observer.port}"
                f" (SP_OBSERVE__PORT): {exc.strerror or exc}"
            ) from None
        log.info("serving /metrics, /healthz, /readyz on %s:%d", self.observer.host, self.observer.port)

    def _loop(self, until: Callable[[Worker], bool] | None) -> None:
        """Poll and process; publish statistics and checkpoint when due; until a stop is asked
        (or ``until(self)``). A stop asked during a poll (a signal, or a revocation checkpoint
        the poll ran) ends the loop once the batches polled are processed: the shutdown's
        statistics record and checkpoint come next, and an interval checkpoint before them
        would only add a round of flush retries against a broker that does not answer.

        The ``consumer_lag`` gauge follows each poll's high-water marks (a statistics record sets
        it too), so after a burst it does not wait up to ``SP_STATS__EVERY_SECONDS`` to show it."""
        poll_ms, max_records = self.settings.kafka.poll_timeout_ms, self.settings.kafka.max_poll_records
        backoff = 0.0  # while the schema registry does not answer, the wait before the next poll
        while not self.shutdown.asked:
            # partitions waiting at a mixing point for other workers' are looked at again soon
            self.mixer.release(self.partitions.assigned, follow=True)
            waits = self.mixer.waits
            batches = self.edge.poll(min(poll_ms, self._MIX_RECHECK_MS) if waits else poll_ms, max_records)
            if self._refused is not None:  # a partition's state could not be restored
                raise self._refused
            self.observer.polled()
            retry_in = min(max(2 * backoff, 0.5), 30.0)
            deferred = self._process_polled(batches, retry_in)
            if self.shutdown.asked:
                return
            backoff = retry_in if deferred else 0.0
            if deferred:
                self._wait(backoff)
            if self.publisher.due():
                self.publisher.publish()
            else:
                self.observer.lag(self.publisher.lag())  # per poll, never per record
            # the checkpoint running beside the loop: its held outputs sent (at most one poll's)
            self.checkpointer.settle(release=True)
            if self.shutdown.asked:  # asked while the checkpoint beside the loop settled: the
                return               # shutdown's checkpoint comes next, no interval one first
            if self.checkpointer.due():
                self.checkpointer.checkpoint("interval", aside=True)
            if until is not None and until(self):
                return

    #: While partitions wait at a mixing point, the longest poll before they are looked at again.
    _MIX_RECHECK_MS = 50

    def _process_polled(self, batches: list[Batch], retry_in: float) -> bool:
        """Process a poll's batches in chunks of ``SP_OUTPUT__CHUNK_RECORDS``; True when one had
        to wait for the schema registry (:meth:`_defer`).

        With mixing on, the partitions take turns, a chunk each, every chunk ending at its
        partition's next mixing point at the latest, so the partitions reach their mixing points
        together: a partition that waits there lets the others go on, goes on itself as soon as
        they let it (:meth:`Mixer.release`, after every chunk), and has its records paused when
        only waiting partitions are left (what it did not process is read again from its
        mixing point). Each partition's records are processed in offset order."""
        chunk_records = self.settings.output.chunk_records
        if self.mixer.on:
            return self._interleave(batches, chunk_records, retry_in)
        deferred = False
        for batch in batches:
            for chunk in batch.chunks(chunk_records):
                try:
                    self.process(chunk)
                except RegistryUnavailable as exc:
                    deferred = True
                    self._defer(chunk, exc, retry_in)
                    break  # the rest of the partition's batch comes again with it
        return deferred

    def _interleave(self, batches: list[Batch], chunk_records: int, retry_in: float) -> bool:
        """:meth:`_process_polled` with mixing on: the partitions take turns."""
        deferred = False
        queue = deque(batches)
        while queue:
            batch = queue.popleft()
            st = self.partitions.assigned.get((batch.topic, batch.partition))
            if st is not None:
                batch = batch.after(st.next_offset)  # records processed already are not again
                if not len(batch):
                    continue
                if self.mixer.waiting(st):
                    if any(not self._waits(b) for b in queue):
                        queue.append(batch)  # its turn comes again after the others'
                        continue
                    for waiting in (batch, *queue):  # none of them can move: their records wait
                        self.mixer.hold(self.partitions.state(waiting.topic, waiting.partition))
                    break
            limit = chunk_records if st is None else self.mixer.piece(st, chunk_records)
            chunk, rest = batch.slice(0, limit), batch.slice(limit, len(batch))
            try:
                done = self.process(chunk)
            except RegistryUnavailable as exc:
                deferred = True
                self._defer(chunk, exc, retry_in)
                continue  # the rest of the partition's batch comes again with it
            if done < len(chunk):
                rest = batch.slice(done, len(batch))
            self.mixer.release(self.partitions.assigned)
            if len(rest):
                queue.append(rest)
        return deferred

    def _waits(self, batch: Batch) -> bool:
        """The partition of ``batch`` waits at a mixing point."""
        st = self.partitions.assigned.get((batch.topic, batch.partition))
        return st is not None and self.mixer.waiting(st)

    def _defer(self, batch: Batch, exc: RegistryUnavailable, retry_in: float) -> None:
        """``batch`` cannot be decoded while the schema registry does not answer: nothing of it
        was processed; the consumer goes back to its first record, which the first poll after
        ``retry_in`` seconds brings again."""
        first = batch.offsets[0]
        self.edge.seek(batch.topic, batch.partition, first)
        log.warning("%s[%d]@%d waits for the schema registry (%s); read again in %.1f s", batch.topic,
                    batch.partition, first, exc, retry_in)

    def _wait(self, seconds: float) -> None:
        """Sleep ``seconds`` unless a stop is asked, telling /healthz the loop is alive."""
        deadline = time.monotonic() + seconds
        while not self.shutdown.asked and (left := deadline - time.monotonic()) > 0:
            self.observer.polled()
            self.shutdown.wait(min(left, 1.0))

    def _start_edge(self) -> bool:
        """Check the topics and connect, retrying with backoff until Kafka answers or a stop is
        asked. A refused login and a missing input topic are settings to fix: they raise."""
        delay = 0.5
        while not self.shutdown.asked:
            self.observer.polled()
            try:
                self._check_topics()
                self.mixer.start()  # the model topic, made before the edge's producer starts
                self.store.open()
                self.edge.start()
                return True
            except KafkaAuthError:
                raise
            except KafkaEdgeError as exc:
                log.warning("Kafka not reachable yet (%s); retrying in %.1f s", exc, delay)
                self._wait(delay)  # the backoff can outlast liveness_timeout_s: alive throughout
                delay = min(delay * 2, 30.0)
        return False

    def _check_topics(self) -> None:
        """The input topic must exist (it is never created with a broker's defaults); missing
        output topics are created with one partition each."""
        kafka, t = self.settings.kafka, self.settings.topics
        timeout_s = kafka.request_timeout_ms / 1000
        if missing_topics(kafka, [t.input], timeout_s):
            raise SettingsError(
                f"input topic {t.input!r} does not exist (SP_TOPICS__INPUT):"
                " create it with the partitions you want"
            )
        try:
            ensure_topics(kafka, {t.predictions: 1, t.stats: 1, t.dead_letter: 1, t.outcomes: 1}, timeout_s)
        except KafkaAuthError:
            raise
        except KafkaEdgeError as exc:
            log.warning("output topics not checked or created: %s", exc)

    def _shut_down(self) -> int:
        code = 0
        self.shutdown.begun = True
        deadline = self.shutdown.deadline
        deadline.arm("the shutdown began")  # counted from the signal when there was one
        held = list(self.partitions.assigned.values())  # the partitions this shutdown hands over
        try:
            with deadline.during("publishing the statistics"):
                self.publish_stats()
            if not self.checkpoint("shutdown"):
                code, self.shutdown.failed = 1, True
        finally:
            with deadline.during("closing the Kafka clients"):
                self.edge.close()  # writes the client's lines it still suppresses
                deadline.disarm()  # done: what remains cannot wait on Kafka
        c = self.counters
        mistakes = sum(st.learner.stats.mistakes for st in held)
        labeled = sum(st.learner.stats.labeled for st in held)
        log.info(
            "stopped: %d records, %d predictions, %d dead letters, %d checkpoints (%d failed),"
            " %d partitions held at the shutdown: %d updates, mistake rate %s",
            c.records, c.predictions, c.dead_letters, c.checkpoints, c.checkpoint_failures,
            len(held), sum(st.learner.model.updates for st in held),
            f"{mistakes / labeled:.6g}" if labeled else None,
        )
        return code

    #: How the worker leaves its process when the shutdown overruns its deadline (a test's stand-in
    #: replaces it); like SIGKILL, it runs no cleanup.
    exit_process: Callable[[int], Any] = staticmethod(os._exit)

    def _overran(self, phase: str, elapsed_s: float, why: str) -> None:
        """The shutdown took longer than ``SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S`` (from the timer's
        thread): say so, then exit 1 at once. That loses nothing a SIGKILL would not: no
        checkpoint is written without its outputs acknowledged, and a checkpoint file appears
        whole or not at all, so the last one stands and a restart processes the records after
        it again."""
        try:  # the client's lines held back in the last minute: nothing runs after this
            self.edge.log_suppressed()
        except Exception:  # noqa: S110 - the line and the exit below matter more than the counts
            pass
        try:
            log.error(  # the CLI's handler flushes each line: it is out before the exit
                "shutdown not done %.1f s after %s (SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S=%g), while %s:"
                " exiting 1 now; a restart resumes from %s",
                elapsed_s, why, self.shutdown.deadline.seconds, phase, self.partitions.resume_point(),
            )
        finally:  # whatever logging does, the exit comes
            self.exit_process(1)

    def _signals(self) -> AbstractContextManager[threading.Event]:
        """While it lasts, SIGTERM and SIGINT ask for the shutdown (its deadline counts from the
        signal); a second SIGINT exits at once, without a final checkpoint.

        The handler runs between two bytecodes of the main thread, which may be inside a log
        write of its own: logging there would re-enter that stream ("reentrant call"). A thread
        logs instead, once the main thread lets go of the handler's lock."""

        def stopping(signum: int) -> None:
            name = signal.Signals(signum).name
            self.shutdown.deadline.arm(name)  # the grace period counts from here too
            _log_aside(logging.INFO, "%s: finishing the batch, then checkpointing", name)

        def again(signum: int) -> None:
            thread = _log_aside(logging.WARNING,
                                "second interrupt: exiting at once, without a final checkpoint")
            if thread is not None:
                thread.join(0.5)  # lost if the main thread holds the lock: exit regardless
            os._exit(130)

        return stopping_on_signals(self.shutdown.event, on_stop=stopping, again=again)

    # ------------------------------------------------------------------ rebalances
    def _on_assigned(self, partitions: list[Partition]) -> None:
        if self.shutdown.begun:  # an assignment the client delivers while it closes: never used
            log.info("assigned %s while shutting down: not taken", partitions)
            return
        self.checkpointer.settle(wait=True)  # no state is read while one is being written
        self.counters.rebalances += 1
        self.observer.rebalance()
        self.observer.assigned(self.edge.assignment())
        for topic, part in partitions:
            try:
                self.partitions.take(topic, part)
            except (CheckpointError, SettingsError) as exc:
                # raised from the poll that ran this callback (see _loop), not into the client,
                # which would log it with a traceback before the edge passes it on
                self._refused = exc
                self.shutdown.ask()
                return

    def _on_revoked(self, partitions: list[Partition]) -> None:
        if not partitions:
            return
        try:
            if self.shutdown.failed:
                # A second try a moment later meets the same trouble: against a broker that does
                # not answer it would only add a round of flush retries to the shutdown.
                log.info("revoked %s: the shutdown checkpoint failed a moment ago; not tried again",
                         partitions)
            else:
                log.info("revoked %s: checkpointing", partitions)
                self.checkpoint("revocation", handover=partitions)
        finally:
            self.checkpointer.forget(partitions)
            self.partitions.release(partitions)
