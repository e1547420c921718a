"""How far the worker is, and what it says about it: lag per partition, :meth:`~Progress.caught_up`,
and the statistics record published every ``SP_STATS__EVERY_*`` (README, "Record formats")."""

from __future__ import annotations

import logging
import time
from typing import Any

from stream_perceptron.codec.outputs import encode
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.model.learner import Learner
from stream_perceptron.settings import Settings
from stream_perceptron.state.checkpoint import Offsets
from stream_perceptron.throttle import Throttle
from stream_perceptron.worker.observe import Observer
from stream_perceptron.worker.policy import Every

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


class Progress:
    """The progress half of :class:`~stream_perceptron.worker.loop.Worker` (a mixin: the
    attributes below are the worker's, set in its ``__init__``)."""

    settings: Settings
    edge: Edge
    learner: Learner
    observer: Observer | None
    offsets: Offsets
    model_id: str
    dead_letters_total: int
    _routine_lines: Throttle
    _shutting_down: bool
    _started: float
    _starts: dict[Partition, int]
    _stats_policy: Every
    _stats_seen: int
    _stats_time: float
    _stats_unflushed: bool

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
