"""The checkpoint: the outputs confirmed, each moved partition's state stored, and the offsets those
states hold committed (README, "Guarantees"). Two kinds, chosen when the worker is built:

:class:`Checkpointer` (at-least-once): flush the outputs, store each moved partition's state,
then commit its offset.

* A state is stored only once every output of the input it covers is acknowledged, and never
  while the worker's state is not one to resume from (a batch that stopped half-way, outputs
  given up).
* A partition's offset is committed only after the state holding it is stored, and never below
  the group's committed offset (read at assignment, raised by each commit): committed offsets
  never go backwards.
* A store that refuses a state because another worker claimed the partition since this one did
  (:class:`~stream_perceptron.errors.FencedError`) leaves the partition to its new owner: this
  worker processes, stores and commits nothing more of it.
* With ``background`` (the directory store), the loop's interval checkpoint runs beside the loop:
  it takes each moved partition's state (a snapshot of plain data), then a thread of its own
  flushes the outputs sent so far while the records sent meanwhile are held back
  (:meth:`~stream_perceptron.worker.outputs.Outputs.hold`), then stores the snapshot; the loop's
  thread releases the held records once the flush is done, and commits the offsets once the
  states are stored (:meth:`Checkpointer.settle`). So the order above holds: a state is stored
  only after the outputs it covers are acknowledged, its offsets committed only after it is
  stored. At most one is in flight; the loop holds back at most one poll's records; an interval
  checkpoint that comes due while one is in flight waits for it; every other checkpoint, and
  every assignment, settles it first. A partition that moved since its snapshot stays one to
  store.

:class:`TransactionalCheckpointer` (exactly-once, ``SP_OUTPUT__GUARANTEE=exactly-once``, on the
Kafka store): each checkpoint interval is one Kafka transaction. It holds what the interval
published (the predictions, statistics records and dead letters), then the state records of
every partition that moved (chunks, manifest last), then the partitions' next input offsets,
sent with the consumer's group membership (KIP-447), and it commits them together:

* a ``read_committed`` reader of the output topics sees each input offset's records once, and
  only from a transaction whose states and offsets committed with them;
* a restore reads the state topic ``read_committed``, so a state is restored only with the
  outputs of the records it learned;
* a worker that lost its partitions (stalled past its session, then resumed) is refused by the
  group coordinator at the commit: nothing of its transaction becomes visible.

A transaction that aborts (refused, fenced, a record not delivered), or whose outcome the broker
never told, leaves the worker's in-memory states ahead of what is committed: every partition it
still holds is restored again from the store and the consumer sought back there, so what follows
is exactly what a new owner would do.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from stream_perceptron.errors import (
    CheckpointError,
    FencedError,
    KafkaEdgeError,
    TransactionAbortedError,
    UndeliveredError,
)
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.state.store import PartitionStore, TransactionalStore
from stream_perceptron.state.stored import StoredState
from stream_perceptron.throttle import Throttle
from stream_perceptron.worker.assignment import Partitions
from stream_perceptron.worker.deadline import ShutdownDeadline
from stream_perceptron.worker.observe import NullObserver, Observer
from stream_perceptron.worker.outputs import Outputs
from stream_perceptron.worker.partition import PartitionState
from stream_perceptron.worker.policy import Counters, Every

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line

Snapshot = list[tuple[PartitionState, int, StoredState, int]]
"""Each moved partition's state, taken once its outputs were confirmed: (partition, offset,
state, epoch)."""


@dataclass
class Saved:
    """What storing a :data:`Snapshot` did: the states stored (partition, offset, where), the
    partitions a store refused as fenced, and the failure that stopped it (None if none)."""

    stored: list[tuple[PartitionState, int, str]] = field(default_factory=list)
    fenced: list[tuple[PartitionState, FencedError]] = field(default_factory=list)
    failure: CheckpointError | KafkaEdgeError | None = None


@dataclass
class _InFlight:
    """An interval checkpoint running beside the loop: its flush (``stage`` "flush"), then the
    storing of its snapshot ("save")."""

    future: Future[Any]
    reason: str
    started: float
    snapshot: Snapshot
    mark: int  # the outputs' count when the flush began
    stage: str = "flush"


class _Background:
    """One daemon thread running the calls handed to it, in turn (started at the first)."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._calls.put((future, call))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sp-checkpoint", daemon=True)
            self._thread.start()
        return future

    def _run(self) -> None:
        while True:
            future, call = self._calls.get()
            try:
                future.set_result(call())
            except BaseException as exc:  # handed to the loop's thread, which raises it
                future.set_exception(exc)


