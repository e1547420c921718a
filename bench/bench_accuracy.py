"""Progressive accuracy of the plain and the averaged perceptron, beside river's Perceptron.

    .venv/bin/python -m bench.bench_accuracy                    # the table in docs/accuracy.md
    .venv/bin/python -m bench.bench_accuracy --n 2000 --quiet   # a few rows of each stream

How it measures: docs/accuracy.md (river's Perceptron is given ``y == 1`` where a stream labels
with -1/+1). Deterministic: one run is the figure.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from river import datasets, evaluate, metrics
from river import linear_model as river_lm
from river.datasets import synth

from bench.worker.formatting import format_table, write_json
from stream_perceptron import Perceptron
from stream_perceptron.sources import open_source

Stream = list[tuple[Any, Any]]


def streams(n: int | None) -> Iterable[tuple[str, str, Callable[[], Iterable[tuple[Any, Any]]]]]:
    """(name, what it is, a function giving its examples); ``n`` caps the generated ones and,
    when given, the bundled ones too."""
    gen = n or 20_000
    yield "Phishing", "river, bundled; bool labels", datasets.Phishing
    yield "Bananas", "river, bundled; bool labels", datasets.Bananas
    yield "Shuttle", "river, bundled, binary as the demo takes it (anomaly 1/0); int labels", datasets.Shuttle
    yield "SEA, 10% noise", "river `synth.SEA(seed=1, noise=0.1)`; bool labels", \
        lambda: synth.SEA(seed=1, noise=0.1).take(gen)
    yield "Agrawal, perturbation 0.1", "river `synth.Agrawal(seed=1, perturbation=0.1)`; 0/1 labels", \
        lambda: synth.Agrawal(seed=1, perturbation=0.1).take(gen)
    for noise in (0.0, 0.1, 0.2):
        spec = f"separable:d=20,gamma=0.05,n={gen},seed=1,noise={noise}"
        yield f"separable d=20, {noise:.0%} label noise", f"`{spec}`; -1/+1 labels", \
            lambda spec=spec: _named(open_source(spec))


def _named(examples: Iterable[tuple[Any, Any]]) -> Iterable[tuple[dict[str, float], Any]]:
    """Dense examples as the dicts river's models take."""
    for x, y in examples:
        yield {f"x{j}": v for j, v in enumerate(x)}, y


RIVER = "river Perceptron"
MODELS: dict[str, Callable[[], Any]] = {RIVER: river_lm.Perceptron, "Perceptron()": Perceptron,
                                         "Perceptron(average=True)": lambda: Perceptron(average=True)}


def measure(n: int | None) -> list[dict[str, Any]]:
    rows = []
    for name, what, examples in streams(n):
        stream: Stream = list(itertools.islice(examples(), n)) if n else list(examples())
        # river's Perceptron takes bools (or 0/1): -1 would be a truthy label to it
        as_bools = [(x, y == 1) for x, y in stream] if any(y == -1 for _, y in stream) else stream
        accuracy = {label: evaluate.progressive_val_score(
                        as_bools if label == RIVER else stream, make(), metrics.Accuracy()).get()
                    for label, make in MODELS.items()}
        rows.append({"stream": name, "what": what, "examples": len(stream), "accuracy": accuracy})
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    body = [[r["stream"], f"{r['examples']:,}", *(f"{r['accuracy'][m]:.2%}" for m in MODELS)] for r in rows]
    return format_table(["stream", "examples", *MODELS], body, markdown=True)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None,
                        help="examples of each stream (default: bundled datasets whole, 20,000 generated)")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    rows = measure(args.n)
    write_json(args.json, {"rows": rows})
    if not args.quiet:
        print(table(rows))
        for r in rows:
            print(f"  {r['stream']}: {r['what']}")
    return rows


if __name__ == "__main__":
    main()
