"""One model across 8 partitions: iterative parameter mixing against one model and 8 unmixed ones.

    .venv/bin/python -m bench.bench_mix                                  # the table in docs/mixing.md
    .venv/bin/python -m bench.bench_mix --plot docs/mixing.png            # ... and its plot
    .venv/bin/python -m bench.bench_mix --n 2000 --passes 3 --quiet       # a short run
    .venv/bin/python -m bench.bench_mix --seeds 0                         # no seed spread

The streams, runs (:func:`bench.ipm.simulate_stream`, :func:`bench.ipm.ipm`) and columns:
docs/mixing.md, "The evaluation". Accuracy, not speed: one run is the figure.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from river import datasets

from bench.ipm import ipm, simulate_stream
from bench.worker.formatting import format_table, write_json
from stream_perceptron.model.mixing import WEIGHTINGS, Weighting
from stream_perceptron.sources import open_source

PARTITIONS = 8
Data = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # X, y (training), X, y (held out)
Config = tuple[str, int, int, Weighting | None]  # label, partitions, interval, weighting


def separable_spec(n: int, seed: int = 1, noise: float = 0.0) -> str:
    return f"separable:d=20,gamma=0.05,n={n},seed={seed},noise={noise}"


def generated(noise: float, n: int, held_out: int, seed: int = 1) -> Callable[[], Data]:
    def load() -> Data:
        rows = list(open_source(separable_spec(n + held_out, seed, noise)))
        X = np.array([x for x, _ in rows], dtype=np.float64)
        y = np.array([v for _, v in rows], dtype=np.int8)
        return X[:n], y[:n], X[n:], y[n:]
    return load


def phishing() -> Data:
    rows = list(datasets.Phishing())
    names = sorted(rows[0][0])
    X = np.array([[float(x[k]) for k in names] for x, _ in rows], dtype=np.float64)
    y = np.array([1 if label else -1 for _, label in rows], dtype=np.int8)
    split = len(rows) - 250
    return X[:split], y[:split], X[split:], y[split:]


def streams(n: int, held_out: int) -> list[tuple[str, Callable[[], Data]]]:
    return [("separable", generated(0.0, n, held_out)),
            ("separable, 10% label noise", generated(0.1, n, held_out)), ("Phishing", phishing)]


def accuracy(w: np.ndarray, b: float, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.where(X @ w + b > 0, 1, -1) == y))


def own_accuracy(models: Sequence[Any], X: np.ndarray, y: np.ndarray) -> float:
    """Each partition's model on its round-robin share of the held-out rows."""
    right = sum(int((np.where(X[q::len(models)] @ m.weights + m.intercept > 0, 1, -1)
                     == y[q::len(models)]).sum()) for q, m in enumerate(models))
    return right / len(y)


def configs(intervals: Sequence[int], weightings: Sequence[Weighting] = WEIGHTINGS) -> list[Config]:
    """single, unmixed, then each weighting at each interval."""
    return [("single", 1, 1, None), ("unmixed", PARTITIONS, 1, None)] + [
        (f"{w}@{e}", PARTITIONS, e, w) for w in weightings for e in intervals]


def stream_rows(name: str, data: Data, intervals: Sequence[int], passes: int,
                rgamma: float | None) -> list[dict[str, Any]]:
    X, y, Xh, yh = data

    def row(run: str, first: int, per_pass: Sequence[int], sum_mu_k: float | None, oldest: int | None,
            served: Any, own: float | None) -> dict[str, Any]:
        clean = next((p + 1 for p, k in enumerate(per_pass) if k == 0), None)
        return {"stream": name, "run": run, "examples": len(X), "held_out": len(yh),
                "first_pass_mistakes": first, "clean_pass": clean, "mistakes_until_clean": sum(per_pass),
                "passes_run": len(per_pass), "sum_mu_k": sum_mu_k, "bound": rgamma,
                "oldest_state_mixed": oldest, "own_accuracy": own,
                "served_accuracy": accuracy(served.weights, served.intercept, Xh, yh)}

    rows = []
    for label, parts, every, weights in configs(intervals):
        once, many = (simulate_stream(X, y, partitions=parts, every=every, weights=weights, passes=p)
                      for p in (1, passes))
        rows.append(row(label, once.pass_mistakes[0], many.pass_mistakes, many.sum_mu_k if weights else None,
                        max(once.age_examples, default=None), once.final, own_accuracy(once.models, Xh, yh)))
    shards = [(X[q::PARTITIONS], y[q::PARTITIONS]) for q in range(PARTITIONS)]
    for weights in WEIGHTINGS:  # synchronous IPM: each pass one epoch of every shard, then one mix
        one, run = (ipm(shards, weights, max_epochs=p) for p in (1, passes))
        rows.append(row(f"ipm {weights}", sum(one.epochs[0].mistakes), [sum(e.mistakes) for e in run.epochs],
                        run.epochs[-1].running, None, one, None))
    return rows


def separable_bound(X: np.ndarray, y: np.ndarray, n: int, held_out: int) -> float:
    """(R/γ)² of the training rows on [x, 1]: γ is the margin of the generator's hidden unit
    normal u (through the origin, so [u, 0] is a unit separator of [x, 1])."""
    from stream_perceptron.sources.separable import separable_params

    u = separable_params(separable_spec(n + held_out))["u"]
    gamma = float(np.min(y * (X @ u)))
    radius = float(np.sqrt(np.einsum("ij,ij->i", X, X) + 1.0).max())
    return (radius / gamma) ** 2


