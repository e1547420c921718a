"""What ``stream-perceptron plot`` holds per statistics record: the record decoded whole, against
the fields it draws (``watch._plotted``).

Run from the repository root::

    .venv/bin/python -m bench.bench_plot_memory              # 20,000 records
    .venv/bin/python -m bench.bench_plot_memory --records 100000

The record is a worker's statistics record (``Worker.stats_record``'s fields) after a learner has
seen 20,000 generated examples, encoded as the worker encodes it. Each way, ``--records`` copies
are decoded and held, and ``tracemalloc`` gives the bytes held per record. A worker publishes a
record every ``SP_STATS__EVERY_EXAMPLES`` (5,000) examples, so at 20,000 examples/s a topic
gains about 350,000 a day: plot reads a topic's whole history.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stream_perceptron.learner import Learner
from stream_perceptron.perceptron import Perceptron
from stream_perceptron.records import decode, encode
from stream_perceptron.sources import open_source
from stream_perceptron.stats import RunningStats
from stream_perceptron.watch import _plotted


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


def bytes_held(raw: bytes, records: int, keep: Callable[[Any], Any] | None) -> float:
    """Bytes held per record after ``records`` decodes of ``raw``, each kept as ``keep`` gives."""
    gc.collect()
    tracemalloc.start()
    try:
        held = [keep(decode(raw)) if keep else decode(raw) for _ in range(records)]
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del held
    return size / records


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args(argv)
    if args.records < 1:
        parser.error("--records must be >= 1")
    raw = statistics_record()
    out = {"json_bytes": float(len(raw)), "whole": bytes_held(raw, args.records, None),
           "plotted": bytes_held(raw, args.records, _plotted)}
    print(f"a statistics record: {len(raw)} bytes of JSON; held per record, {args.records:,} records:")
    print(f"  decoded whole  {out['whole']:8,.0f} bytes")
    print(f"  plot's fields  {out['plotted']:8,.0f} bytes  ({out['plotted'] / out['whole']:.2f}x)")
    return out


if __name__ == "__main__":
    main()
