"""Drift alarms on streams whose concept changes at known offsets: delay, misses, false alarms.

    .venv/bin/python -m bench.bench_drift                       # the table in docs/drift.md
    .venv/bin/python -m bench.bench_drift --scale 0.02 --seeds 2 --quiet   # a quick look

Pure model, no Kafka; the streams and measures are in docs/drift.md. Every detector watches the
same mistake stream of ``Learner.step`` (no reaction: the mistakes do not depend on the detector).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from river import drift as river_drift
from river.datasets import synth

from bench.worker.formatting import format_table
from stream_perceptron.model.drift import DETECTORS, Adwin, DriftWatch, RiseDetector
from stream_perceptron.model.learner import Learner
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.model.stats import RunningStats

NAMES = [d for d in DETECTORS if d != "none"]
SEA_VARIANTS = (0, 1, 2, 3, 0, 2)
BATCH = 500


def flip_stream(n: int, segment: int, seed: int, changes: bool = True, noise: float = 0.02,
                d: int = 10, gap: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """Rows and ±1 labels of the ``flip`` stream: N(0, I) rows moved out of the band
    ``|w·x| < gap`` of a random unit hyperplane ``w`` (so the data are separable with margin
    ``gap``), labeled by ``w``, which turns to ``-w`` every ``segment`` rows (never, unless
    ``changes``); then a fraction ``noise`` of the labels flipped."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.empty(n, dtype=np.int8)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    step = segment if changes else n
    for start in range(0, n, step):
        part = slice(start, min(n, start + step))
        s = X[part] @ w
        X[part] += np.outer(np.where(np.abs(s) < gap, np.where(s < 0, -gap, gap) - s, 0.0), w)
        y[part] = np.where(X[part] @ w > 0, 1, -1)
        w = -w
    flipped = rng.random(n) < noise
    y[flipped] = -y[flipped]
    return X, y