class Checkpointer:
    """At-least-once checkpoints (see the module's docstring), every ``policy`` and on demand.

    ``stop`` asks the worker to stop: called when outputs were given up, after which nothing is
    stored again."""

    def __init__(self, edge: Edge, store: PartitionStore, partitions: Partitions, outputs: Outputs, *,
                 policy: Every, deadline: ShutdownDeadline, observer: Observer | NullObserver,
                 counters: Counters, lines: Throttle, stop: Callable[[], None],
                 background: bool = False) -> None:
        self._edge = edge
        self._store = store
        self._partitions = partitions
        self._outputs = outputs
        self._policy = policy
        self._deadline = deadline
        self._observer = observer
        self._counters = counters
        self._lines = lines
        self._stop = stop
        self.ok = True
        """The last checkpoint succeeded (or none was tried yet)."""
        # Why the worker's state must not be stored (None while it may): a batch that did not
        # finish (its rows learned, its offsets not advanced), or outputs given up.
        self._open_batch: str | None = None
        self._lost: str | None = None
        # Offsets of stored states whose commit failed; the next checkpoint or the hand-over
        # sends them. Kept only while the partition stays assigned (see forget).
        self._withheld: dict[Partition, int] = {}
        self._background = background
        self._aside = False  # this checkpoint runs beside the loop
        self._in_flight: _InFlight | None = None
        self._thread = _Background() if background else None

    # ------------------------------------------------------------------ the worker's calls
    def tick(self, n: int) -> None:
        """Count ``n`` records processed."""
        self._policy.tick(n)

    def due(self) -> bool:
        """An interval checkpoint is due (examples or seconds since the last)."""
        return self._policy.due()

    @contextmanager
    def batch(self, what: str) -> Iterator[None]:
        """Around one batch's processing: while it runs, and for good when it raises, the
        worker's state is not one to resume from (``what`` names the batch in the error)."""
        self._open_batch = f"{what} did not finish"
        yield
        self._open_batch = None

    def forget(self, partitions: Iterable[Partition]) -> None:
        """The ``partitions`` are handed over: an offset still withheld is never sent later (by
        then another worker may own the partition and have moved the group's commit on)."""
        for key in partitions:
            self._withheld.pop(key, None)

    def checkpoint(self, reason: str, handover: Iterable[Partition] | None = None, *, aside: bool = False
                   ) -> bool:
        """Confirm the outputs, store each moved partition's state, commit their offsets;
        returns False on failure. ``handover``: the partitions being revoked (all of them at the
        shutdown), whose offsets are committed even when held back before: the next owner's lag
        starts there.

        Nothing is stored for a partition that did not move since its last stored state;
        records sent since are still confirmed, and a failure to confirm them is reported as for
        any output. Nothing is ever stored once the worker's state is not one to resume from.
        A restart then resumes each partition from its last stored state and replays.

        ``aside`` (the loop's interval checkpoints, with ``background``): the checkpoint runs
        beside the loop and :meth:`settle` finishes it (the module's docstring); it returns True,
        and does nothing while one is in flight (the checkpoint stays due).
        """
        if aside and self._in_flight is not None and not self._in_flight.future.done():
            return True
        if handover is None and reason == "shutdown":
            handover = list(self._partitions.assigned)
        # named in the line of a shutdown that overran its deadline while this waited
        with self._deadline.during(f"writing the {reason} checkpoint (flushing the outputs first)"):
            self.settle(wait=True)
            self._aside = aside and self._background
            self._policy.reset()
            started = time.monotonic()
            unsafe = self._open_batch or self._lost
            if unsafe is not None:
                self.ok = False
                log.error("checkpoint (%s) not written: %s; a restart resumes from %s", reason, unsafe,
                          self._partitions.resume_point())
                self._record(False, started)
                return False
            return self._checkpoint(reason, set(handover or ()), started)

    # ------------------------------------------------------------------ at-least-once
    def _moved(self) -> list[PartitionState]:
        return [st for st in self._partitions.assigned.values() if st.dirty and not st.fenced]

    def _checkpoint(self, reason: str, handover: set[Partition], started: float) -> bool:
        moved = self._moved()
        if not (moved or self._outputs.unconfirmed):
            self._commit({}, handover)
            return True
        snapshot = [(st, st.next_offset, st.state(), st.epoch) for st in moved if st.next_offset is not None]
        if self._aside and self._thread is not None and not handover:
            flush, mark = self._outputs.hold()
            self._in_flight = _InFlight(self._thread.submit(lambda: _flushed(flush)), reason, started,
                                        snapshot, mark)
            return True
        failed = _flushed(self._outputs.flush)
        if failed is not None:
            return self._not_flushed(failed, reason, started)
        if not snapshot:  # only statistics records to confirm: the stored states still hold
            self._observer.outputs_confirmed()
            self._commit({}, handover)
            return True
        return self._stored(self._save(snapshot), reason, handover, started)

    @property
    def holding(self) -> bool:
        """A checkpoint's flush runs beside the loop, and the outputs sent meanwhile are held."""
        return self._in_flight is not None and self._in_flight.stage == "flush"

    def settle(self, *, wait: bool = False, release: bool = False) -> None:
        """Take the checkpoint running beside the loop as far as it has come: once its flush is
        done, the held outputs are sent and its states go to be stored; once they are stored, its
        offsets are committed, its outcome counted and logged. ``wait``: wait until it is
        finished; ``release``: until the held outputs are sent. Nothing when none is in flight."""
        while (flight := self._in_flight) is not None:
            if not flight.future.done() and not (wait or release and flight.stage == "flush"):
                return
            outcome = flight.future.result()  # raises what the thread raised
            if flight.stage == "save":
                self._in_flight = None
                self._stored(outcome, flight.reason, set(), flight.started)
                return
            self._outputs.release()
            if outcome is not None:
                self._in_flight = None
                self._not_flushed(outcome, flight.reason, flight.started)
                return
            self._outputs.confirmed_up_to(flight.mark)
            if not flight.snapshot:
                self._in_flight = None
                self._observer.outputs_confirmed()
                self._commit({}, set())
                return
            assert self._thread is not None
            flight.stage = "save"
            flight.future = self._thread.submit(functools.partial(self._save, flight.snapshot))

    def _not_flushed(self, exc: KafkaEdgeError, reason: str, started: float) -> bool:
        """A checkpoint whose outputs were not acknowledged: given up (the worker stops), or not
        yet (postponed: the next checkpoint tries again)."""
        if isinstance(exc, UndeliveredError):
            self._lost = f"outputs were given up ({exc})"
            self._stop()
            log.error(
                "stopping: outputs since the last checkpoint were given up: %s; a restart resumes"
                " from %s and sends them again", exc, self._partitions.resume_point(),
            )
        else:
            log.error("checkpoint (%s) postponed: outputs not acknowledged: %s", reason, exc)
        self._record(False, started)
        return False

    def _stored(self, saved: Saved, reason: str, handover: set[Partition], started: float) -> bool:
        """Account for the states ``saved`` stored: each stored partition that has not moved since
        is clean; a fenced one is left to its new owner; the offsets stored are committed."""
        for st, exc in saved.fenced:
            st.fenced = True
            log.warning("%s; this worker leaves %s to its new owner", exc, st.name)
        stored: dict[Partition, int] = {}
        places: list[str] = []
        for st, offset, place in saved.stored:
            st.dirty, st.saved_at = st.dirty and st.next_offset != offset, place
            stored[st.key] = offset
            places.append(place)
        failure = saved.failure
        if failure is not None:
            if self.ok:
                log.error("checkpoint (%s) failed, offsets not committed: %s", reason, failure)
            self.ok = False
            self._record(False, started)
            self._commit(stored, handover)  # those stored before the failure hold
            return False
        if not self.ok:
            log.info("checkpoint storage works again")
        self.ok = True
        self._record(True, started)
        self._commit(stored, handover)
        level, more = self._level(reason)
        log.log(level, "checkpoint (%s) in %.1f ms: %d partition states stored (%s), offsets %s%s", reason,
                (time.monotonic() - started) * 1000, len(places), ", ".join(places),
                {f"{t}[{p}]": o for (t, p), o in stored.items()}, more)
        return True

    def _save(self, snapshot: Snapshot) -> Saved:
        """Store the snapshot's states, in turn, until one fails (on any thread: it changes no
        partition's state, :meth:`_stored` does)."""
        saved = Saved()
        for st, offset, state, epoch in snapshot:
            try:
                saved.stored.append((st, offset, self._store.save(state, epoch)))
            except FencedError as exc:
                saved.fenced.append((st, exc))
            except (CheckpointError, KafkaEdgeError) as exc:  # a file, or the state topic
                saved.failure = exc
                break
        return saved

    def _commit(self, stored: dict[Partition, int], handover: set[Partition]) -> None:
        """Commit the offsets of the states just stored (``stored``), those withheld from
        earlier commits that failed, and those of states restored past the group's commit
        (:attr:`PartitionState.restored_ahead`, offered once), for the partitions still assigned
        and not fenced, each only above the group's committed offset. A failed commit outside a
        hand-over is withheld for the next."""
        with self._deadline.during("committing the stored states' offsets to the group"):
            assigned = set(self._edge.assignment())
            restored: dict[Partition, int] = {}
            for ahead in self._partitions.assigned.values():
                if ahead.restored_ahead is not None:
                    restored[ahead.key], ahead.restored_ahead = ahead.restored_ahead, None
            offered = {**restored, **self._withheld, **stored}
            commit = {}
            for tp, offset in offered.items():
                st = self._partitions.assigned.get(tp)
                if tp in assigned and st is not None and not st.fenced and (
                        st.committed is None or offset > st.committed):
                    commit[tp] = offset
            self._withheld = {}
            if not commit:
                return
            try:
                self._edge.commit(commit)
            except KafkaEdgeError as exc:  # the stored state is authoritative; the commit a courtesy
                if handover & set(commit):  # tried again a moment later, it would meet the same refusal
                    log.warning("commit after checkpoint failed (the stored states stand): %s", exc)
                    return
                self._withheld = commit  # sent again by the next checkpoint, or the hand-over
                log.warning("commit after checkpoint failed (the stored states stand; sent again at"
                            " the next checkpoint or hand-over): %s", exc)
                return
            for tp, offset in commit.items():
                self._partitions.assigned[tp].committed = offset

    # ------------------------------------------------------------------ both
    def _record(self, ok: bool, started: float) -> None:
        """Count a checkpoint written (``ok``) or failed, and report it with its duration."""
        if ok:
            self._counters.checkpoints += 1
        else:
            self._counters.checkpoint_failures += 1
        self._observer.checkpoint(ok=ok, duration_s=time.monotonic() - started)

    def _level(self, reason: str) -> tuple[int, str]:
        """The level of a checkpoint's line, and its suffix: every checkpoint but the interval's
        (a revocation, the shutdown) is logged at INFO; the interval's at most once per
        ``SP_LOG_EVERY_SECONDS``, the others at DEBUG, counted in the next."""
        allowed = self._lines.allow("checkpoint") if reason == "interval" else 0
        return (logging.DEBUG if allowed is None else logging.INFO,
                f" ({allowed} more at DEBUG since the last)" if allowed else "")


