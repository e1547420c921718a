"""The worker's checkpoint/commit protocol: flush the outputs, write the checkpoint, then commit
the offsets it holds (README, "Guarantees").

* A checkpoint is written only once every output of the input it covers is acknowledged, and
  never while the state is not one to resume from (a batch that stopped half-way, outputs given
  up).
* Offsets are committed only after the checkpoint holding them is durable; outside a hand-over,
  only those every kept checkpoint holds, so a restart that falls back past a damaged newest file
  replays what it never learned.
* On a hand-over (a revocation, the shutdown) every assigned partition's offset is committed: the
  next owner starts there.
"""

from __future__ import annotations

import logging
import threading
import time

from stream_perceptron.errors import CheckpointError, KafkaEdgeError, UndeliveredError
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.model.learner import Learner
from stream_perceptron.state.checkpoint import Checkpoint, CheckpointStore, Offsets
from stream_perceptron.throttle import Throttle
from stream_perceptron.worker.deadline import ShutdownDeadline
from stream_perceptron.worker.observe import Observer
from stream_perceptron.worker.policy import Counters, Every

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


class Checkpointing:
    """The checkpoint/commit half of :class:`~stream_perceptron.worker.loop.Worker` (a mixin:
    the attributes below are the worker's, set in its ``__init__``)."""

    edge: Edge
    store: CheckpointStore
    learner: Learner
    observer: Observer | None
    counters: Counters
    offsets: Offsets
    model_id: str
    dead_letters_total: int
    checkpoint_ok: bool
    last_checkpoint_path: str | None
    _ckpt_policy: Every
    _deadline: ShutdownDeadline
    _dirty: bool
    _lost: str | None
    _open_batch: str | None
    _routine_lines: Throttle
    _stats_unflushed: bool
    _stop: threading.Event
    _withheld: dict[Partition, int]

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
