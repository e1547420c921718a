"""``stream-perceptron mixed``: the newest mix of each input partition, read from the model topic.

A worker mixing partitions (``SP_MIX__EVERY_EXAMPLES`` > 0) writes a record to the model topic
(``SP_MIX__TOPIC``) at each mixing point of a partition; the last entry of its log is the mix the
partition adopted there (:mod:`stream_perceptron.model.newest_mix`). :func:`mixed_lines` reads the
topic to its end, as the worker's own reader does
(:class:`~stream_perceptron.worker.mixer.KafkaModelTopic`, read without creating the topic), and
yields one line per input partition, its newest mix: ``{"topic", "partition", "epoch",
"offset", "weights", "intercept", "partitions", "mu"}``, in (topic, partition) order. With
``follow`` it goes on reading and yields each new mix as a record brings it, until ``stop`` is
set (the command sets it on SIGINT and SIGTERM:
:func:`~stream_perceptron.signals.stopping_on_signals`). With ``rows`` (dense rows) each line also
carries ``"scores"``, θ·x + θ0 of each row, and ``"predictions"``, +1 where the score is > 0
and −1 elsewhere.

Nothing logged here holds a secret: the clients get the security settings through
:func:`~stream_perceptron.kafka.admin.client_config` alone, and errors are described by
:func:`~stream_perceptron.kafka.config.describe`.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from stream_perceptron.errors import ModelTopicError
from stream_perceptron.kafka.admin import partition_count
from stream_perceptron.model.newest_mix import Adopted
from stream_perceptron.settings import Settings
from stream_perceptron.state.model_topic import ModelTopicIndex
from stream_perceptron.worker.mixer import KafkaModelTopic

log = logging.getLogger(__name__)

POLL_S = 0.5
"""How long ``--follow`` waits between two reads that found the topic's end."""


def parse_row(text: str) -> list[float]:
    """A ``--score`` row: a JSON array of finite numbers; :class:`ModelTopicError` naming it else.

    >>> parse_row("[0.5, 1, -2e-3]")
    [0.5, 1.0, -0.002]
    """
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = None
    if (not isinstance(value, list) or not value
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            or not all(math.isfinite(v) for v in value)):
        raise ModelTopicError(f"--score {text!r}: a row is a JSON array of numbers, like [0.5, 1.0]")
    return [float(v) for v in value]


def line(adopted: Adopted, rows: Sequence[Sequence[float]] = ()) -> dict[str, Any]:
    """What ``mixed`` prints of one partition's newest mix, with the scores of ``rows``."""
    out = adopted.record()
    if rows:
        width = len(adopted.mix.weights)
        for i, row in enumerate(rows, 1):
            if len(row) != width:
                raise ModelTopicError(
                    f"--score row {i} has {len(row)} values; the mix of {adopted.topic}:"
                    f"{adopted.partition} has {width} weights")
        out["scores"] = [adopted.score(row) for row in rows]
        out["predictions"] = [adopted.predict(row) for row in rows]
    return out


def mixed_lines(
    settings: Settings, *, rows: Sequence[Sequence[float]] = (), follow: bool = False,
    stop: threading.Event | None = None, poll_s: float = POLL_S,
) -> Iterator[dict[str, Any]]:
    """The lines of ``mixed`` (the module's docstring). :class:`ModelTopicError` when the topic
    does not exist or, without ``follow``, holds no mix;
    :class:`~stream_perceptron.errors.KafkaEdgeError` when it cannot be read."""
    topic = settings.mix.topic
    if partition_count(settings.kafka, topic, settings.kafka.request_timeout_ms / 1000) is None:
        raise ModelTopicError(f"the model topic {topic} does not exist (SP_MIX__TOPIC): a worker"
                              " creates it when it starts with SP_MIX__EVERY_EXAMPLES > 0")
    stop = stop or threading.Event()
    reader = KafkaModelTopic(settings)  # the topic exists: nothing is created
    index = ModelTopicIndex()
    try:
        held: dict[tuple[str, int], Adopted | None] = {}
        for _ in _read(reader, index, topic):
            pass
        held = _newest(index, topic)
        newest = [a for _, a in sorted(held.items()) if a is not None]
        if not newest and not follow:
            raise ModelTopicError(f"the model topic {topic} holds no mix yet: no partition has"
                                  " reached a mixing point")
        for adopted in newest:
            yield line(adopted, rows)
        while follow and not stop.wait(poll_s):
            for _ in _read(reader, index, topic):  # each record as it comes, its mix if new
                for key, new in sorted(_newest(index, topic).items()):
                    before, held[key] = held.get(key), new
                    if new is not None and (before is None or before.record() != new.record()):
                        yield line(new, rows)
    finally:
        reader.close()


def _read(reader: KafkaModelTopic, index: ModelTopicIndex, topic: str) -> Iterator[None]:
    """What the model topic gained, into ``index``, one record at a time (a record that is not
    the model topic's is skipped, with a warning)."""
    for key, value in reader.newer():
        try:
            index.add(key, value)
        except ValueError as exc:
            log.warning("skipping a record of %s (key %r): not a model record: %s", topic, key, exc)
            continue
        yield


def _newest(index: ModelTopicIndex, topic: str) -> dict[tuple[str, int], Adopted | None]:
    """The newest mix of every partition in ``index`` (None while a partition's newest record
    logs none; a record that is not a mixing record is skipped, with a warning)."""
    out: dict[tuple[str, int], Adopted | None] = {}
    for (name, partition), record in index.records().items():
        try:
            out[(name, partition)] = Adopted.from_record(record)
        except (KeyError, IndexError, TypeError, ValueError):
            log.warning("skipping the record of %s:%d in %s: not a mixing record", name, partition, topic)
    return out
