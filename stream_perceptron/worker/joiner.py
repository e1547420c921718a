"""Labels that arrive late: keep each event's prediction under its id, join the label record that
comes later, learn the kept features then, and publish the outcome (README, "Record formats").

A record with ``id`` and ``x`` and no ``y`` is predicted like any unlabeled record, and what it
was given is kept in its partition's :class:`~stream_perceptron.model.pending.PendingLabels`.
A label record ``{"id", "y"}`` learns the kept features with the perceptron's update (through
:meth:`~stream_perceptron.model.learner.Learner.step`, as every labeled row is) at its own place
in the partition's offset order, and publishes one outcome record on ``SP_TOPICS__OUTCOMES``; an
id with nothing kept goes to the dead-letter topic with the reason. The bounds are checked at
each event and label record against the partition's stream time, the largest record timestamp
up to that record, so what is kept, joined and expired is a function of the partition's records
in offset order, however they were batched, and replays exactly from a stored state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

import numpy as np

from stream_perceptron.codec.inputs import LabelRecord
from stream_perceptron.codec.outputs import clip, encode, outcome_record
from stream_perceptron.kafka.edge import Batch
from stream_perceptron.model.pending import (
    EXPIRED,
    JOINED,
    PendingEvent,
    PendingLabels,
    kept_features,
)
from stream_perceptron.model.perceptron import BatchResult
from stream_perceptron.settings import Settings
from stream_perceptron.worker.classes import class_refusals
from stream_perceptron.worker.drift_reporter import DriftReporter
from stream_perceptron.worker.outputs import DeadLetters, Outputs
from stream_perceptron.worker.partition import PartitionState

_WHY = {
    None: "unknown id {id}: no prediction is waiting for it",
    EXPIRED: "expired id {id}: its prediction was dropped at offset {at}, past SP_LABELS__PENDING_MAX,"
             " SP_LABELS__PENDING_TTL_S or SP_LABELS__PENDING_MAX_OFFSETS",
    JOINED: "id {id} already labeled: its prediction was joined at offset {at}",
}


def new_pending(settings: Settings) -> PendingLabels:
    """An empty store bounded as ``SP_LABELS__*`` say; label delays averaged over the last
    ``SP_STATS__WINDOW`` joins."""
    labels = settings.labels
    ttl = labels.pending_ttl_s
    return PendingLabels(labels.pending_max, None if math.isinf(ttl) else round(ttl * 1000),
                         labels.pending_max_offsets, delay_window=settings.stats.window)


def stream_clock(batch: Batch) -> list[int]:
    """The partition's stream time at each record of ``batch`` (before the store's own): the
    largest timestamp up to and including it.

    >>> from stream_perceptron.kafka.edge import InRecord
    >>> stream_clock(Batch.of([InRecord("t", 0, o, None, b"", ts) for o, ts in enumerate([5, 3, 9])]))
    [5, 5, 9]
    """
    return list(accumulate(batch.timestamps_ms, max))


class LabelJoiner:
    """Late labels: keeps each unlabeled event's prediction under its id in its partition's
    store, joins the label record that comes later, learns the kept features then and publishes
    the outcome on ``SP_TOPICS__OUTCOMES``."""

    def __init__(self, outputs: Outputs, dead_letters: DeadLetters, drifts: DriftReporter, *,
                 topic: str) -> None:
        self._outputs = outputs
        self._dead_letters = dead_letters
        self._drifts = drifts
        self._topic = topic

    def keep(self, st: PartitionState, batch: Batch, clock: Sequence[int], raw: Any, rows: Sequence[int],
             ys: Sequence[int], ids: Sequence[Any], result: BatchResult) -> None:
        """Keep the unlabeled rows with an id (``raw[k]`` the features of batch position
        ``rows[k]``) with the prediction and score ``result`` gave them; ``clock`` is
        :func:`stream_clock` of ``batch``."""
        if 0 not in ys:  # every row labeled: nothing to keep (the common case, at C speed)
            return
        pending = st.pending
        offsets, stamps = batch.offsets, batch.timestamps_ms
        scores = result.served_scores
        # signs as Python ints; a K-class worker's class names as they are
        predictions = result.predictions
        if isinstance(predictions, np.ndarray):
            predictions = predictions.tolist()
        for k, (y, rid) in enumerate(zip(ys, ids, strict=True)):
            if y or rid is None:
                continue
            i = rows[k]
            pending.advance(offsets[i], clock[i])
            pending.add(rid, PendingEvent(kept_features(raw[k]), predictions[k], float(scores[k]),
                                          offsets[i], stamps[i]))

    def join(self, st: PartitionState, batch: Batch, clock: Sequence[int], i: int,
             label: LabelRecord, names: Sequence[Any] | None = None) -> tuple[int, int]:
        """Join the label record at position ``i`` of ``batch`` to its kept event: learn the kept
        features with ``label.y`` and publish the outcome; or dead-letter it with the reason.
        Returns (labeled, mistakes): (1, 0 or 1) when joined, else (0, 0). (``names``: a K-class
        batch's class names, not used here.)"""
        found = self._kept(st, batch, clock, i, label)
        if found is None:
            return 0, 0
        event, X = found
        y = np.array([label.y], dtype=np.int8)
        return self._learned(st, batch, i, label, event, X, y, label.y)

    def _kept(self, st: PartitionState, batch: Batch, clock: Sequence[int], i: int,
              label: LabelRecord) -> tuple[PendingEvent, Any] | None:
        """The event kept for ``label`` and its features in the model's coordinates; None when
        there is none (a dead letter then, with the reason)."""
        pending, offset, ts = st.pending, batch.offsets[i], batch.timestamps_ms[i]
        shown = clip(repr(label.id))
        if not pending.max_entries:
            self._dead_letters.send(st, batch, i, f"label record for id {shown}: late labels are off"
                                                  " (SP_LABELS__PENDING_MAX=0)")
            return None
        pending.advance(offset, clock[i])
        event, why = pending.take(label.id, offset, ts)
        if event is None:
            gone = pending.gone(label.id)
            self._dead_letters.send(st, batch, i, _WHY[why].format(id=shown,
                                                                   at=None if gone is None else gone[1]))
            return None
        model = st.learner.model
        X, rejected = model.vectorize_many([event.features])
        if rejected:  # the model no longer takes them (fixed anew since): the label cannot be learned
            self._dead_letters.send(st, batch, i,
                                    f"id {shown}: its kept features do not fit the model: {rejected[0]}")
            return None
        return event, X

    def _learned(self, st: PartitionState, batch: Batch, i: int, label: LabelRecord, event: PendingEvent,
                 X: Any, y: Any, shown_label: Any) -> tuple[int, int]:
        """Learn the kept features ``X`` with the label ``y`` (as the learner takes it), and
        publish the outcome naming ``shown_label``."""
        offset, ts = batch.offsets[i], batch.timestamps_ms[i]
        step = st.learner.step(X, y, labeled=np.ones(1, dtype=np.bool_))
        # the joined label's mistake is the stream's at the label record
        self._drifts.report(st, step.alarms, [offset])
        mistake = bool(step.result.mistakes[0])
        record = outcome_record(
            id=label.id, topic=batch.topic, partition=batch.partition, offset=offset,
            event_offset=event.offset, prediction=event.prediction, score=event.score, label=shown_label,
            mistake=mistake, delay_s=None if ts < 0 or event.timestamp_ms < 0
            else (ts - event.timestamp_ms) / 1000,
        )
        self._outputs.send(self._topic, batch.keys[i], encode(record))
        return 1, int(mistake)

    @staticmethod
    def to_end(st: PartitionState, batch: Batch) -> None:
        """Move the partition's store to the last record of ``batch`` (expiring what that passes)."""
        if st.pending.max_entries:
            st.pending.advance(batch.offsets[-1], max(batch.timestamps_ms))


class ClassJoiner(LabelJoiner):
    """:class:`LabelJoiner` for a K-class worker: a label record names a class, learned at its
    own place (a new class comes in there), or refused as a row of the stream would be
    (:func:`~stream_perceptron.worker.classes.class_refusals`); the outcome names the classes."""

    def join(self, st: PartitionState, batch: Batch, clock: Sequence[int], i: int,
             label: LabelRecord, names: Sequence[Any] | None = None) -> tuple[int, int]:
        assert names is not None and isinstance(label.y, int)
        name = names[label.y - 1]
        refused = class_refusals(st.learner.model, [name])
        if refused:
            self._dead_letters.send(st, batch, i, refused[0])
            return 0, 0
        found = self._kept(st, batch, clock, i, label)
        if found is None:
            return 0, 0
        event, X = found
        return self._learned(st, batch, i, label, event, X, [name], name)
