"""The worker's processing of a poll without Kafka: ``Worker.process`` over each poll's chunks,
with the compiled part and with its pure-Python twins, beside the three calls a chunk cannot do
without (the compiled reader, the learning step, the compiled encoder) timed alone.

    .venv/bin/python -m bench.bench_process                    # 100,000 records, chunks of 500 and 2,000
    .venv/bin/python -m bench.bench_process --chunks 500 --repeats 9 --json bench/results/process.json

Every poll is 2,000 of ``bench.worker.inputs.dense_records``' records (20 features, 1% flipped
labels), copied afresh before it is timed, as a poll's records arrive. The edge only keeps what
is sent. The ways:

* "worker, compiled": a worker with default settings (one partition, at-least-once, predictions
  for every record, ADWIN) processing each poll in chunks, as its loop does, with what is
  installed of the compiled part;
* "worker, python": the same with the compiled part set aside (its reader, encoder, dense pass,
  EWMA and ADWIN), as in a worker without it;
* "three calls": per chunk, only the compiled reader (``DenseReader.read``), ``Learner.step`` on a
  learner as the worker builds it, and the compiled encoder on the step's columns. It writes the
  same prediction records; what the worker spends beyond it is its own Python (the plan, the
  runs, the columns, the counters, the observer) and numpy's calls around the three.

Process CPU time of the processing alone (not the copies), medians of interleaved repeats. Every
way must write the same prediction records, byte for byte, or the benchmark exits 1.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from bench.bench_step import python_twins
from bench.worker.contenders import interleaved_ways, offline_parser
from bench.worker.formatting import ways_report
from bench.worker.inputs import DEFAULT_D, dense_records
from stream_perceptron.codec import native
from stream_perceptron.kafka.edge import Batch
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from stream_perceptron.worker.partition import new_learner

POLL = 2_000  # SP_KAFKA__MAX_POLL_RECORDS' default
TOPIC = "in"
WAYS = ("worker, compiled", "worker, python", "three calls")


class KeepingEdge:
    """An edge that keeps the values sent to each topic; at-least-once, nothing to flush."""

    transactional = False
    in_transaction = False

    def __init__(self) -> None:
        self.sent: dict[str, list[bytes]] = {}

    def send(self, topic: str, key: bytes | None, value: bytes, partition: int | None = None) -> None:
        self.sent.setdefault(topic, []).append(value)

    def send_many(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None:
        self.sent.setdefault(topic, []).extend(values)

    def assignment(self) -> list[tuple[str, int]]:
        return []

    def highwater(self, topic: str, partition: int) -> int | None:
        return None

    def flush(self) -> None:
        pass

    def commit(self, offsets: Any) -> None:
        pass

    def committed(self, topic: str, partition: int) -> int | None:
        return None

    def seek(self, topic: str, partition: int, offset: int) -> None:
        pass


def polls(values: list[bytes]) -> Iterator[Batch]:
    """Each poll's batch, its values copied afresh (not timed by the caller)."""
    for start in range(0, len(values), POLL):
        fresh = [bytes(bytearray(v)) for v in values[start:start + POLL]]
        n = len(fresh)
        yield Batch(TOPIC, 0, list(range(start, start + n)), [None] * n, fresh, [0] * n)


@contextlib.contextmanager
def without_compiled_part() -> Iterator[None]:
    """The compiled part set aside: its reader and encoder, and the learning step's functions."""
    saved = native._native
    native._native = None
    try:
        with python_twins(3):
            yield
    finally:
        native._native = saved


@contextlib.contextmanager
def quiet_worker() -> Iterator[None]:
    """The worker's lines below ERROR (each drift alarm's) left out while it lasts; the level
    before is restored after."""
    logger = logging.getLogger("stream_perceptron")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def run_worker(values: list[bytes], chunk: int, settings: Settings) -> tuple[float, list[bytes]]:
    """CPU seconds of ``Worker.process`` over every poll's chunks; the predictions sent."""
    edge = KeepingEdge()
    worker = Worker(settings, edge=edge)
    spent = 0.0
    for batch in polls(values):
        start = time.process_time()
        for piece in batch.chunks(chunk):
            worker.process(piece)
        spent += time.process_time() - start
    return spent, edge.sent.get(settings.topics.predictions, [])


def run_calls(values: list[bytes], chunk: int, settings: Settings) -> tuple[float, list[bytes]]:
    """CPU seconds of the three calls per chunk; the prediction records they write."""
    reader = native.reader(settings.codec_limits())
    if reader is None:
        raise SystemExit("the compiled part is not installed: `make native` builds it")
    learner = new_learner(settings)
    out: list[bytes] = []
    spent = 0.0
    for batch in polls(values):
        start = time.process_time()
        for piece in batch.chunks(chunk):
            got = reader.read(piece.values)
            assert got is not None, "the benchmark's records are all plain dense records"
            X, ys, ids = got
            y = np.array(ys, dtype=np.int8)
            before = learner.model.updates
            step = learner.step(X, y, labeled=y != 0)
            r = step.result
            encoded = native.encode_predictions(
                topic=TOPIC, partition=0, offsets=piece.offsets, keys=piece.keys, ids=ids,
                predictions=r.predictions, scores=r.served_scores, labels=y, mistakes=r.mistakes,
                margins=step.margin, updates=before + np.cumsum(r.mistakes), classes=None)
            assert encoded is not None
            out += encoded
        spent += time.process_time() - start
    return spent, out


def run(way: str, values: list[bytes], chunk: int) -> tuple[float, str]:
    """CPU seconds of ``way`` over ``values`` in chunks of ``chunk``; a digest of its predictions."""
    with tempfile.TemporaryDirectory(prefix="bench-process-") as states:  # none is written
        settings = Settings(observe={"enabled": False}, checkpoint={"dir": states},
                            output={"chunk_records": chunk})
        if way == "three calls":
            spent, sent = run_calls(values, chunk, settings)
        elif way == "worker, python":
            with without_compiled_part():
                spent, sent = run_worker(values, chunk, settings)
        else:
            spent, sent = run_worker(values, chunk, settings)
    digest = hashlib.blake2b(b"\n".join(sent), digest_size=16).hexdigest()
    return spent, f"{len(sent)}:{digest}"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = offline_parser(__doc__ or "", records=100_000, repeats=5)
    parser.add_argument("--chunks", default="500,2000", help="comma-separated records per chunk")
    args = parser.parse_args(argv)
    if not native.available():
        raise SystemExit("the compiled part is not installed: `make native` builds it")
    sizes = [int(c) for c in args.chunks.split(",")]
    values, _ = dense_records(args.records, DEFAULT_D, seed=args.seed)
    with quiet_worker():
        runs = interleaved_ways(WAYS, sizes, args.repeats, lambda way, chunk: run(way, values, chunk),
                                "chunks of {}: the ways wrote different prediction records")
    return ways_report(
        args, runs, WAYS, len(values), base=WAYS[0],
        heading=f"{len(values):,} records of {DEFAULT_D} features in polls of {POLL:,}; process CPU,"
                f" medians of {args.repeats} interleaved repeats; the same prediction records every way",
        columns=["records per chunk", "way", "µs per record", "spread", "× worker, compiled"])

if __name__ == "__main__":
    main()
