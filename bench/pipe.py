"""The limit: a bare kafka-python consume → produce pipe, one process, values forwarded unchanged.

Run from the repository root::

    .venv/bin/python -m bench.pipe --bootstrap 127.0.0.1:9092 --input IN --output OUT --records N

It reads partition 0 of ``IN`` from its beginning with ``assign()`` (no group, so no group join),
sends every record's key and value unchanged to ``OUT``, and stops after ``N`` records and a
flush. The clients use the worker's settings (``stream_perceptron.settings.KafkaSettings``
defaults, ``acks="all"`` and ``max_block_ms`` as ``stream_perceptron.kafka_io`` builds its
producer), so the only difference from the worker is everything the worker does per record.

The last line on stdout is ``BENCH_RESULT {json}`` with the process's own timings (wall clock,
``time.time()``): ``t_first_polled`` (first poll that returned records), ``t_last_sent``,
``t_flushed``. ``bench.bench_worker`` runs this as a subprocess and measures its rate from the
output topic's record timestamps, like every other contender.

This module also holds the small helpers the other contenders share (client keyword arguments,
the result line).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

RESULT_PREFIX = "BENCH_RESULT "
PRODUCER_ACKS = "all"  # stream_perceptron.kafka_io.KafkaEdge._new_producer hard-codes acks="all"


def kafka_settings(bootstrap: str) -> Any:
    """The worker's Kafka settings (all defaults) pointed at ``bootstrap``."""
    from stream_perceptron.settings import KafkaSettings

    return KafkaSettings(bootstrap_servers=bootstrap)


def consumer_kwargs(bootstrap: str) -> dict[str, Any]:
    """KafkaConsumer kwargs as the worker's (no group: the caller uses ``assign()``)."""
    from stream_perceptron.kafka_io import client_config

    kafka = kafka_settings(bootstrap)
    return {
        **client_config(kafka),
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "max_poll_records": kafka.max_poll_records,
    }


def producer_kwargs(bootstrap: str) -> dict[str, Any]:
    """KafkaProducer kwargs as the worker's producer."""
    from stream_perceptron.kafka_io import PRODUCER_MAX_BLOCK_MS, client_config

    kafka = kafka_settings(bootstrap)
    return {
        **client_config(kafka),
        "acks": PRODUCER_ACKS,
        "linger_ms": kafka.linger_ms,
        "batch_size": kafka.batch_size,
        "max_block_ms": PRODUCER_MAX_BLOCK_MS,
    }


def poll_params(bootstrap: str) -> tuple[int, int]:
    """(poll timeout ms, max records per poll), the worker's defaults."""
    kafka = kafka_settings(bootstrap)
    return kafka.poll_timeout_ms, kafka.max_poll_records


def assigned_consumer(bootstrap: str, topic: str, partition: int = 0) -> Any:
    """A consumer assigned to ``topic``/``partition``, positioned at offset 0.

    The benchmark's topics are fresh, so offset 0 is their beginning; an explicit seek avoids a
    ListOffsets(earliest) request (tansu gets ListOffsets(latest) wrong; see the team notes).
    """
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**consumer_kwargs(bootstrap))
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    return consumer


def consume_produce(
    bootstrap: str,
    input_topic: str,
    records: int,
    handle_batch: Callable[[list[Any], Any], None],
    *,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Poll ``input_topic`` until ``records`` records went through ``handle_batch(recs, producer)``,
    then flush. Returns the process's own timings; shared by the pipe and the river peer."""
    from kafka import KafkaProducer

    t_start = time.time()
    consumer = assigned_consumer(bootstrap, input_topic)
    producer = KafkaProducer(**producer_kwargs(bootstrap))
    poll_ms, max_records = poll_params(bootstrap)
    t_ready = time.time()
    consumed = 0
    t_first: float | None = None
    deadline = time.monotonic() + timeout_s
    try:
        while consumed < records:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {consumed} of {records} records in {timeout_s} s")
            batches = consumer.poll(timeout_ms=poll_ms, max_records=max_records)
            for recs in batches.values():
                if t_first is None and recs:
                    t_first = time.time()
                handle_batch(recs, producer)
                consumed += len(recs)
        t_last_sent = time.time()
        producer.flush()
        t_flushed = time.time()
    finally:
        producer.close()
        consumer.close()
    return {
        "records": consumed,
        "t_start": t_start,
        "t_ready": t_ready,
        "t_first_polled": t_first,
        "t_last_sent": t_last_sent,
        "t_flushed": t_flushed,
        "own_rate_first_poll_to_flush": (
            (consumed / (t_flushed - t_first)) if t_first is not None and t_flushed > t_first else None
        ),
    }


def pipe(bootstrap: str, input_topic: str, output_topic: str, records: int) -> dict[str, Any]:
    """Forward ``records`` records of ``input_topic`` to ``output_topic``, key and value unchanged."""

    def forward(recs: list[Any], producer: Any) -> None:
        send = producer.send
        for r in recs:
            send(output_topic, value=r.value, key=r.key)

    return consume_produce(bootstrap, input_topic, records, forward)


def emit_result(result: dict[str, Any]) -> None:
    """Print the machine-readable last line."""
    sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()


def parse_result(stdout: str) -> dict[str, Any] | None:
    """The ``BENCH_RESULT`` payload in a contender's stdout (the last one), or None."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            parsed: dict[str, Any] = json.loads(line[len(RESULT_PREFIX) :])
            return parsed
    return None


def contender_args(prog: str, description: str, argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--bootstrap", required=True, help="host:port of the broker")
    p.add_argument("--input", required=True, help="input topic (partition 0 is read)")
    p.add_argument("--output", required=True, help="output topic")
    p.add_argument("--records", type=int, required=True, help="records to forward, then stop")
    args = p.parse_args(argv)
    if args.records < 1:
        p.error("--records must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = contender_args("python -m bench.pipe", "A bare consume -> produce pipe (the limit).", argv)
    result = pipe(args.bootstrap, args.input, args.output, args.records)
    result["contender"] = "pipe"
    emit_result(result)
    return result


if __name__ == "__main__":
    main()