def measure(n: int, held_out: int, intervals: Sequence[int], passes: int) -> list[dict[str, Any]]:
    rows = []
    for name, load in streams(n, held_out):
        data = load()
        rgamma = separable_bound(data[0], data[1], n, held_out) if name == "separable" else None
        rows += stream_rows(name, data, intervals, passes, rgamma)
    return rows


def seed_spread(n: int, held_out: int, intervals: Sequence[int], seeds: int) -> list[dict[str, Any]]:
    """Per run (single, unmixed, uniform@E): the separable stream's pass-1 mistakes for each
    generator seed 1..``seeds``, and those × the same seed's single model's."""
    runs = configs(intervals, ["uniform"])
    mistakes: dict[str, list[int]] = {label: [] for label, *_ in runs}
    for seed in range(1, seeds + 1):
        X, y, _, _ = generated(0.0, n, held_out, seed)()
        for label, parts, every, weights in runs:
            once = simulate_stream(X, y, partitions=parts, every=every, weights=weights, passes=1)
            mistakes[label].append(once.pass_mistakes[0])
    return [{"run": label, "seeds": list(range(1, seeds + 1)), "mistakes": ks,
             "x_single": [k / max(1, s) for k, s in zip(ks, mistakes["single"], strict=True)]}
            for label, ks in mistakes.items()]


def spread_table(spread: Sequence[dict[str, Any]]) -> str:
    head = ["run", "mistakes, pass 1: min", "median", "max", "× single: min", "median", "max"]
    stats = (min, statistics.median, max)
    body = [[r["run"]] + [f"{f(r['mistakes']):,g}" for f in stats]
            + [f"{f(r['x_single']):.2f}" for f in stats] for r in spread]
    return format_table(head, body)


def table(rows: Sequence[dict[str, Any]]) -> str:
    head = ["stream", "run", "mistakes, pass 1", "× single", "clean pass", "mistakes until clean",
            "Σμk", "(R/γ)²", "oldest state mixed", "served acc.", "own acc."]
    single = {r["stream"]: r["first_pass_mistakes"] for r in rows if r["run"] == "single"}
    body = []
    for r in rows:
        clean = str(r["clean_pass"]) if r["clean_pass"] else f"none in {r['passes_run']}"
        optional = (("sum_mu_k", ".1f"), ("bound", ",.0f"), ("oldest_state_mixed", ","))
        body.append([r["stream"], r["run"], f"{r['first_pass_mistakes']:,}",
                     f"{r['first_pass_mistakes'] / max(1, single[r['stream']]):.2f}", clean,
                     f"{r['mistakes_until_clean']:,}" if r["clean_pass"] else "—",
                     *("—" if r[key] is None else format(r[key], spec) for key, spec in optional),
                     f"{r['served_accuracy']:.1%}",
                     "—" if r["own_accuracy"] is None else f"{r['own_accuracy']:.1%}"])
    return format_table(head, body, "ll" + "r" * (len(head) - 2))


def plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["stream"] for r in rows))
    fig, axes = plt.subplots(2, len(names), figsize=(5.2 * len(names), 7.5), squeeze=False)
    for col, name in enumerate(names):
        mine = [r for r in rows if r["stream"] == name]
        labels = [r["run"] for r in mine]
        colors = ["#444444" if r["run"] == "single" else "#bb4444" if r["run"] == "unmixed"
                  else "#4477aa" if "uniform" in r["run"] else "#66aa55" for r in mine]
        top, bottom = axes[0][col], axes[1][col]
        top.bar(labels, [r["first_pass_mistakes"] for r in mine], color=colors)
        top.axhline(1.5 * mine[0]["first_pass_mistakes"], color="#444444", ls="--", lw=1,
                    label="1.5 × single")
        top.set_title(f"{name}: mistakes in one pass ({mine[0]['examples']:,} examples)", fontsize=10)
        top.legend(fontsize=8, loc="lower right", framealpha=0.9)
        bottom.bar(labels, [r["served_accuracy"] for r in mine], color=colors)
        low = min(r["served_accuracy"] for r in mine)
        bottom.set_ylim(max(0.0, low - 0.05), 1.0)
        bottom.set_title("held-out accuracy of the served model after one pass", fontsize=10)
        for ax in (top, bottom):
            ax.tick_params(axis="x", labelrotation=60, labelsize=8)
    fig.suptitle("8 partitions: one model (single), 8 unmixed, mixed every E examples "
                 "(uniform / ∝ mistakes), synchronous IPM", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="training examples of the generated streams")
    parser.add_argument("--held-out", type=int, default=5_000, help="held-out examples of generated streams")
    parser.add_argument("--every", default="2,5,10,50,200,1000", help="mixing intervals, comma-separated")
    parser.add_argument("--passes", type=int, default=10, help="at most this many passes to find a clean one")
    parser.add_argument("--seeds", type=int, default=5,
                        help="the seed spread over the separable stream's generator seeds 1..N (0: none)")
    parser.add_argument("--json", default=None, help="write the figures to this file")
    parser.add_argument("--plot", default=None, help="write the plot (PNG) to this file")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    intervals = [int(e) for e in args.every.split(",")]
    rows = measure(args.n, args.held_out, intervals, args.passes)
    spread = seed_spread(args.n, args.held_out, intervals, args.seeds) if args.seeds > 0 else []
    write_json(args.json, {"rows": rows, "seed_spread": spread})
    if args.plot:
        plot(rows, Path(args.plot))
    if not args.quiet:
        print(table(rows))
        if spread:
            print(f"\nseparable stream, generator seeds 1..{args.seeds}: pass-1 mistakes and × single")
            print(spread_table(spread))
    return rows


if __name__ == "__main__":
    main()
