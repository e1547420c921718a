"""The input partitions a worker holds: each opened on assignment from its own stored state and
released on revocation.

A partition's state is restored anew at each assignment: claimed in the store, its newest stored
state loaded (else the initial model, else zero weights), the consumer sought to its offset (the
group's committed offset only for a partition with no state). The worker never reuses what it
remembers of a partition it held before, so a partition's outputs and model are a function of its
records in offset order, whichever worker holds it.
"""

from __future__ import annotations

import logging
import time

from stream_perceptron.errors import CheckpointError, KafkaEdgeError
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.settings import Settings
from stream_perceptron.state.store import PartitionStore
from stream_perceptron.state.stored import Offsets, StateFiles, StoredState
from stream_perceptron.worker.joiner import new_pending
from stream_perceptron.worker.mixer import Mixer
from stream_perceptron.worker.observe import NullObserver, Observer
from stream_perceptron.worker.partition import PartitionState, new_learner

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


class Partitions:
    """The states of the partitions assigned to this worker, and of those it released."""

    #: With exactly-once, how long an assignment waits for the state topic to show the state the
    #: group's commit was made with: longer than the broker's transaction timeout (60 s), after
    #: which a transaction left open by a killed worker is aborted and no longer holds it back.
    state_wait_s = 75.0

    def __init__(self, settings: Settings, store: PartitionStore, edge: Edge, mixer: Mixer,
                 observer: Observer | NullObserver, *, started: float) -> None:
        self._settings = settings
        self._store = store
        self._edge = edge
        self._mixer = mixer
        self._observer = observer
        self._started = started
        self._exactly_once = settings.output.guarantee == "exactly-once"
        spec = settings.features.feature_spec()
        self._spec = None if spec is None else spec.fingerprint()
        self.assigned: dict[Partition, PartitionState] = {}
        """The assigned partitions' states."""
        self.released: dict[Partition, PartitionState] = {}
        """The states of partitions revoked since: readable (by a test, or a caller inspecting a
        stopped worker), never reused."""
        self.initial: StoredState | None = None
        """The initial model: the newest state at the top of ``SP_CHECKPOINT__DIR`` (a `fit`
        checkpoint, or an older worker's), which starts each partition with no state of its own."""

    # ------------------------------------------------------------------ views
    @property
    def held(self) -> dict[Partition, PartitionState]:
        """The states held: the assigned partitions', and those released since."""
        return {**self.released, **self.assigned}

    def offsets(self) -> Offsets:
        """The next offset of each partition held that has one."""
        out: Offsets = {}
        for st in self.held.values():
            if st.next_offset is not None:
                out.setdefault(st.topic, {})[st.partition] = st.next_offset
        return out

    def resume_point(self) -> str:
        """Where a restart would resume: each assigned partition's last stored state."""
        if not self.assigned:
            return "the partitions' stored states"
        return ", ".join(f"{st.name} from {st.saved_at or 'its start (no stored state yet)'}"
                         for st in self.assigned.values())

    # ------------------------------------------------------------------ start
    def preflight(self) -> None:
        """Before connecting: check the states the store can read now against this model's
        configuration, and read the initial model, if any, checking it fits (raises
        :class:`CheckpointError` clearly otherwise)."""
        self._store.preflight(self._new("preflight", -1, 0).config())
        ck = self._settings.checkpoint
        found = StateFiles(ck.dir, ck.keep)
        initial = found.load()
        if initial is None:
            damaged = found.files()
            if damaged:
                raise CheckpointError(
                    f"none of the {len(damaged)} checkpoint files in {found.directory} is valid"
                    " (see the warnings above); refusing to start the partitions from zero"
                    " weights: move them away to start afresh"
                )
            return
        # the configuration, and that a state can be built from it (raises CheckpointError)
        self._new("initial", -1, 0).adopt(initial, self._settings, own=False)
        self.initial = initial
        log.info(
            "initial model %s: model %s (%d features), %d updates, offsets %s; it starts each"
            " partition that has no stored state", initial.path, initial.model_id,
            len(initial.model.get("weights") or []), int(initial.model.get("mistakes", 0)),
            initial.offsets,
        )

    # ------------------------------------------------------------------ assignment
    def take(self, topic: str, part: int) -> PartitionState:
        """Open ``topic[part]``'s state (:meth:`open`) and seek the consumer to where it resumes:
        its state's offset, else the group's commit (else the earliest offset)."""
        st = self.open(topic, part)
        try:
            st.committed = self._edge.committed(topic, part)
        except KafkaEdgeError as exc:  # the stored state still says where to resume
            log.warning("%s: the group's committed offset could not be read (%s): resuming from"
                        " %s, commits not held above it", st.name, exc,
                        "its stored state" if st.next_offset is not None else "where the consumer starts it")
            st.committed = None
        if (self._exactly_once and st.saved_at is not None and st.committed is not None
                and (st.next_offset or 0) < st.committed):
            st = self._caught_up_state(st)
        st.start = st.next_offset if st.next_offset is not None else st.committed
        if st.saved_at is not None and st.next_offset is not None and (
                st.committed is None or st.next_offset > st.committed):
            st.restored_ahead = st.next_offset
        if st.start is not None:
            self._edge.seek(topic, part, st.start)
        if st.saved_at is None and st.next_offset is None and st.committed:
            log.warning(
                "%s has no stored state but the group committed offset %d: its model starts"
                " from %s there. If another worker learned it, the workers of one group must"
                " share SP_CHECKPOINT__DIR (a shared volume) or use SP_CHECKPOINT__STORE=kafka",
                st.name, st.committed, "the initial model" if self.initial is not None else "zero weights",
            )
        log.info(
            "assigned %s: starting at %s (%s), from %s", st.name,
            "the earliest offset" if st.start is None else st.start,
            "stored state" if st.saved_at is not None
            else "initial model" if st.next_offset is not None
            else "group commit" if st.start is not None else "new",
            st.origin,
        )
        return st

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
            self._observer.polled()  # waiting on Kafka, not hung
            time.sleep(1.0)
            st = self.open(st.topic, st.partition)
            st.committed = committed
        if (st.next_offset or 0) < (committed or 0):
            log.warning("%s: the stored state stays at %s, behind the group's commit at %d: going on"
                        " from it; the records between are processed again", st.name,
                        st.next_offset, committed)
        return st

    def open(self, topic: str, part: int) -> PartitionState:
        """Claim ``topic[part]`` in the store and restore its newest stored state (else the
        initial model, else zero weights), replacing whatever this worker held of it before."""
        key = (topic, part)
        self.released.pop(key, None)
        self.assigned.pop(key, None)
        settings = self._settings
        st = self._new(topic, part, self._store.claim(topic, part))
        if settings.model.n_features is not None:
            st.width_from = "SP_MODEL__N_FEATURES"
        stored = self._store.load(topic, part)
        if stored is not None:
            st.adopt(stored, settings, own=True)
            log.info(
                "restored %s: model %s (%d features), %d updates, %d examples seen, next offset %s",
                stored.path or st.saved_at, st.model_id, st.learner.model.dim or 0,
                st.learner.model.updates, st.learner.stats.seen, st.next_offset,
            )
        elif self.initial is not None:
            st.adopt(self.initial, settings, own=False)
        self._mixer.opened(st)
        self.assigned[key] = st
        if st.learner.stats.seen:
            # the partition's series start at its restored totals: a counter made at 0 and
            # raised at the first statistics record would read to Prometheus as new drifts,
            # mistakes and examples
            self._observer.stats(st.statistics(client_id=settings.kafka.client_id,
                                               started=self._started, lag=None))
        return st

    def _new(self, topic: str, part: int, epoch: int) -> PartitionState:
        """A fresh state of ``topic[part]`` (zero weights) under the claim ``epoch``."""
        return PartitionState(topic, part, new_learner(self._settings), epoch,
                              pending=new_pending(self._settings), spec=self._spec)

    def state(self, topic: str, part: int) -> PartitionState:
        """The state of ``topic[part]``, opened now if the partition arrived without an
        assignment this worker saw (a caller feeding batches directly)."""
        st = self.assigned.get((topic, part))
        return st if st is not None else self.open(topic, part)

    def release(self, partitions: list[Partition]) -> None:
        """The ``partitions`` are revoked: their states stay readable in :attr:`released`, and
        their series leave the observer."""
        for key in partitions:
            st = self.assigned.pop(key, None)
            if st is not None:
                self.released[key] = st
        self._mixer.forget(partitions)
        gone = set(partitions)
        self._observer.forget(gone)
        self._observer.assigned([tp for tp in self._edge.assignment() if tp not in gone])

    def rewind(self) -> None:
        """Drop every assigned partition's in-memory state and, for those still assigned to the
        consumer, restore it from the store and seek back to it."""
        assigned = set(self._edge.assignment())
        for key in list(self.assigned):
            del self.assigned[key]
            if key in assigned:
                self.take(*key)
