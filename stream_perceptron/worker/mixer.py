"""Iterative parameter mixing in the worker: each partition publishes its state to the model topic
every ``SP_MIX__EVERY_EXAMPLES`` labeled examples and adopts the mix of the newest states of all
the input's partitions (docs/mixing.md; the math is :mod:`stream_perceptron.model.mixing`).

A mixing point is at an exact record: right after the E-th labeled example since the last one,
before the next record (``process`` cuts its chunks there), so where polls cut the stream does
not move it. At a mixing point of partition p at input offset o (the next record's):

1. k = the model's mistakes since the last mixing point; ``Published(p, θ, θ0, k, n, o)``;
2. the newest state of every other partition of the input, as the model topic has shown it so
   far (read without waiting: no barrier, an idle partition's last state stays in the mix);
3. ``mix`` of them with ``SP_MIX__WEIGHTS``;
4. one record on the model topic, key ``"<topic>:<p>"``: the state published and the partition's
   adoption log (every adoption past the group's committed offset, the newest last), then a
   flush, so the log is durable before any prediction after o is sent;
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
from typing import Any, Protocol

import orjson

from stream_perceptron.codec.limits import FRAMING_BYTES, OUTPUT_RECORD_BYTES
from stream_perceptron.errors import SettingsError
from stream_perceptron.kafka.edge import Edge
from stream_perceptron.kafka.state_log import KafkaStateLog
from stream_perceptron.model.mixing import Mix, MixLog, Published, adopt, mix, mix_cut
from stream_perceptron.settings import Settings
from stream_perceptron.worker.partition import PartitionState

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


class ModelTopic(Protocol):
    """The model topic as the worker follows it: ``newer()`` returns the records (key, value)
    appended since the last call, up to the topic's end as the call finds it."""

    def newer(self) -> list[tuple[str | None, bytes | None]]: ...
    def close(self) -> None: ...


class KafkaModelTopic:
    """The model topic through a reader of its own (one partition, compacted, created when
    missing like the state topic)."""

    def __init__(self, settings: Settings) -> None:
        self._log = KafkaStateLog(settings.kafka, settings.mix.topic, partitions=1)
        self._position = 0

    def newer(self) -> list[tuple[str | None, bytes | None]]:
        out: list[tuple[str | None, bytes | None]] = []
        for record in self._log.scan(0, start=self._position):
            out.append((record.key, record.value))
            self._position = record.offset + 1
        return out

    def close(self) -> None:
        self._log.close()


def mix_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def mix_stats(st: PartitionState) -> dict[str, Any] | None:
    """The statistics record's ``"mix"``: the version (mixing points so far), this partition's
    k and μ in the latest mix, the running Σμk, and the staleness: how many epochs the oldest
    state mixed was behind this partition's. None when the partition never mixed."""
    ml = st.mix
    if ml is None or ml.last is None:
        return None
    m = ml.last["mix"]
    i = m["partitions"].index(st.partition)
    return {"version": ml.epoch, "offset": ml.last["offset"], "k": m["mistakes"][i], "mu": m["mu"][i],
            "sum_mu_k": ml.sum_mu_k, "partitions": m["partitions"],
            "staleness": ml.last["epoch"] - min(m["epochs"])}


