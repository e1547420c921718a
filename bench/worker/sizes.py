"""The size section: the worker and the river loop on 10, 100 and 1,000 dense features and on
10,000-name sparse features."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.worker.contenders import rotated
from bench.worker.formatting import Say, fmt_rate
from bench.worker.inputs import SPARSE_NAMES, SPARSE_NNZ, dense_records, sparse_records
from bench.worker.processes import Ctx, run_one, summarize

MIN_SIZE_RECORDS = 5_000  # records per size run: at least a few poll batches (2,000 each)


def size_variants(n: int, quick: bool) -> list[dict[str, Any]]:
    """(label, kind, d, records): fewer records where records are large or the worker is slow, but
    never fewer than MIN_SIZE_RECORDS (several poll batches: one batch only times its send loop).

    >>> [v["records"] for v in size_variants(100_000, quick=False)]
    [100000, 100000, 25000, 50000]
    >>> [v["records"] for v in size_variants(10_000, quick=True)]
    [10000, 10000, 5000, 5000]
    """
    big = max(MIN_SIZE_RECORDS, n // (2 if quick else 4))
    return [
        {"label": "dense d=10", "kind": "dense", "d": 10, "records": n},
        {"label": "dense d=100", "kind": "dense", "d": 100, "records": n},
        {"label": "dense d=1000", "kind": "dense", "d": 1000, "records": big},
        {
            "label": f"sparse {SPARSE_NNZ} of {SPARSE_NAMES:,} names",
            "kind": "sparse",
            "d": None,
            "records": max(MIN_SIZE_RECORDS, n // 2),
        },
    ]


def section_sizes(
    ctx: Ctx, n: int, repeats: int, quick: bool, seed: int, contenders: Sequence[str], say: Say
) -> dict[str, Any]:
    variants = size_variants(n, quick)
    for k, v in enumerate(variants):
        if v["kind"] == "dense":
            values, meta = dense_records(v["records"], v["d"], seed=seed + 10 + k)
        else:
            values, meta = sparse_records(v["records"], seed=seed + 10 + k)
        topic, v["produce_seconds"] = ctx.new_input(f"size{k}-in", values)
        v["input"], v["topic"] = meta, topic
        v["runs"] = {c: [] for c in contenders}
        say(f"  {v['label']}: {v['records']:,} records, mean {meta['mean_bytes']:,.0f} bytes")
        del values
    for rep in range(repeats):
        for k, v in enumerate(rotated(variants, rep)):
            for c in rotated(list(contenders), rep + k):
                r = run_one(ctx, c, v["topic"], v["records"], f"size-r{rep}")
                r["repeat"] = rep
                v["runs"][c].append(r)
                say(
                    f"  repeat {rep + 1}/{repeats} {v['label']:<26} {c:<40} {fmt_rate(r['rate']):>9} rec/s"
                    f"  peak RSS {r['memory'].get('peak_rss_mb', 0):,.0f} MB"
                    + ("" if r["complete"] else "  INCOMPLETE")
                )
    for v in variants:
        v["summary"] = {c: summarize(v["runs"][c]) for c in contenders}
    return {"variants": variants}
