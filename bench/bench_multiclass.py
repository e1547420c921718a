"""Many classes: the multiclass perceptron's progressive accuracy beside river's one-vs-rest
Perceptron and scikit-learn's, and learn_many at K = 10 against river's one-vs-rest learn_one.

    .venv/bin/python -m bench.bench_multiclass --json bench/results/multiclass.json   # docs/accuracy.md
    .venv/bin/python -m bench.bench_multiclass --n 500 --rows 5000 --repeats 1       # a smoke run

The streams and contenders: docs/accuracy.md, "Many classes"; the speed section: docs/performance.md,
"Many classes: learn_many with ten classes" (process CPU time, medians of ``--repeats`` interleaved
runs; its flags and state are ``learn_one``'s bit for bit, or it exits 1).
"""

from __future__ import annotations

import argparse
import itertools
import pickle
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from river import compat, datasets, evaluate, metrics, multiclass, preprocessing
from river import linear_model as river_lm
from river.datasets import synth
from sklearn import linear_model as sk_lm

from bench.bench_accuracy import _named
from bench.bench_river_api import _cpu, _median_runs
from bench.worker.formatting import format_table, write_json
from bench.worker.machine import machine_info
from stream_perceptron import Perceptron

MODELS: dict[str, Callable[[list[Any]], Any]] = {
    "Perceptron": lambda classes: Perceptron(classes=classes),
    "averaged": lambda classes: Perceptron(classes=classes, average=True),
    "river one-vs-rest": lambda _: multiclass.OneVsRestClassifier(river_lm.Perceptron()),
    "scikit-learn partial_fit": lambda classes: compat.SKL2RiverClassifier(sk_lm.Perceptron(), classes),
}


