"""One partition's batch, processed: decode, vectorize, plan, then learn, join and mix in offset
order, with that partition's state only.

* Bad input never stops the loop: a record the decoder refuses, or the model does not take (of
  another width, or bringing names past the bound), goes to the dead-letter topic with its
  reason. The first of each kind a partition refuses is also one WARNING.
* The batch's learnable rows are vectorized in runs of one kind (named or dense; wide dense rows
  in blocks of at most :data:`~stream_perceptron.model.learner.MATRIX_BYTES`), each just before
  it is learned, and :func:`~stream_perceptron.worker.plan.plan` cuts each run, the label records
  before the next run and the mixing points into segments in offset order. A record's score
  does not depend on how polls cut the stream, nor on other partitions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stream_perceptron.codec.avro import AvroDecoder, wire_schema_id
from stream_perceptron.codec.events import EventDecoder
from stream_perceptron.codec.inputs import BatchDecoder, ClassRule, Decoded
from stream_perceptron.codec.limits import Limits
from stream_perceptron.codec.outputs import (
    configured_classes,
    encode_class_predictions,
    encode_predictions,
)
from stream_perceptron.errors import DecodeError, SchemaNotFound
from stream_perceptron.kafka.edge import Batch
from stream_perceptron.kafka.registry import SchemaRegistry
from stream_perceptron.model.learner import take_rows
from stream_perceptron.model.perceptron import Refusal, Rows
from stream_perceptron.settings import Settings
from stream_perceptron.worker.assignment import Partitions
from stream_perceptron.worker.classes import class_refusals
from stream_perceptron.worker.drift_reporter import DriftReporter
from stream_perceptron.worker.joiner import LabelJoiner, stream_clock
from stream_perceptron.worker.mixer import Mixer
from stream_perceptron.worker.observe import NullObserver, Observer
from stream_perceptron.worker.outputs import DeadLetters, Outputs
from stream_perceptron.worker.partition import PartitionState
from stream_perceptron.worker.plan import Join, Learn, Mix, plan
from stream_perceptron.worker.policy import Counters

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


@dataclass
class Run:
    """A run of a batch's learnable rows (decoded and accepted by the model), in offset order,
    vectorized together into ``X``."""

    X: Rows
    positions: list[int] = field(default_factory=list)
    """Each row's position in the batch."""
    ys: list[int] = field(default_factory=list)
    ids: list[Any] = field(default_factory=list)
    raw: list[Any] | None = None
    """Each row's features as decoded (kept for late labels; None when they are off)."""
    echo: list[Any] | None = None
    """Each row's echo fields (a feature spec's ``echo``; None without)."""
    names: list[Any] | None = None
    """The batch's class names (a K-class worker's; ``ys`` are codes of them, 0 unlabeled)."""


