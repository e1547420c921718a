"""kafka-python's record-by-record reading of fetched batches against ``kafka.fastpath.fetch``'s one loop.

Run from the repository root::

    .venv/bin/python -m bench.bench_fetch_decode            # 100,000 records, 7 repeats
    .venv/bin/python -m bench.bench_fetch_decode --repeats 11 --json bench/results/fetch_decode.json

What ``KafkaConsumer.poll`` does per record once a fetch response is in, both ways: the fetcher's
``PartitionRecords`` reading each record of a v2 batch into a ``DefaultRecord`` and then a
``ConsumerRecord``, or ``stream_perceptron.kafka.fastpath.fetch.BatchDecodingRecords`` (what the
worker's edge installs) reading a batch in one loop into the same tuples. The benchmark's dense
records are built into batches of 256 KiB with kafka-python's builder (CRC checks on) and taken in
polls of 2,000; no broker. Both must give the same records, or nothing is timed. Each repeat runs
both in rotated order, the cycle collector set up as the worker's; the table gives the median µs
per record and its ratio to kafka-python's own.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.worker.contenders import offline_parser, rotated
from bench.worker.formatting import contender_report
from bench.worker.inputs import dense_records

POLL_RECORDS = 2_000
BATCH_BYTES = 262_144  # stream_perceptron.settings.KafkaSettings.batch_size's default


def fetched(records: int, seed: int) -> bytes:
    """``records`` input records as one fetch response's record batches (offsets from 0)."""
    from kafka.record.memory_records import MemoryRecordsBuilder

    values, _ = dense_records(records, 20, seed=seed)
    out, i = [], 0
    while i < records:
        builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=BATCH_BYTES, offset=i)
        while i < records and builder.append(1_700_000_000_000 + i, str(i).encode(), values[i], []):
            i += 1
        builder.close()
        out.append(bytes(builder.buffer()))
    return b"".join(out)


def contenders() -> dict[str, Any]:
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


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = offline_parser(__doc__, records=100_000, repeats=7).parse_args(argv)
    from stream_perceptron.runtime import tune_gc

    data = fetched(args.records, args.seed)
    classes = contenders()
    tune_gc()
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
    return contender_report(args, runs, input_text=f"records in polls of {POLL_RECORDS:,}",
                            column="reading fetched batches", poll_records=POLL_RECORDS)


if __name__ == "__main__":
    main(sys.argv[1:])
