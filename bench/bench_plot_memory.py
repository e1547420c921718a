"""What ``stream-perceptron plot`` holds of a statistics topic: each record decoded whole, against
the fields it draws (``watch._History`` without thinning), against what it holds (at most
``plot.POINTS`` records, evenly spaced: ``plot.Thinned``).

Run from the repository root::

    .venv/bin/python -m bench.bench_plot_memory              # 20,000 records
    .venv/bin/python -m bench.bench_plot_memory --records 200000

The record is a worker's statistics record (``Worker.stats_record``'s fields) after a learner has
seen 20,000 generated examples, encoded as the worker encodes it. Each way, ``--records`` copies
are decoded and held, and ``tracemalloc`` gives the bytes held. A worker publishes a record
every ``SP_STATS__EVERY_EXAMPLES`` (5,000) examples, so at 20,000 examples/s a topic gains about
350,000 a day: plot reads a topic's whole history.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable, Sequence

import numpy as np

from stream_perceptron.codec.outputs import decode, encode
from stream_perceptron.commands.plot import POINTS, Thinned
from stream_perceptron.commands.watch import _History
from stream_perceptron.model.learner import Learner
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.model.stats import RunningStats
from stream_perceptron.sources import open_source


def statistics_record() -> bytes:
    """A statistics record as a worker publishes it, after 20,000 examples."""
    stream = list(open_source("separable:d=20,gamma=0.05,n=20000,seed=1,noise=0.02"))
    X = np.array([x for x, _ in stream], dtype=np.float64)
    y = np.array([label for _, label in stream], dtype=np.int8)
    learner = Learner(Perceptron(), RunningStats(window=1000, ewma_alpha=0.01))
    learner.step(X, y)
    return encode({
        **learner.stats.snapshot(), "updates": learner.model.mistakes,
        "intercept": learner.model.intercept, "examples_per_s": 38_000.0, "dead_letters": 2,
        "offsets": {"examples": {"0": 20_000}}, "lag": {"examples:0": 0}, "ts": time.time(),
        "uptime_s": 12.5, "client_id": "worker-1",
    })


def bytes_held(raw: bytes, records: int, hold: Callable[[], Callable[[bytes], object]]) -> float:
    """Bytes held after ``records`` decodes of ``raw``, each given to the holder ``hold()`` makes."""
    gc.collect()
    tracemalloc.start()
    try:
        holder = hold()
        for _ in range(records):
            holder(raw)
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del holder
    return float(size)


def whole() -> Callable[[bytes], object]:
    """Each record decoded and held whole."""
    held: list[object] = []
    return lambda raw: held.append(decode(raw))


def fields(limit: int) -> Callable[[], Callable[[bytes], object]]:
    """Each record as ``plot`` holds it, at most ``limit`` of them (``Thinned``)."""
    def make() -> Callable[[bytes], object]:
        history = _History(Thinned(limit))
        return lambda raw: history.add(decode(raw))
    return make


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args(argv)
    if args.records < 1:
        parser.error("--records must be >= 1")
    raw, n = statistics_record(), args.records
    out = {"json_bytes": float(len(raw)), "whole": bytes_held(raw, n, whole) / n,
           "plotted": bytes_held(raw, n, fields(n)) / n, "thinned_total": bytes_held(raw, n, fields(POINTS))}
    print(f"a statistics record: {len(raw)} bytes of JSON; held, {n:,} records:")
    print(f"  decoded whole        {out['whole']:8,.0f} bytes per record")
    ratio = out["plotted"] / out["whole"]
    print(f"  plot's fields        {out['plotted']:8,.0f} bytes per record  ({ratio:.2f}x)")
    print(f"  at most {POINTS:,} of them {out['thinned_total'] / 1e6:8,.2f} MB in all "
          f"({out['thinned_total'] / n:,.0f} bytes per record)")
    return out


if __name__ == "__main__":
    main()
