"""The benchmark's input records: dense rows linearly separable with a margin, or sparse rows of
named features; then a fraction ``noise`` of the labels flipped."""

from __future__ import annotations

import math
from typing import Any

DEFAULT_D = 20
DEFAULT_NOISE = 0.01
MARGIN = 0.1  # rows with |u·x| < MARGIN (on the values as sent) are rejected: separable with a margin
SPARSE_NAMES, SPARSE_NNZ = 10_000, 20


def _encoded(xs: list[Any], ys: list[int], noise: float, rng: Any, meta: dict[str, Any]
             ) -> tuple[list[bytes], dict[str, Any]]:
    """``{"x", "y", "id"}`` records, a fraction ``noise`` of the labels flipped (in ``ys`` too),
    and their meta."""
    import orjson

    n = len(xs)
    flips = rng.choice(n, size=round(noise * n), replace=False).tolist() if noise else []
    for i in flips:
        ys[i] = -ys[i]
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


# events as systems write them, and the feature spec that reads them: 10 numeric, 3 categorical, 1 list
EVENT_NUMERIC = tuple(f"n{k}" for k in range(10))
EVENT_CATEGORIES = {"country": 40, "device": 8, "plan": 5}  # how many values each
EVENT_TAGS, EVENT_MAX_TAGS = 30, 4
EVENT_SPEC = {"label": "label", "id": "id", "numeric": [f"m.{k}" for k in EVENT_NUMERIC],
              "categorical": [*(f"c.{k}" for k in EVENT_CATEGORIES), "tags"]}
EVENT_SCHEMA = {"type": "record", "name": "Event", "fields": [  # the events in Avro
    {"name": "id", "type": "long"}, {"name": "label", "type": "boolean"},
    *({"name": k, "type": {"type": "record", "name": k, "fields": [{"name": f, "type": t} for f in fs]}}
      for k, fs, t in (("m", EVENT_NUMERIC, "double"), ("c", EVENT_CATEGORIES, "string"))),
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}


def event_records(n: int, *, seed: int, noise: float = DEFAULT_NOISE
                  ) -> tuple[list[dict[str, Any]], list[bytes], dict[str, Any]]:
    """``n`` events ``{"id": i, "label": bool, "m": {"n0".."n9": number}, "c": {"country",
    "device", "plan": string}, "tags": [1 to 4 strings]}``, and the same examples as envelope
    records ``{"x": {name: value}, "y": ±1, "id": i}`` with the names, values and order that
    :data:`EVENT_SPEC` makes of the event (``m.n0``, …, ``c.country=c7``, …, ``tags=t3``, …).
    Numbers N(0, 1) rounded to one decimal; labelled by a hidden weight per name, rows within
    ``MARGIN`` of the boundary rejected, then a fraction ``noise`` of the labels flipped."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values = {k: [f"{k[0]}{j}" for j in range(size)] for k, size in EVENT_CATEGORIES.items()}
    names = [f"m.{k}" for k in EVENT_NUMERIC] + [f"c.{k}={v}" for k, vs in values.items() for v in vs]
    names += [f"tags=t{t}" for t in range(EVENT_TAGS)]
    weight = dict(zip(names, (rng.standard_normal(len(names)) / 2).tolist(), strict=True))
    events: list[dict[str, Any]] = []
    xs: list[dict[str, float]] = []
    labels: list[int] = []
    while len(xs) < n:
        nums = np.round(rng.standard_normal((1024, len(EVENT_NUMERIC))), 1).tolist()
        picks = rng.integers(0, 2**30, (1024, len(values))).tolist()  # each value's index, modulo its count
        tags = np.argsort(rng.random((1024, EVENT_TAGS)), axis=1)[:, :EVENT_MAX_TAGS].tolist()
        counts = rng.integers(1, EVENT_MAX_TAGS + 1, 1024).tolist()
        for num, pick, tag, k in zip(nums, picks, tags, counts, strict=True):
            event = {"m": dict(zip(EVENT_NUMERIC, num, strict=True)), "tags": [f"t{t}" for t in tag[:k]],
                     "c": {c: vs[p % len(vs)] for (c, vs), p in zip(values.items(), pick, strict=True)}}
            x = {f"m.{c}": v for c, v in event["m"].items()}
            x |= {f"c.{c}={v}": 1.0 for c, v in event["c"].items()} | {f"tags=t{t}": 1.0 for t in tag[:k]}
            score = sum(v * weight[name] for name, v in x.items())
            if abs(score) >= MARGIN and len(xs) < n:
                events.append(event)
                xs.append(x)
                labels.append(1 if score > 0 else -1)
    envelopes, meta = _encoded(xs, labels, noise, rng, {"kind": "events", "seed": seed, "spec": EVENT_SPEC})
    events = [{"id": i, "label": y > 0, "m": e["m"], "c": e["c"], "tags": e["tags"]}
              for i, (e, y) in enumerate(zip(events, labels, strict=True))]
    return events, envelopes, meta
