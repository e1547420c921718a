"""The worker: decode → score → learn → publish → checkpoint → commit, one poll batch at a time.

Guarantees (README, "Guarantees"):

* The checkpoint is authoritative. On start the worker restores the newest valid checkpoint;
  on assignment it seeks each partition to the checkpoint's offset (the group's committed offset
  only for partitions the checkpoint has never seen). A restart therefore resumes with exactly
  the state it checkpointed and reprocesses what came after.
* Before a checkpoint is written, the producer is flushed, so every input offset the checkpoint
  covers has its prediction (or dead letter) acknowledged by the broker. Kafka offsets are
  committed only after the checkpoint is durable. Outputs are at least once; a record
  re-emitted after a restart is identical to the first (scores do not depend on batch cuts).
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
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np

from stream_perceptron.checkpoint import Checkpoint, CheckpointStore, Offsets, new_model_id
from stream_perceptron.deadline import ShutdownDeadline
from stream_perceptron.edge import Batch, Edge
from stream_perceptron.errors import (
    CheckpointError,
    KafkaAuthError,
    KafkaEdgeError,
    SettingsError,
    UndeliveredError,
)
from stream_perceptron.kafka_io import KafkaEdge, ensure_topics, missing_topics
from stream_perceptron.learner import Learner
from stream_perceptron.observe import Observer
from stream_perceptron.perceptron import Perceptron
from stream_perceptron.records import (
    BatchDecoder,
    dead_letter_record,
    encode,
    encode_predictions,
)
from stream_perceptron.runtime import tune_gc
from stream_perceptron.settings import KafkaSettings, Settings, redacted
from stream_perceptron.stats import RunningStats
from stream_perceptron.throttle import Throttle

log = logging.getLogger(__name__)

Partition = tuple[str, int]

# The feature matrix of one learned chunk stays under this many bytes.
_MATRIX_BYTES = 16 << 20


def _log_aside(level: int, msg: str, *args: object) -> threading.Thread | None:
    """Log ``msg`` from a thread of its own (for a signal handler); returns the thread, started,
    or None when no thread could start (at a process limit: the line is lost, nothing else)."""
    thread = threading.Thread(target=log.log, args=(level, msg, *args), name="sp-signal-log", daemon=True)
    try:
        thread.start()
    except RuntimeError:
        return None
    return thread


def open_edge(
    kafka: KafkaSettings,
    input_topic: str,
    on_assigned: Callable[[list[Partition]], None],
    on_revoked: Callable[[list[Partition]], None],
) -> Edge:
    """The Kafka edge of the configured backend (``kafka.backend``); both have one interface."""
    if kafka.backend == "confluent-kafka":
        try:
            from stream_perceptron.kafka_confluent import ConfluentEdge
        except ImportError as exc:
            raise SettingsError(
                "SP_KAFKA__BACKEND=confluent-kafka needs the confluent-kafka package"
                f" (pip install 'stream-perceptron[confluent]'): {exc}"
            ) from None
        edge: Edge = ConfluentEdge(kafka, input_topic, on_assigned, on_revoked)
        return edge
    if kafka.producer_process:
        from stream_perceptron.kafka_producer_process import SplitKafkaEdge

        return SplitKafkaEdge(kafka, input_topic, on_assigned, on_revoked)
    return KafkaEdge(kafka, input_topic, on_assigned, on_revoked)


@dataclass
class Every:
    """A policy that falls due every ``examples`` examples or ``seconds`` seconds (monotonic)."""

    examples: int
    seconds: float
    clock: Callable[[], float] = time.monotonic
    count: int = 0
    since: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.since = self.clock()

    def tick(self, n: int) -> None:
        self.count += n

    def due(self) -> bool:
        return self.count >= self.examples or self.clock() - self.since >= self.seconds

    def reset(self) -> None:
        self.count, self.since = 0, self.clock()


@dataclass
class Counters:
    """What the worker has done since it started (dead letters are also kept in checkpoints)."""

    records: int = 0
    predictions: int = 0
    dead_letters: int = 0
    checkpoints: int = 0
    checkpoint_failures: int = 0
    rebalances: int = 0


class Worker:
    """One model, fed by one consumer, publishing to three topics, checkpointing to one directory."""

    def __init__(self, settings: Settings, edge: Edge | None = None, *, owns_process: bool = False) -> None:
        self.settings = settings
        m, s = settings.model, settings.stats
        self.learner = Learner(
            Perceptron(n_features=m.n_features, fit_intercept=m.fit_intercept,
                       max_names=settings.limits.max_names),
            RunningStats(window=s.window, ewma_alpha=s.ewma_alpha),
        )
        self.store = CheckpointStore(settings.checkpoint.dir, settings.checkpoint.keep)
        self.limits = settings.limits.codec_limits()
        self.decoder = BatchDecoder(self.limits)
        self.offsets: Offsets = {}
        # The model's identity: minted here for a model that begins now, else the checkpoint's
        # (restore), so a worker's statistics stay one series across restarts and moves.
        self.model_id = new_model_id()
        self.dead_letters_total = 0
        self.counters = Counters()
        self.checkpoint_ok = True
        self.last_checkpoint_path: str | None = None
        self._dirty = False
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
        # Where each assigned partition started (checkpoint or group commit): the position of one
        # with nothing processed yet, for lag and caught_up (never checkpointed).
        self._starts: dict[Partition, int] = {}
        # offsets of the last checkpoint not yet committed: partitions not every kept checkpoint
        # holds (CheckpointStore.held_by_all), or whose commit failed; a revocation or shutdown
        # hands them over. Kept only while the partition stays assigned (see _on_revoked).
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
            settings.kafka, settings.topics.input, self._on_assigned, self._on_revoked
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
        self._publish_labeled = out == "all"
        self._publish_unlabeled = out in ("all", "unlabeled")

    # ------------------------------------------------------------------ lifecycle
    def restore(self) -> None:
        """Load the newest valid checkpoint, if any (fails clearly on another configuration)."""
        ckpt = self.store.load()
        if ckpt is None:
            damaged = self.store.files()
            if damaged:
                raise CheckpointError(
                    f"none of the {len(damaged)} checkpoint files in {self.store.directory} is valid"
                    " (see the warnings above); refusing to start from zero weights: move them away"
                    " to start afresh"
                )
            log.info("no checkpoint in %s: starting from zero weights (model %s)",
                     self.store.directory, self.model_id)
            return
        try:
            model = self.learner.model
            ckpt.check_config(model.config())
            if model.n_features is None and isinstance(ckpt.config.get("n_features"), int):
                model.n_features = ckpt.config["n_features"]  # unset here: the checkpoint's holds
            self.learner.restore(ckpt.model, ckpt.stats)
            dead_letters = int(ckpt.stats.get("dead_letters", 0))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # the checksum holds, so the file is intact: written by something else, not damaged
            raise CheckpointError(
                f"checkpoint {ckpt.path} is intact but not one this worker can restore"
                f" ({type(exc).__name__}: {exc}): move it away, or fix what wrote it"
            ) from None
        self.offsets = {t: dict(p) for t, p in ckpt.offsets.items()}
        self.dead_letters_total = dead_letters
        if ckpt.model_id is not None:  # None only for a Checkpoint not read from a file
            self.model_id = ckpt.model_id
        self.last_checkpoint_path = str(ckpt.path)
        self._stats_seen, self._stats_time = self.learner.stats.seen, time.monotonic()
        if self.observer is not None:
            self.observer.stats({**self.learner.stats.snapshot(), "dead_letters": self.dead_letters_total})
        log.info(
            "restored %s: model %s, %d updates, %d examples seen, offsets %s",
            ckpt.path, self.model_id, self.learner.model.mistakes, self.learner.stats.seen, ckpt.offsets,
        )

    def stop(self) -> None:
        """Ask the loop to finish its batch, checkpoint and return (safe from any thread)."""
        self._stop.set()

    def run(self, until: Callable[[Worker], bool] | None = None) -> int:
        """Run until stopped (or ``until(self)`` is true); returns the process exit code.

        The checkpoint directory is held (:meth:`CheckpointStore.lock`) from before the restore
        to the end: a second worker on it stops with one line.
        """
        log.info("effective settings: %s", redacted(self.settings))
        self.store.lock()
        try:
            return self._run(until)
        finally:
            self._deadline.disarm()
            self.store.unlock()

    def _run(self, until: Callable[[Worker], bool] | None) -> int:
        self.restore()
        self._install_signals()
        if self.observer is not None:
            self.observer.model(self.model_id)
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
        would only add a round of flush retries against a broker that does not answer."""
        poll_ms, max_records = self.settings.kafka.poll_timeout_ms, self.settings.kafka.max_poll_records
        chunk_records = self.settings.output.chunk_records
        while not self._stop.is_set():
            batches = self.edge.poll(poll_ms, max_records)
            if self.observer is not None:
                self.observer.polled()
            for batch in batches:
                for chunk in batch.chunks(chunk_records):
                    self.process(chunk)
            if self._stop.is_set():
                return
            if self._stats_policy.due():
                self.publish_stats()
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
            ensure_topics(kafka, {t.predictions: 1, t.stats: 1, t.dead_letter: 1}, timeout_s)
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
        c = self.counters
        log.info(
            "stopped: %d records, %d predictions, %d dead letters, %d checkpoints (%d failed),"
            " %d updates, mistake rate %s",
            c.records, c.predictions, c.dead_letters, c.checkpoints, c.checkpoint_failures,
            self.learner.model.mistakes, self.learner.stats.snapshot()["mistake_rate"],
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
        self.counters.rebalances += 1
        if self.observer is not None:
            self.observer.rebalance()
            self.observer.assigned(self.edge.assignment())
        for topic, part in partitions:
            mine = self.offsets.get(topic, {}).get(part)
            start = mine if mine is not None else self.edge.committed(topic, part)
            if start is not None:
                self.edge.seek(topic, part, start)
                self._starts[(topic, part)] = start
            log.info(
                "assigned %s[%d]: starting at %s (%s)", topic, part,
                "the earliest offset" if start is None else start,
                "checkpoint" if mine is not None else "group commit" if start is not None else "new",
            )

    def _on_revoked(self, partitions: list[Partition]) -> None:
        for key in partitions:
            self._starts.pop(key, None)
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
                self.checkpoint("revocation")
        finally:
            # The hand-over has been tried. An offset still not committed is never sent later:
            # by then another worker may own the partition and have moved the group's commit on.
            for key in partitions:
                self._withheld.pop(key, None)
        if self.observer is not None:
            gone = set(partitions)
            self.observer.assigned([tp for tp in self.edge.assignment() if tp not in gone])

    def caught_up(self) -> bool:
        """Every assigned partition processed up to its high-water mark (from fetch responses)."""
        assigned = self.edge.assignment()
        return bool(assigned) and all(self._behind(topic, part) == 0 for topic, part in assigned)

    def _behind(self, topic: str, part: int) -> int | None:
        """Records between the next offset to process and the fetch high-water mark (None while
        the mark is unknown). The next offset is past the last one processed, else where the
        partition started (a group commit, with nothing after it yet), else 0."""
        hw = self.edge.highwater(topic, part)
        if hw is None:
            return None
        done = self.offsets.get(topic, {}).get(part)
        return max(0, hw - (done if done is not None else self._starts.get((topic, part), 0)))

    # ------------------------------------------------------------------ the batch
    def process(self, batch: Batch) -> None:
        """Decode, score, learn and publish one partition's batch (offset order)."""
        n = len(batch)
        if not n:
            return
        self._open_batch = (
            f"the batch of {batch.topic}[{batch.partition}] from offset {batch.offsets[0]} did not finish"
        )
        dead_before, labeled, mistakes = self.counters.dead_letters, 0, 0
        decoded = self.decoder.decode_many(batch.values, batch.keys)
        for i, reason in decoded.rejected.items():
            self._dead_letter(batch, i, reason)
        xs, rows, ys, ids = decoded.xs, decoded.rows, decoded.ys, decoded.ids
        start = 0
        while start < len(xs):
            # Consecutive rows of one kind are learned together, never named and dense mixed, so
            # a record is summed the same way wherever the batch was cut. Named rows are held
            # sparse (memory grows with the values given); wide dense rows go in smaller blocks.
            x0 = xs[start]
            named = isinstance(x0, dict)
            limit = len(xs)
            if not named:
                width = max(self.learner.model.dim or 0, len(x0), 1)
                limit = min(limit, start + max(1, _MATRIX_BYTES // (8 * width)))
            end = (
                limit
                if isinstance(xs, np.ndarray)  # one dense matrix
                else next((j for j in range(start + 1, limit) if isinstance(xs[j], dict) is not named), limit)
            )
            X, rejected = self.learner.model.vectorize_many(xs[start:end])
            chunk_rows, chunk_ys, chunk_ids = rows[start:end], ys[start:end], ids[start:end]
            start = end
            if rejected:
                for k, reason in rejected.items():
                    self._dead_letter(batch, chunk_rows[k], reason)
                keep = [k for k in range(len(chunk_rows)) if k not in rejected]
                chunk_rows = [chunk_rows[k] for k in keep]
                chunk_ys = [chunk_ys[k] for k in keep]
                chunk_ids = [chunk_ids[k] for k in keep]
            if chunk_rows:
                n_labeled, n_mistakes = self._learn_and_publish(X, batch, chunk_rows, chunk_ys, chunk_ids)
                labeled, mistakes = labeled + n_labeled, mistakes + n_mistakes
        self.offsets.setdefault(batch.topic, {})[batch.partition] = batch.offsets[-1] + 1
        self._open_batch = None
        self.counters.records += n
        self._ckpt_policy.tick(n)
        self._stats_policy.tick(n)
        self._dirty = True
        if self.observer is not None:
            self.observer.batch(records=n, labeled=labeled, mistakes=mistakes,
                                dead_letters=self.counters.dead_letters - dead_before)

    def _learn_and_publish(
        self, X: Any, batch: Batch, rows: list[int], ys: list[int], ids: list[Any]
    ) -> tuple[int, int]:
        """Learn the decoded rows ``rows`` of ``batch`` and publish their predictions; returns
        (labeled, mistakes) among them."""
        y = np.array(ys, dtype=np.int8)
        model = self.learner.model
        before = model.mistakes
        result, margin = self.learner.step(X, y)
        counts = int((y != 0).sum()), int(result.mistakes.sum())
        if not (self._publish_labeled or self._publish_unlabeled):
            return counts
        updates = (before + np.cumsum(result.mistakes)).tolist()
        scores, preds = result.scores.tolist(), result.predictions.tolist()
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
            margins=margins, updates=updates,
        )
        self.edge.send_many(self.settings.topics.predictions, keys, values)
        self.counters.predictions += len(values)
        return counts

    def _dead_letter(self, batch: Batch, i: int, reason: str) -> None:
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
        self.dead_letters_total += 1
        log.debug("dead letter %s[%d]@%d: %s", batch.topic, batch.partition, offset, reason)

    # ------------------------------------------------------------------ durability
    def checkpoint(self, reason: str) -> bool:
        """Flush outputs, write a checkpoint, then commit its offsets. Returns False on failure.

        Nothing is written when nothing changed since the last durable checkpoint; statistics
        records sent since are still flushed, and a failure to flush them is reported as for any
        output. Nothing is ever written once the state is not one to resume from: a batch that
        raised half-way (rows learned, offsets not advanced), or outputs the edge gave up
        (:class:`UndeliveredError`, which also stops the worker). A restart then resumes from the
        last checkpoint and replays.
        """
        # named in the line of a shutdown that overran its deadline while this waited
        with self._deadline.during(f"writing the {reason} checkpoint (flushing the outputs first)"):
            return self._checkpoint(reason)

    def _checkpoint(self, reason: str) -> bool:
        """:meth:`checkpoint`'s work."""
        self._ckpt_policy.reset()
        started = time.monotonic()
        unsafe = self._open_batch or self._lost
        if unsafe is not None:
            self.checkpoint_ok = False
            log.error(
                "checkpoint (%s) not written: %s; a restart resumes from %s", reason, unsafe,
                self._resume_point(),
            )
            self._record_checkpoint(False, started)
            return False
        handoff = reason in ("revocation", "shutdown")  # the partitions may go to another worker
        if not (self._dirty or self._stats_unflushed):
            if handoff:
                self._commit(self._withheld, handoff=True)
            return True
        try:
            self.edge.flush()
        except UndeliveredError as exc:
            self._lost = f"outputs were given up ({exc})"
            self._stop.set()
            log.error(
                "stopping: outputs since the last checkpoint were given up: %s; a restart resumes"
                " from %s and sends them again", exc, self._resume_point(),
            )
            self._record_checkpoint(False, started)
            return False
        except KafkaEdgeError as exc:
            log.error("checkpoint (%s) postponed: outputs not acknowledged: %s", reason, exc)
            self._record_checkpoint(False, started)
            return False
        self._stats_unflushed = False
        if not self._dirty:  # only statistics records to confirm: the last checkpoint still holds
            if self.observer is not None:
                self.observer.outputs_confirmed()
            if handoff:
                self._commit(self._withheld, handoff=True)
            return True
        model_state, stats_state = self.learner.state()
        stats_state["dead_letters"] = self.dead_letters_total
        snapshot = {t: dict(p) for t, p in self.offsets.items()}
        try:
            path = self.store.save(
                Checkpoint(model_state, self.learner.model.config(), stats_state, snapshot,
                           model_id=self.model_id)
            )
        except CheckpointError as exc:
            if self.checkpoint_ok:
                log.error("checkpoint (%s) failed, offsets not committed: %s", reason, exc)
            self.checkpoint_ok = False
            self._record_checkpoint(False, started)
            return False
        self.last_checkpoint_path = str(path)
        if not self.checkpoint_ok:
            log.info("checkpoint storage works again")
        self.checkpoint_ok = True
        self._dirty = False
        self._record_checkpoint(True, started)
        self._commit({(t, p): o for t, ps in snapshot.items() for p, o in ps.items()}, handoff=handoff)
        # every checkpoint but the interval's (a revocation, the shutdown) is logged at INFO
        held = self._routine_lines.allow("checkpoint") if reason == "interval" else 0
        log.log(
            logging.DEBUG if held is None else logging.INFO,
            "checkpoint %s (%s) in %.1f ms: offsets %s%s", path.name, reason,
            (time.monotonic() - started) * 1000, snapshot,
            f" ({held} more at DEBUG since the last)" if held else "",
        )
        return True

    def _commit(self, saved: dict[Partition, int], *, handoff: bool) -> None:
        """Commit the offsets of the checkpoint just written (``saved``), or those held back
        from earlier ones (:attr:`_withheld`), for the partitions assigned: all of them on a
        ``handoff`` (a revocation or shutdown: the next owner starts there), otherwise only those
        every kept checkpoint holds, so that a restart falling back past a damaged newest file
        replays what the checkpoint it restores never learned. Offsets whose commit failed
        outside a hand-over are held back for the next."""
        with self._deadline.during("committing the checkpoint's offsets to the group"):
            self._commit_assigned(saved, handoff=handoff)

    def _commit_assigned(self, saved: dict[Partition, int], *, handoff: bool) -> None:
        """:meth:`_commit`'s work."""
        assigned = set(self.edge.assignment())
        safe = None if handoff else self.store.held_by_all()
        commit = {tp: o for tp, o in saved.items() if tp in assigned and (safe is None or tp in safe)}
        self._withheld = {tp: o for tp, o in saved.items() if tp in assigned and tp not in commit}
        if not commit:
            return
        try:
            self.edge.commit(commit)
        except KafkaEdgeError as exc:  # the checkpoint is authoritative; the commit is a courtesy
            if handoff:  # tried again a moment later, it would meet the same refusal
                log.warning("commit after checkpoint failed (the checkpoint stands): %s", exc)
                return
            self._withheld.update(commit)  # sent again by the next checkpoint, or the hand-over
            log.warning("commit after checkpoint failed (the checkpoint stands; sent again at the"
                        " next checkpoint or hand-over): %s", exc)

    def _resume_point(self) -> str:
        """Where a restart would resume: the last durable checkpoint."""
        return self.last_checkpoint_path or "the start (no checkpoint yet)"

    def _record_checkpoint(self, ok: bool, started: float) -> None:
        """Count a checkpoint written (``ok``) or failed, and report it with its duration."""
        if ok:
            self.counters.checkpoints += 1
        else:
            self.counters.checkpoint_failures += 1
        if self.observer is not None:
            self.observer.checkpoint(ok=ok, duration_s=time.monotonic() - started)

    # ------------------------------------------------------------------ statistics
    def lag(self) -> dict[Partition, int]:
        """Records behind the fetch high-water mark, per assigned partition (known ones only)."""
        behind = {tp: self._behind(*tp) for tp in self.edge.assignment()}
        return {tp: n for tp, n in behind.items() if n is not None}

    def stats_record(self, lags: dict[Partition, int] | None = None) -> dict[str, Any]:
        """The statistics record: the running statistics plus throughput, dead letters, offsets, lag."""
        lags = self.lag() if lags is None else lags
        now = time.monotonic()
        snap = self.learner.stats.snapshot()
        seen = snap["seen"]
        elapsed = now - self._stats_time
        rate = (seen - self._stats_seen) / elapsed if elapsed > 0 else None
        self._stats_seen, self._stats_time = seen, now
        return {
            **snap,
            "updates": self.learner.model.mistakes,
            "intercept": self.learner.model.intercept,
            "examples_per_s": rate,
            "dead_letters": self.dead_letters_total,
            "offsets": {t: {str(p): o for p, o in ps.items()} for t, ps in self.offsets.items()},
            "lag": {f"{t}:{p}": n for (t, p), n in lags.items()},
            "ts": time.time(),
            "uptime_s": now - self._started,
            "client_id": self.settings.kafka.client_id,
            "model_id": self.model_id,
        }

    def publish_stats(self) -> dict[str, Any]:
        """Send a statistics record and log the headline figures (at INFO at most once per
        ``SP_LOG_EVERY_SECONDS``, and at the shutdown; otherwise at DEBUG)."""
        self._stats_policy.reset()
        lags = self.lag()
        rec = self.stats_record(lags)
        self.edge.send(self.settings.topics.stats, None, encode(rec))
        self._stats_unflushed = True
        if self.observer is not None:
            self.observer.stats(rec)
            self.observer.lag(lags)
        rate = rec["mistake_rate"]
        shown = self._shutting_down or self._routine_lines.allow("progress") is not None
        log.log(
            logging.INFO if shown else logging.DEBUG,
            "seen %d, labeled %d, mistakes %d (rate %s, window %s), %s examples/s, %d dead letters",
            rec["seen"], rec["labeled"], rec["mistakes"],
            "n/a" if rate is None else f"{rate:.4f}",
            "n/a" if rec["window_mistake_rate"] is None else f"{rec['window_mistake_rate']:.4f}",
            "n/a" if rec["examples_per_s"] is None else f"{rec['examples_per_s']:.0f}",
            rec["dead_letters"],
        )
        return rec
