"""The worker: decode → score → learn → publish → checkpoint → commit, one poll batch at a time.

Guarantees (README, "Guarantees"):

* The partition owns its state. Each input partition has a model, statistics and next offset of
  its own (:class:`~stream_perceptron.worker.partition.PartitionState`); a record is scored and
  learned with its partition's state only. On assignment the worker claims the partition in the
  store, restores its newest stored state (else the seed, else zero weights) and seeks to the
  state's offset (the group's committed offset only for a partition with no state). It never
  reuses what it remembers of a partition it held before. A partition's outputs and model are
  therefore a function of its records in offset order, whichever worker holds it.
* Before a partition's state is stored, the producer is flushed, so every input offset the state
  covers has its prediction (or dead letter) acknowledged by the broker. Kafka offsets are
  committed only after the state holding them is stored, and never below the group's committed
  offset. Outputs are at least once; a record re-emitted after a restart or a move is identical to
  the first (scores depend neither on batch cuts nor on other partitions).
* Bad input never stops the loop: it goes to the dead-letter topic with its reason.
* The shutdown of ``stream-perceptron run`` is bounded (``SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S``):
  past it the process exits 1 where it stands, as a SIGKILL would, which by the two points above
  loses nothing.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import numpy as np

from stream_perceptron.codec.inputs import BatchDecoder
from stream_perceptron.codec.outputs import (
    configured_classes,
    dead_letter_record,
    encode,
    encode_predictions,
)
from stream_perceptron.errors import (
    CheckpointError,
    KafkaAuthError,
    KafkaEdgeError,
    SettingsError,
)
from stream_perceptron.kafka.admin import ensure_topics, missing_topics
from stream_perceptron.kafka.edge import Batch, Edge, Partition
from stream_perceptron.kafka.factory import open_edge
from stream_perceptron.model.learner import Learner
from stream_perceptron.runtime import tune_gc
from stream_perceptron.settings import Settings, redacted
from stream_perceptron.state.checkpoint import Checkpoint, CheckpointStore, Offsets
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.throttle import Throttle
from stream_perceptron.worker.checkpointing import Checkpointing
from stream_perceptron.worker.deadline import ShutdownDeadline
from stream_perceptron.worker.drifts import Drifts
from stream_perceptron.worker.labels import LateLabels, label_cuts, new_pending
from stream_perceptron.worker.mixing import Mixing
from stream_perceptron.worker.observe import Observer
from stream_perceptron.worker.partition import PartitionState, new_learner
from stream_perceptron.worker.policy import Counters, Every
from stream_perceptron.worker.progress import Progress
from stream_perceptron.worker.stores import worker_store
from stream_perceptron.worker.transactions import Transactions

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


class Worker(Checkpointing, Progress, Transactions, LateLabels, Drifts, Mixing):
    """One consumer, one state per assigned input partition, four output topics, one store."""

    def __init__(self, settings: Settings, edge: Edge | None = None, *, owns_process: bool = False) -> None:
        self.settings = settings
        self.store = worker_store(settings)
        self.limits = settings.limits.codec_limits()
        self.decoder = BatchDecoder(self.limits)
        # The assigned partitions' states; those revoked stay readable in `released` (for a test or
        # a caller inspecting a stopped worker) and are never reused: an assignment restores anew.
        self.parts: dict[Partition, PartitionState] = {}
        self.released: dict[Partition, PartitionState] = {}
        # The seed: the newest checkpoint at the top of SP_CHECKPOINT__DIR (a `fit` checkpoint, or
        # a version-1 worker's), which starts each partition that has no state of its own.
        self.seed: Checkpoint | None = None
        self.counters = Counters()
        # Why an assigned partition could not be opened (its stored states all damaged, another
        # configuration's): raised by the loop after the poll whose rebalance met it.
        self._refused: CheckpointError | SettingsError | None = None
        self._exactly_once = settings.output.guarantee == "exactly-once"
        self._in_transaction = False  # exactly-once: the interval's transaction is open
        self.checkpoint_ok = True
        # Statistics records sent since the last flush: a checkpoint confirms them even when the
        # model and offsets have not moved, so an idle worker notices a broker that stopped
        # acknowledging (its input stalls with it, and nothing else would ask for a flush).
        self._stats_unflushed = False
        # Why the worker's state must not be checkpointed (None while it may): a batch that did
        # not finish (its rows learned, its offsets not advanced), or outputs given up.
        self._open_batch: str | None = None
        self._lost: str | None = None
        self._stop = threading.Event()
        self._ckpt_policy = Every(settings.checkpoint.every_examples, settings.checkpoint.every_seconds)
        self._stats_policy = Every(settings.stats.every_examples, settings.stats.every_seconds)
        self._stats_seen = 0
        self._stats_time = time.monotonic()
        # At INFO, one progress line and one interval checkpoint's line per SP_LOG_EVERY_SECONDS;
        # the others at DEBUG. At full speed both come due every few ms, and a worker runs for
        # months.
        self._routine_lines = Throttle(settings.log_every_seconds)
        # offsets of stored states whose commit failed; the next checkpoint or the hand-over
        # sends them. Kept only while the partition stays assigned (see _on_revoked).
        self._withheld: dict[Partition, int] = {}
        # The shutdown has begun (its checkpoint flushes in full); its checkpoint failed, so the
        # revocation edge.close() then runs does not try again
        self._shutting_down = False
        self._shutdown_failed = False
        # Bounds the shutdown (see _overran), armed at the signal or when the shutdown begins;
        # only in a process of the worker's own (`stream-perceptron run`): a worker run by another
        # program (the demo, a test) leaves its process to it, and is not bounded.
        bound = settings.checkpoint.shutdown_timeout_s if owns_process else math.inf
        self._deadline = ShutdownDeadline(bound, self._overran)
        self._started = time.monotonic()
        self.edge = edge or open_edge(
            settings.kafka, settings.topics.input, self._on_assigned, self._on_revoked,
            transactional=self._exactly_once,
        )
        # a checkpoint's flush can retry for minutes while the broker is away; /healthz must
        # keep hearing from the worker, which is waiting, not hung
        self.edge.heartbeat = self._alive
        self.edge.stopping = self._stop_pending
        obs = settings.observe
        self.observer = (
            Observer(host=obs.host, port=obs.port, liveness_timeout_s=obs.liveness_timeout_s)
            if obs.enabled
            else None
        )
        out = settings.output.predictions
        self._classes = configured_classes(self.limits)  # names in each prediction's "class"
        self._publish_labeled = out == "all"
        self._publish_unlabeled = out in ("all", "unlabeled")

    # ------------------------------------------------------------------ views
    @property
    def held(self) -> dict[Partition, PartitionState]:
        """The partitions' states held: those assigned, and those released since (readable,
        never reused)."""
        return {**self.released, **self.parts}

    @property
    def learner(self) -> Learner:
        """The learner of the one partition held (assigned, else the last released)."""
        held = self.parts or self.released
        if len(held) != 1:
            raise LookupError(f"the worker holds {len(held)} partitions' states, not one")
        return next(iter(held.values())).learner

    @property
    def offsets(self) -> Offsets:
        """The next offset of each partition held (assigned, or released last) that has one."""
        out: Offsets = {}
        for st in self.held.values():
            if st.next_offset is not None:
                out.setdefault(st.topic, {})[st.partition] = st.next_offset
        return out

    @property
    def dead_letters_total(self) -> int:
        """Dead letters of the partitions held, over their states' lifetimes."""
        return sum(st.dead_letters for st in self.parts.values())

    # ------------------------------------------------------------------ lifecycle
    def restore(self) -> None:
        """Read the seed, if any, and check it fits this model's configuration (fails clearly
        otherwise). Partitions' own states are restored when they are assigned."""
        if isinstance(self.store, DirectoryStore):
            self.store.open()  # a directory it cannot use stops the worker before it connects
            # and so does a stored state of another configuration: found at an assignment, it
            # would stop the worker with its clients in the middle of a rebalance
            model_config = new_learner(self.settings).model.config()
            for topic, part in self.store.partitions():
                stored = self.store.load(topic, part)
                if stored is not None:
                    stored.check_config(model_config)
        seeds = CheckpointStore(self.settings.checkpoint.dir, self.settings.checkpoint.keep)
        seed = seeds.load()
        if seed is None:
            damaged = seeds.files()
            if damaged:
                raise CheckpointError(
                    f"none of the {len(damaged)} checkpoint files in {seeds.directory} is valid"
                    " (see the warnings above); refusing to seed the partitions with zero weights:"
                    " move them away to start afresh"
                )
            return
        # the configuration, and that a state can be built from it (raises CheckpointError)
        PartitionState("seed", -1, new_learner(self.settings), 0).adopt(seed, self.settings, own=False)
        self.seed = seed
        log.info(
            "seed %s: model %s (%d features), %d updates, offsets %s; it starts each partition"
            " that has no stored state", seed.path, seed.model_id,
            len(seed.model.get("weights") or []), int(seed.model.get("mistakes", 0)), seed.offsets,
        )

    def stop(self) -> None:
        """Ask the loop to finish its batch, checkpoint and return (safe from any thread)."""
        self._stop.set()

    def run(self, until: Callable[[Worker], bool] | None = None) -> int:
        """Run until stopped (or ``until(self)`` is true); returns the process exit code."""
        log.info("effective settings: %s", redacted(self.settings))
        try:
            return self._run(until)
        finally:
            self._deadline.disarm()
            self._mix_close()
            self.store.close()

    def _run(self, until: Callable[[Worker], bool] | None) -> int:
        self.restore()
        self._install_signals()
        if self.observer is not None:
            try:
                self.observer.start()
            except OSError as exc:
                raise SettingsError(
                    f"cannot serve /metrics on {self.observer.host}:{self.observer.port}"
                    f" (SP_OBSERVE__PORT): {exc.strerror or exc}"
                ) from None
            log.info("serving /metrics, /healthz, /readyz on %s:%d", self.observer.host, self.observer.port)
        try:
            if not self._start_edge():
                return 0
            tune_gc()
            try:
                self._loop(until)
            finally:
                code = self._shutdown()
            return code
        finally:
            if self.observer is not None:
                self.observer.stop()

    def _loop(self, until: Callable[[Worker], bool] | None) -> None:
        """Poll and process; publish statistics and checkpoint when due; until a stop is asked
        (or ``until(self)``). A stop asked during a poll (a signal, or a revocation checkpoint
        the poll ran) ends the loop once the batches polled are processed: the shutdown's
        statistics record and checkpoint come next, and an interval checkpoint before them
        would only add a round of flush retries against a broker that does not answer.

        The ``consumer_lag`` gauge follows each poll's high-water marks (a statistics record sets
        it too), so after a burst it does not wait up to ``SP_STATS__EVERY_SECONDS`` to show it."""
        poll_ms, max_records = self.settings.kafka.poll_timeout_ms, self.settings.kafka.max_poll_records
        chunk_records = self.settings.output.chunk_records
        while not self._stop.is_set():
            batches = self.edge.poll(poll_ms, max_records)
            if self._refused is not None:  # a partition's state could not be restored
                raise self._refused
            if self.observer is not None:
                self.observer.polled()
            for batch in batches:
                for chunk in batch.chunks(chunk_records):
                    self.process(chunk)
            if self._stop.is_set():
                return
            if self._stats_policy.due():
                self.publish_stats()
            elif self.observer is not None:
                self.observer.lag(self.lag())  # per poll, never per record: one mark per partition
            if self._ckpt_policy.due():
                self.checkpoint("interval")
            if until is not None and until(self):
                return

    def _start_edge(self) -> bool:
        """Check the topics and connect, retrying with backoff until Kafka answers or a stop is
        asked. A refused login and a missing input topic are settings to fix: they raise."""
        delay = 0.5
        while not self._stop.is_set():
            self._alive()
            try:
                self._check_topics()
                self._mix_start()  # the model topic, made before the edge's producer starts
                self.store.open()
                self.edge.start()
                return True
            except KafkaAuthError:
                raise
            except KafkaEdgeError as exc:
                log.warning("Kafka not reachable yet (%s); retrying in %.1f s", exc, delay)
                deadline = time.monotonic() + delay
                while not self._stop.is_set() and (left := deadline - time.monotonic()) > 0:
                    self._alive()  # the backoff can outlast liveness_timeout_s; /healthz must not
                    self._stop.wait(min(left, 1.0))
                delay = min(delay * 2, 30.0)
        return False

    def _stop_pending(self) -> bool:
        """A stop was asked and the shutdown has not begun. A flush in progress then gives up
        (``Edge.stopping``): the shutdown checkpoint flushes again at once, and against a broker
        that does not answer each round of retries costs 5 × request_timeout_ms and more."""
        return self._stop.is_set() and not self._shutting_down

    def _alive(self) -> None:
        """Tell /healthz the process is alive while it waits on Kafka (connecting, or retrying a
        flush, commit or send) rather than polling."""
        if self.observer is not None:
            self.observer.polled()

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

    def _shutdown(self) -> int:
        code, self._shutting_down = 0, True
        self._deadline.arm("the shutdown began")  # counted from the signal when there was one
        try:
            with self._deadline.during("publishing the statistics"):
                self.publish_stats()
            if not self.checkpoint("shutdown"):
                code, self._shutdown_failed = 1, True
        finally:
            with self._deadline.during("closing the Kafka clients"):
                self.edge.close()  # writes the client's lines it still holds back
                self._deadline.disarm()  # done: what remains cannot wait on Kafka
        c, held = self.counters, list(self.held.values())
        mistakes = sum(st.learner.stats.mistakes for st in held)
        labeled = sum(st.learner.stats.labeled for st in held)
        log.info(
            "stopped: %d records, %d predictions, %d dead letters, %d checkpoints (%d failed),"
            " %d partitions last held: %d updates, mistake rate %s",
            c.records, c.predictions, c.dead_letters, c.checkpoints, c.checkpoint_failures,
            len(held), sum(st.learner.model.mistakes for st in held),
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
            self.edge.log_held()
        except Exception:  # noqa: S110 - the line and the exit below matter more than the counts
            pass
        try:
            log.error(  # the CLI's handler flushes each line: it is out before the exit
                "shutdown not done %.1f s after %s (SP_CHECKPOINT__SHUTDOWN_TIMEOUT_S=%g), while %s:"
                " exiting 1 now; a restart resumes from %s",
                elapsed_s, why, self._deadline.seconds, phase, self._resume_point(),
            )
        finally:  # whatever logging does, the exit comes
            self.exit_process(1)

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def handle(signum: int, frame: FrameType | None) -> None:
            # The handler runs between two bytecodes of the main thread, which may be inside a
            # log write of its own: logging here would re-enter that stream ("reentrant call").
            # A thread logs instead, once the main thread lets go of the handler's lock.
            if self._stop.is_set() and signum == signal.SIGINT:
                thread = _log_aside(logging.WARNING,
                                    "second interrupt: exiting at once, without a final checkpoint")
                if thread is not None:
                    thread.join(0.5)  # lost if the main thread holds the lock: exit regardless
                os._exit(130)
            self._stop.set()
            name = signal.Signals(signum).name
            self._deadline.arm(name)  # the grace period counts from here too
            _log_aside(logging.INFO, "%s: finishing the batch, then checkpointing", name)

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    # ------------------------------------------------------------------ rebalances
    def _on_assigned(self, partitions: list[Partition]) -> None:
        if self._shutting_down:  # an assignment the client delivers while it closes: never used
            log.info("assigned %s while shutting down: not taken", partitions)
            return
        self.counters.rebalances += 1
        if self.observer is not None:
            self.observer.rebalance()
            self.observer.assigned(self.edge.assignment())
        for topic, part in partitions:
            try:
                self._take(topic, part)
            except (CheckpointError, SettingsError) as exc:
                # raised from the poll that ran this callback (see _loop), not into the client,
                # which would log it with a traceback before the edge passes it on
                self._refused = exc
                self._stop.set()
                return

    def _take(self, topic: str, part: int) -> None:
        """Open ``topic[part]``'s state (:meth:`_open`) and seek the consumer to where it
        resumes: its state's offset, else the group's commit (else the earliest offset)."""
        st = self._open(topic, part)
        try:
            st.committed = self.edge.committed(topic, part)
        except KafkaEdgeError as exc:  # the stored state still says where to resume
            log.warning("%s: the group's committed offset could not be read (%s): resuming from"
                        " %s, commits not held above it", st.name, exc,
                        "its stored state" if st.next_offset is not None else "where the consumer starts it")
            st.committed = None
        if (self._exactly_once and st.saved_at is not None and st.committed is not None
                and (st.next_offset or 0) < st.committed):
            st = self._caught_up_state(st)
        st.start = st.next_offset if st.next_offset is not None else st.committed
        if st.start is not None:
            self.edge.seek(topic, part, st.start)
        if st.saved_at is None and st.next_offset is None and st.committed:
            log.warning(
                "%s has no stored state but the group committed offset %d: its model starts"
                " from %s there. If another worker learned it, the workers of one group must"
                " share SP_CHECKPOINT__DIR (a shared volume) or use SP_CHECKPOINT__STORE=kafka",
                st.name, st.committed, "the seed" if self.seed is not None else "zero weights",
            )
        log.info(
            "assigned %s: starting at %s (%s), from %s", st.name,
            "the earliest offset" if st.start is None else st.start,
            "stored state" if st.saved_at is not None
            else "seed" if st.next_offset is not None
            else "group commit" if st.start is not None else "new",
            st.origin,
        )

    #: With exactly-once, how long an assignment waits for the state topic to show the state the
    #: group's commit was made with: longer than the broker's transaction timeout (60 s), after
    #: which a transaction left open by a killed worker is aborted and no longer holds it back.
    state_wait_s = 75.0

    def _caught_up_state(self, st: PartitionState) -> PartitionState:
        """Exactly-once commits a partition's state and its offset in one transaction, so the
        state stored is at the group's commit. A state behind it means the state topic's
        newest records are held back from ``read_committed`` readers by a transaction still
        open there (a worker killed in the middle of its commit): read again until they show,
        for at most :attr:`state_wait_s`; after that go on from the state found, saying so."""
        committed, deadline, said = st.committed, time.monotonic() + self.state_wait_s, False
        while (st.next_offset or 0) < (committed or 0) and time.monotonic() < deadline:
            if not said:
                log.warning(
                    "%s: the stored state is at %s, the group's commit at %d: waiting up to %.0f s"
                    " for the state topic's open transaction to end", st.name, st.next_offset,
                    committed, self.state_wait_s)
                said = True
            self._alive()
            time.sleep(1.0)
            st = self._open(st.topic, st.partition)
            st.committed = committed
        if (st.next_offset or 0) < (committed or 0):
            log.warning("%s: the stored state stays at %s, behind the group's commit at %d: going on"
                        " from it; the records between are processed again", st.name,
                        st.next_offset, committed)
        return st

    def _open(self, topic: str, part: int) -> PartitionState:
        """Claim ``topic[part]`` in the store and restore its newest stored state (else the seed,
        else zero weights), replacing whatever this worker held of it before."""
        key = (topic, part)
        self.released.pop(key, None)
        self.parts.pop(key, None)
        st = PartitionState(topic, part, new_learner(self.settings), self.store.claim(topic, part),
                            pending=new_pending(self.settings))
        if self.settings.model.n_features is not None:
            st.width_from = "SP_MODEL__N_FEATURES"
        stored = self.store.load(topic, part)
        if stored is not None:
            st.adopt(stored, self.settings, own=True)
            log.info(
                "restored %s: model %s (%d features), %d updates, %d examples seen, next offset %s",
                stored.path or st.saved_at, st.model_id, st.learner.model.dim or 0,
                st.learner.model.mistakes, st.learner.stats.seen, st.next_offset,
            )
        elif self.seed is not None:
            st.adopt(self.seed, self.settings, own=False)
        self._mix_open(st)
        self.parts[key] = st
        if self.observer is not None and st.learner.stats.seen:
            # the partition's series start at its restored totals: a counter made at 0 and
            # raised at the first statistics record would read to Prometheus as new drifts,
            # mistakes and examples
            self.observer.stats(self.stats_record(st, {}))
        return st

    def _state(self, topic: str, part: int) -> PartitionState:
        """The state of ``topic[part]``, opened now if the partition arrived without an
        assignment this worker saw (a caller feeding :meth:`process` directly)."""
        st = self.parts.get((topic, part))
        return st if st is not None else self._open(topic, part)

    def _on_revoked(self, partitions: list[Partition]) -> None:
        if not partitions:
            return
        try:
            if self._shutdown_failed:
                # A second try a moment later meets the same trouble: against a broker that does
                # not answer it would only add a round of flush retries to the shutdown.
                log.info("revoked %s: the shutdown checkpoint failed a moment ago; not tried again",
                         partitions)
            else:
                log.info("revoked %s: checkpointing", partitions)
                self.checkpoint("revocation", handover=partitions)
        finally:
            # The hand-over has been tried. An offset still not committed is never sent later:
            # by then another worker may own the partition and have moved the group's commit on.
            for key in partitions:
                self._withheld.pop(key, None)
                st = self.parts.pop(key, None)
                if st is not None:
                    self.released[key] = st
        if self.observer is not None:
            gone = set(partitions)
            self.observer.forget(gone)
            self.observer.assigned([tp for tp in self.edge.assignment() if tp not in gone])

    # ------------------------------------------------------------------ the batch
    def process(self, batch: Batch) -> None:
        """Decode, score, learn and publish one partition's batch (offset order), with that
        partition's state only."""
        n = len(batch)
        if not n:
            return
        st = self._state(batch.topic, batch.partition)
        if st.fenced:  # the new owner processes it; this worker's next poll learns it lost it
            return
        self._begun()  # exactly-once: what this batch sends goes into the interval's transaction
        self._open_batch = (
            f"the batch of {st.name} from offset {batch.offsets[0]} did not finish"
        )
        dead_before, labeled, mistakes = self.counters.dead_letters, 0, 0
        decoded = self.decoder.decode_many(batch.values, batch.keys)
        for i, reason in decoded.rejected.items():
            self._dead_letter(st, batch, i, reason)
        xs, rows, ys, ids = decoded.xs, decoded.rows, decoded.ys, decoded.ids
        learner = st.learner
        model = learner.model
        cuts = label_cuts(decoded)  # label records: each joined between the rows around it
        start = 0
        while start < len(xs) or cuts:
            if cuts and cuts[0][0] == start:
                at = cuts.popleft()[1]
                n_labeled, n_mistakes = self._join_label(st, batch, at, decoded.labels[at])
                labeled, mistakes = labeled + n_labeled, mistakes + n_mistakes
                continue
            end = learner.chunk_end(xs, start)
            if cuts:
                end = min(end, cuts[0][0])
            end = self._mix_cut(st, ys, start, end)  # a mixing point ends the chunk
            names_refused = model.names_refused
            X, rejected = model.vectorize_many(xs[start:end])
            chunk_rows, chunk_ys, chunk_ids = rows[start:end], ys[start:end], ids[start:end]
            raw = xs[start:end] if st.pending.max_entries else None
            start = end
            if rejected:
                for k, reason in rejected.items():
                    self._dead_letter(st, batch, chunk_rows[k], reason)
                k, reason = next(iter(rejected.items()))
                # a chunk is all named or all dense rows: its refusals are all of one kind
                self._tell_refusal(st, batch, chunk_rows[k], reason,
                                   names=model.names_refused > names_refused)
                keep = [k for k in range(len(chunk_rows)) if k not in rejected]
                chunk_rows = [chunk_rows[k] for k in keep]
                chunk_ys = [chunk_ys[k] for k in keep]
                chunk_ids = [chunk_ids[k] for k in keep]
                raw = None if raw is None else [raw[k] for k in keep]
            if chunk_rows:
                n_labeled, n_mistakes = self._learn_and_publish(
                    learner, X, batch, chunk_rows, chunk_ys, chunk_ids, st=st, raw=raw)
                labeled, mistakes = labeled + n_labeled, mistakes + n_mistakes
                self._mix_after(st, n_labeled, batch.offsets[chunk_rows[-1]] + 1)
        self._pending_to_end(st, batch)
        st.next_offset = batch.offsets[-1] + 1
        st.dirty = True
        self._open_batch = None
        self.counters.records += n
        self._ckpt_policy.tick(n)
        self._stats_policy.tick(n)
        if self.observer is not None:
            self.observer.batch(topic=st.topic, partition=st.partition, records=n, labeled=labeled,
                                mistakes=mistakes, dead_letters=self.counters.dead_letters - dead_before)
            self.observer.feature_names(model.n_names, model.name_limit,
                                        topic=st.topic, partition=st.partition)

    def _tell_refusal(self, st: PartitionState, batch: Batch, i: int, reason: str, *, names: bool) -> None:
        """Say at WARNING, once per kind and partition, that the model refused the ``i``-th record
        of ``batch`` (a dead letter now) and that the records like it will follow: those bringing
        new names past the bound (``names``), or those that do not fit the model's width. Each
        dead letter is logged at DEBUG only; without this line a stream of them would pass
        unremarked."""
        kind = "names" if names else "width"
        if kind in st.refusals_told:
            return
        st.refusals_told.add(kind)
        where, model = f"{st.name}@{batch.offsets[i]}", st.learner.model
        if names:
            setting = "SP_MODEL__N_FEATURES" if model.n_features is not None else "SP_LIMITS__MAX_NAMES"
            log.warning(
                "%s went to the dead-letter topic: %s; so will every later record whose new feature"
                " names would pass %s=%s (%d names in use; said once, the count is"
                " stream_perceptron_feature_names on /metrics; SP_MODEL__HASH_BITS hashes names"
                " into a fixed width instead)",
                where, reason, setting, model.name_limit, model.n_names,
            )
        else:
            origin = "" if st.width_from is None else f": that width is {st.width_from}"
            log.warning(
                "%s went to the dead-letter topic: %s; so will every record that does not fit the"
                " model's %d features (said once)%s",
                where, reason, model.dim or 0, origin,
            )

    def _learn_and_publish(
        self, learner: Learner, X: Any, batch: Batch, rows: list[int], ys: list[int], ids: list[Any],
        *, st: PartitionState | None = None, raw: Any = None,
    ) -> tuple[int, int]:
        """Learn the decoded rows ``rows`` of ``batch`` with ``learner`` (the partition's) and
        publish their predictions; returns (labeled, mistakes) among them. With ``raw`` (the
        rows' features as decoded), the unlabeled rows with an id wait in ``st.pending`` for
        their late labels."""
        y = np.array(ys, dtype=np.int8)
        model = learner.model
        before = model.mistakes
        result, margin = learner.step(X, y, labeled=y != 0)  # the decoder's 0: no label
        if st is not None and raw is not None:
            self._keep_pending(st, batch, raw, rows, ys, ids, result)
        counts = int((y != 0).sum()), int(result.mistakes.sum())
        if learner.alarms:
            self._publish_drifts(self._state(batch.topic, batch.partition), learner.alarms,
                                 [batch.offsets[r] for r in rows])
        if not (self._publish_labeled or self._publish_unlabeled):
            return counts
        updates = (before + np.cumsum(result.mistakes)).tolist()
        # the served model answers (averaged weights with SP_MODEL__AVERAGE); `mistake` and the
        # margin stay the learning θ's, as the update and E_n are
        scores, preds = result.served_scores.tolist(), result.predictions.tolist()
        flags, margins = result.mistakes.tolist(), margin.tolist()
        if not (self._publish_labeled and self._publish_unlabeled):
            wanted = (self._publish_unlabeled, self._publish_labeled)
            keep = [k for k, label in enumerate(ys) if wanted[label != 0]]
            rows, ys, ids = [rows[k] for k in keep], [ys[k] for k in keep], [ids[k] for k in keep]
            scores, preds = [scores[k] for k in keep], [preds[k] for k in keep]
            flags, margins = [flags[k] for k in keep], [margins[k] for k in keep]
            updates = [updates[k] for k in keep]
        offsets, batch_keys = batch.offsets, batch.keys
        keys = [batch_keys[r] for r in rows]
        values = encode_predictions(
            topic=batch.topic, partition=batch.partition, offsets=[offsets[r] for r in rows],
            keys=keys, ids=ids, predictions=preds, scores=scores, labels=ys, mistakes=flags,
            margins=margins, updates=updates, classes=self._classes,
        )
        self.edge.send_many(self.settings.topics.predictions, keys, values)
        self.counters.predictions += len(values)
        return counts

    def _dead_letter(self, st: PartitionState, batch: Batch, i: int, reason: str) -> None:
        """Send the ``i``-th record of ``batch`` to the dead-letter topic with ``reason``."""
        offset, key, limits = batch.offsets[i], batch.keys[i], self.limits
        body = dead_letter_record(
            topic=batch.topic, partition=batch.partition, offset=offset, key=key, error=reason,
            value=batch.values[i], max_value_bytes=limits.dead_letter_value_bytes,
            max_key_bytes=limits.max_key_bytes,
        )
        if body["key_truncated"]:
            key = None  # the record's key is too long to send; the dead letter keeps its start
        self.edge.send(self.settings.topics.dead_letter, key, encode(body))
        self.counters.dead_letters += 1
        st.dead_letters += 1
        log.debug("dead letter %s[%d]@%d: %s", batch.topic, batch.partition, offset, reason)
