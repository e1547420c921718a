"""The kafka-python fast paths (``stream_perceptron/kafka/fastpath/``) against kafka-python's own
per-record paths, side by side: the canaries run on each upgrade of kafka-python.

    .venv/bin/python -m bench.bench_fastpath append   # embedded broker (--bootstrap HOST:PORT: another)
    .venv/bin/python -m bench.bench_fastpath fetch    # no broker
    .venv/bin/python -m bench.bench_fastpath encode   # no broker (each: --repeats N, --json PATH)

What each path times: ``stream_perceptron/kafka/fastpath/README.md``, "On an upgrade of kafka-python".
Nothing is timed unless both ways give the same records (or futures, or batches).
"""

from __future__ import annotations

import gc
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
BATCH_BYTES = 262_144  # stream_perceptron.settings.KafkaSettings.batch_size's default
Poll = tuple[list[bytes], list[bytes]]  # keys, values


def _errback(*_args: Any) -> None:
    return None


def inputs(records: int, seed: int) -> Poll:
    values, _ = dense_records(records, 20, seed=seed)
    return [str(i).encode() for i in range(records)], values


# ------------------------------------------------------------------------------------ append
def send_per_record(producer: Any, topic: str, poll: Poll) -> list[Any]:
    """The edge before ``append_many``: ``send`` per record, then its errback."""
    send, futures = producer.send, []
    for key, value in zip(*poll, strict=True):
        future = send(topic, value=value, key=key, partition=0)
        future.add_errback(_errback, topic, key, value)
        futures.append(future)
    return futures


def append_per_poll(producer: Any, topic: str, poll: Poll) -> list[Any]:
    """The edge now: ``append_many`` per poll, which adds each record's errback as it appends it."""
    from stream_perceptron.kafka.fastpath.append import append_many

    futures = append_many(producer, topic, 0, *poll, errback=_errback)
    if futures is None or None in futures:
        raise SystemExit("append_many did not take the whole poll; nothing timed")
    return futures


APPEND: dict[str, Callable[[Any, str, Poll], list[Any]]] = {
    "send per record (earlier)": send_per_record, "append_many per poll": append_per_poll}


def time_append(send: Callable[[Any, str, Poll], list[Any]], producer: Any, topic: str,
                polls: Sequence[Poll]) -> float:
    """Seconds for ``send`` to hand every poll to the producer; then, untimed, every future must
    have succeeded once the producer is flushed."""
    futures: list[Any] = []
    started = time.perf_counter()
    for poll in polls:
        futures += send(producer, topic, poll)
    took = time.perf_counter() - started
    producer.flush(timeout=60)
    expected = sum(len(keys) for keys, _ in polls)
    delivered = sum(1 for f in futures if f.succeeded())
    if len(futures) != expected or delivered != expected:
        raise SystemExit(f"{getattr(send, '__name__', 'a contender')} delivered {delivered} of {expected}"
                         " records; nothing timed")
    return took


def run_append(args: Any) -> dict[str, list[float]]:
    from kafka import KafkaProducer

    keys, values = inputs(args.records, args.seed)
    polls = [(keys[a:a + POLL_RECORDS], values[a:a + POLL_RECORDS])
             for a in range(0, len(keys), POLL_RECORDS)]
    runs: dict[str, list[float]] = {name: [] for name in APPEND}
    with broker_at(args.bootstrap) as (bootstrap, _):
        topic = f"ba{time.time_ns()}"
        create_topics(bootstrap, [topic])
        producer = KafkaProducer(**producer_kwargs(kafka_settings(bootstrap)))
        try:
            producer.send(topic, b"warm-up", partition=0).get(timeout=30)  # the topic's metadata
            for r in range(args.repeats):
                for name in rotated(list(APPEND), r):
                    runs[name].append(time_append(APPEND[name], producer, topic, polls))
        finally:
            producer.close()
            delete_topics(bootstrap, [topic])
    return runs


# ------------------------------------------------------------------------------------- fetch
def fetched(records: int, seed: int) -> bytes:
    """``records`` input records as one fetch response's record batches (offsets from 0)."""
    from kafka.record.memory_records import MemoryRecordsBuilder

    keys, values = inputs(records, seed)
    out, i = [], 0
    while i < records:
        builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=BATCH_BYTES, offset=i)
        while i < records and builder.append(1_700_000_000_000 + i, keys[i], values[i], []):
            i += 1
        builder.close()
        out.append(bytes(builder.buffer()))
    return b"".join(out)


