"""kafka-python's ``KafkaProducer.send`` per record against ``append_many`` per poll, side by side.

Run from the repository root::

    .venv/bin/python -m bench.bench_append            # embedded broker, 100,000 records, 7 repeats
    .venv/bin/python -m bench.bench_append --repeats 11 --json bench/results/append.json
    .venv/bin/python -m bench.bench_append --bootstrap HOST:PORT  # an existing broker

Both ways of handing a poll to one producer with the worker's settings, with the edge's errback
on each record's future: ``send(topic, value=v, key=k, partition=0)`` per record, as
``KafkaEdge.send_many`` did, and ``stream_perceptron.kafka.fastpath.append.append_many`` per poll,
as it does; the benchmark's dense records with ``str(i)`` keys, polls of 2,000, to a topic of one
partition. The producer's I/O thread sends meanwhile, as in the worker. After each run, untimed,
the producer is flushed and every future must have succeeded, or nothing is timed. Each repeat
runs both, in rotated order; the table gives the median µs per record and its ratio to ``send``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.pipe import kafka_settings, producer_kwargs
from bench.worker.contenders import offline_parser, rotated
from bench.worker.formatting import contender_report
from bench.worker.inputs import dense_records
from bench.worker.processes import broker_at
from bench.worker.topics import create_topics, delete_topics

POLL_RECORDS = 2_000
Poll = tuple[list[bytes], list[bytes]]  # keys, values
Send = Callable[[Any, str, Poll], list[Any]]  # the futures, in order


def _errback(*_args: Any) -> None:
    return None


def per_record(producer: Any, topic: str, poll: Poll) -> list[Any]:
    """The edge up to this benchmark: ``send`` per record, then its errback."""
    send, futures = producer.send, []
    for key, value in zip(*poll, strict=True):
        future = send(topic, value=value, key=key, partition=0)
        future.add_errback(_errback, topic, key, value)
        futures.append(future)
    return futures


def per_poll(producer: Any, topic: str, poll: Poll) -> list[Any]:
    """The edge now: ``append_many`` per poll, which adds each record's errback as it appends it."""
    from stream_perceptron.kafka.fastpath.append import append_many

    keys, values = poll
    futures = append_many(producer, topic, 0, keys, values, errback=_errback)
    if futures is None or None in futures:
        raise SystemExit("append_many did not take the whole poll; nothing timed")
    return futures


CONTENDERS: dict[str, Send] = {"send per record (earlier)": per_record, "append_many per poll": per_poll}


def polls(records: int, seed: int) -> list[Poll]:
    """``records`` input records and their keys, in polls of :data:`POLL_RECORDS`."""
    values, _ = dense_records(records, 20, seed=seed)
    keys = [str(i).encode() for i in range(records)]
    return [(keys[a:a + POLL_RECORDS], values[a:a + POLL_RECORDS]) for a in range(0, records, POLL_RECORDS)]


def time_contender(send: Send, producer: Any, topic: str, inputs: Sequence[Poll]) -> float:
    """Seconds for ``send`` to hand every poll to the producer. Then, untimed, the producer is
    flushed: every record must have a future, and every future must have succeeded."""
    futures: list[Any] = []
    started = time.perf_counter()
    for poll in inputs:
        futures += send(producer, topic, poll)
    took = time.perf_counter() - started
    producer.flush(timeout=60)
    expected = sum(len(keys) for keys, _ in inputs)
    delivered = sum(1 for f in futures if f.succeeded())
    if len(futures) != expected or delivered != expected:
        name = getattr(send, "__name__", "a contender")
        raise SystemExit(f"{name} delivered {delivered} of {expected} records; nothing timed")
    return took


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from kafka import KafkaProducer

    parser = offline_parser(__doc__, records=100_000, repeats=7)
    parser.add_argument("--bootstrap", help="an existing broker (default: start the embedded one)")
    args = parser.parse_args(argv)
    inputs = polls(args.records, args.seed)
    with broker_at(args.bootstrap) as (bootstrap, _):
        topic = f"ba{time.time_ns()}"
        create_topics(bootstrap, [topic])
        producer = KafkaProducer(**producer_kwargs(kafka_settings(bootstrap)))
        try:
            producer.send(topic, b"warm-up", partition=0).get(timeout=30)  # the topic's metadata
            runs: dict[str, list[float]] = {name: [] for name in CONTENDERS}
            for r in range(args.repeats):
                for name in rotated(list(CONTENDERS), r):
                    runs[name].append(time_contender(CONTENDERS[name], producer, topic, inputs))
        finally:
            producer.close()
            delete_topics(bootstrap, [topic])
    return contender_report(args, runs, input_text=f"records in polls of {POLL_RECORDS:,}",
                            column="kafka-python producer call", poll_records=POLL_RECORDS)


if __name__ == "__main__":
    main(sys.argv[1:])
