"""Iterative parameter mixing in the worker: each partition publishes its state to the model topic
every ``SP_MIX__EVERY_EXAMPLES`` labeled examples and adopts the mix of the newest states of all
the input's partitions (docs/mixing.md; the math is :mod:`stream_perceptron.model.mixing`).

A mixing point is at an exact record: right after the E-th labeled example since the last one,
before the next record (:func:`~stream_perceptron.worker.plan.plan` puts it there), so where
polls cut the stream does not move it. At a mixing point of partition p at input offset o (the
next record's):

1. k = the model's updates since the last mixing point; ``Published(p, θ, θ0, k, n, o)``;
2. the newest state of every other partition of the input, as the model topic has shown it so
   far (read without waiting: no barrier, an idle partition's last state stays in the mix);
3. ``mix`` of them with ``SP_MIX__WEIGHTS``;
4. p's mixing record on the model topic, under p's claim (chunks and a manifest,
   :mod:`stream_perceptron.state.model_topic`): the state published and the partition's adoption
   log (every adoption past the group's committed offset, the newest last), acknowledged before
   any prediction after o is sent;
5. ``adopt``: θ, θ0 become the mix.

**Exact on replay.** A partition restored from a stored state at offset S reads its newest
model-topic record before its first batch: the adoptions logged there at offsets past S are
adopted again at the same offsets, from the logged mix (bit for bit: JSON floats round-trip),
instead of a mix of what the topic holds now. The stored state carries the mixing counters
(``stats["mix"]``), so the mixing points fall at the same records. See docs/mixing.md.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import Protocol

from stream_perceptron.errors import SettingsError
from stream_perceptron.kafka.state_log import KafkaStateLog
from stream_perceptron.model.mixing import Mix, MixLog, Published, adopt, mix
from stream_perceptron.settings import Settings
from stream_perceptron.state.kafka_store import StateRecord
from stream_perceptron.state.model_topic import ModelTopicIndex, encode
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
    (a zombie) writes records every reader ignores once the partition's owner has claimed it."""

    def __init__(self, settings: Settings, model_topic: ModelTopic | None = None) -> None:
        self._settings = settings
        self._mix = settings.mix
        self._chunk_bytes = settings.checkpoint.chunk_bytes
        self._topic = model_topic
        self._index = ModelTopicIndex()
        self._writer = uuid.uuid4().hex[:12]  # this worker's name in its records' keys
        self._epochs: dict[tuple[str, int], int] = {}  # each partition's claim, on the model topic

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
        with the producer sending, stalled its flushes on tansu)."""
        if self.on:
            self._reader()

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
        after = -1 if st.next_offset is None else st.next_offset
        logged = [e for e in (record or {}).get("log", []) if int(e["offset"]) > after]
        st.mix.replay = {int(e["offset"]): e for e in logged}
        st.mix_log = logged
        if logged:
            log.info("%s: %d adoptions logged past offset %d are adopted again at their offsets",
                     st.name, len(logged), after)
        # Above every claim the topic has shown for the partition: the store's epoch need not be
        # (the Kafka store's is 1 + that of the newest *stored state*: over a holder that stored
        # none, the holder's own), and the holder's later records must lose to this claim's.
        self._epochs[(st.topic, st.partition)] = max(st.epoch, self._index.epoch(st.topic, st.partition) + 1)
        self._write(st, self._published(st, max(after, 0)), max(after, 0))

    def remaining(self, st: PartitionState) -> int:
        """Labeled examples ``st``'s partition learns before its next mixing point (0: off)."""
        if not self.on or st.mix is None:
            return 0
        return st.mix.remaining(self._mix.every_examples)

    def learned(self, st: PartitionState, labeled: int) -> None:
        """Count ``labeled`` examples ``st``'s partition just learned."""
        if self.on and st.mix is not None:
            st.mix.labeled += labeled

    def _published(self, st: PartitionState, offset: int) -> Published:
        """``st``'s partition's state as it publishes it now, the next mix version's."""
        ml, model = st.mix, st.learner.model
        assert ml is not None
        return Published(st.partition, model.weights.copy(), model.intercept, model.updates - ml.mistakes_at,
                         ml.version + 1, offset)

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

    def point(self, st: PartitionState, offset: int) -> None:
        """``st``'s partition's mixing point, before input ``offset``: adopt the logged mix in a
        replay, else publish its state and adopt the mix of the newest states."""
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
            ml.adopted(offset, mixed, model.updates)
            adopt(model, mixed)
            return
        own = self._published(st, offset)
        self._follow()
        states = {p: Published.from_record(r["state"]) for p, r in self._index.newest(st.topic).items()}
        states[st.partition] = own
        mixed = mix(states.values(), self._mix.weights)
        entry = ml.adopted(offset, mixed, model.updates)
        floor = -1 if st.committed is None else st.committed
        st.mix_log = [e for e in st.mix_log if int(e["offset"]) > floor] + [entry]
        self._write(st, own, offset)
        adopt(model, mixed)
