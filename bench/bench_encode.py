"""kafka-python's ``ProducerBatch.try_append`` per record against ``kafka.fastpath.encode.append_run``.

Run from the repository root::

    .venv/bin/python -m bench.bench_encode            # 100,000 records, 7 repeats
    .venv/bin/python -m bench.bench_encode --repeats 11 --json bench/results/encode.json

What ``append_many`` does per record under the partition's lock, both ways: ``try_append`` on the
open batch and the edge's errback on the record's future, as it did, or a run of records encoded
in one loop (``stream_perceptron.kafka.fastpath.encode.append_run``), as it does. The benchmark's
dense records (``str(i)`` keys) go into producer batches of 256 KiB (the worker's ``batch_size``),
a new one whenever one is full; no broker. Both must give the same batches and records, or nothing
is timed. Each repeat runs both in rotated order, the cycle collector set up as the worker's; the
table gives the median µs per record and its ratio to ``try_append``.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.worker.contenders import offline_parser, rotated
from bench.worker.formatting import contender_report
from bench.worker.inputs import dense_records

BATCH_BYTES = 262_144  # stream_perceptron.settings.KafkaSettings.batch_size's default
Append = Callable[[list[bytes], list[bytes]], list[Any]]  # the batches


def _errback(*_args: Any) -> None:
    return None


def _new_batch() -> Any:
    from kafka.producer.producer_batch import ProducerBatch
    from kafka.record.memory_records import MemoryRecordsBuilder
    from kafka.structs import TopicPartition

    return ProducerBatch(TopicPartition("out", 0), MemoryRecordsBuilder(2, 0, BATCH_BYTES))


def per_record(keys: list[bytes], values: list[bytes]) -> list[Any]:
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


def per_run(keys: list[bytes], values: list[bytes]) -> list[Any]:
    """``append_run`` until a batch is full, with the same errback."""
    from stream_perceptron.kafka.fastpath.encode import append_run

    batches, k, rows, now = [_new_batch()], 0, range(len(values)), time.monotonic()
    futures: list[Any] = [None] * len(values)
    while True:
        k = append_run(batches[-1], rows, k, keys, values, futures, "out", _errback, now)
        if k == len(values):
            return batches
        batches.append(_new_batch())


CONTENDERS: dict[str, Append] = {"try_append per record (earlier)": per_record,
                                 "append_run per batch": per_run}


def time_contender(append: Append, keys: list[bytes], values: list[bytes]) -> tuple[float, tuple[int, int]]:
    """Seconds to append every record, and (batches, records) once the batches are closed."""
    started = time.perf_counter()
    batches = append(keys, values)
    took = time.perf_counter() - started
    for batch in batches:
        batch.records.close()
    shape = len(batches), sum(batch.record_count for batch in batches)
    del batches
    gc.collect()
    return took, shape


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = offline_parser(__doc__, records=100_000, repeats=7).parse_args(argv)
    from stream_perceptron.runtime import tune_gc

    values, _ = dense_records(args.records, 20, seed=args.seed)
    keys = [str(i).encode() for i in range(args.records)]
    tune_gc()
    runs: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    shapes = {}
    for r in range(args.repeats):
        for name in rotated(list(CONTENDERS), r):
            took, shapes[name] = time_contender(CONTENDERS[name], keys, values)
            runs[name].append(took)
        if len(set(shapes.values())) != 1 or next(iter(shapes.values()))[1] != args.records:
            raise SystemExit(f"the contenders appended differently: {shapes}; nothing timed")
    return contender_report(args, runs, input_text=f"records in batches of {BATCH_BYTES:,} bytes",
                            column="appending to producer batches", batch_bytes=BATCH_BYTES)


if __name__ == "__main__":
    main(sys.argv[1:])
