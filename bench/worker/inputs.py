"""The benchmark's input records: dense rows linearly separable with a margin, or sparse rows of
named features; then a fraction ``noise`` of the labels flipped."""

from __future__ import annotations

import math
from typing import Any

DEFAULT_D = 20
DEFAULT_NOISE = 0.01
MARGIN = 0.1  # rows with |u·x| < MARGIN (on the values as sent) are rejected: separable with a margin
SPARSE_NAMES, SPARSE_NNZ = 10_000, 20


def _encoded(xs: list[Any], labels: list[int], noise: float, rng: Any, meta: dict[str, Any]
             ) -> tuple[list[bytes], dict[str, Any]]:
    """``{"x", "y", "id"}`` records, a fraction ``noise`` of the labels flipped, and their meta."""
    import orjson

    n = len(xs)
    flips = set(rng.choice(n, size=round(noise * n), replace=False).tolist()) if noise else set()
    ys = [-y if i in flips else y for i, y in enumerate(labels)]
    values = [orjson.dumps({"x": x, "y": y, "id": i}) for i, (x, y) in enumerate(zip(xs, ys, strict=True))]
    return values, {**meta, "n": n, "noise": noise, "labels_flipped": len(flips),
                    "mean_bytes": sum(map(len, values)) / n, "positive_fraction": sum(y > 0 for y in ys) / n}


def dense_records(n: int, d: int, *, seed: int, noise: float = DEFAULT_NOISE
                  ) -> tuple[list[bytes], dict[str, Any]]:
    """``n`` records ``{"x": [d floats], "y": ±1, "id": i}``: ``x ~ N(0, I_d)`` rounded to one
    decimal, rows with ``|u·x| < MARGIN`` on the rounded values rejected (``u`` a seeded random
    unit vector), so the values as sent are separable by ``u`` with that margin; ``y = sign(u·x)``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    chunks, have = [], 0
    while have < n:
        X = np.round(rng.standard_normal((max(1024, int((n - have) * 1.3)), d)), 1)
        chunks.append(X[np.abs(X @ u) >= MARGIN])
        have += len(chunks[-1])
    X = np.concatenate(chunks)[:n]
    return _encoded(X.tolist(), np.where(X @ u > 0, 1, -1).tolist(), noise, rng,
                    {"kind": "dense", "d": d, "seed": seed, "margin_on_sent_values": MARGIN})


def sparse_records(n: int, *, names: int = SPARSE_NAMES, nnz: int = SPARSE_NNZ, seed: int,
                   noise: float = DEFAULT_NOISE) -> tuple[list[bytes], dict[str, Any]]:
    """``n`` records ``{"x": {"f<j>": v, ... nnz of them}, "y": ±1, "id": i}``: names drawn
    uniformly from ``names``, values N(0, 1) rounded to one decimal, labelled by a hidden weight
    per name (rows within ``MARGIN`` of the boundary rejected)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    u = rng.standard_normal(names)
    u /= np.linalg.norm(u) / math.sqrt(names / nnz)  # scores of order 1
    xs: list[dict[str, float]] = []
    labels: list[int] = []
    while len(xs) < n:
        picks, draws = rng.integers(0, names, size=(4096, nnz + 8)), rng.standard_normal((4096, nnz))
        for cols, v in zip(picks, np.round(draws, 1), strict=True):
            cols = list(dict.fromkeys(cols.tolist()))[:nnz]
            score = float(np.dot(u[cols], v)) if len(cols) == nnz else 0.0
            if abs(score) >= MARGIN and len(xs) < n:
                xs.append(dict(zip([f"f{c}" for c in cols], v.tolist(), strict=True)))
                labels.append(1 if score > 0 else -1)
    return _encoded(xs, labels, noise, rng, {"kind": "sparse", "names": names, "nnz": nnz, "seed": seed})