def labeled_rows(n: int, k: int, d: int = 20, noise: float = 0.05,
                 seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``x ~ N(0, I_d)`` labeled with the argmax of ``W x`` for a seeded ``W`` (k × d, rows of norm
    about 1), rows whose best score leads the runner-up by less than 0.1 rejected, then a fraction
    ``noise`` of the labels moved to another class, drawn uniformly."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((k, d)) / np.sqrt(d)
    X = np.zeros((0, d))
    while len(X) < n:
        more = rng.standard_normal((n, d))
        top2 = np.sort(more @ W.T, axis=1)[:, -2:]
        X = np.concatenate([X, more[top2[:, 1] - top2[:, 0] >= 0.1]])
    X = np.ascontiguousarray(X[:n])
    y = np.argmax(X @ W.T, axis=1)
    flip = rng.choice(n, size=round(noise * n), replace=False)
    y[flip] = (y[flip] + rng.integers(1, k, size=len(flip))) % k
    return X, y


def streams(n: int | None) -> Iterable[tuple[str, str, list[Any], Callable[[], Iterable[Any]]]]:
    """(name, what it is, its classes, a function giving its examples); ``n`` caps the generated
    ones and, when given, the bundled one too."""
    gen = n or 20_000
    yield "ImageSegments", "river, bundled; 7 classes, 18 features, names", \
        sorted({y for _, y in datasets.ImageSegments()}), datasets.ImageSegments
    yield "LED, 10% noise", "river `synth.LED(seed=1, noise_percentage=0.1)`; 10 classes, 7 of 0/1", \
        list(range(10)), lambda: synth.LED(seed=1, noise_percentage=0.1).take(gen)
    yield "Waveform", "river `synth.Waveform(seed=1)`; 3 classes, 21 features", \
        list(range(3)), lambda: synth.Waveform(seed=1).take(gen)
    yield "generated K=5, 5% noise", "`labeled_rows(k=5, d=20, noise=0.05, seed=1)`; ints", \
        list(range(5)), lambda: _named(zip(*(a.tolist() for a in labeled_rows(gen, 5)), strict=True))


def accuracy(n: int | None) -> list[dict[str, Any]]:
    rows = []
    for name, what, classes, examples in streams(n):
        stream = list(itertools.islice(examples(), n)) if n else list(examples())
        for scaled in (True, False):
            scores = {}
            for label, make in MODELS.items():
                model = make(classes)
                model = preprocessing.StandardScaler() | model if scaled else model
                both = metrics.Accuracy() + metrics.MacroF1()
                acc, f1 = evaluate.progressive_val_score(stream, model, both)
                scores[label] = {"accuracy": acc.get(), "macro_f1": f1.get()}
            rows.append({"stream": name, "what": what, "classes": len(classes), "scaled": scaled,
                         "examples": len(stream), "scores": scores})
    return rows


def speed(n: int, k: int, repeats: int, noise: float) -> dict[str, Any]:
    X, y = labeled_rows(n, k, noise=noise, seed=2)
    classes = list(range(k))
    dicts, labels = [dict(enumerate(row)) for row in X.tolist()], y.tolist()
    Perceptron(classes=classes).learn_many(X, y)  # a first long call loads the compiled loop, untimed
    many = Perceptron(classes=classes)
    out = many.learn_many(X, y)
    one, flags = Perceptron(classes=classes), []
    for row, label in zip(X, labels, strict=True):
        one.learn_one(row, label)
        flags.append(one.last_mistake)
    same = out.mistakes.tolist() == flags and pickle.dumps(one.get_state()) == pickle.dumps(many.get_state())

    def river_run() -> float:
        model = multiclass.OneVsRestClassifier(river_lm.Perceptron())
        return _cpu(lambda: [model.learn_one(x, t) for x, t in zip(dicts, labels, strict=True)])

    times = _median_runs({"learn_many": lambda: _cpu(lambda: Perceptron(classes=classes).learn_many(X, y)),
                          "river one-vs-rest learn_one": river_run}, repeats)
    return {"rows": n, "d": X.shape[1], "classes": k, "mistakes": int(out.mistakes.sum()), "seconds": times,
            "times_river": times["river one-vs-rest learn_one"] / times["learn_many"],
            "learn_many_is_learn_one": same}


def report(r: dict[str, Any]) -> str:
    keys = list(MODELS)
    lines = ["progressive_val_score: accuracy (macro-F1)", format_table(
        ["stream", "classes", "examples", "StandardScaler", *keys],
        [[a["stream"], a["classes"], f"{a['examples']:,}", "yes" if a["scaled"] else "no",
          *(f"{a['scores'][m]['accuracy']:.2%} ({a['scores'][m]['macro_f1']:.2%})" for m in keys)]
         for a in r["accuracy"]], markdown=True)]
    s = r["speed"]
    lines.append(f"\nlearn_many, {s['rows']:,} dense rows of {s['d']} features, K = {s['classes']},"
                 f" {s['mistakes']:,} mistakes: {s['seconds']['learn_many'] * 1e3:.1f} ms against river's"
                 f" one-vs-rest learn_one {s['seconds']['river one-vs-rest learn_one'] * 1e3:.0f} ms:"
                 f" {s['times_river']:.1f}× river (goal 20×);"
                 f" bit for bit learn_one: {s['learn_many_is_learn_one']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_multiclass",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=None,
                        help="examples of each stream (default: ImageSegments whole, 20,000 generated)")
    parser.add_argument("--rows", type=int, default=100_000, help="dense rows of the speed section")
    parser.add_argument("--noise", type=float, default=0.002, help="labels moved in the speed section's rows")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    result = {"benchmark": "bench.bench_multiclass", "params": vars(args) | {"json": str(args.json)},
              "machine": machine_info(("numpy", "river", "sklearn")), "accuracy": accuracy(args.n),
              "speed": speed(args.rows, 10, args.repeats, args.noise)}
    write_json(args.json, result)
    if not args.quiet:
        print(report(result))
    if not result["speed"]["learn_many_is_learn_one"]:
        raise SystemExit(1)
    return result


if __name__ == "__main__":
    main()