class BatchProcessor:
    """Processes each batch of input records (one partition's, in offset order) with its
    partition's state: predictions, dead letters, label joins, drift alarms and mixing points."""

    def __init__(self, settings: Settings, partitions: Partitions, outputs: Outputs,
                 dead_letters: DeadLetters, joiner: LabelJoiner, mixer: Mixer, drifts: DriftReporter, *,
                 observer: Observer | NullObserver, counters: Counters,
                 registry: SchemaRegistry | None = None) -> None:
        limits: Limits = settings.codec_limits()
        # chosen once: labels as signs, or (K classes) as class names and their rows
        rule = None
        self._learn: Any = self._learn_signs
        if settings.model.k_class():
            known = settings.model.classes if settings.model.unknown_class == "dead-letter" else None
            rule = ClassRule(limits.max_class_chars, None if known is None else frozenset(known))
            self._learn = self._learn_classes
            self._scores = settings.output.scores == "all"
        self._decoder = BatchDecoder(limits, classes=rule)
        spec = settings.features.feature_spec()
        self._events = None if spec is None else EventDecoder(spec, limits, rule)
        # SP_INPUT__FORMAT=avro: the writers' schemas, fetched by id before a batch is decoded
        self._registry = registry
        self._avro = AvroDecoder() if settings.input.format == "avro" else None
        self._schemas: dict[int, str | SchemaNotFound] = {}
        self._classes = configured_classes(limits)  # names in each prediction's "class"
        out = settings.output.predictions
        self._publish = (out in ("all", "unlabeled"), out == "all")  # (unlabeled, labeled)
        self._topic = settings.topics.predictions
        self._partitions = partitions
        self._outputs = outputs
        self._dead_letters = dead_letters
        self._joiner = joiner
        self._mixer = mixer
        self._drifts = drifts
        self._observer = observer
        self._counters = counters

    def prepare(self, batch: Batch) -> None:
        """Fetch what decoding ``batch`` needs from outside the worker: with Avro events, the
        writer's schema of every id the batch names that the decoder does not hold. Changes no
        state; raises :class:`RegistryUnavailable` while the registry does not answer, for the
        loop to take the batch again later."""
        if self._avro is None:
            return
        schemas = self._schemas
        schemas.clear()
        for value in batch.values:
            try:
                schema_id = wire_schema_id(value or b"")
            except DecodeError:
                continue  # refused when decoded, with its reason
            if schema_id not in schemas:
                assert self._registry is not None
                try:
                    schemas[schema_id] = self._registry.schema(schema_id)
                except SchemaNotFound as exc:
                    schemas[schema_id] = exc

    def _schema(self, schema_id: int) -> str:
        """The writer's schema :meth:`prepare` fetched for ``schema_id``."""
        found = self._schemas[schema_id]
        if isinstance(found, SchemaNotFound):
            raise DecodeError(found.reason)
        return found

    def _parse_avro(self, value: bytes) -> Any:
        assert self._avro is not None
        return self._avro.decode_wire(value, self._schema)

    def process(self, batch: Batch) -> int:
        """Decode, score, learn and publish one partition's batch (offset order); with Avro
        events, after :meth:`prepare`. Returns how many of its records were processed: all, or
        none when its partition waits at a mixing point due before them.

        With mixing on, the batch holds at most as many records as there are labeled examples
        before its partition's next mixing point (:meth:`Mixer.piece`), so that point, if the
        batch reaches it, is its last: a partition that waits there has processed the whole
        batch."""
        n = len(batch)
        if not n:
            return 0
        st = self._partitions.state(batch.topic, batch.partition)
        if st.fenced:  # the new owner processes it; this worker's next poll learns it lost it
            return n
        if self._mixer.due(st):  # a mixing point waited for, or stored, before this batch
            assert st.next_offset is not None
            if not self._mixer.point(st, st.next_offset, self._partitions.assigned):
                return n if st.fenced else 0
        dead_before = self._counters.dead_letters
        if self._events is None:
            decoded = self._decoder.decode_many(batch.values, batch.keys)
        elif self._avro is None:
            decoded = self._events.decode_many(batch.values, batch.keys, st.standardizer)
        else:
            decoded = self._events.decode_many(batch.values, batch.keys, st.standardizer, self._parse_avro)
        for i, reason in decoded.rejected.items():
            self._dead_letters.send(st, batch, i, reason)
        clock = stream_clock(batch) if st.pending.max_entries else []
        xs, labels = decoded.xs, sorted(decoded.labels)
        labeled = mistakes = start = 0
        while start < len(xs) or labels:
            # a run of rows of one kind, and the label records before the next run's first row
            end = st.learner.chunk_end(xs, start) if start < len(xs) else start
            until = decoded.rows[end] if end < len(xs) else len(batch)
            joins = [i for i in labels if i < until]
            labels = labels[len(joins):]
            run = self._vectorize(st, batch, decoded, start, end)
            for seg in plan(run.positions, run.ys, joins, every=self._mixer.every,
                            remaining=self._mixer.remaining(st)):
                if isinstance(seg, Learn):
                    a, b = seg.start, seg.stop
                    n_labeled, n_mistakes = self._learn(
                        st, batch, clock, take_rows(run.X, a, b), run.positions[a:b], run.ys[a:b],
                        run.ids[a:b], None if run.raw is None else run.raw[a:b],
                        None if run.echo is None else run.echo[a:b], run.names)
                    # the labeled rows plan() counted (a K-class row refused at its class
                    # included), so the mixing points do not depend on where batches were cut
                    self._mixer.learned(st, b - a - run.ys[a:b].count(0))
                elif isinstance(seg, Join):
                    n_labeled, n_mistakes = self._joiner.join(
                        st, batch, clock, seg.position, decoded.labels[seg.position], decoded.class_names)
                else:
                    assert isinstance(seg, Mix)
                    self._point(st, batch, batch.offsets[run.positions[seg.after]] + 1)
                    continue
                labeled, mistakes = labeled + n_labeled, mistakes + n_mistakes
            start = end
        self._joiner.to_end(st, batch)
        st.next_offset = batch.offsets[-1] + 1
        st.dirty = True
        self._counters.records += n
        model = st.learner.model
        self._observer.batch(topic=st.topic, partition=st.partition, records=n, labeled=labeled,
                             mistakes=mistakes, dead_letters=self._counters.dead_letters - dead_before)
        self._observer.feature_names(model.n_names, model.name_limit, topic=st.topic, partition=st.partition)
        return n

    def _point(self, st: PartitionState, batch: Batch, offset: int) -> None:
        """``st``'s mixing point before ``offset`` in ``batch``: where it waits, or stops as the
        partition's claim has passed to another worker, it is the batch's end
        (:meth:`Mixer.piece` cuts batches so)."""
        if not self._mixer.point(st, offset, self._partitions.assigned) and not st.fenced \
                and offset <= batch.offsets[-1]:
            raise RuntimeError(f"{st.name} waits at its mixing point {offset} inside a batch to"
                               f" {batch.offsets[-1]}: batches end at mixing points")

    def _vectorize(self, st: PartitionState, batch: Batch, decoded: Decoded, start: int, end: int) -> Run:
        """The decoded rows ``[start, end)`` (of one kind) in the model's coordinates; the rows the
        model does not take are dead letters."""
        xs = decoded.xs
        X, rejected = st.learner.model.vectorize_many(xs[start:end])
        for k, reason in rejected.items():
            self._dead_letters.send(st, batch, decoded.rows[start + k], reason)
        if rejected:
            k, reason = next(iter(rejected.items()))
            self._tell_refusal(st, batch, decoded.rows[start + k], reason)
        echo = decoded.echo
        if not rejected:  # every row taken: the columns' slices
            return Run(X, decoded.rows[start:end], decoded.ys[start:end], decoded.ids[start:end],
                       list(xs[start:end]) if st.pending.max_entries else None,
                       None if echo is None else echo[start:end], decoded.class_names)
        kept = [k for k in range(start, end) if k - start not in rejected]
        return Run(X, [decoded.rows[k] for k in kept], [decoded.ys[k] for k in kept],
                   [decoded.ids[k] for k in kept],
                   [xs[k] for k in kept] if st.pending.max_entries else None,
                   None if echo is None else [echo[k] for k in kept], decoded.class_names)

    def _tell_refusal(self, st: PartitionState, batch: Batch, i: int, reason: str) -> None:
        """Say at WARNING, once per kind and partition, that the model refused the ``i``-th record
        of ``batch`` (a dead letter now) and that the records like it will follow: those bringing
        new names past the bound, or those that do not fit the model's width. Each dead letter
        is logged at DEBUG only; without this line a stream of them would pass unremarked."""
        kind = reason.kind if isinstance(reason, Refusal) else "width"
        if kind in st.refusals_told:
            return
        st.refusals_told.add(kind)
        where, model = f"{st.name}@{batch.offsets[i]}", st.learner.model
        if kind == "names":
            setting = "SP_MODEL__N_FEATURES" if model.n_features is not None else "SP_LIMITS__MAX_NAMES"
            log.warning(
                "%s went to the dead-letter topic: %s; so will every later record whose new feature"
                " names would pass %s=%s (%d names in use; said once, the count is"
                " stream_perceptron_feature_names on /metrics; SP_MODEL__HASH_BITS hashes names"
                " into a fixed width instead)",
                where, reason, setting, model.name_limit, model.n_names,
            )
        elif kind == "classes":
            log.warning(
                "%s went to the dead-letter topic: %s; so will every later record whose class the"
                " model does not take (%d classes held, at most SP_LIMITS__MAX_CLASSES=%s; said once)",
                where, reason, len(getattr(model, "classes", ())), getattr(model, "max_classes", None),
            )
        else:
            origin = "" if st.width_from is None else f": that width is {st.width_from}"
            log.warning(
                "%s went to the dead-letter topic: %s; so will every record that does not fit the"
                " model's %d features (said once)%s",
                where, reason, model.dim or 0, origin,
            )

    def _learn_signs(self, st: PartitionState, batch: Batch, clock: Sequence[int], X: Rows, rows: list[int],
                     ys: list[int], ids: list[Any], raw: Any, echo: list[Any] | None,
                     names: list[Any] | None = None) -> tuple[int, int]:
        """Learn the learnable rows at batch positions ``rows`` with ``st``'s learner and publish
        their predictions (with ``echo``, each row's echo fields); returns (labeled, mistakes)
        among them. With ``raw`` (the rows' features as decoded), the unlabeled rows with an id
        wait for their late labels. (``names``: a K-class batch's, not used here.)"""
        y = np.array(ys, dtype=np.int8)
        model = st.learner.model
        before = model.updates
        step = st.learner.step(X, y, labeled=y != 0)  # the decoder's 0: no label
        result = step.result
        if raw is not None:
            self._joiner.keep(st, batch, clock, raw, rows, ys, ids, result)
        counts = int((y != 0).sum()), int(result.mistakes.sum())
        if step.alarms:
            self._drifts.report(st, step.alarms, [batch.offsets[r] for r in rows])
        publish_unlabeled, publish_labeled = self._publish
        if not (publish_labeled or publish_unlabeled):
            return counts
        updates = before + np.cumsum(result.mistakes)
        # the served model answers (averaged weights with SP_MODEL__AVERAGE); `mistake` and the
        # margin stay the learning θ's, as the update and E_n are
        columns: list[Any] = [result.served_scores, result.predictions, result.mistakes, step.margin,
                              updates, y]
        if not (publish_labeled and publish_unlabeled):
            wanted = (publish_unlabeled, publish_labeled)
            keep = [k for k, label in enumerate(ys) if wanted[label != 0]]
            rows, ys, ids = [rows[k] for k in keep], [ys[k] for k in keep], [ids[k] for k in keep]
            columns = [column[keep] for column in columns]
            echo = None if echo is None else [echo[k] for k in keep]
        offsets, batch_keys = batch.offsets, batch.keys
        if rows and rows[-1] - rows[0] == len(rows) - 1:  # increasing positions, none skipped
            keys, at = batch_keys[rows[0]:rows[-1] + 1], offsets[rows[0]:rows[-1] + 1]
        else:
            keys, at = [batch_keys[r] for r in rows], [offsets[r] for r in rows]
        scores, preds, flags, margins, updates, labels = columns
        values = encode_predictions(
            topic=batch.topic, partition=batch.partition, offsets=at,
            keys=keys, ids=ids, predictions=preds, scores=scores, labels=labels, mistakes=flags,
            margins=margins, updates=updates, classes=self._classes, echo=echo,
        )
        self._outputs.send_many(self._topic, keys, values)
        self._counters.predictions += len(values)
        return counts

    def _learn_classes(self, st: PartitionState, batch: Batch, clock: Sequence[int], X: Rows, rows: list[int],
                       ys: list[int], ids: list[Any], raw: Any, echo: list[Any] | None,
                       names: list[Any] | None) -> tuple[int, int]:
        """:meth:`_learn_signs` for a K-class learner: ``ys`` are codes of the batch's class
        ``names``. A row whose class the model does not take (one class past
        ``SP_LIMITS__MAX_CLASSES``, a name whose text is another class's) is a dead letter; the
        rows between such rows are learned as they come."""
        assert names is not None
        labels = [None if code == 0 else names[code - 1] for code in ys]
        refused = class_refusals(st.learner.model, labels)
        if not refused:
            return self._learn_class_rows(st, batch, clock, X, rows, ys, labels, ids, raw, echo)
        for k, reason in refused.items():
            self._dead_letters.send(st, batch, rows[k], reason)
        k, reason = next(iter(refused.items()))
        self._tell_refusal(st, batch, rows[k], reason)
        labeled = mistakes = start = 0
        for end in [*refused, len(rows)]:
            if end > start:
                part = slice(start, end)
                a, b = self._learn_class_rows(
                    st, batch, clock, take_rows(X, start, end), rows[part], ys[part], labels[part], ids[part],
                    None if raw is None else raw[part], None if echo is None else echo[part])
                labeled, mistakes = labeled + a, mistakes + b
            start = end + 1
        return labeled, mistakes

    def _learn_class_rows(self, st: PartitionState, batch: Batch, clock: Sequence[int], X: Rows,
                          rows: list[int], ys: list[int], labels: list[Any], ids: list[Any], raw: Any,
                          echo: list[Any] | None) -> tuple[int, int]:
        model: Any = st.learner.model  # a MulticlassPerceptron
        before = model.updates
        step = st.learner.step(X, labels, labeled=[y != 0 for y in ys])
        result: Any = step.result  # a ClassResult
        classes = model.classes
        preds = result.predictions.tolist()
        if raw is not None:
            named = [*classes, None]  # row -1: no class known yet
            self._joiner.keep(st, batch, clock, raw, rows, ys, ids,
                              result._replace(predictions=[named[p] for p in preds]))
        counts = len(ys) - ys.count(0), int(result.mistakes.sum())
        if step.alarms:
            self._drifts.report(st, step.alarms, [batch.offsets[r] for r in rows])
        publish_unlabeled, publish_labeled = self._publish
        if not (publish_labeled or publish_unlabeled):
            return counts
        updates = (before + np.cumsum(result.mistakes)).tolist()
        fields: dict[str, list[Any]] = {
            "predictions": preds, "scores": result.served_scores.tolist(),
            "runner_up": result.runner_up.tolist(), "runner_up_scores": result.runner_up_scores.tolist(),
            "labels": result.labels.tolist(), "mistakes": result.mistakes.tolist(),
            "margins": step.margin.tolist(), "updates": updates,
        }
        all_scores: Any = result.all_scores if self._scores else None
        if not (publish_labeled and publish_unlabeled):
            wanted = (publish_unlabeled, publish_labeled)
            keep = [k for k, y in enumerate(ys) if wanted[y != 0]]
            rows, ids = [rows[k] for k in keep], [ids[k] for k in keep]
            fields = {name: [v[k] for k in keep] for name, v in fields.items()}
            echo = None if echo is None else [echo[k] for k in keep]
            all_scores = None if all_scores is None else all_scores[keep]
        offsets, batch_keys = batch.offsets, batch.keys
        keys = [batch_keys[r] for r in rows]
        values = encode_class_predictions(
            topic=batch.topic, partition=batch.partition, offsets=[offsets[r] for r in rows],
            keys=keys, ids=ids, classes=classes, echo=echo,
            all_scores=None if all_scores is None else all_scores.tolist(), **fields,
        )
        self._outputs.send_many(self._topic, keys, values)
        self._counters.predictions += len(values)
        return counts

