"""``stream-perceptron produce``: publish a dataset as input records (edge: knows no model)."""

from __future__ import annotations

import time
from collections.abc import Callable

from kafka import KafkaProducer
from kafka.errors import KafkaError

from stream_perceptron.codec.inputs import decode_example, input_record
from stream_perceptron.codec.limits import Limits
from stream_perceptron.errors import DecodeError, KafkaEdgeError, ProduceInterrupted, SourceError
from stream_perceptron.kafka.admin import client_config
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.sources import Source, no_positive_class


def check_source(source: Source, limits: Limits) -> int:
    """Read ``source`` through, as :func:`produce_source` would send it, without sending; the
    count of examples. Raises :class:`SourceError` at the first example that cannot be read or
    that the worker would refuse under ``limits``, so a file is sent whole or not at all."""
    count = positives = 0
    for i, (x, y) in enumerate(source):
        _accepted(source, i, input_record(x, y, i), limits)
        count += 1
        positives += y > 0
    no_positive_class(source.spec, limits.positive_class, count, positives)
    return count


def _accepted(source: Source, i: int, value: bytes, limits: Limits) -> None:
    try:
        decode_example(value, limits)
    except DecodeError as exc:
        raise SourceError(
            f"{source.spec}: example {i + 1}: {exc}; the worker would dead-letter it"
        ) from None


def produce_source(
    kafka: KafkaSettings,
    source: Source,
    topic: str,
    *,
    limits: Limits | None = None,
    unlabeled_every: int = 0,
    rate: float | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> int:
    """Send every example of ``source`` to ``topic`` in order, as input records; returns the count.

    Keys are the example's index (so an example keeps its key whatever partition it lands on);
    ``id`` is the same index. With ``unlabeled_every=k`` every k-th record is sent without its
    label. ``rate`` caps records/s (for latency runs). Flushes before returning.

    With ``limits``, each record is first decoded as the worker decodes it: one it would
    dead-letter stops the run with :class:`SourceError`, which says how many were sent before.

    Raises :class:`KafkaEdgeError` when a record cannot be sent or its delivery failed (the
    client's own retries included), saying how many of those sent were not delivered: a
    returned count is a count of acknowledged records.
    Raises :class:`ProduceInterrupted` on Ctrl+C, once what was sent is delivered, saying how many.
    """
    producer = KafkaProducer(
        **client_config(kafka), acks="all", linger_ms=kafka.linger_ms, batch_size=kafka.batch_size
    )
    sent = 0
    failed: list[BaseException] = []  # delivery reports, from the client's I/O thread
    started = time.monotonic()
    try:
        for i, (x, y) in enumerate(source):
            label = None if unlabeled_every and (i + 1) % unlabeled_every == 0 else y
            value = input_record(x, label, i)
            if limits is not None:
                try:
                    _accepted(source, i, value, limits)
                except SourceError as exc:
                    producer.flush()
                    lost = f", {len(failed)} of them not delivered" if failed else ""
                    raise SourceError(
                        f"{exc} ({sent} records before it were sent to {topic}{lost})"
                    ) from None
            try:
                future = producer.send(topic, key=str(i).encode(), value=value)
            except KafkaError as exc:
                raise KafkaEdgeError(
                    f"sending record {i} to {topic} failed: {type(exc).__name__}: {exc}"
                ) from None
            future.add_errback(failed.append)
            sent += 1
            if rate is not None:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            if on_progress is not None and sent % 1000 == 0:
                on_progress(1000)
        producer.flush()
        if failed:
            raise KafkaEdgeError(
                f"{len(failed)} of {sent} records sent to {topic} were not delivered, e.g. "
                f"{type(failed[0]).__name__}: {failed[0]}"
            )
        if on_progress is not None:
            on_progress(sent % 1000)
    except KeyboardInterrupt:
        producer.flush()  # what was sent is delivered (or fails) before the count is given
        lost = f"; {len(failed)} of them were not delivered" if failed else ""
        raise ProduceInterrupted(
            f"interrupted: examples 0 to {sent - 1} were sent to {topic}{lost}; sending the source"
            " again sends them again"
            if sent else f"interrupted before any record was sent to {topic}"
        ) from None
    finally:
        producer.close()
    return sent