def _flushed(flush: Callable[[], None]) -> KafkaEdgeError | None:
    """Run ``flush``; the failure that says the outputs were not acknowledged (None when they
    were)."""
    try:
        flush()
    except KafkaEdgeError as exc:  # UndeliveredError among them: given up
        return exc
    return None


class TransactionalCheckpointer(Checkpointer):
    """Exactly-once checkpoints: one transaction per interval (see the module's docstring)."""

    def __init__(self, edge: Edge, store: TransactionalStore, partitions: Partitions, outputs: Outputs, *,
                 policy: Every, deadline: ShutdownDeadline, observer: Observer | NullObserver,
                 counters: Counters, lines: Throttle, stop: Callable[[], None]) -> None:
        super().__init__(edge, store, partitions, outputs, policy=policy, deadline=deadline,
                         observer=observer, counters=counters, lines=lines, stop=stop)
        self._states = store

    def _checkpoint(self, reason: str, handover: set[Partition], started: float) -> bool:
        ok = self._commit_interval(reason, started)
        if ok and not self.ok:
            log.info("checkpoint storage works again")
        self.ok = ok
        self._record(ok, started)
        return ok

    def _commit_interval(self, reason: str, started: float) -> bool:
        """Write the moved partitions' states into the open transaction and commit it with their
        offsets; on an abort, restore every partition held from the store. Returns whether the
        transaction committed."""
        moved = self._moved()
        edge, store = self._edge, self._states
        if not (moved or edge.in_transaction):
            return True  # nothing sent, nothing learned: no transaction to commit
        if not edge.in_transaction:
            edge.begin_transaction()
        written: list[tuple[PartitionState, int, list[Any]]] = []
        try:
            for st in moved:
                offset = st.next_offset
                if offset is None:  # a moved partition has processed a batch
                    continue
                records = list(store.encode(st.state(), st.epoch))
                for r in records:
                    edge.send(store.topic, r.key.encode(), r.value or b"", partition=r.partition)
                written.append((st, offset, records))
            edge.commit_transaction({st.key: offset for st, offset, _ in written})
        except CheckpointError:
            self._abort_quietly()
            raise  # a state too large for SP_CHECKPOINT__CHUNK_BYTES: a setting to change
        except KafkaEdgeError as exc:  # aborted (nothing of it visible), or never confirmed
            aborted = isinstance(exc, TransactionAbortedError)
            log.log(logging.WARNING if aborted else logging.ERROR,
                    "transaction (%s) %s: %s; each partition held restarts from its stored state",
                    reason, "aborted, nothing of it visible" if aborted
                    else "not confirmed (the next transaction settles it)", exc)
            self._partitions.rewind()
            return False
        self._outputs.confirmed()
        for st, offset, records in written:
            st.dirty, st.committed = False, offset
            st.saved_at = f"{store.topic} (transaction)"
            store.durable(records)  # tombstones for the states these replace
        level, more = self._level(reason)
        log.log(level, "transaction (%s) committed in %.1f ms: %d partition states, offsets %s%s", reason,
                (time.monotonic() - started) * 1000, len(written),
                {f"{st.topic}[{st.partition}]": offset for st, offset, _ in written}, more)
        return True

    def _abort_quietly(self) -> None:
        try:
            self._edge.abort_transaction()
        except KafkaEdgeError as exc:
            log.warning("could not abort the transaction (the next one settles it): %s", exc)
        self._partitions.rewind()
