"""What the worker says about a drift alarm: one ``drift`` event on the statistics topic, the
``drifts_total`` counter, a WARNING line (README, "Record formats"; docs/drift.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from stream_perceptron.codec.outputs import encode
from stream_perceptron.kafka.edge import Edge
from stream_perceptron.model.drift import Alarm
from stream_perceptron.settings import Settings
from stream_perceptron.throttle import Throttle, suppressed
from stream_perceptron.worker.observe import Observer
from stream_perceptron.worker.partition import PartitionState

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


def drift_event(st: PartitionState, alarm: Alarm, offset: int, drifts: int, client_id: str) -> dict[str, Any]:
    """The ``drift`` event of ``alarm``, raised by the record at input ``offset`` of ``st``'s
    partition, the partition's ``drifts``-th alarm."""
    return {
        "event": "drift", "topic": st.topic, "partition": st.partition, "offset": offset,
        "detector": st.learner.drift.detector if st.learner.drift is not None else "none",
        "stream": alarm.stream, "rate_before": alarm.rate_before, "rate_after": alarm.rate_after,
        "drifts": drifts, "labeled": alarm.labeled, "model_id": st.model_id,
        "client_id": client_id, "ts": time.time(),
    }


class Drifts:
    """The drift half of :class:`~stream_perceptron.worker.loop.Worker` (a mixin: the attributes
    below are the worker's, set in its ``__init__``)."""

    settings: Settings
    edge: Edge
    observer: Observer | None
    _routine_lines: Throttle
    _stats_unflushed: bool

    def _publish_drifts(self, st: PartitionState, alarms: Sequence[Alarm], offsets: Sequence[int]) -> None:
        """Publish one ``drift`` event per alarm of ``st``'s last learner step, in row order;
        ``offsets[i]`` is the input offset of the step's row ``i``. Records the latest alarm's
        offset in the partition's state (``last_drift_offset``, stored with it). The WARNING
        line comes at most once per partition every ``SP_LOG_EVERY_SECONDS`` (the others at
        DEBUG, counted in the next)."""
        watch = st.learner.drift
        if not alarms or watch is None:
            return
        first = watch.drifts - len(alarms)  # the step's alarms are counted already
        key = f"{st.topic}:{st.partition}".encode()
        for k, alarm in enumerate(alarms):
            offset = offsets[alarm.row]
            watch.last_offset = offset
            event = drift_event(st, alarm, offset, first + k + 1, self.settings.kafka.client_id)
            self.edge.send(self.settings.topics.stats, key, encode(event))
            self._stats_unflushed = True
            if self.observer is not None:
                self.observer.drift(st.topic, st.partition)
            held = self._routine_lines.allow(("drift", st.key))
            log.log(
                logging.DEBUG if held is None else logging.WARNING,
                "%s@%d: drift alarm %d (%s on %s): error rate %.4g -> %.4g%s", st.name, offset,
                event["drifts"], event["detector"], alarm.stream, alarm.rate_before, alarm.rate_after,
                suppressed(held or 0),
            )
