"""confluent-kafka's messages to the worker's batches, side by side, with no Kafka.

``kafka_confluent.batches_of`` (each column read with one ``map`` of the accessor over the
poll's messages, the messages split by partition only when there are several) against the
message-by-message loop it replaced, kept here as :func:`message_by_message` (every accessor
called and every column appended in bytecode, once per message).

Run from the repository root::

    .venv/bin/python -m bench.bench_columns                         # 200,000 messages, 7 repeats
    .venv/bin/python -m bench.bench_columns --repeats 15 --json bench/results/columns.json

The messages are ``confluent_kafka.Message`` objects built in Python with the benchmark's dense
input records as values and ``str(i)`` keys, in polls of 2,000 (``SP_KAFKA__MAX_POLL_RECORDS``):
from one partition, as the benchmark's input is, and spread over four partitions in runs of
50, as a poll of several partitions returns them. Both contenders are checked to give the same
batches before anything is timed. Each repeat runs both on both inputs, in rotated order; the
table gives the median µs per message and its ratio to the earlier loop.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Message

from bench.worker.contenders import offline_parser, rotated
from bench.worker.formatting import format_table, timing_rows, write_json
from bench.worker.inputs import dense_records
from stream_perceptron.kafka.confluent_edge import batches_of
from stream_perceptron.kafka.edge import Batch, Partition

POLL_MESSAGES = 2_000
RUN = 50  # messages of one partition in a row, in the input of several partitions

Convert = Callable[[Sequence[Message]], tuple[list[Batch], list[Any]]]


def message_by_message(messages: Sequence[Any]) -> tuple[list[Batch], list[Any]]:
    """The earlier ``ConfluentEdge.poll`` loop: a batch per partition, built message by message."""
    batches: dict[Partition, Batch] = {}
    errors = []
    for m in messages:
        err = m.error()
        if err is not None:
            errors.append(err)
            continue
        topic, partition = m.topic(), m.partition()
        batch = batches.get((topic, partition))
        if batch is None:
            batch = batches[(topic, partition)] = Batch(topic, partition, [], [], [], [])
        batch.offsets.append(m.offset())
        batch.keys.append(m.key())
        batch.values.append(m.value())
        batch.timestamps_ms.append(m.timestamp()[1])
    return [batches[tp] for tp in sorted(batches)], errors


CONTENDERS: dict[str, Convert] = {
    "message by message (earlier)": message_by_message,
    "batches_of": batches_of,
}


def polls(records: int, seed: int, partitions: int) -> list[list[Message]]:
    """``records`` messages in polls of :data:`POLL_MESSAGES`, over ``partitions`` partitions in
    runs of :data:`RUN` (offsets counted per partition)."""
    values, _ = dense_records(records, 20, seed=seed)
    next_offset = [0] * partitions
    messages = []
    for i, value in enumerate(values):
        p = (i // RUN) % partitions
        messages.append(Message(topic="in", partition=p, offset=next_offset[p], key=str(i).encode(),
                                value=value, timestamp=(1, 1_700_000_000_000 + i)))
        next_offset[p] += 1
    return [messages[a:a + POLL_MESSAGES] for a in range(0, len(messages), POLL_MESSAGES)]


def same_batches(inputs: Sequence[Sequence[Message]]) -> bool:
    """Whether every contender gives the same batches for every poll."""
    for messages in inputs:
        got = [CONTENDERS[name](messages) for name in CONTENDERS]
        if any(other != got[0] for other in got[1:]):
            return False
    return True


def time_contender(convert: Convert, inputs: Sequence[Sequence[Message]]) -> float:
    """Seconds for ``convert`` to turn every poll into batches."""
    started = time.perf_counter()
    for messages in inputs:
        convert(messages)
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = offline_parser(__doc__, records=200_000, repeats=7)
    args = parser.parse_args(argv)
    inputs = {p: polls(args.records, args.seed, p) for p in (1, 4)}
    if not all(same_batches(polls_) for polls_ in inputs.values()):
        raise SystemExit("the contenders disagree on some poll; nothing timed")
    runs: dict[int, dict[str, list[float]]] = {p: {name: [] for name in CONTENDERS} for p in inputs}
    for r in range(args.repeats):
        for p, name in rotated([(p, name) for p in inputs for name in CONTENDERS], r):
            runs[p][name].append(time_contender(CONTENDERS[name], inputs[p]))
    print(f"{args.records:,} messages in polls of {POLL_MESSAGES:,}; median of {args.repeats}"
          " interleaved runs")
    for p, by_name in runs.items():
        rows = timing_rows(by_name, args.records, base=next(iter(CONTENDERS)))
        title = "one partition" if p == 1 else f"{p} partitions, runs of {RUN}"
        print(format_table([f"messages to batches: {title}", "us/message", "spread", "x earlier"], rows))
    report = {"records": args.records, "repeats": args.repeats, "poll_messages": POLL_MESSAGES,
              "seconds": {str(p): by_name for p, by_name in runs.items()}}
    if args.json is not None:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