def sea_stream(n: int, segment: int, seed: int, changes: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Rows and ±1 labels of SEA, 10 % noise, its variant switching every ``segment``."""
    rows, labels = [], []
    for k, start in enumerate(range(0, n, segment if changes else n)):
        count = min(n - start, segment if changes else n)
        variant = SEA_VARIANTS[k % len(SEA_VARIANTS)] if changes else 0
        gen = synth.SEA(variant=variant, noise=0.1, seed=seed * 100 + k)
        for _, (x, label) in zip(range(count), gen, strict=False):
            rows.append((x[0], x[1], x[2]))
            labels.append(1 if label else -1)
    return np.array(rows, dtype=np.float64), np.array(labels, dtype=np.int8)


def mistakes(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The perceptron's mistake flags on the stream, learned in batches as the worker does."""
    learner = Learner(Perceptron(), RunningStats(window=1000))
    out = [learner.step(X[s:s + BATCH], y[s:s + BATCH])[0].mistakes for s in range(0, len(y), BATCH)]
    return np.concatenate(out)


def alarms(name: str, flags: np.ndarray) -> tuple[list[int], float]:
    """The rows of ``name``'s alarms on ``flags`` and its speed (flags per second), fed in the
    learner's batches."""
    det, zs = RiseDetector(name), flags.astype(np.int8).tolist()
    started = time.perf_counter()
    out = [k + j for k in range(0, len(zs), BATCH) for j, _, _ in det.update_many(zs[k:k + BATCH])]
    return out, len(flags) / max(time.perf_counter() - started, 1e-9)


def score(rows: Sequence[int], changes: Sequence[int], segment: int) -> tuple[list[int], int]:
    """Delays of the first alarm after each change (within its segment), and the changes missed."""
    firsts = [next((r - c for r in rows if c <= r < c + segment), None) for c in changes]
    return [d for d in firsts if d is not None], firsts.count(None)


def run(scale: float = 1.0, seeds: int = 5, quiet: bool = False) -> list[dict[str, Any]]:
    """One row per (stream, detector)."""
    segment = max(200, int(20_000 * scale))
    n_changing = segment * len(SEA_VARIANTS)
    n_stationary = segment + max(1_000, int(200_000 * scale))
    changes = list(range(segment, n_changing, segment))
    table: list[dict[str, Any]] = []
    for stream, make in (("flip", flip_stream), ("sea", sea_stream)):
        per: dict[str, dict[str, list[Any]]] = {d: {"delays": [], "missed": [], "false": [], "speed": []}
                                                 for d in NAMES}
        rises: list[float] = []
        span = max(50, segment // 100)
        for seed in range(seeds):
            changing = mistakes(*make(n_changing, segment, seed))
            rises += [float(changing[c:c + span].mean() - changing[c - span:c].mean()) for c in changes]
            stationary = mistakes(*make(n_stationary, segment, seed + 1000, changes=False))
            for d in NAMES:
                rows, speed = alarms(d, changing)
                delays, missed = score(rows, changes, segment)
                quiet_rows, _ = alarms(d, stationary)
                after = [r for r in quiet_rows if r >= segment]
                per[d]["delays"] += delays
                per[d]["missed"].append(missed)
                per[d]["false"].append(len(after) * 100_000 / (n_stationary - segment))
                per[d]["speed"].append(speed)
            if not quiet:
                print(f"{stream} seed {seed}: E_n {changing.mean():.3f} (changing),"
                      f" {stationary[segment:].mean():.3f} (stationary)", flush=True)
        for d in NAMES:
            p = per[d]
            table.append({
                "stream": stream, "detector": d, "segment": segment, "changes": len(changes) * seeds,
                "delay_median": statistics.median(p["delays"]) if p["delays"] else None,
                "delay_max": max(p["delays"], default=None), "missed": sum(p["missed"]),
                "false_per_100k": statistics.median(p["false"]), "flags_per_s": statistics.median(p["speed"]),
                "rise_median": statistics.median(rises), "rise_span": span,
                "rises_below_0_02": sum(r < 0.02 for r in rises)})
    return table


def adwin_cost(n: int = 300_000, repeats: int = 3) -> dict[str, float]:
    """µs per flag of this package's ADWIN (fed a list at once, best of ``repeats``), of its
    insert alone (the clock's test never due), and of river's compiled ADWIN one flag a call,
    on a stationary stream with 5 % ones."""
    rng = np.random.default_rng(1)
    xs = (rng.random(n) < 0.05).astype(np.float64).tolist()

    def best(clock: int) -> float:
        times = []
        for _ in range(repeats):
            det, started = Adwin(clock=clock), time.perf_counter()
            det.update_many(xs)
            times.append(time.perf_counter() - started)
        return min(times) / n * 1e6

    theirs = river_drift.ADWIN()
    started = time.perf_counter()
    for x in xs:
        theirs.update(x)
    river = (time.perf_counter() - started) / n * 1e6
    return {"ours": best(32), "insert": best(1 << 60), "river": river}


def learner_cost(n: int = 200_000, d: int = 20, repeats: int = 3) -> dict[str, float]:
    """µs per row of :meth:`Learner.step` (batches of 500) without a detector and with ADWIN,
    best of ``repeats`` interleaved runs, on rows a model mostly gets right (3 % label noise)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) > 0, 1, -1).astype(np.int8)
    noisy = rng.random(n) < 0.03
    y[noisy] = -y[noisy]
    times: dict[str, list[float]] = {"none": [], "adwin": []}
    for _ in range(repeats):
        for name in times:
            learner = Learner(Perceptron(), RunningStats(), None if name == "none" else DriftWatch(name))
            started = time.perf_counter()
            for s in range(0, n, BATCH):
                learner.step(X[s:s + BATCH], y[s:s + BATCH])
            times[name].append((time.perf_counter() - started) / n * 1e6)
    return {name: min(t) for name, t in times.items()}


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The table as docs/drift.md shows it."""
    body = [[r["stream"], f"`{r['detector']}`", _n(r["delay_median"]), _n(r["delay_max"]),
             f"{r['missed']} / {r['changes']}", f"{r['false_per_100k']:.1f}", f"{r['flags_per_s']:,.0f}"]
            for r in rows]
    lines = [format_table(["stream", "detector", "delay, median", "delay, largest", "missed",
                           "false alarms / 100k", "flags/s"], body, "ll" + "r" * 5, markdown=True)]
    for r in rows:
        if r["detector"] == NAMES[0]:
            lines.append(
                f"\n`{r['stream']}`: the error rate over the {r['rise_span']:,} examples after a change"
                f" minus the {r['rise_span']:,} before, median over the changes:"
                f" {r['rise_median']:+.3f}; {r['rises_below_0_02']} of {r['changes']} changes raise it"
                " by less than 0.02.")
    return "\n".join(lines)


def _n(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f}"


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0,
                    help="segment = 20,000 x scale examples; stationary stretch 200,000 x scale")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    rows = run(args.scale, args.seeds, args.quiet)
    if not args.quiet:
        print(markdown(rows))
        cost = adwin_cost(max(10_000, int(300_000 * args.scale)))
        print(f"\nADWIN, µs per flag: {cost['ours']:.2f} here ({cost['insert']:.2f} inserting,"
              f" the rest the test every 32 flags); river's compiled ADWIN {cost['river']:.2f}")
        step = learner_cost(max(10_000, int(200_000 * args.scale)))
        print(f"Learner.step, µs per row: {step['none']:.2f} without a detector, {step['adwin']:.2f}"
              " with ADWIN")
    return rows


if __name__ == "__main__":
    main()
