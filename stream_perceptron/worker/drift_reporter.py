"""What the worker says about a drift alarm: one ``drift`` event on the statistics topic, the
``drifts_total`` counter, a WARNING line (README, "Record formats"; docs/drift.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from stream_perceptron.codec.outputs import encode
from stream_perceptron.model.drift import Alarm
from stream_perceptron.throttle import Throttle, suppressed
from stream_perceptron.worker.observe import NullObserver, Observer
from stream_perceptron.worker.outputs import Outputs
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


class DriftReporter:
    """Reports each drift alarm of a partition's learner: its ``drift`` event on the statistics
    topic, ``drifts_total``, and a WARNING line at most once per partition every
    ``SP_LOG_EVERY_SECONDS`` (the others at DEBUG, counted in the next)."""

    def __init__(self, outputs: Outputs, observer: Observer | NullObserver, *, topic: str,
                 client_id: str, lines: Throttle) -> None:
        self._outputs = outputs
        self._observer = observer
        self._topic = topic
        self._client_id = client_id
        self._lines = lines

    def report(self, st: PartitionState, alarms: Sequence[Alarm], offsets: Sequence[int]) -> None:
        """Report ``alarms``, raised by one learner step of ``st``'s partition, in row order;
        ``offsets[i]`` is the input offset of the step's row ``i``. Records the latest alarm's
        offset in the partition's state (``last_drift_offset``, stored with it)."""
        watch = st.learner.drift
        if not alarms or watch is None:
            return
        first = watch.drifts - len(alarms)  # the step's alarms are counted already
        key = f"{st.topic}:{st.partition}".encode()
        for k, alarm in enumerate(alarms):
            offset = offsets[alarm.row]
            watch.last_offset = offset
            event = drift_event(st, alarm, offset, first + k + 1, self._client_id)
            self._outputs.send(self._topic, key, encode(event))
            self._observer.drift(st.topic, st.partition)
            allowed = self._lines.allow(("drift", st.key))
            log.log(
                logging.DEBUG if allowed is None else logging.WARNING,
                "%s@%d: drift alarm %d (%s on %s): error rate %.4g -> %.4g%s", st.name, offset,
                event["drifts"], event["detector"], alarm.stream, alarm.rate_before, alarm.rate_after,
                suppressed(allowed or 0),
            )
