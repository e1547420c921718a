"""The record codec's batch paths side by side, with no Kafka.

Encoding: the prediction records by a dict and ``orjson.dumps`` per record (the encoder before
``records.encode_predictions`` built msgspec structs) against ``encode_predictions``. Decoding:
the worker's step from a batch's values to the matrix ``learn_many`` takes (``decode_many``, then
``Perceptron.vectorize_many``), three ways: the typed msgspec decoder given the values only, the
same given the records' keys too (which adds the check of ``limits.max_key_bytes``; the worker's
call before the simdjson reader), and with the simdjson reader of plain dense batches
(``dense_json.DenseBatchReader``), the worker's call now.

Run from the repository root::

    .venv/bin/python -m bench.bench_codec                          # 100,000 records, 7 repeats
    .venv/bin/python -m bench.bench_codec --repeats 15 --json bench/results/codec.json

The rows are the worker's own: ``bench.worker.inputs.dense_records`` (20 features, 1% flipped
labels) decoded by ``BatchDecoder`` and learned by ``Perceptron.learn_many``, keys as the
benchmark's producers write them, in batches of 500 records (``SP_OUTPUT__CHUNK_RECORDS``). Both
encoders are checked to give the same JSON values for every record before anything is timed.
Each repeat times both encoders over every batch, in rotated order; the table gives the median
µs per record and its ratio to the dict encoder. The three decoders are checked to give the same
matrix bit for bit, the same labels, ids, positions and refusals, then timed the same way over the
same input batches, each repeat with a fresh decoder and model.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson

from bench.worker.contenders import offline_parser, rotated
from bench.worker.formatting import format_table, timing_rows, write_json
from bench.worker.inputs import dense_records
from stream_perceptron.codec.inputs import BatchDecoder
from stream_perceptron.codec.limits import Limits
from stream_perceptron.codec.outputs import encode_predictions
from stream_perceptron.model.perceptron import Perceptron

BATCH_RECORDS = 500
Columns = dict[str, Any]


def dict_encoder(**columns: Any) -> list[bytes]:
    """The prediction records as a dict each, encoded by ``orjson.dumps`` (the earlier encoder)."""
    dumps, topic, partition = orjson.dumps, columns["topic"], columns["partition"]
    return [
        dumps(
            {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "key": None if key is None else key.decode("utf-8", errors="backslashreplace"),
                "id": rid,
                "prediction": prediction,
                "score": score,
                "label": label or None,
                "mistake": mistake if label else None,
                "margin": margin if label and margin == margin else None,
                "updates": update,
            }
        )
        for offset, key, rid, prediction, score, label, mistake, margin, update in zip(
            columns["offsets"], columns["keys"], columns["ids"], columns["predictions"],
            columns["scores"], columns["labels"], columns["mistakes"], columns["margins"],
            columns["updates"], strict=True,
        )
    ]


ENCODERS: dict[str, Callable[..., list[bytes]]] = {
    "dict + orjson.dumps": dict_encoder,
    "encode_predictions (struct + msgspec)": encode_predictions,
}


def prediction_batches(records: int, seed: int) -> list[Columns]:
    """The columns ``Worker`` hands to the encoder for ``records`` records, per batch."""
    values, _ = dense_records(records, 20, seed=seed)
    decoded = BatchDecoder(Limits()).decode_many(values)
    model = Perceptron()
    batches = []
    for a in range(0, len(decoded.xs), BATCH_RECORDS):
        b = min(a + BATCH_RECORDS, len(decoded.xs))
        X, _ = model.vectorize_many(decoded.xs[a:b])
        y = np.array(decoded.ys[a:b], dtype=np.int8)
        before = model.mistakes
        result = model.learn_many(X, y)
        norm = result.theta_norm
        margins = np.where(norm > 0, y * result.scores / np.where(norm > 0, norm, 1), math.nan)
        batches.append({
            "topic": "examples", "partition": 0, "offsets": list(range(a, b)),
            "keys": [str(i).encode() for i in range(a, b)], "ids": decoded.ids[a:b],
            "predictions": result.predictions.tolist(), "scores": result.scores.tolist(),
            "labels": decoded.ys[a:b], "mistakes": result.mistakes.tolist(),
            "margins": margins.tolist(),
            "updates": (before + np.cumsum(result.mistakes)).tolist(),
        })
    return batches


def input_batches(records: int, seed: int) -> list[tuple[list[bytes | None], list[bytes | None]]]:
    """The input values and keys of ``records`` records, per batch."""
    values, _ = dense_records(records, 20, seed=seed)
    keys: list[bytes | None] = [str(i).encode() for i in range(records)]
    return [(list(values[a:a + BATCH_RECORDS]), keys[a:a + BATCH_RECORDS])
            for a in range(0, records, BATCH_RECORDS)]


Decode = Callable[[Sequence[bytes | None], Sequence[bytes | None]], Any]


def decoder(read_dense: bool, with_keys: bool) -> Callable[[], Decode]:
    """A contender: a fresh decoder and model that turn a batch into the matrix ``learn_many``
    takes, as the worker does (``decode_many``, then ``vectorize_many``)."""

    def make() -> Decode:
        dec, model = BatchDecoder(Limits(), read_dense=read_dense), Perceptron()

        def call(values: Sequence[bytes | None], keys: Sequence[bytes | None]) -> Any:
            d = dec.decode_many(values, keys if with_keys else None)
            X, rejected = model.vectorize_many(d.xs)
            return X, rejected, d

        return call

    return make


DECODERS: dict[str, Callable[[], Decode]] = {
    "msgspec: decode_many(values)": decoder(read_dense=False, with_keys=False),
    "msgspec: decode_many(values, keys)": decoder(read_dense=False, with_keys=True),
    "simdjson matrix: decode_many(values, keys)": decoder(read_dense=True, with_keys=True),
}
DECODER_BASE = "msgspec: decode_many(values, keys)"


def decoded_bits(result: Any) -> tuple[Any, ...]:
    """What a decoder contender gave, exactly: the matrix's bits, labels, ids with their types,
    positions and refusals."""
    X, rejected, d = result
    return (X.shape, X.tobytes(), rejected, list(d.ys), [(type(i), i) for i in d.ids], list(d.rows),
            d.rejected)


Batches = Sequence[tuple[list[bytes | None], list[bytes | None]]]


def same_decoded(batches: Batches) -> bool:
    """Whether every decoder contender gives the same matrix, labels and ids for every batch."""
    calls = [make() for make in DECODERS.values()]
    return all(len({repr(decoded_bits(call(v, k))) for call in calls}) == 1 for v, k in batches)


def time_decoder(make: Callable[[], Decode], batches: Batches) -> float:
    """Seconds for a fresh contender to decode and vectorise every batch."""
    call = make()
    started = time.perf_counter()
    for values, keys in batches:
        call(values, keys)
    return time.perf_counter() - started


def same_values(batches: Sequence[Columns]) -> bool:
    """Whether every encoder gives the same JSON values for every record of ``batches``."""
    first, *others = ENCODERS.values()
    for columns in batches:
        want = [orjson.loads(b) for b in first(**columns)]
        if any([orjson.loads(b) for b in enc(**columns)] != want for enc in others):
            return False
    return True


def time_encoder(encoder: Callable[..., list[bytes]], batches: Sequence[Columns]) -> float:
    """Seconds for ``encoder`` to encode every batch."""
    started = time.perf_counter()
    for columns in batches:
        encoder(**columns)
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = offline_parser(__doc__, records=100_000, repeats=7)
    args = parser.parse_args(argv)
    batches = prediction_batches(args.records, args.seed)
    inputs = input_batches(args.records, args.seed)
    if not same_values(batches):
        raise SystemExit("the encoders disagree on some record; nothing timed")
    if not same_decoded(inputs):
        raise SystemExit("the decoder calls disagree on some batch; nothing timed")
    runs: dict[str, list[float]] = {name: [] for name in [*ENCODERS, *DECODERS]}
    for r in range(args.repeats):
        for name in rotated(list(ENCODERS), r):
            runs[name].append(time_encoder(ENCODERS[name], batches))
        for name in rotated(list(DECODERS), r):
            runs[name].append(time_decoder(DECODERS[name], inputs))
    print(f"{args.records:,} records in batches of {BATCH_RECORDS};"
          f" median of {args.repeats} interleaved runs")
    encoders = {name: runs[name] for name in ENCODERS}
    decoders = {name: runs[name] for name in DECODERS}
    print(format_table(["encoder", "us/record", "spread", "x dict encoder"],
                       timing_rows(encoders, args.records, base=next(iter(ENCODERS)))))
    print(format_table(["decode + vectorize", "us/record", "spread", "x msgspec with keys"],
                       timing_rows(decoders, args.records, base=DECODER_BASE)))
    report = {"records": args.records, "repeats": args.repeats, "batch_records": BATCH_RECORDS,
              "seconds": runs}
    if args.json is not None:
        write_json(args.json, report)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
