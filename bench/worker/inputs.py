"""The benchmark's input records: dense rows linearly separable with a margin (a fraction
``noise`` of labels flipped), and sparse rows of named features."""

from __future__ import annotations

import math
from typing import Any

DEFAULT_D = 20
DEFAULT_NOISE = 0.01
MARGIN = 0.1  # rows with |u·x| < MARGIN (on the values as sent) are rejected: separable with a margin
SPARSE_NAMES = 10_000
SPARSE_NNZ = 20


def dense_records(
    n: int, d: int, *, seed: int, noise: float = DEFAULT_NOISE
) -> tuple[list[bytes], dict[str, Any]]:
    """``n`` input records ``{"x": [d floats], "y": ±1, "id": i}``, separable with a margin, then
    a fraction ``noise`` of the labels flipped.

    ``x ~ N(0, I_d)`` rounded to one decimal (standardised features as they are often sent); ``u``
    a seeded random unit vector; rows with ``|u·x| < MARGIN`` on the rounded values are rejected,
    so the values as sent are separable by ``u`` with that margin; ``y = sign(u·x)``.
    """
    import numpy as np
    import orjson

    rng = np.random.default_rng(seed)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    chunks = []
    have = 0
    while have < n:
        X = np.round(rng.standard_normal((max(1024, int((n - have) * 1.3)), d)), 1)
        keep = np.abs(X @ u) >= MARGIN
        chunks.append(X[keep])
        have += int(keep.sum())
    X = np.concatenate(chunks)[:n]
    y = np.where(X @ u > 0, 1, -1)
    flips = rng.choice(n, size=round(noise * n), replace=False) if noise else np.zeros(0, dtype=int)
    y[flips] = -y[flips]
    dumps = orjson.dumps
    rows = X.tolist()
    labels = y.tolist()
    values = [dumps({"x": rows[i], "y": labels[i], "id": i}) for i in range(n)]
    meta = {
        "kind": "dense",
        "d": d,
        "n": n,
        "seed": seed,
        "noise": noise,
        "labels_flipped": int(len(flips)),
        "margin_on_sent_values": MARGIN,
        "mean_bytes": sum(map(len, values)) / n,
        "positive_fraction": float((y > 0).mean()),
        "generator": "x ~ N(0, I_d) rounded to 1 decimal; rows with |u.x| < 0.1 rejected; "
        "y = sign(u.x); then a fraction `noise` of the labels flipped",
    }
    return values, meta


def sparse_records(
    n: int, *, names: int = SPARSE_NAMES, nnz: int = SPARSE_NNZ, seed: int, noise: float = DEFAULT_NOISE
) -> tuple[list[bytes], dict[str, Any]]:
    """``n`` records ``{"x": {"f<j>": v, ... nnz of them}, "y": ±1, "id": i}``, names drawn
    uniformly from ``names`` names, values N(0, 1) rounded to one decimal, labelled by a hidden
    weight per name (rows within 0.1 of the boundary rejected), then ``noise`` of them flipped."""
    import numpy as np
    import orjson

    rng = np.random.default_rng(seed)
    u = rng.standard_normal(names)
    u /= np.linalg.norm(u) / math.sqrt(names / nnz)  # scores of order 1
    keys = [f"f{j}" for j in range(names)]
    dumps = orjson.dumps
    values: list[bytes] = []
    labels: list[int] = []
    while len(values) < n:
        idx = rng.integers(0, names, size=(4096, nnz + 8))
        vals = np.round(rng.standard_normal((4096, nnz)), 1)
        for r in range(4096):
            cols = list(dict.fromkeys(idx[r].tolist()))[:nnz]
            if len(cols) < nnz:
                continue
            v = vals[r]
            score = float(np.dot(u[cols], v))
            if abs(score) < MARGIN:
                continue
            label = 1 if score > 0 else -1
            labels.append(label)
            values.append(b"")  # filled below, once the flips are known
            values[-1] = dumps({"x": dict(zip([keys[c] for c in cols], v.tolist(), strict=True)), "y": label})
            if len(values) == n:
                break
    flips = set(rng.choice(n, size=round(noise * n), replace=False).tolist()) if noise else set()
    out = []
    for i, raw in enumerate(values):
        rec = orjson.loads(raw)
        if i in flips:
            rec["y"] = -rec["y"]
        rec["id"] = i
        out.append(dumps(rec))
    meta = {
        "kind": "sparse",
        "names": names,
        "nnz": nnz,
        "n": n,
        "seed": seed,
        "noise": noise,
        "labels_flipped": len(flips),
        "mean_bytes": sum(map(len, out)) / n,
        "positive_fraction": sum(1 for v in labels if v > 0) / n,
        "generator": f"{nnz} distinct names of {names} per record, values N(0,1) rounded to 1 decimal; "
        "y = sign(u.x) for a hidden u over the names, |u.x| >= 0.1; then `noise` flipped",
    }
    return out, meta
