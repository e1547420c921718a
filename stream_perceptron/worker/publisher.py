"""How far the worker is, and what it says about it: lag per partition, :meth:`~Progress.caught_up`,
and the statistics record published every ``SP_STATS__EVERY_*`` (README, "Record formats")."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from stream_perceptron.codec.outputs import encode
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.settings import Settings
from stream_perceptron.throttle import Throttle
from stream_perceptron.worker.mixing import mix_stats
from stream_perceptron.worker.observe import Observer
from stream_perceptron.worker.partition import PartitionState
from stream_perceptron.worker.policy import Every

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


class Progress:
    """The progress half of :class:`~stream_perceptron.worker.loop.Worker` (a mixin: the
    attributes below are the worker's, set in its ``__init__``)."""

    settings: Settings
    edge: Edge
    parts: dict[Partition, PartitionState]
    observer: Observer | None
    _routine_lines: Throttle
    _shutting_down: bool
    _started: float
    _stats_policy: Every
    _stats_unflushed: bool
    _begun: Callable[[], None]  # opens the interval's transaction (exactly-once; transactions.py)

    def caught_up(self) -> bool:
        """Every assigned partition processed up to its high-water mark (from fetch responses)."""
        assigned = self.edge.assignment()
        return bool(assigned) and all(self._behind(topic, part) == 0 for topic, part in assigned)

    def _behind(self, topic: str, part: int) -> int | None:
        """Records between the next offset to process and the fetch high-water mark (None while
        the mark is unknown). The next offset is past the last one processed, else where the
        partition started (its stored state's, or a group commit), else 0."""
        hw = self.edge.highwater(topic, part)
        if hw is None:
            return None
        st = self.parts.get((topic, part))
        done = None if st is None else st.next_offset if st.next_offset is not None else st.start
        return max(0, hw - (done or 0))

    def lag(self) -> dict[Partition, int]:
        """Records behind the fetch high-water mark, per assigned partition (known ones only)."""
        behind = {tp: self._behind(*tp) for tp in self.edge.assignment()}
        return {tp: n for tp, n in behind.items() if n is not None}

    def stats_record(
        self, st: PartitionState | None = None, lags: dict[Partition, int] | None = None
    ) -> dict[str, Any]:
        """One partition's statistics record (``st``; by default the one partition held): its
        running statistics plus throughput, dead letters, offset and lag (README, "Record
        formats"). ``lags`` by default: :meth:`lag` now."""
        if st is None:
            if len(self.parts) != 1:
                raise LookupError(f"the worker holds {len(self.parts)} partitions, not one")
            st = next(iter(self.parts.values()))
        lags = self.lag() if lags is None else lags
        now = time.monotonic()
        learner = st.learner
        snap = learner.stats.snapshot()
        seen = snap["seen"]
        elapsed = now - st.stats_time
        rate = (seen - st.stats_seen) / elapsed if elapsed > 0 else None
        st.stats_seen, st.stats_time = seen, now
        lag = lags.get(st.key)
        return {
            **snap,
            "updates": learner.model.mistakes,
            "intercept": learner.model.intercept,
            "examples_per_s": rate,
            "dead_letters": st.dead_letters,
            "offsets": {} if st.next_offset is None else {st.topic: {str(st.partition): st.next_offset}},
            "lag": {} if lag is None else {f"{st.topic}:{st.partition}": lag},
            "ts": time.time(),
            "uptime_s": now - self._started,
            "client_id": self.settings.kafka.client_id,
            "model_id": st.model_id,
            "drifts": learner.drifts,
            "last_drift_offset": learner.last_drift_offset,
            "topic": st.topic,
            "partition": st.partition,
            "pending_labels": len(st.pending),
            "label_joins": st.pending.joins,
            "label_expiries": st.pending.expiries,
            "label_delay_s": st.pending.delay_mean,
            "mix": mix_stats(st),
        }

    def publish_stats(self) -> list[dict[str, Any]]:
        """Send one statistics record per assigned partition and log the headline figures of
        the partitions together (at INFO at most once per ``SP_LOG_EVERY_SECONDS``, and at the
        shutdown; otherwise at DEBUG)."""
        self._stats_policy.reset()
        lags = self.lag()
        records = []
        if self.parts:
            self._begun()  # exactly-once: the records go into the interval's transaction
        for st in list(self.parts.values()):
            if st.fenced:
                continue
            rec = self.stats_record(st, lags)
            self.edge.send(self.settings.topics.stats, f"{st.topic}:{st.partition}".encode(), encode(rec))
            self._stats_unflushed = True
            if self.observer is not None:
                self.observer.stats(rec)
            records.append(rec)
        if self.observer is not None:
            self.observer.lag(lags)
        seen = sum(r["seen"] for r in records)
        labeled = sum(r["labeled"] for r in records)
        mistakes = sum(r["mistakes"] for r in records)
        rates = [r["examples_per_s"] for r in records if r["examples_per_s"] is not None]
        shown = self._shutting_down or self._routine_lines.allow("progress") is not None
        log.log(
            logging.INFO if shown else logging.DEBUG,
            "%d partitions: seen %d, labeled %d, mistakes %d (rate %s), %s examples/s, %d dead letters",
            len(records), seen, labeled, mistakes,
            "n/a" if not labeled else f"{mistakes / labeled:.4f}",
            "n/a" if not rates else f"{sum(rates):.0f}",
            sum(r["dead_letters"] for r in records),
        )
        return records
