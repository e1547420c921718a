"""Following a statistics topic live, for ``watch`` and ``dashboard``.

* :func:`follow_stats` reads a statistics topic without a consumer group (every partition
  assigned by hand) and yields the decoded records (statistics records and drift events) in
  batches as they arrive, ``[]`` on an idle poll so a display can refresh.

(The reading is :class:`~stream_perceptron.kafka.reader.TopicReader`'s, which takes the end of a
partition from fetch responses.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from typing import Any

from stream_perceptron.codec.outputs import decode
from stream_perceptron.commands.series import is_stats_or_drift
from stream_perceptron.kafka.config import check_reachable
from stream_perceptron.kafka.reader import Record, TopicReader
from stream_perceptron.settings import KafkaSettings

log = logging.getLogger("stream_perceptron.commands.watch")  # the name watch's lines always had

# Records per poll; a statistics topic is small, this only bounds one batch.
_MAX_POLL_RECORDS = 1_000
# How long the first connection may take before follow_stats gives up.
_CONNECT_TIMEOUT_S = 10.0


def connect_timeout_s(kafka: KafkaSettings) -> float:
    """How long ``watch`` and ``plot`` wait for their first connection: a port that accepts and
    does not answer as Kafka is named within it, not after a whole request timeout."""
    return min(_CONNECT_TIMEOUT_S, kafka.request_timeout_ms / 1000)


# --------------------------------------------------------------------------- reading


def follow_stats(
    kafka: KafkaSettings, topic: str, *, from_beginning: bool = True, poll_timeout_ms: int = 500,
    on_skip: Callable[[int], None] | None = None,
) -> Generator[list[dict[str, Any]], None, None]:
    """Yield batches of statistics records from ``topic`` as they arrive; ``[]`` on an idle poll.

    Every partition is assigned (no consumer group, nothing committed). With ``from_beginning``
    each partition is read from its first record; otherwise only records published after the
    start are yielded (the end is the high-water mark of the first fetch). While the topic does
    not exist the generator yields ``[]`` every ``poll_timeout_ms`` and assigns the topic's
    partitions once it appears. Drift events (``"event": "drift"``) are yielded with the statistics
    records, in their order. Records that are neither, or not JSON, are skipped (the first with a
    warning); ``on_skip``, if given, is called with the number skipped in each
    batch that skipped any. The consumer is created on the first ``next()`` and closed when the generator
    is closed (or garbage-collected). Raises :class:`~stream_perceptron.errors.KafkaEdgeError`
    when no bootstrap server can be reached.
    """
    connect_s = connect_timeout_s(kafka)
    check_reachable(kafka, connect_s)
    reader = TopicReader(kafka, topic, start="beginning" if from_beginning else "end",
                         connect_timeout_s=connect_s)
    try:
        skipped = 0  # only the first skipped record is logged as a warning
        while True:
            batch: list[dict[str, Any]] = []
            skipped_before = skipped
            for record in reader.poll(poll_timeout_ms / 1000, max_records=_MAX_POLL_RECORDS):
                stats = _decode_stats(topic, record, quiet=skipped > 0)
                if stats is not None:
                    batch.append(stats)
                else:
                    skipped += 1
            if on_skip is not None and skipped > skipped_before:
                on_skip(skipped - skipped_before)
            yield batch
    finally:
        reader.close()


def _decode_stats(topic: str, record: Record, *, quiet: bool = False) -> dict[str, Any] | None:
    """The statistics record or drift event in a record of ``topic``, or None (logged; at debug
    level if ``quiet``)."""
    level = logging.DEBUG if quiet else logging.WARNING
    where = f"{topic}/{record.partition}@{record.offset}"
    more = "" if quiet else "; further ones are logged at debug level"
    if record.value is None:
        return None
    try:
        value = decode(record.value)
    except ValueError as exc:
        log.log(level, "skipping %s: not JSON (%s)%s", where, exc, more)
        return None
    if not is_stats_or_drift(value):
        log.log(level, "skipping %s: not a statistics record or drift event%s", where, more)
        return None
    stats: dict[str, Any] = value
    return stats
