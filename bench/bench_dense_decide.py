"""learn_many's two ways of deciding dense rows, side by side: the compiled loop and numpy's blocks.

Run from the repository root::

    .venv/bin/python -m bench.bench_dense_decide                       # 60,000 rows, ~3% mistakes
    .venv/bin/python -m bench.bench_dense_decide --noise 0 --n 200000  # 0.24% mistakes

The stream is ``bench_core``'s (d=20, separable with a margin, ``--noise`` of the labels
flipped). Each repeat runs ``Perceptron().learn_many`` once deciding in the compiled loop
(``model/dense_kernel.py``) and once in numpy's blocks (``dense_pass.COMPILED_MIN_ROWS`` set past
the stream's length), in an order that alternates; the table gives the median wall time of each
and their ratio. Both runs' flags, scores and weights are compared bit for bit. The compiled
loop's first call in the process (numba compiled or loaded from its cache) is timed apart.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.bench_core import make_stream
from stream_perceptron import Perceptron
from stream_perceptron.model import dense_pass

WAYS = ("compiled", "numpy")


def learn(X: np.ndarray, y: np.ndarray, way: str) -> tuple[float, Any, Perceptron]:
    """One learn_many over the stream, deciding the ``way`` given; its seconds, result, model."""
    threshold = dense_pass.COMPILED_MIN_ROWS
    dense_pass.COMPILED_MIN_ROWS = 0 if way == "compiled" else len(X) + 1
    try:
        model = Perceptron()
        gc.collect()
        t0 = time.perf_counter()
        out = model.learn_many(X, y)
        return time.perf_counter() - t0, out, model
    finally:
        dense_pass.COMPILED_MIN_ROWS = threshold


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=60_000)
    p.add_argument("--d", type=int, default=20)
    p.add_argument("--noise", type=float, default=0.005)
    p.add_argument("--repeats", type=int, default=11)
    args = p.parse_args(argv)
    stream = make_stream(args.n, args.d, noise=args.noise, with_dicts=False)
    first, _, _ = learn(stream.X[: dense_pass.COMPILED_MIN_ROWS], stream.y[: dense_pass.COMPILED_MIN_ROWS],
                        "compiled")
    times: dict[str, list[float]] = {w: [] for w in WAYS}
    results: dict[str, tuple[Any, Perceptron]] = {}
    for rep in range(args.repeats):
        for way in WAYS if rep % 2 == 0 else WAYS[::-1]:
            seconds, out, model = learn(stream.X, stream.y, way)
            times[way].append(seconds)
            results[way] = (out, model)
    (a, ma), (b, mb) = results["compiled"], results["numpy"]
    same = (np.array_equal(a.mistakes, b.mistakes) and a.scores.tobytes() == b.scores.tobytes()
            and ma.weights.tobytes() == mb.weights.tobytes() and ma.intercept == mb.intercept)
    med = {w: statistics.median(t) for w in WAYS for t in [times[w]]}
    print(f"n={args.n} d={args.d} noise={args.noise}: {int(a.mistakes.sum())} mistakes; "
          f"{args.repeats} alternating repeats; first compiled call in the process {first * 1e3:.0f} ms")
    for way in WAYS:
        print(f"  {way:<9} median {med[way] * 1e3:7.2f} ms  (runs {min(times[way]) * 1e3:.2f}–"
              f"{max(times[way]) * 1e3:.2f})")
    print(f"  numpy / compiled: {med['numpy'] / med['compiled']:.2f}x; flags, scores and weights "
          f"bit for bit the same: {'yes' if same else 'NO'}")
    return {"median_s": med, "times_s": times, "first_call_s": first, "same": same,
            "mistakes": int(a.mistakes.sum())}


if __name__ == "__main__":
    main()
