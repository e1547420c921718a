"""How far the worker is, and what it says about it: lag per partition,
:meth:`~StatsPublisher.caught_up`, and the statistics record published every ``SP_STATS__EVERY_*``
(README, "Record formats")."""

from __future__ import annotations

import logging
from typing import Any

from stream_perceptron.codec.outputs import encode
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.settings import Settings
from stream_perceptron.throttle import Throttle
from stream_perceptron.worker.assignment import Partitions
from stream_perceptron.worker.observe import NullObserver, Observer
from stream_perceptron.worker.outputs import Outputs
from stream_perceptron.worker.partition import PartitionState
from stream_perceptron.worker.policy import Every

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


class StatsPublisher:
    """Publishes one statistics record per assigned partition every ``SP_STATS__EVERY_*`` (and
    when asked), and knows how far behind each partition is."""

    def __init__(self, settings: Settings, edge: Edge, outputs: Outputs, partitions: Partitions,
                 observer: Observer | NullObserver, *, lines: Throttle, started: float) -> None:
        self._topic = settings.topics.stats
        self._client_id = settings.kafka.client_id
        self._edge = edge
        self._outputs = outputs
        self._partitions = partitions
        self._observer = observer
        self._lines = lines
        self._policy = Every(settings.stats.every_examples, settings.stats.every_seconds)
        self._started = started

    def tick(self, n: int) -> None:
        """Count ``n`` records processed."""
        self._policy.tick(n)

    def due(self) -> bool:
        """A statistics record is due (examples or seconds since the last)."""
        return self._policy.due()

    def caught_up(self) -> bool:
        """Every assigned partition processed up to its high-water mark (from fetch responses)."""
        assigned = self._edge.assignment()
        return bool(assigned) and all(self._behind(topic, part) == 0 for topic, part in assigned)

    def _behind(self, topic: str, part: int) -> int | None:
        """Records between the next offset to process and the fetch high-water mark (None while
        the mark is unknown). The next offset is past the last one processed, else where the
        partition started (its stored state's, or a group commit), else 0."""
        hw = self._edge.highwater(topic, part)
        if hw is None:
            return None
        st = self._partitions.assigned.get((topic, part))
        done = None if st is None else st.next_offset if st.next_offset is not None else st.start
        return max(0, hw - (done or 0))

    def lag(self) -> dict[Partition, int]:
        """Records behind the fetch high-water mark, per assigned partition (known ones only)."""
        behind = {tp: self._behind(*tp) for tp in self._edge.assignment()}
        return {tp: n for tp, n in behind.items() if n is not None}

    def record(self, st: PartitionState, lags: dict[Partition, int] | None = None) -> dict[str, Any]:
        """``st``'s partition's statistics record (:meth:`PartitionState.statistics`); ``lags``
        by default: :meth:`lag` now."""
        lags = self.lag() if lags is None else lags
        return st.statistics(client_id=self._client_id, started=self._started, lag=lags.get(st.key))

    def publish(self, *, loud: bool = False) -> list[dict[str, Any]]:
        """Send one statistics record per assigned partition and log the headline figures of
        the partitions together: at INFO at most once per ``SP_LOG_EVERY_SECONDS``, or always
        when ``loud`` (the shutdown's); otherwise at DEBUG."""
        self._policy.reset()
        lags = self.lag()
        records = []
        for st in list(self._partitions.assigned.values()):
            if st.fenced:
                continue
            rec = self.record(st, lags)
            self._outputs.send(self._topic, f"{st.topic}:{st.partition}".encode(), encode(rec))
            self._observer.stats(rec)
            records.append(rec)
        self._observer.lag(lags)
        seen = sum(r["seen"] for r in records)
        labeled = sum(r["labeled"] for r in records)
        mistakes = sum(r["mistakes"] for r in records)
        rates = [r["examples_per_s"] for r in records if r["examples_per_s"] is not None]
        shown = loud or self._lines.allow("progress") is not None
        log.log(
            logging.INFO if shown else logging.DEBUG,
            "%d partitions: seen %d, labeled %d, mistakes %d (rate %s), %s examples/s, %d dead letters",
            len(records), seen, labeled, mistakes,
            "n/a" if not labeled else f"{mistakes / labeled:.4f}",
            "n/a" if not rates else f"{sum(rates):.0f}",
            sum(r["dead_letters"] for r in records),
        )
        return records
