"""Two workers mixing 8 partitions with states one version old (s = 1): which mixing rule keeps
the mistakes within 2× one model's.

    .venv/bin/python -m bench.bench_staleness                    # the table in docs/mixing.md
    .venv/bin/python -m bench.bench_staleness --orders 2 --seeds 2   # a short run

The stream of ``tests/integration/worker/test_mixing_staleness.py`` (``separable:d=10,
gamma=0.01``, 32,000 examples round-robin over 8 partitions, 5,000 held out, seeds 1–5), and its
two workers as a timing model: partitions 0–3 and 4–7 each advance together; at each mixing point
n one group (drawn at random) mixes first, so it finds the other group's states of version n − 1
(what s = 1 lets it take), and the other group then finds every state at version n. ``--orders``
draws of that order per seed. With s = 0 every group waits for the others: synchronous IPM.

The rules, each a mix of the newest state published by every partition:

* ``newest``: the worker's (uniform μ over the newest states);
* ``discounted``: μ ∝ 1/(1 + versions behind), as staleness-aware asynchronous SGD weighs a
  stale gradient (Zhang et al. 2016);
* ``fresh``: only the states of version n (those one version old left out);
* ``mistakes``: μ ∝ each state's mistakes in its round (``SP_MIX__WEIGHTS=mistakes``);
* ``sum``: every partition publishes the sum of its own updates since the start, and a mix is
  their sum: one perceptron whose updates reach the others late (a parameter server's delayed
  updates), never averaged.

Accuracy, not speed: one run is the figure.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.worker.formatting import format_table, write_json
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.sources import open_source

PARTS, N, HELD_OUT, EVERY = 8, 32_000, 5_000, 100
GROUPS = ((0, 1, 2, 3), (4, 5, 6, 7))
RULES = ("newest", "discounted", "fresh", "mistakes", "sum")


def stream(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rows = list(open_source(f"separable:d=10,gamma=0.01,seed={seed},n={N + HELD_OUT}"))
    return (np.array([x for x, _ in rows], dtype=np.float64),
            np.array([v for _, v in rows], dtype=np.int8))


def _learn(w: np.ndarray, b: float, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float, int]:
    model = Perceptron()
    model.set_state({**model.get_state(), "weights": w.copy(), "intercept": b})
    k = int(model.learn_many(X, y).mistakes.sum())
    return model.weights.copy(), float(model.intercept), k


def run(X: np.ndarray, y: np.ndarray, rule: str, staleness: int, rng: np.random.Generator,
        every: int = EVERY) -> tuple[int, float]:
    """The mistakes of all partitions together, and the share of held-out points partition 0's
    last mix separates."""
    shares = [np.arange(p, N, PARTS) for p in range(PARTS)]
    width = X.shape[1]
    base = {p: (np.zeros(width), 0.0) for p in range(PARTS)}  # the mix each adopted last
    own = {p: (np.zeros(width), 0.0) for p in range(PARTS)}  # "sum": its own updates so far
    published: dict[int, tuple[np.ndarray, float, int, int]] = {}  # weights, intercept, version, k
    total = 0
    for n in range(1, len(shares[0]) // every + 1):
        order = [tuple(range(PARTS))] if staleness == 0 else list(GROUPS)
        if staleness:
            rng.shuffle(order)  # type: ignore[arg-type]
        for group in order:
            for p in group:
                rows = shares[p][(n - 1) * every:n * every]
                w0, b0 = base[p]
                w, b, k = _learn(w0, b0, X[rows], y[rows])
                total += k
                own[p] = (own[p][0] + (w - w0), own[p][1] + (b - b0))
                published[p] = (own[p][0], own[p][1], n, k) if rule == "sum" else (w, b, n, k)
            mixed = _mix(published, rule, n)
            for p in group:
                base[p] = mixed
    w, b = base[0]
    held = float(np.mean(np.where(X[N:] @ w + b > 0, 1, -1) == y[N:]))
    return total, held


def _mix(published: dict[int, tuple[np.ndarray, float, int, int]], rule: str, n: int
         ) -> tuple[np.ndarray, float]:
    states = sorted(published.items())
    if rule == "sum":
        return sum(s[0] for _, s in states), float(sum(s[1] for _, s in states))
    if rule == "fresh":
        states = [(p, s) for p, s in states if s[2] == n]
    mu = {"newest": lambda s: 1.0, "fresh": lambda s: 1.0, "discounted": lambda s: 1.0 / (1 + n - s[2]),
          "mistakes": lambda s: float(s[3])}[rule]
    weights = [mu(s) for _, s in states]
    if not sum(weights):
        weights = [1.0] * len(states)
    total = sum(weights)
    w = sum(m / total * s[0] for m, (_, s) in zip(weights, states, strict=True))
    b = sum(m / total * s[1] for m, (_, s) in zip(weights, states, strict=True))
    return np.asarray(w), float(b)


def measure(seeds: Sequence[int], orders: int, rules: Sequence[str], intervals: Sequence[int] = (EVERY,)
            ) -> list[dict[str, Any]]:
    out = []
    data = {seed: stream(seed) for seed in seeds}
    single = {seed: int(Perceptron().learn_many(X[:N], y[:N]).mistakes.sum())
              for seed, (X, y) in data.items()}
    for every in intervals:
        for rule in rules:
            for staleness in (0, 1):
                ratios, held = [], []
                for seed, (X, y) in data.items():
                    for order in range(orders if staleness else 1):
                        total, share = run(X, y, rule, staleness, np.random.default_rng(order), every)
                        ratios.append(total / single[seed])
                        held.append(share)
                out.append({"every": every, "rule": rule, "s": staleness, "runs": len(ratios),
                            "median": float(np.median(ratios)), "max": max(ratios),
                            "over_2x": sum(r > 2 for r in ratios), "held_out_min": min(held)})
    return out


def table(rows: Sequence[dict[str, Any]]) -> str:
    head = ["E", "rule", "s", "runs", "× one model, median", "max", "runs over 2×", "held out, lowest"]
    body = [[str(r["every"]), r["rule"], str(r["s"]), str(r["runs"]), f"{r['median']:.2f}×",
             f"{r['max']:.2f}×", str(r["over_2x"]), f"{100 * r['held_out_min']:.2f}%"] for r in rows]
    return format_table(head, body, "rll" + "r" * 5, markdown=True)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="generator seeds 1..SEEDS")
    parser.add_argument("--orders", type=int, default=8, help="draws of the groups' order per seed (s = 1)")
    parser.add_argument("--rules", default=",".join(RULES))
    parser.add_argument("--every", default=str(EVERY), help="mixing intervals E, comma-separated")
    parser.add_argument("--json", type=str, default=None)
    args = parser.parse_args(argv)
    rows = measure(range(1, args.seeds + 1), args.orders, args.rules.split(","),
                   [int(e) for e in args.every.split(",")])
    print(table(rows))
    write_json(args.json, {"rows": rows})
    return rows


if __name__ == "__main__":
    main()
