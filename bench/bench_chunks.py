"""The worker's own cost per record against ``SP_OUTPUT__CHUNK_RECORDS``, with no Kafka.

Run from the repository root::

    .venv/bin/python -m bench.bench_chunks                     # 100,000 records, chunks 2000/500/100
    .venv/bin/python -m bench.bench_chunks --chunks 2000,500,250 --repeats 7 --json bench/results/chunks.json

A poll batch is decoded, learned, encoded and handed to the edge in chunks of at most
``chunk_records`` records: smaller chunks let a batch's first predictions leave sooner, at the
price of more calls per batch. This measures that price alone: ``Worker.process`` on poll batches
of 2,000 records (the default ``max_poll_records``) cut as the run loop cuts them, into an edge
that drops what it is given, on the benchmark's input records (``bench.worker.inputs.dense_records``:
20 features, 1% flipped labels). Each repeat runs every chunk size once, in rotated order, each on
a fresh worker; the table gives the median µs per record and its ratio to the largest chunk.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.worker.contenders import offline_parser, rotated
from bench.worker.formatting import format_table, timing_rows, write_json
from bench.worker.inputs import dense_records
from stream_perceptron.kafka.edge import Batch
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker

POLL_RECORDS = 2_000


class _DropEdge:
    """An edge that accepts records and drops them (the worker's own work is what is timed)."""

    def send(self, topic: str, key: bytes | None, value: bytes) -> None:
        return None

    def send_many(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None:
        return None

    def assignment(self) -> list[tuple[str, int]]:
        return []

    def highwater(self, topic: str, partition: int) -> int | None:
        return None


def time_chunks(values: list[bytes], chunk: int, workdir: Path) -> float:
    """Seconds for a fresh worker to process ``values`` in poll batches cut into ``chunk``s."""
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(workdir)},
                        output={"chunk_records": chunk})
    worker = Worker(settings, edge=_DropEdge())  # type: ignore[arg-type]
    offsets = list(range(len(values)))
    keys = [str(i).encode() for i in offsets]
    polls = [
        Batch("examples", 0, offsets[a:b], keys[a:b], values[a:b], [0] * len(offsets[a:b]))
        for a, b in ((a, a + POLL_RECORDS) for a in range(0, len(values), POLL_RECORDS))
    ]
    started = time.perf_counter()
    for poll in polls:
        for part in poll.chunks(chunk):
            worker.process(part)
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = offline_parser(__doc__, records=100_000, repeats=5)
    parser.add_argument("--chunks", default="2000,500,100", help="chunk sizes, comma-separated")
    args = parser.parse_args(argv)
    chunks = [int(c) for c in args.chunks.split(",")]
    values, meta = dense_records(args.records, 20, seed=args.seed)
    runs: dict[int, list[float]] = {c: [] for c in chunks}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for c in rotated(chunks, r):
                runs[c].append(time_chunks(values, c, Path(tmp) / f"r{r}-c{c}"))
    rows = timing_rows(runs, args.records, base=max(chunks))
    print(f"Worker.process, {args.records:,} records of 20 features, poll batches of {POLL_RECORDS:,}, "
          f"an edge that drops the outputs; median of {args.repeats} interleaved runs")
    print(format_table(["chunk_records", "us/record", "spread", "x largest chunk"], rows))
    report = {"records": args.records, "input": meta, "repeats": args.repeats,
              "seconds": {str(c): v for c, v in runs.items()}}
    if args.json is not None:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