def fetch_contenders() -> dict[str, Any]:
    from kafka.consumer.fetcher import Fetcher

    from stream_perceptron.kafka.fastpath.fetch import BatchDecodingRecords

    return {"kafka-python, record by record": Fetcher.PartitionRecords,
            "fastpath.fetch, a batch at once": BatchDecodingRecords}


def read_all(cls: Any, data: bytes) -> tuple[float, list[Any]]:
    """Seconds to take every record of ``data`` through ``cls`` in polls, and the records."""
    from kafka.record.memory_records import MemoryRecords
    from kafka.structs import TopicPartition

    records: list[Any] = []
    started = time.perf_counter()
    part = cls(0, TopicPartition("in", 0), MemoryRecords(data), check_crcs=True)
    while part:
        records += part.take(POLL_RECORDS)
    return time.perf_counter() - started, records


def run_fetch(args: Any) -> dict[str, list[float]]:
    data, classes = fetched(args.records, args.seed), fetch_contenders()
    runs: dict[str, list[float]] = {name: [] for name in classes}
    _, expected = read_all(classes[next(iter(classes))], data)
    for r in range(args.repeats):
        for name in rotated(list(classes), r):
            took, records = read_all(classes[name], data)
            if records != expected:
                raise SystemExit(f"{name} read other records than kafka-python; nothing timed")
            del records
            gc.collect()
            runs[name].append(took)
    return runs


# ------------------------------------------------------------------------------------ encode
def _new_batch() -> Any:
    from kafka.producer.producer_batch import ProducerBatch
    from kafka.record.memory_records import MemoryRecordsBuilder
    from kafka.structs import TopicPartition

    return ProducerBatch(TopicPartition("out", 0), MemoryRecordsBuilder(2, 0, BATCH_BYTES))


def try_append_per_record(keys: list[bytes], values: list[bytes]) -> list[Any]:
    """``try_append`` per record, then the edge's errback on its future."""
    batches, i, n, now = [_new_batch()], 0, len(values), time.monotonic()
    while i < n:
        future = batches[-1].try_append(None, keys[i], values[i], [], now)
        if future is None:
            batches.append(_new_batch())
            continue
        future.add_errback(_errback, "out", keys[i], values[i])
        i += 1
    return batches


def append_run_per_batch(keys: list[bytes], values: list[bytes]) -> list[Any]:
    """``append_run`` until a batch is full, with the same errback."""
    from stream_perceptron.kafka.fastpath.encode import append_run

    batches, k, rows, now = [_new_batch()], 0, range(len(values)), time.monotonic()
    futures: list[Any] = [None] * len(values)
    while True:
        k = append_run(batches[-1], rows, k, keys, values, futures, "out", _errback, now)
        if k == len(values):
            return batches
        batches.append(_new_batch())


ENCODE: dict[str, Callable[[list[bytes], list[bytes]], list[Any]]] = {
    "try_append per record (earlier)": try_append_per_record, "append_run per batch": append_run_per_batch}


def run_encode(args: Any) -> dict[str, list[float]]:
    keys, values = inputs(args.records, args.seed)
    runs: dict[str, list[float]] = {name: [] for name in ENCODE}
    shapes = {}
    for r in range(args.repeats):
        for name in rotated(list(ENCODE), r):
            started = time.perf_counter()
            batches = ENCODE[name](keys, values)
            runs[name].append(time.perf_counter() - started)
            for batch in batches:
                batch.records.close()
            shapes[name] = len(batches), sum(batch.record_count for batch in batches)
            del batches
            gc.collect()
        if len(set(shapes.values())) != 1 or next(iter(shapes.values()))[1] != args.records:
            raise SystemExit(f"the contenders appended differently: {shapes}; nothing timed")
    return runs


PATHS = {"append": (run_append, "kafka-python producer call", f"records in polls of {POLL_RECORDS:,}"),
         "fetch": (run_fetch, "reading fetched batches", f"records in polls of {POLL_RECORDS:,}"),
         "encode": (run_encode, "appending to producer batches",
                    f"records in batches of {BATCH_BYTES:,} bytes")}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from stream_perceptron.runtime import tune_gc

    parser = offline_parser(__doc__, records=100_000, repeats=7)
    parser.add_argument("path", choices=PATHS, help="the fast path to time")
    parser.add_argument("--bootstrap", help="append: an existing broker (default: start the embedded one)")
    args = parser.parse_args(argv)
    run, column, input_text = PATHS[args.path]
    if args.path != "append":  # the producer's own thread runs beside the append
        tune_gc()
    return contender_report(args, run(args), input_text=input_text, column=column,
                            **({"batch_bytes": BATCH_BYTES} if args.path == "encode" else
                               {"poll_records": POLL_RECORDS}))


if __name__ == "__main__":
    main(sys.argv[1:])
