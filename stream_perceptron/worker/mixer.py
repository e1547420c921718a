"""Iterative parameter mixing in the worker: each partition publishes its state to the model topic
every ``SP_MIX__EVERY_EXAMPLES`` labeled examples and adopts the mix of the newest states of all
the input's partitions (docs/mixing.md; the math is :mod:`stream_perceptron.model.mixing`).

A mixing point is at an exact record: right after the E-th labeled example since the last one,
before the next record (:func:`~stream_perceptron.worker.plan.plan` puts it there), so where
polls cut the stream does not move it. At a mixing point of partition p at input offset o (the
next record's), making mix version n:

1. k = the model's updates since the last mixing point; ``Published(p, θ, θ0, k, n, o)``;
2. **the wait**: while partitions hold p back (:func:`~stream_perceptron.worker.pacing.holding`:
   those of this worker with records to read until they reach version n; with
   ``SP_MIX__MAX_STALENESS`` = s, every other partition of the input until it reaches n − s),
   p publishes its state once and waits, its records paused, for at most ``SP_MIX__MAX_WAIT_S``;
   then it goes on without those still behind, which it waits for no more until they publish
   again. Without s nothing bounds the states of other workers' partitions (a partition never
   seen is absent, an idle one's last state stays in the mix);
3. ``mix`` of the newest state of every partition that has passed a mixing point (version ≥ 1)
   and its own, with ``SP_MIX__WEIGHTS``;
4. p's mixing record on the model topic, under p's claim (chunks and a manifest,
   :mod:`stream_perceptron.state.model_topic`): the state published and the partition's adoption
   log (every adoption past the group's committed offset, the newest last, with the partitions
   it went on without), acknowledged before any prediction after o is sent;
5. ``adopt``: θ, θ0 become the mix.

**Exact on replay.** A partition restored from a stored state at offset S reads its newest
model-topic record before its first batch: the adoptions logged there at offsets past S are
adopted again at the same offsets, from the logged mix (bit for bit: JSON floats round-trip),
instead of a mix of what the topic holds now, and without waiting. The stored state carries the
mixing counters (``stats["mix"]``), so the mixing points fall at the same records; a state
stored while the partition waited holds the point still to make. See docs/mixing.md.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from stream_perceptron.errors import SettingsError
from stream_perceptron.kafka.admin import partition_count
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.kafka.state_log import KafkaStateLog
from stream_perceptron.model.mixing import Mix, MixLog, Published, adopt, mix
from stream_perceptron.model.multiclass import MulticlassPerceptron
from stream_perceptron.settings import Settings
from stream_perceptron.state.kafka_store import StateRecord
from stream_perceptron.state.model_topic import ModelTopicIndex, encode
from stream_perceptron.worker.observe import NullObserver, Observer
from stream_perceptron.worker.pacing import MixWait, holding
from stream_perceptron.worker.partition import PartitionState

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


class ModelTopic(Protocol):
    """The model topic as the worker uses it: ``newer()`` returns the records (key, value)
    appended since the last call, up to the topic's end as the call finds it; ``append(records)``
    writes records and returns once they are acknowledged."""

    def newer(self) -> list[tuple[str | None, bytes | None]]: ...
    def append(self, records: Sequence[StateRecord]) -> None: ...
    def close(self) -> None: ...


class KafkaModelTopic:
    """The model topic through a reader and a writer of its own (one partition, compacted,
    created when missing like the state topic), records of at most ``chunk_bytes``."""

    def __init__(self, settings: Settings) -> None:
        self._log = KafkaStateLog(settings.kafka, settings.mix.topic, partitions=1,
                                  max_record_bytes=settings.checkpoint.chunk_bytes)
        self._position = 0

    def newer(self) -> list[tuple[str | None, bytes | None]]:
        out: list[tuple[str | None, bytes | None]] = []
        for record in self._log.scan(0, start=self._position):
            out.append((record.key, record.value))
            self._position = record.offset + 1
        return out

    def append(self, records: Sequence[StateRecord]) -> None:
        self._log.append(records)

    def close(self) -> None:
        self._log.close()


class Mixer:
    """Iterative parameter mixing for the partitions of one worker (``SP_MIX__*``; off when
    ``SP_MIX__EVERY_EXAMPLES`` is 0). It follows the model topic (its own reader, or
    ``model_topic`` given) in a :class:`~stream_perceptron.state.model_topic.ModelTopicIndex`;
    each partition's mixing counters and adoption log are its state's (:class:`PartitionState`).
    Its records are written under each partition's claim, so a worker that lost a partition
    (a zombie) writes records every reader ignores once the partition's owner has claimed it.

    It paces the mixing points (the module's step 2): a partition held back waits
    (:meth:`waiting`); the loop pauses its records through ``edge`` (:meth:`hold`) and calls
    :meth:`release`, which makes the mixing points no longer held back and resumes their
    records. ``clock``: monotonic seconds."""

    def __init__(self, settings: Settings, model_topic: ModelTopic | None = None, *, edge: Edge | None = None,
                 observer: Observer | NullObserver | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._mix = settings.mix
        self._chunk_bytes = settings.checkpoint.chunk_bytes
        self._max_classes = settings.limits.max_classes  # a K-class mix's classes, at most
        self._topic = model_topic
        bound = self._mix.max_staleness
        # with a bound, a mix at point n takes each partition's state of version n or earlier
        # (ModelTopicIndex.at_most): another partition's newest state is at most s versions past
        # this one's point n (it waits for this one within s), so its last s + 2 (claim,
        # version)s hold its n-th, with one to spare for a new claim's record
        self._index = ModelTopicIndex(recent=0 if bound is None else bound + 2)
        # remote partitions the fresh wait waited for in vain, each with the version it had then:
        # not waited for again (within s) until they publish another
        self._fresh_excused: dict[Partition, int] = {}
        self._writer = uuid.uuid4().hex[:12]  # this worker's name in its records' keys
        self._epochs: dict[tuple[str, int], int] = {}  # each partition's claim, on the model topic
        self._edge = edge
        self._observer = observer or NullObserver()
        self._clock = clock
        self._inputs: dict[str, int] = {}  # the input topics' partition counts, where read
        self._waiting: dict[Partition, PartitionState] = {}  # the partitions waiting at a mixing point

    @property
    def on(self) -> bool:
        return self._mix.every_examples > 0

    @property
    def every(self) -> int:
        """The mixing interval E in labeled examples (0: off)."""
        return self._mix.every_examples

    def _reader(self) -> ModelTopic:
        if self._topic is None:
            self._topic = KafkaModelTopic(self._settings)
        return self._topic

    def _follow(self) -> None:
        """Read what the model topic gained (a record that is none of its own is skipped)."""
        for key, value in self._reader().newer():
            try:
                self._index.add(key, value)
            except ValueError as exc:
                log.debug("skipping a record of %s (key %r): %s", self._mix.topic, key, exc)

    def start(self) -> None:
        """With mixing on, open the model topic's reader, creating the topic when missing: at
        start-up, before the edge's producer runs (a topic created in the middle of a rebalance,
        with the producer sending, stalled its flushes on tansu). With bounded staleness, read
        how many partitions the input has: each of them bounds the mixes."""
        if not self.on:
            return
        self._reader()
        if self._mix.max_staleness is not None:
            kafka, topic = self._settings.kafka, self._settings.topics.input
            count = partition_count(kafka, topic, kafka.request_timeout_ms / 1000)
            if count:
                self._inputs[topic] = count

    def close(self) -> None:
        """Close the model topic's reader, if one was opened."""
        if self._topic is not None:
            self._topic.close()

    def opened(self, st: PartitionState) -> None:
        """At a partition's restore: its mixing counters (from its state, else new) and the
        adoptions logged past its state's offset, to adopt again at the same offsets; then a
        record of its state under the new claim, which fences every earlier writer's."""
        if not self.on:
            return
        if st.mix is None:
            st.mix = MixLog(mistakes_at=st.learner.model.updates)
        self._follow()
        record = self._index.newest(st.topic).get(st.partition)
        at = 0 if st.next_offset is None else st.next_offset
        # an adoption at the state's own offset is one it had still to make (it waited there)
        logged = [e for e in (record or {}).get("log", []) if int(e["offset"]) >= at]
        st.mix.replay = {int(e["offset"]): e for e in logged}
        st.mix_log = logged
        if logged:
            log.info("%s: %d adoptions logged from offset %d on are adopted again at their offsets",
                     st.name, len(logged), at)
        # Above every claim the topic has shown for the partition: the store's epoch need not be
        # (the Kafka store's is 1 + that of the newest *stored state*: over a holder that stored
        # none, the holder's own), and the holder's later records must lose to this claim's.
        self._epochs[(st.topic, st.partition)] = max(st.epoch, self._index.epoch(st.topic, st.partition) + 1)
        self._write(st, self._published(st, at, st.mix.version), at)
        st.mix_left = self._clock()

    def remaining(self, st: PartitionState) -> int:
        """Labeled examples ``st``'s partition learns before its next mixing point (0: off, or
        the point is due before its next record)."""
        if not self.on or st.mix is None:
            return 0
        return max(st.mix.remaining(self._mix.every_examples), 0)

    def due(self, st: PartitionState) -> bool:
        """``st``'s partition's next mixing point comes before its next record (it waited there,
        or its stored state was stored there)."""
        return self.on and st.mix is not None and self.remaining(st) == 0

    def piece(self, st: PartitionState, limit: int) -> int:
        """How many records of ``st``'s partition to process at most next (``limit`` at most):
        with mixing on, no more than the labeled examples before its next mixing point, so that
        point, if they reach it, is their last (where a partition that waits stops)."""
        if not self.on or st.mix is None:
            return limit
        return max(1, min(limit, self.remaining(st)))

    def learned(self, st: PartitionState, labeled: int) -> None:
        """Count ``labeled`` examples ``st``'s partition just learned."""
        if self.on and st.mix is not None:
            st.mix.labeled += labeled

    def _published(self, st: PartitionState, offset: int, version: int) -> Published:
        """``st``'s partition's state as it publishes it now, as mix ``version``'s."""
        ml, model = st.mix, st.learner.model
        assert ml is not None
        if isinstance(model, MulticlassPerceptron):  # its rows, named by its classes
            return Published(st.partition, model.weights.copy(), model.intercept.copy(),
                             model.updates - ml.mistakes_at, version, offset, tuple(model.classes))
        return Published(st.partition, model.weights.copy(), model.intercept, model.updates - ml.mistakes_at,
                         version, offset)

    def _write(self, st: PartitionState, own: Published, offset: int) -> None:
        """Write the partition's record (its state ``own`` and its adoption log) under its claim,
        then tombstone its earlier ones; returns once it is acknowledged."""
        record = {"topic": st.topic, "partition": st.partition, "offset": offset, "state": own.record(),
                  "log": st.mix_log, "ts": time.time()}
        epoch = self._epochs.get((st.topic, st.partition), st.epoch)
        writer = f"{self._writer}-{epoch}"
        records = encode(record, epoch=epoch, writer=writer, chunk_bytes=self._chunk_bytes)
        topic = self._reader()
        topic.append(records)  # the adoption is durable before any prediction after it
        for r in records:
            self._index.add(r.key, r.value)
        stale = self._index.stale(st.topic, st.partition, epoch, writer, keep=(r.key for r in records))
        if stale:
            topic.append([StateRecord(0, key, None) for key in sorted(stale)])
            for key in stale:
                self._index.add(key, None)

    # ------------------------------------------------------------------ the mixing point
    def point(self, st: PartitionState, offset: int, held: Mapping[Partition, PartitionState]) -> bool:
        """``st``'s partition's mixing point, before input ``offset`` (``held``: the partitions
        this worker holds): adopt the logged mix in a replay; else, once no partition holds it
        back (or its wait ran out), publish its state and adopt the mix of the newest states.
        False while it waits: its state is published (once) and the point stays to make, by
        :meth:`release` or by the next batch of the partition; False too, with ``st.fenced`` set,
        when the model topic shows a later claim of the partition (:meth:`_claimed_since`)."""
        ml, model = st.mix, st.learner.model
        assert ml is not None
        if model.n_names and model.hash_bits is None:
            raise SettingsError(
                f"SP_MIX__EVERY_EXAMPLES={self._mix.every_examples} needs dense features or"
                " SP_MODEL__HASH_BITS: named features without hashing have indices of each"
                f" partition's own ({st.name}@{offset} is named), so their weights cannot be mixed"
            )
        logged = ml.replay.pop(offset, None)
        if logged is not None and int(logged["epoch"]) == ml.version + 1:
            mixed = Mix.from_record(logged["mix"])
            ml.adopted(offset, mixed, model.updates, {k: logged[k] for k in _WAIT_FIELDS if k in logged})
            adopt(model, mixed)
            st.mix_left = self._clock()
            return True
        version, wait = ml.version + 1, st.mix_wait
        own = self._published(st, offset, version)
        if wait is None:
            self._follow()  # the newest states, once per mixing point (then by release())
        if self._claimed_since(st, offset):
            return False
        versions = self._versions(st.topic, held)
        local = {q.partition: self._busy(q) for q in held.values() if q.topic == st.topic and not q.fenced}
        count = max([self._inputs.get(st.topic, 0), *(p + 1 for p in (*versions, *local))])
        behind = holding(version, st.partition, versions, local, partitions=count,
                         bound=self._mix.max_staleness)
        now = self._clock()
        waits, overdue = self._held_back(st, version, offset, own, versions, local, behind, count, now)
        if waits:
            return False
        wait = st.mix_wait
        # a waited point is made from the topic as read before the wait, or by release() when a
        # partition of another worker held it back: read it once more, so a worker that stalled
        # meanwhile finds the new owner's claim here and stops (no mix, no record)
        if wait is not None and self._claimed_since(st, offset, follow=True):
            return False
        extra: dict[str, Any] = {}
        if behind:
            extra["stale"] = {str(q): version - versions.get(q, 0) for q in behind}
        if wait is not None:
            extra["waited_s"] = round(now - wait.since, 6)
        records = (self._index.newest(st.topic) if self._mix.max_staleness is None
                   else self._index.at_most(st.topic, version))
        states = {p: Published.from_record(r["state"]) for p, r in records.items()}
        states = {p: s for p, s in states.items() if s.version > 0}  # a claim's state before any round
        states[st.partition] = own
        mixed = mix(states.values(), self._mix.weights, first=own.classes or (), limit=self._max_classes)
        entry = ml.adopted(offset, mixed, model.updates, extra)
        # the log keeps every adoption a state stored at the group's commit C may still have to
        # make: those at C (where it may have waited) and after
        floor = 0 if st.committed is None else st.committed
        st.mix_log = [e for e in st.mix_log if int(e["offset"]) >= floor] + [entry]
        self._write(st, own, offset)
        adopt(model, mixed)
        st.dirty = True
        st.mix_left = now
        self._observer.mix_adopted(st.topic, st.partition, staleness=version - min(mixed.versions),
                                   overdue=overdue)
        if wait is not None:
            self._end_wait(st, resume=True)
        return True

    def _held_back(self, st: PartitionState, version: int, offset: int, own: Published,
                   versions: Mapping[int, int], local: Mapping[int, bool], behind: Mapping[int, int],
                   count: int, now: float) -> tuple[bool, bool]:
        """At ``st``'s partition's mixing point of ``version``: whether it waits on (its state
        ``own`` published once, when the wait begins), and whether its wait ran out with
        partitions more than s versions behind (overdue: they are excused until they publish)."""
        wait = st.mix_wait
        st.mix_excused = {q: v for q, v in st.mix_excused.items() if versions.get(q, 0) == v}
        blocking = [q for q in behind if q not in st.mix_excused]
        lagging = self._lagging(st, version, versions, local, count, behind) if not blocking else []
        log.debug("%s: mixing point %d at offset %d: versions %s, this worker's %s, held back by %s",
                  st.name, version, offset, versions, sorted(local), blocking or lagging)
        if blocking or lagging:
            if wait is None:
                # a partition of another worker that keeps this one's pace, up to a point behind,
                # reaches the point within this one's lap (the time from its last point to this)
                lap = 0.0 if st.mix_left is None else max(now - st.mix_left, 0.0)
                st.mix_wait = wait = MixWait(now, offset, fresh_s=lap + self._mix.fresh_wait_s)
                self._waiting[st.key] = st
                self._write(st, own, offset)  # what the others wait for
            wait.remote = any(q not in local for q in (*blocking, *lagging))
            if blocking and now - wait.since < self._mix.max_wait_s:
                return True, False
            if lagging:  # the fresh wait counts from the end of the wait for those beyond s,
                # and no wait lasts longer than SP_MIX__MAX_WAIT_S in all
                wait.fresh_since = now if wait.fresh_since is None else wait.fresh_since
                if now - wait.fresh_since < wait.fresh_s and now - wait.since < self._mix.max_wait_s:
                    return True, False
        if lagging:
            assert wait is not None and wait.fresh_since is not None
            self._fresh_excused.update({(st.topic, q): versions.get(q, 0) for q in lagging})
            log.debug("%s: mixing point %d at offset %d: waited %.3f s (the fresh wait) for %s;"
                      " mixing their states within SP_MIX__MAX_STALENESS", st.name, version, offset,
                      now - wait.fresh_since, lagging)
        if not blocking:
            return False, False
        assert wait is not None and st.mix is not None
        st.mix_excused.update({q: versions.get(q, 0) for q in blocking})
        st.mix.overdue += 1
        log.info("%s: mixing point %d at offset %d: waited %.1f s (SP_MIX__MAX_WAIT_S) for %s; mixing"
                 " without them, and not waiting for them again until they publish", st.name, version,
                 offset, now - wait.since, ", ".join(f"{st.topic}[{q}] at version {versions.get(q, 0)}"
                                                    for q in blocking))
        return False, True

    def _lagging(self, st: PartitionState, version: int, versions: Mapping[int, int],
                 local: Mapping[int, bool], count: int, behind: Mapping[int, int]) -> list[int]:
        """The partitions of other workers that have not published a state of ``version`` yet
        but are within s (so hold nothing back): with s >= 1, ``st``'s partition waits for them
        (the fresh wait: its lap plus ``SP_MIX__FRESH_WAIT_S``, within ``SP_MIX__MAX_WAIT_S`` of
        the wait's start), for a mix of states of one version. A partition waited for in
        vain is not waited for again until it publishes another state."""
        if not self._mix.max_staleness or self._mix.fresh_wait_s <= 0:
            return []
        self._fresh_excused = {k: v for k, v in self._fresh_excused.items()
                               if k[0] != st.topic or versions.get(k[1], 0) == v}
        fresh = holding(version, st.partition, versions, local, partitions=count, bound=0)
        return [q for q in fresh if q not in local and q not in behind
                and (st.topic, q) not in self._fresh_excused]

    def _claimed_since(self, st: PartitionState, offset: int, *, follow: bool = False) -> bool:
        """Whether the model topic shows a later claim of ``st``'s partition than this worker's
        (``follow``: read what it gained first): then another worker owns it, and this one, a
        zombie, stops at the mixing point (no mix, no record, no stored state: ``st.fenced``), as
        a save the directory store refuses does."""
        if follow:
            self._follow()
        ours = self._epochs.get((st.topic, st.partition), st.epoch)
        theirs = self._index.epoch(st.topic, st.partition)
        if theirs <= ours:
            return False
        st.fenced = True
        log.warning("%s: the model topic shows claim %d of it, later than this worker's %d: this worker"
                    " stops at its mixing point at offset %d and leaves it to its new owner",
                    st.name, theirs, ours, offset)
        if st.mix_wait is not None:
            self._end_wait(st, resume=False)
        return True

    def _versions(self, topic: str, held: Mapping[Partition, PartitionState]) -> dict[int, int]:
        """Each partition's newest published mix version (this worker's: or the version it has
        reached, replaying logged adoptions, which publishes nothing)."""
        versions = {p: int(r["state"]["epoch"]) for p, r in self._index.newest(topic).items()}
        for q in held.values():
            if q.topic == topic and q.mix is not None:
                versions[q.partition] = max(versions.get(q.partition, 0), q.mix.version)
        return versions

    def _busy(self, st: PartitionState) -> bool:
        """Whether ``st``'s partition has records to read: its fetch high-water mark is past its
        next offset, or not known yet."""
        hw = None if self._edge is None else self._edge.highwater(st.topic, st.partition)
        if hw is None:
            return True
        done = st.next_offset if st.next_offset is not None else (st.start or 0)
        return hw > done

    # ------------------------------------------------------------------ waiting
    @property
    def waits(self) -> int:
        """How many partitions wait at a mixing point."""
        return len(self._waiting)

    def waiting(self, st: PartitionState) -> bool:
        """``st``'s partition waits at a mixing point: none of its records is to be processed."""
        return st.mix_wait is not None

    def hold(self, st: PartitionState) -> None:
        """Pause the records of a partition that waits (records of it polled past its mixing
        point are dropped: :meth:`release` fetches them again from the point)."""
        wait = st.mix_wait
        if wait is not None and not wait.held and self._edge is not None:
            self._edge.pause(st.topic, st.partition)
            wait.held = True

    def release(self, held: Mapping[Partition, PartitionState], *, follow: bool = False) -> None:
        """Make the mixing point of each waiting partition that nothing holds back any more (or
        whose wait ran out) and resume its records; ``follow``: read the model topic first (the
        states of other workers' partitions), if a partition of another worker holds one back
        (this worker's own states are in the index as it writes them)."""
        if not self._waiting:
            return
        if follow and any(st.mix_wait is not None and st.mix_wait.remote for st in self._waiting.values()):
            self._follow()
        for key, st in list(self._waiting.items()):
            wait = st.mix_wait
            if held.get(key) is not st or st.fenced or wait is None:
                self.forget([key])
            else:
                self.point(st, wait.offset, held)

    def _end_wait(self, st: PartitionState, *, resume: bool) -> None:
        """``st``'s partition waits no more: count the time, and resume its records if held."""
        wait, st.mix_wait = st.mix_wait, None
        self._waiting.pop(st.key, None)
        if wait is None:
            return
        seconds = max(self._clock() - wait.since, 0.0)
        if st.mix is not None:
            st.mix.paused_s += seconds
        self._observer.mix_paused(st.topic, st.partition, seconds)
        if resume and wait.held and self._edge is not None:
            self._edge.resume(st.topic, st.partition, wait.offset)

    def forget(self, partitions: Iterable[Partition]) -> None:
        """The ``partitions`` are revoked (or gone): their waits end, their pauses with the
        revocation."""
        for key in partitions:
            st = self._waiting.get(key)
            if st is not None:
                self._end_wait(st, resume=False)


#: What a log entry may carry of the wait before its adoption (docs/records.md, "Model").
_WAIT_FIELDS = ("stale", "waited_s")
