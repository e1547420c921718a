"""Named features to sparse rows, side by side, with no Kafka.

``Perceptron.vectorize_many`` on rows of named features against the per-row lists it replaced:
that version checked every row for new names in Python, built a list of column indices and a
list of values per row, and flattened them with generator expressions. The current one looks
every name of a batch up in one pass iterated in C (``map`` and ``itertools.chain`` into
``np.fromiter``) and goes row by row only when some name is new.

Run from the repository root::

    .venv/bin/python -m bench.bench_vectorize                        # 50,000 records, 7 repeats
    .venv/bin/python -m bench.bench_vectorize --repeats 15 --json bench/results/vectorize.json

The rows are the benchmark's sparse input (``bench.worker.inputs.sparse_records``: 20 of 10,000
names a record, 1% flipped labels) decoded by ``BatchDecoder`` in batches of 500 records
(``SP_OUTPUT__CHUNK_RECORDS``). Each run starts from a fresh model, so the first batches index
the names as a worker's first batches do. Both contenders are checked to give the same rows and
the same name index for every batch before anything is timed. Each repeat runs both, in
rotated order; the table gives the median µs per record and its ratio to the earlier version.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from bench.worker.contenders import offline_parser, rotated
from bench.worker.formatting import contender_report
from bench.worker.inputs import sparse_records
from stream_perceptron.codec.inputs import BatchDecoder
from stream_perceptron.codec.limits import Limits
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.model.sparse import SparseRows

BATCH_RECORDS = 500
Rows = list[Mapping[str, float]]


def per_row_lists(model: Perceptron, xs: Rows) -> tuple[SparseRows, dict[int, str]]:
    """The earlier ``Perceptron._vectorize_named_many`` (no dense-fixed check: the input has none):
    every row checked for new names in Python, then a list of columns and of values per row."""
    rejected = model._index_new_names(xs)
    index = model._index
    w = model._ensure_dim(max(len(index), model.n_features or 0, model.dim or 0))
    kept = [x for i, x in enumerate(xs) if i not in rejected] if rejected else xs
    columns = [[index[k] for k in x] for x in kept]
    values = [list(x.values()) for x in kept]
    lengths = np.fromiter((len(r) for r in columns), dtype=np.intp, count=len(columns))
    indptr = np.zeros(len(columns) + 1, dtype=np.intp)
    np.cumsum(lengths, out=indptr[1:])
    flat_i = np.fromiter((i for r in columns for i in r), dtype=np.intp, count=int(indptr[-1]))
    flat_v = np.fromiter((v for r in values for v in r), dtype=np.float64, count=int(indptr[-1]))
    return SparseRows(indptr, flat_i, flat_v, len(w)), rejected


Vectorize = Callable[[Perceptron, Rows], tuple[Any, dict[int, str]]]

CONTENDERS: dict[str, Vectorize] = {
    "per-row lists (earlier)": per_row_lists,
    "vectorize_many": lambda model, xs: model.vectorize_many(xs),
}


def named_batches(records: int, seed: int) -> list[Rows]:
    """The decoded named rows of ``records`` sparse records, per batch."""
    values, _ = sparse_records(records, seed=seed)
    xs = BatchDecoder(Limits()).decode_many(values).xs
    return [xs[a:a + BATCH_RECORDS] for a in range(0, len(xs), BATCH_RECORDS)]  # type: ignore[misc]


def same_rows(batches: Sequence[Rows], n_features: int | None = None) -> bool:
    """Whether every contender gives the same rows, refusals and name index for every batch."""
    models = {name: Perceptron(n_features=n_features) for name in CONTENDERS}
    for xs in batches:
        got = [(CONTENDERS[name](model, xs), model.feature_names) for name, model in models.items()]
        (first, first_rejected), first_names = got[0]
        for (rows, rejected), names in got[1:]:
            if rejected != first_rejected or names != first_names or rows.n_cols != first.n_cols:
                return False
            if any(not np.array_equal(getattr(rows, f), getattr(first, f))
                   for f in ("indptr", "indices", "values")):
                return False
    return True


def time_contender(vectorize: Vectorize, batches: Sequence[Rows]) -> float:
    """Seconds for ``vectorize`` to turn every batch into rows, on a fresh model."""
    model = Perceptron()
    started = time.perf_counter()
    for xs in batches:
        vectorize(model, xs)
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = offline_parser(__doc__, records=50_000, repeats=7)
    args = parser.parse_args(argv)
    batches = named_batches(args.records, args.seed)
    if not (same_rows(batches) and same_rows(batches, n_features=len(batches[0]) * 10)):
        raise SystemExit("the contenders disagree on some batch; nothing timed")
    runs: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    for r in range(args.repeats):
        for name in rotated(list(CONTENDERS), r):
            runs[name].append(time_contender(CONTENDERS[name], batches))
    return contender_report(
        args, runs, input_text=f"sparse records (20 of 10,000 names) in batches of {BATCH_RECORDS}",
        column="named rows to sparse rows", batch_records=BATCH_RECORDS,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
