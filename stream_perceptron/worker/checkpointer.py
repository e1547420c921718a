"""The worker's checkpoint/commit protocol: flush the outputs, store each moved partition's state,
then commit the offsets those states hold (README, "Guarantees").

* A state is stored only once every output of the input it covers is acknowledged, and never
  while the worker's state is not one to resume from (a batch that stopped half-way, outputs
  given up).
* A partition's offset is committed only after the state holding it is stored, and never below
  the group's committed offset (read at assignment, raised by each commit): committed offsets
  never go backwards.
* A store that refuses a state because another worker claimed the partition since this one did
  (:class:`~stream_perceptron.errors.FencedError`) leaves the partition to its new owner: this
  worker processes, stores and commits nothing more of it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from stream_perceptron.errors import CheckpointError, FencedError, KafkaEdgeError, UndeliveredError
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.state.store import PartitionStore
from stream_perceptron.throttle import Throttle
from stream_perceptron.worker.deadline import ShutdownDeadline
from stream_perceptron.worker.observe import Observer
from stream_perceptron.worker.partition import PartitionState
from stream_perceptron.worker.policy import Counters, Every

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


class Checkpointing:
    """The checkpoint/commit half of :class:`~stream_perceptron.worker.loop.Worker` (a mixin:
    the attributes below are the worker's, set in its ``__init__``)."""

    edge: Edge
    store: PartitionStore
    parts: dict[Partition, PartitionState]
    observer: Observer | None
    counters: Counters
    checkpoint_ok: bool
    _ckpt_policy: Every
    _deadline: ShutdownDeadline
    _lost: str | None
    _open_batch: str | None
    _routine_lines: Throttle
    _stats_unflushed: bool
    _stop: threading.Event
    _withheld: dict[Partition, int]
    _exactly_once: bool
    _commit_interval: Callable[[str, float], bool]  # the exactly-once checkpoint (transactions.py)

    def checkpoint(self, reason: str, handover: Iterable[Partition] | None = None) -> bool:
        """Flush outputs, store each moved partition's state, then commit their offsets. Returns
        False on failure. ``handover``: the partitions being revoked (all of them at the
        shutdown), whose offsets are committed even when held back before: the next owner's lag
        starts there.

        Nothing is stored for a partition that did not move since its last stored state;
        statistics records sent since are still flushed, and a failure to flush them is reported
        as for any output. Nothing is ever stored once the worker's state is not one to resume
        from: a batch that raised half-way (rows learned, offsets not advanced), or outputs the
        edge gave up (:class:`UndeliveredError`, which also stops the worker). A restart then
        resumes each partition from its last stored state and replays.
        """
        if handover is None and reason == "shutdown":
            handover = list(self.parts)
        # named in the line of a shutdown that overran its deadline while this waited
        with self._deadline.during(f"writing the {reason} checkpoint (flushing the outputs first)"):
            return self._checkpoint(reason, set(handover or ()))

    def _checkpoint(self, reason: str, handover: set[Partition]) -> bool:
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
        if self._exactly_once:  # one transaction: outputs, states and offsets together
            ok = self._commit_interval(reason, started)
            if ok and not self.checkpoint_ok:
                log.info("checkpoint storage works again")
            self.checkpoint_ok = ok
            self._record_checkpoint(ok, started)
            return ok
        moved = [st for st in self.parts.values() if st.dirty and not st.fenced]
        if not (moved or self._stats_unflushed):
            self._commit({}, handover)
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
        if not moved:  # only statistics records to confirm: the stored states still hold
            if self.observer is not None:
                self.observer.outputs_confirmed()
            self._commit({}, handover)
            return True
        stored, places, failure = self._store(moved)
        if failure is not None:
            if self.checkpoint_ok:
                log.error("checkpoint (%s) failed, offsets not committed: %s", reason, failure)
            self.checkpoint_ok = False
            self._record_checkpoint(False, started)
            self._commit(stored, handover)  # those stored before the failure hold
            return False
        if not self.checkpoint_ok:
            log.info("checkpoint storage works again")
        self.checkpoint_ok = True
        self._record_checkpoint(True, started)
        self._commit(stored, handover)
        # every checkpoint but the interval's (a revocation, the shutdown) is logged at INFO
        held = self._routine_lines.allow("checkpoint") if reason == "interval" else 0
        log.log(
            logging.DEBUG if held is None else logging.INFO,
            "checkpoint (%s) in %.1f ms: %d partition states stored (%s), offsets %s%s", reason,
            (time.monotonic() - started) * 1000, len(places), ", ".join(places),
            {f"{t}[{p}]": o for (t, p), o in stored.items()},
            f" ({held} more at DEBUG since the last)" if held else "",
        )
        return True

    def _store(
        self, moved: list[PartitionState]
    ) -> tuple[dict[Partition, int], list[str], CheckpointError | KafkaEdgeError | None]:
        """Store the ``moved`` partitions' states, in turn, until one fails; returns the offsets
        stored, where they went, and the failure (None when none failed). A partition whose
        store refuses it as fenced is left to its new owner."""
        stored: dict[Partition, int] = {}
        places: list[str] = []
        for st in moved:
            offset = st.next_offset
            try:
                place = self.store.save(st.state(), st.epoch)
            except FencedError as exc:
                st.fenced = True
                log.warning("%s; this worker leaves %s to its new owner", exc, st.name)
                continue
            except (CheckpointError, KafkaEdgeError) as exc:  # a file, or the state topic
                return stored, places, exc
            st.dirty, st.saved_at = False, place
            if offset is not None:  # always: a moved partition has processed a batch
                stored[st.key] = offset
            places.append(place)
        return stored, places, None

    def _commit(self, stored: dict[Partition, int], handover: set[Partition]) -> None:
        """Commit the offsets of the states just stored (``stored``) and those held back from
        earlier commits that failed (:attr:`_withheld`), for the partitions still assigned and
        not fenced, each only above the group's committed offset. A failed commit outside a
        hand-over is held back for the next."""
        with self._deadline.during("committing the stored states' offsets to the group"):
            self._commit_assigned(stored, handover)

    def _commit_assigned(self, stored: dict[Partition, int], handover: set[Partition]) -> None:
        """:meth:`_commit`'s work."""
        assigned = set(self.edge.assignment())
        offered = {**self._withheld, **stored}
        commit = {}
        for tp, offset in offered.items():
            st = self.parts.get(tp)
            if tp in assigned and st is not None and not st.fenced and (
                    st.committed is None or offset > st.committed):
                commit[tp] = offset
        self._withheld = {}
        if not commit:
            return
        try:
            self.edge.commit(commit)
        except KafkaEdgeError as exc:  # the stored state is authoritative; the commit is a courtesy
            if handover & set(commit):  # tried again a moment later, it would meet the same refusal
                log.warning("commit after checkpoint failed (the stored states stand): %s", exc)
                return
            self._withheld = commit  # sent again by the next checkpoint, or the hand-over
            log.warning("commit after checkpoint failed (the stored states stand; sent again at the"
                        " next checkpoint or hand-over): %s", exc)
            return
        for tp, offset in commit.items():
            self.parts[tp].committed = offset

    def _resume_point(self) -> str:
        """Where a restart would resume: each held partition's last stored state."""
        if not self.parts:
            return "the partitions' stored states"
        return ", ".join(f"{st.name} from {st.saved_at or 'its start (no stored state yet)'}"
                         for st in self.parts.values())

    def _record_checkpoint(self, ok: bool, started: float) -> None:
        """Count a checkpoint written (``ok``) or failed, and report it with its duration."""
        if ok:
            self.counters.checkpoints += 1
        else:
            self.counters.checkpoint_failures += 1
        if self.observer is not None:
            self.observer.checkpoint(ok=ok, duration_s=time.monotonic() - started)
