"""confluent-kafka's ``produce`` called three ways, side by side, with no Kafka.

``ConfluentEdge.send_many`` and the bare pipe call ``Producer.produce`` once per record. This times
that call with keyword arguments, ``produce(topic, value=v, key=k)`` (the edge up to this
benchmark), with positional ones, ``produce(topic, v, k)`` (the edge now), and the batch call
``produce_batch(topic, [{"value": v, "key": k}, ...])``, which needs a dict per record.

Run from the repository root::

    .venv/bin/python -m bench.bench_produce                         # 200,000 records, 15 repeats
    .venv/bin/python -m bench.bench_produce --repeats 25 --json bench/results/produce.json

The producer has the edge's batching settings, a default delivery callback as the edge's producer
has, and a bootstrap address where nothing listens, so a call only queues its record: what is timed
is the call, not the network. The records are the benchmark's dense input records with ``str(i)``
keys, in polls of 2,000 (``SP_KAFKA__MAX_POLL_RECORDS``). After each contender's run, untimed, the
queue is purged, and the purge's delivery reports must count every record. Each repeat runs every
contender, in rotated order; the table gives the median µs per record and its ratio to keyword
arguments.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaError, Producer

from bench.worker.contenders import offline_parser, rotated
from bench.worker.formatting import contender_report
from bench.worker.inputs import dense_records
from stream_perceptron.commands.broker import free_port
from stream_perceptron.settings import KafkaSettings

POLL_RECORDS = 2_000
TOPIC = "out"
DEFAULTS = KafkaSettings()  # the edge's batching settings, as a worker gets them

Poll = tuple[list[bytes], list[bytes]]  # keys, values
Send = Callable[[Producer, Poll], None]


def keywords(producer: Producer, poll: Poll) -> None:
    produce = producer.produce
    for key, value in zip(*poll, strict=True):
        produce(TOPIC, value=value, key=key)


def positional(producer: Producer, poll: Poll) -> None:
    produce = producer.produce
    for key, value in zip(*poll, strict=True):
        produce(TOPIC, value, key)


def batch_of_dicts(producer: Producer, poll: Poll) -> None:
    producer.produce_batch(TOPIC, [{"value": v, "key": k} for k, v in zip(*poll, strict=True)])


CONTENDERS: dict[str, Send] = {
    "produce(topic, value=v, key=k) (earlier)": keywords,
    "produce(topic, v, k)": positional,
    "produce_batch(topic, [dict per record])": batch_of_dicts,
}


def queue_only_producer(records: int, purged: list[int]) -> Producer:
    """A producer with the edge's batching settings, room for ``records``, and no broker; each
    record purged from its queue adds one to ``purged[0]`` when its report is served."""

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and err.code() == KafkaError._PURGE_QUEUE:
            purged[0] += 1

    return Producer({
        "bootstrap.servers": f"127.0.0.1:{free_port()}",  # nothing listens: calls only queue
        "linger.ms": DEFAULTS.linger_ms, "batch.size": DEFAULTS.batch_size, "acks": "all",
        "queue.buffering.max.messages": max(records, 1),
        "queue.buffering.max.kbytes": 2_097_151,
        "delivery.report.only.error": True,
        "on_delivery": on_delivery,
        "log_level": 0,  # the refused connections are expected
    })


def polls(records: int, seed: int) -> list[Poll]:
    """``records`` input records and their keys, in polls of :data:`POLL_RECORDS`."""
    values, _ = dense_records(records, 20, seed=seed)
    keys = [str(i).encode() for i in range(records)]
    return [(keys[a:a + POLL_RECORDS], values[a:a + POLL_RECORDS])
            for a in range(0, records, POLL_RECORDS)]


def time_contender(send: Send, producer: Producer, inputs: Sequence[Poll], purged: list[int]) -> float:
    """Seconds for ``send`` to queue every poll. Then, untimed, the queue is purged and its
    delivery reports served: ``purged`` (counted by the producer's ``on_delivery``) must grow by
    every record sent, or nothing is timed."""
    before = purged[0]
    started = time.perf_counter()
    for poll in inputs:
        send(producer, poll)
    took = time.perf_counter() - started
    producer.purge()
    while producer.poll(0):
        pass
    queued, expected = purged[0] - before, sum(len(keys) for keys, _ in inputs)
    if queued != expected:
        raise SystemExit(f"{send.__name__} queued {queued} of {expected} records; nothing timed")
    return took


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = offline_parser(__doc__, records=200_000, repeats=15)
    args = parser.parse_args(argv)
    inputs = polls(args.records, args.seed)
    purged = [0]
    producer = queue_only_producer(args.records, purged)
    runs: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for r in range(args.repeats):
        for name in rotated(list(CONTENDERS), r):
            runs[name].append(time_contender(CONTENDERS[name], producer, inputs, purged))
    return contender_report(args, runs, input_text=f"records in polls of {POLL_RECORDS:,}",
                            column="confluent-kafka call", poll_records=POLL_RECORDS)


if __name__ == "__main__":
    main(sys.argv[1:])