class Mixing:
    """The mixing half of :class:`~stream_perceptron.worker.loop.Worker` (a mixin: the attributes
    below are the worker's, set in its ``__init__``; ``model_topic`` may be given before the first
    batch, as tests do with an in-memory one)."""

    settings: Settings
    edge: Edge
    model_topic: ModelTopic | None = None
    _newest: dict[str, dict[int, dict[str, Any]]]

    @property
    def mixing(self) -> bool:
        return self.settings.mix.every_examples > 0

    def _follow(self) -> None:
        """Read what the model topic gained: the newest record of each partition of each input."""
        if self.model_topic is None:
            self.model_topic = KafkaModelTopic(self.settings)
        if not hasattr(self, "_newest"):
            self._newest = {}
        for key, value in self.model_topic.newer():
            if key is None or value is None:
                continue
            record = orjson.loads(value)
            self._newest.setdefault(record["topic"], {})[int(record["partition"])] = record

    def _mix_start(self) -> None:
        """With mixing on, open the model topic's reader, creating the topic when missing: at
        start-up, before the edge's producer runs (a topic created in the middle of a rebalance,
        with the producer sending, stalled its flushes on tansu)."""
        if self.mixing and self.model_topic is None:
            self.model_topic = KafkaModelTopic(self.settings)

    def _mix_close(self) -> None:
        """Close the model topic's reader, if one was opened."""
        if self.model_topic is not None:
            self.model_topic.close()

    def _mix_open(self, st: PartitionState) -> None:
        """At a partition's restore: its mixing counters (from its state, else new) and the
        adoptions logged past its state's offset, to adopt again at the same offsets."""
        if not self.mixing:
            return
        if st.mix is None:
            st.mix = MixLog(mistakes_at=st.learner.model.mistakes)
        self._follow()
        record = self._newest.get(st.topic, {}).get(st.partition)
        after = -1 if st.next_offset is None else st.next_offset
        logged = [e for e in (record or {}).get("log", []) if int(e["offset"]) > after]
        st.mix.replay = {int(e["offset"]): e for e in logged}
        st.mix_log = logged
        if logged:
            log.info("%s: %d adoptions logged past offset %d are adopted again at their offsets",
                     st.name, len(logged), after)

    def _mix_cut(self, st: PartitionState, ys: list[int], start: int, end: int) -> int:
        """Where the rows ``ys[start:end]`` stop before the next mixing point."""
        if not self.mixing or st.mix is None:
            return end
        return mix_cut(ys, start, end, st.mix.remaining(self.settings.mix.every_examples))

    def _mix_after(self, st: PartitionState, labeled: int, offset: int) -> None:
        """Count ``labeled`` examples just learned; at the E-th, mix before input ``offset``."""
        ml = st.mix
        if not self.mixing or ml is None:
            return
        ml.labeled += labeled
        if ml.labeled >= self.settings.mix.every_examples:
            self._mix_point(st, offset)

    def _mix_point(self, st: PartitionState, offset: int) -> None:
        ml, model = st.mix, st.learner.model
        assert ml is not None
        if model.n_names and model.hash_bits is None:
            raise SettingsError(
                f"SP_MIX__EVERY_EXAMPLES={self.settings.mix.every_examples} needs dense features or"
                " SP_MODEL__HASH_BITS: named features without hashing have indices of each"
                f" partition's own ({st.name}@{offset} is named), so their weights cannot be mixed"
            )
        logged = ml.replay.pop(offset, None)
        if logged is not None and int(logged["epoch"]) == ml.epoch + 1:
            mixed = Mix.from_record(logged["mix"])
            ml.adopted(offset, mixed, model.mistakes)
            adopt(model, mixed)
            return
        k = model.mistakes - ml.mistakes_at
        own = Published(st.partition, model.weights.copy(), model.intercept, k, ml.epoch + 1, offset)
        self._follow()
        states = {p: Published.from_record(r["state"]) for p, r in self._newest.get(st.topic, {}).items()}
        states[st.partition] = own
        mixed = mix(states.values(), self.settings.mix.weights)
        entry = ml.adopted(offset, mixed, model.mistakes)
        floor = -1 if st.committed is None else st.committed
        st.mix_log = [e for e in st.mix_log if int(e["offset"]) > floor] + [entry]
        record = {"topic": st.topic, "partition": st.partition, "state": own.record(),
                  "log": st.mix_log, "ts": time.time()}
        key, value = mix_key(st.topic, st.partition).encode(), orjson.dumps(record)
        if len(key) + len(value) > OUTPUT_RECORD_BYTES - FRAMING_BYTES:
            raise SettingsError(
                f"the model topic's record of {st.name} at offset {offset} takes {len(value):,} bytes"
                f" (its state and {len(st.mix_log)} adoptions logged past the group's commit,"
                f" {len(own.weights):,} weights each), over the"
                f" {OUTPUT_RECORD_BYTES - FRAMING_BYTES:,} a record may take: mix fewer weights"
                " (SP_MODEL__HASH_BITS, or fewer features), or store and commit more often than"
                f" SP_MIX__EVERY_EXAMPLES={self.settings.mix.every_examples}"
                " (SP_CHECKPOINT__EVERY_EXAMPLES)"
            )
        self._newest.setdefault(st.topic, {})[st.partition] = record
        self.edge.send(self.settings.mix.topic, key, value)
        self.edge.flush()  # the adoption is logged before any prediction after it
        adopt(model, mixed)
