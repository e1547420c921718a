"""Core-speed benchmark: ``Perceptron.learn_many`` vs ``learn_one`` vs river vs scikit-learn.

Run from the repository root::

    .venv/bin/python -m bench.bench_core                      # n=200000, d=20, 5 repeats
    .venv/bin/python -m bench.bench_core --json bench/results/core.json

One seeded, linearly separable stream with a margin (so the model is mostly right after a short
warm-up) is learned by four contenders, each on a fresh model per run:

1. ``Perceptron().learn_many(X, y)``: the whole stream in one call;
2. ``Perceptron().learn_one(X[i], y[i])`` row by row;
3. river ``linear_model.Perceptron().learn_one(dict, bool)`` row by row;
4. scikit-learn ``Perceptron(eta0=1, alpha=0, penalty=None, shuffle=False, tol=None)``
   ``partial_fit`` on one row at a time.

Each repeat runs every contender once (the order rotates between repeats so that drift in the
machine's speed hits all of them alike); the reported time is the median over repeats. Slow
row-by-row contenders may run on a prefix of the stream (``--sklearn-rows``, ``--rowwise-rows``):
their *rates* (examples/s) are compared, and their mistakes are checked against ``learn_many`` on
the same prefix. See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.worker.formatting import write_json
from stream_perceptron import Perceptron
from stream_perceptron.model.dense_pass import COMPILED_MIN_ROWS

TARGET_SPEEDUP = 20.0  # learn_many vs river learn_one, at 20 features, on a mostly-right stream
TARGET_D = 20
DEFAULT_SEED = 12345
DEFAULT_MARGIN = 0.1
DEFAULT_OFFSET = 0.3
DEFAULT_SKLEARN_ROWS = 10_000

LEARN_MANY = "stream_perceptron learn_many"
LEARN_ONE = "stream_perceptron learn_one"
RIVER = "river Perceptron learn_one"
SKLEARN = "sklearn Perceptron partial_fit(1 row)"

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


# --------------------------------------------------------------------------------------- stream
@dataclass
class Stream:
    """The one stream every contender learns: dense rows, and the same rows as river dicts."""

    X: FloatArray
    y: npt.NDArray[np.int8]
    u: FloatArray
    offset: float
    margin: float
    seed: int
    noise: float
    flipped: int
    rejected: int
    dicts: list[dict[str, float]] = field(default_factory=list)
    y_int: list[int] = field(default_factory=list)
    y_bool: list[bool] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        n, d = self.X.shape
        scores = self.X @ self.u + self.offset
        return {
            "n": n,
            "d": d,
            "seed": self.seed,
            "generator": (
                "x ~ N(0, I_d); u a fixed random unit vector, b = offset; rows with "
                "|u.x + b| < margin rejected; y = sign(u.x + b); then a fraction `noise` of the "
                "labels flipped (chosen at random, without replacement)"
            ),
            "offset_b": self.offset,
            "margin": self.margin,
            "min_abs_u_x_plus_b": float(np.abs(scores).min()) if n else None,
            "rows_rejected_for_margin": self.rejected,
            "noise": self.noise,
            "labels_flipped": self.flipped,
            "positive_fraction": float((self.y > 0).mean()) if n else None,
            "max_row_norm_augmented": float(np.sqrt((self.X**2).sum(axis=1) + 1).max()) if n else None,
        }


def make_stream(
    n: int,
    d: int,
    *,
    noise: float = 0.0,
    seed: int = DEFAULT_SEED,
    margin: float = DEFAULT_MARGIN,
    offset: float = DEFAULT_OFFSET,
    with_dicts: bool = True,
) -> Stream:
    """A seeded stream separable with margin ``margin`` by (u, b), labels flipped at rate ``noise``."""
    if n < 1 or d < 1:
        raise ValueError("n and d must be positive")
    if not 0.0 <= noise <= 1.0:
        raise ValueError("noise is a fraction in [0, 1]")
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    chunks: list[FloatArray] = []
    kept = rejected = 0
    while kept < n:
        batch = rng.standard_normal((max(1024, int((n - kept) * 1.25)), d))
        ok = np.abs(batch @ u + offset) >= margin
        rejected += int((~ok).sum())
        chunks.append(batch[ok])
        kept += int(ok.sum())
    X = np.ascontiguousarray(np.concatenate(chunks)[:n], dtype=np.float64)
    y = np.where(X @ u + offset > 0, 1, -1).astype(np.int8)
    flipped = int(round(noise * n))
    if flipped:
        idx = rng.choice(n, size=flipped, replace=False)
        y[idx] = -y[idx]
    stream = Stream(X, y, u, offset, margin, seed, noise, flipped, rejected)
    stream.y_int = y.tolist()
    stream.y_bool = [v > 0 for v in stream.y_int]
    if with_dicts:
        names = [f"f{j}" for j in range(d)]
        stream.dicts = [dict(zip(names, row, strict=True)) for row in X.tolist()]
    return stream


# --------------------------------------------------------------------------------------- contenders
@dataclass
class RunOutcome:
    seconds: float
    flags: BoolArray  # per row: was it a mistake (an update) for this contender
    final: dict[str, Any]
    cpu_seconds: float = 0.0  # process CPU time of the same timed span


def run_learn_many(stream: Stream, rows: int) -> RunOutcome:
    X, y = stream.X[:rows], stream.y[:rows]
    model = Perceptron()
    c0, t0 = time.process_time(), time.perf_counter()
    out = model.learn_many(X, y)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return RunOutcome(seconds, out.mistakes, _final_ours(model), cpu)


def run_learn_one(stream: Stream, rows: int) -> RunOutcome:
    X, y = stream.X, stream.y_int
    model = Perceptron()
    learn = model.learn_one
    c0, t0 = time.process_time(), time.perf_counter()
    flags = [learn(X[i], y[i]) for i in range(rows)]
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return RunOutcome(seconds, np.array(flags, dtype=np.bool_), _final_ours(model), cpu)


def _river_model() -> Any:
    from river import linear_model

    return linear_model.Perceptron()


def run_river(stream: Stream, rows: int) -> RunOutcome:
    """Timed loop is ``learn_one`` only; mistakes come from :func:`river_mistake_pass` (untimed)."""
    dicts, ys = stream.dicts, stream.y_bool
    model = _river_model()
    learn = model.learn_one
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(rows):
        learn(dicts[i], ys[i])
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return RunOutcome(seconds, np.zeros(0, dtype=np.bool_), _final_river(model, stream.X.shape[1]), cpu)


def river_mistake_pass(stream: Stream, rows: int) -> tuple[BoolArray, BoolArray, dict[str, Any]]:
    """Untimed pass: per row, did ``predict_one`` (before ``learn_one``) disagree with y, and did
    ``learn_one`` update the model (its intercept moves by ±1 on every update, as ours does)."""
    dicts, ys = stream.dicts, stream.y_bool
    model = _river_model()
    disagree = np.zeros(rows, dtype=np.bool_)
    updated = np.zeros(rows, dtype=np.bool_)
    for i in range(rows):
        x, t = dicts[i], ys[i]
        disagree[i] = model.predict_one(x) != t
        before = model.intercept
        model.learn_one(x, t)
        updated[i] = model.intercept != before
    return disagree, updated, _final_river(model, stream.X.shape[1])


def _sklearn_model() -> Any:
    from sklearn.linear_model import Perceptron as SkPerceptron

    return SkPerceptron(fit_intercept=True, shuffle=False, eta0=1.0, alpha=0.0, penalty=None, tol=None)


def run_sklearn(stream: Stream, rows: int) -> RunOutcome:
    """``partial_fit`` on one-row slices. A mistake is read off ``intercept_``, which moves by
    exactly ±1 on every update with these settings (one float read per row, ~0.1 µs against
    hundreds of µs per ``partial_fit`` call, so it stays in the timed loop)."""
    X, y = stream.X, stream.y
    model = _sklearn_model()
    fit = model.partial_fit
    classes = np.array([-1, 1])
    flags = np.zeros(rows, dtype=np.bool_)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no sklearn warning may turn into an error mid-timing
        c0, t0 = time.process_time(), time.perf_counter()
        before = 0.0
        for i in range(rows):
            if i == 0:
                fit(X[0:1], y[0:1], classes=classes)
            else:
                fit(X[i : i + 1], y[i : i + 1])
            after = model.intercept_[0]
            flags[i] = after != before
            before = after
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    final = {
        "weights": model.coef_[0].tolist(),
        "intercept": float(model.intercept_[0]),
    }
    return RunOutcome(seconds, flags, final, cpu)


def _final_ours(model: Perceptron) -> dict[str, Any]:
    return {"weights": model.weights.tolist(), "intercept": model.intercept}


def _final_river(model: Any, d: int) -> dict[str, Any]:
    w = model.weights
    return {"weights": [float(w.get(f"f{j}", 0.0)) for j in range(d)], "intercept": model.intercept}


@dataclass
class Contender:
    name: str
    rows: int
    run: Callable[[Stream, int], RunOutcome]
    times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)
    outcome: RunOutcome | None = None


# --------------------------------------------------------------------------------------- machine
def machine_info() -> dict[str, Any]:
    import river
    import sklearn

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    return {
        "cpu_model": cpu,
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "numpy": np.__version__,
        "river": getattr(river, "__version__", "?"),
        "sklearn": sklearn.__version__,
    }


# --------------------------------------------------------------------------------------- profile
def profile_learn_many(stream: Stream, learn_many_seconds: float, top: int = 14) -> dict[str, Any]:
    """cProfile of one learn_many call, plus the arithmetic floor it cannot beat."""
    X, y = stream.X, stream.y
    prof = cProfile.Profile()
    model = Perceptron()
    prof.enable()
    out = model.learn_many(X, y)
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    entries = []
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, line, func), (cc, nc, tt, ct, _) in sorted(
        raw.items(), key=lambda kv: kv[1][2], reverse=True
    )[:top]:
        entries.append(
            {
                "function": f"{Path(filename).name}:{line}({func})",
                "calls": nc,
                "primitive_calls": cc,
                "tottime_s": tt,
                "cumtime_s": ct,
            }
        )
    total = sum(v[2] for v in raw.values())
    lines = [f"cProfile of one learn_many call: {total * 1e3:.2f} ms profiled (with overhead)"]
    lines.append(f"{'calls':>8} {'tottime ms':>11} {'us/call':>8} {'cumtime ms':>11}  function")
    for e in entries:
        lines.append(
            f"{e['calls']:>8} {e['tottime_s'] * 1e3:>11.3f} "
            f"{e['tottime_s'] / max(e['calls'], 1) * 1e6:>8.2f} {e['cumtime_s'] * 1e3:>11.3f}  "
            f"{e['function']}"
        )
    w = model.weights.copy()
    floors = {
        "rowwise_mul_sum_whole_stream_s": _best_of(lambda: (X * w).sum(axis=1)),
        "matvec_whole_stream_s": _best_of(lambda: X @ w),
    }
    mistakes = int(out.mistakes.sum())
    per_mistake_us = (learn_many_seconds - floors["rowwise_mul_sum_whole_stream_s"]) / max(1, mistakes) * 1e6
    return {
        "top_by_tottime": entries,
        "text": "\n".join(lines),
        "floors": floors,
        "beyond_floor_per_mistake_us": per_mistake_us,
        "mistakes": mistakes,
    }


def _best_of(fn: Callable[[], Any], k: int = 5) -> float:
    best = float("inf")
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


# --------------------------------------------------------------------------------------- main
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.bench_core",
        description="Time Perceptron.learn_many / learn_one against river and scikit-learn.",
    )
    p.add_argument("--n", type=int, default=200_000, help="examples in the stream (200000)")
    p.add_argument("--d", type=int, default=20, help="features (20)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per contender (5)")
    p.add_argument("--noise", type=float, default=0.0, help="label-flip fraction (0.0)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"stream seed ({DEFAULT_SEED})")
    p.add_argument(
        "--sklearn-rows",
        type=int,
        default=DEFAULT_SKLEARN_ROWS,
        help=f"rows fed to sklearn partial_fit, a prefix of the stream ({DEFAULT_SKLEARN_ROWS}; "
        "0 = all); it runs at a few thousand rows/s",
    )
    p.add_argument(
        "--rowwise-rows",
        type=int,
        default=0,
        help="rows fed to learn_one and river learn_one (0 = all)",
    )
    p.add_argument(
        "--profile",
        choices=("auto", "always", "never"),
        default="auto",
        help="cProfile learn_many: when the speed-up target is missed (auto), always, or never",
    )
    p.add_argument("--json", type=Path, default=None, help="write all results to this file")
    p.add_argument("--quiet", action="store_true", help="print nothing (results still returned)")
    args = p.parse_args(argv)
    if args.n < 1 or args.d < 1 or args.repeats < 1:
        p.error("--n, --d and --repeats must be positive")
    if not 0.0 <= args.noise <= 1.0:
        p.error("--noise is a fraction in [0, 1]")
    if args.sklearn_rows < 0 or args.rowwise_rows < 0:
        p.error("row counts must be >= 0")
    return args


def _rows(requested: int, n: int) -> int:
    return n if requested == 0 else min(requested, n)


def time_contenders(contenders: list[Contender], stream: Stream, repeats: int) -> None:
    """Every repeat runs every contender once, in an order rotated by one each repeat."""
    for rep in range(repeats):
        shift = rep % len(contenders)
        for c in contenders[shift:] + contenders[:shift]:
            gc.collect()
            outcome = c.run(stream, c.rows)
            c.times.append(outcome.seconds)
            c.cpu_times.append(outcome.cpu_seconds)
            if c.outcome is None:
                c.outcome = outcome


def _first_diff(a: BoolArray, b: BoolArray) -> int | None:
    m = min(len(a), len(b))
    diff = np.flatnonzero(a[:m] != b[:m])
    return int(diff[0]) if len(diff) else None


def _max_abs_diff(a: dict[str, Any], b: dict[str, Any]) -> float:
    wa = np.array(a["weights"] + [a["intercept"]], dtype=np.float64)
    wb = np.array(b["weights"] + [b["intercept"]], dtype=np.float64)
    return float(np.abs(wa - wb).max())


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    say: Callable[..., None] = (lambda *a, **k: None) if args.quiet else print
    n, d = args.n, args.d

    t_build = time.perf_counter()
    stream = make_stream(n, d, noise=args.noise, seed=args.seed)
    t_build = time.perf_counter() - t_build
    gc.collect()
    gc.freeze()  # the stream's 200k dicts are long-lived: keep them out of every gc pass

    rows_one = _rows(args.rowwise_rows, n)
    rows_sk = _rows(args.sklearn_rows, n)
    contenders = [
        Contender(LEARN_MANY, n, run_learn_many),
        Contender(LEARN_ONE, rows_one, run_learn_one),
        Contender(RIVER, rows_one, run_river),
        Contender(SKLEARN, rows_sk, run_sklearn),
    ]
    by_name = {c.name: c for c in contenders}

    machine = machine_info()
    say(
        f"machine: {machine['cpu_model']} | {machine['logical_cores']} logical cores "
        f"({machine['usable_cores']} usable) | Python {machine['python']} | "
        f"numpy {machine['numpy']} | river {machine['river']} | sklearn {machine['sklearn']}"
    )
    say(
        f"stream: n={n} d={d} seed={args.seed} margin={DEFAULT_MARGIN} offset={DEFAULT_OFFSET} "
        f"noise={args.noise} ({stream.flipped} labels flipped), "
        f"{(stream.y > 0).mean():.1%} positive; built in {t_build:.1f}s"
    )
    say(
        f"timing: median of {args.repeats} repeats, contenders interleaved (order rotated each "
        "repeat), fresh model per run, model construction untimed"
    )

    # learn_many's compiled loop is compiled (or loaded from numba's on-disk cache) at its first call
    # in a process long enough to take it: timed once here, apart, and out of the table
    first_call_s = run_learn_many(stream, min(n, COMPILED_MIN_ROWS)).seconds
    say(f"learn_many's first call in this process (its compiled loop compiled or loaded from the cache): "
        f"{first_call_s * 1e3:.0f} ms, untimed in the table")
    t_all = time.perf_counter()
    time_contenders(contenders, stream, args.repeats)
    # learn_many takes tens of ms, so one-off costs (fresh pages for its output arrays after the other
    # contenders churned the heap, cold caches) show in the interleaved runs; back-to-back calls show
    # the warm figure. Informational only: the headline stays the interleaved median.
    gc.collect()
    back_to_back = [run_learn_many(stream, n).seconds for _ in range(max(5, args.repeats))]
    t_river_pass = time.perf_counter()
    river_disagree, river_updated, river_final = river_mistake_pass(stream, rows_one)
    t_river_pass = time.perf_counter() - t_river_pass
    t_all = time.perf_counter() - t_all

    # ------------------------------------------------------------- mistakes and agreement
    ref = by_name[LEARN_MANY].outcome
    assert ref is not None
    ref_flags = ref.flags
    river_c = by_name[RIVER]
    assert river_c.outcome is not None
    river_c.outcome.flags = river_updated

    results: list[dict[str, Any]] = []
    river_rate = rows_one / statistics.median(river_c.times)
    river_cpu_rate = rows_one / statistics.median(river_c.cpu_times)
    for c in contenders:
        assert c.outcome is not None
        med = statistics.median(c.times)
        rate = c.rows / med
        flags = c.outcome.flags
        entry: dict[str, Any] = {
            "contender": c.name,
            "rows": c.rows,
            "subsampled": c.rows < n,
            "times_s": c.times,
            "median_s": med,
            "spread": (max(c.times) - min(c.times)) / med,
            "examples_per_s": rate,
            "speedup_vs_river_learn_one": rate / river_rate,
            "cpu_times_s": c.cpu_times,
            "cpu_median_s": statistics.median(c.cpu_times),
            "cpu_speedup_vs_river_learn_one": c.rows / statistics.median(c.cpu_times) / river_cpu_rate,
            "mistakes": int(flags.sum()),
            "learn_many_mistakes_same_rows": int(ref_flags[: c.rows].sum()),
            "first_row_differing_from_learn_many": _first_diff(flags, ref_flags),
        }
        if c.name == LEARN_MANY:
            entry["back_to_back_times_s"] = back_to_back
            entry["back_to_back_median_s"] = statistics.median(back_to_back)
            entry["back_to_back_speedup_vs_river_learn_one"] = (
                n / statistics.median(back_to_back) / river_rate
            )
        if c.name == RIVER:
            entry["mistakes_definition"] = (
                "updates (rows where learn_one moved the model), from an untimed pass"
            )
            entry["predict_one_disagreements"] = int(river_disagree.sum())
            entry["updates"] = int(river_updated.sum())
            entry["mistake_pass_seconds"] = t_river_pass
        elif c.name == SKLEARN:
            entry["mistakes_definition"] = "rows where partial_fit moved intercept_ (timed loop)"
        else:
            entry["mistakes_definition"] = "rows with y*score <= 0 before the update (flags)"
        results.append(entry)

    # final weights: learn_many on each contender's rows, compared with that contender
    finals: dict[str, float] = {}
    for c in contenders:
        assert c.outcome is not None
        if c.name == LEARN_MANY:
            continue
        other = c.outcome.final if c.name != RIVER else river_final
        mine = ref.final
        if c.rows < n:
            model = Perceptron()
            model.learn_many(stream.X[: c.rows], stream.y[: c.rows])
            mine = _final_ours(model)
        finals[c.name] = _max_abs_diff(mine, other)

    ent = {e["contender"]: e for e in results}
    exact_ours = ent[LEARN_ONE]["first_row_differing_from_learn_many"] is None and finals[LEARN_ONE] == 0.0
    sk_equal = ent[SKLEARN]["mistakes"] == ent[SKLEARN]["learn_many_mistakes_same_rows"]
    river_equal = ent[RIVER]["mistakes"] == ent[RIVER]["learn_many_mistakes_same_rows"]
    notes: list[str] = []
    if rows_one < n or rows_sk < n:
        notes.append(
            "subsampled: "
            + ", ".join(f"{c.name} on the first {c.rows} rows" for c in contenders if c.rows < n)
            + f" (of {n}); rates (examples/s) are compared, and mistakes are compared with "
            "learn_many's on the same prefix"
        )
    notes.append(
        "river's mistakes = rows where learn_one updated (intercept moved by ±1), counted in a "
        "separate untimed pass that calls predict_one then learn_one per row; the timed river loop "
        "is learn_one alone"
    )
    first_false = not stream.y_bool[0]
    boundary_gap = ent[RIVER]["updates"] - ent[RIVER]["predict_one_disagreements"]
    if boundary_gap:
        notes.append(
            f"river predict_one disagreed with y on {ent[RIVER]['predict_one_disagreements']} rows "
            f"but learn_one updated on {ent[RIVER]['updates']}: river's Hinge(threshold=0) updates "
            "when y*score <= 0 (a score of 0 counts as a mistake, as here), but predict_one "
            "breaks the 0.5/0.5 tie of sigmoid(0) (and of |score| < ~1e-16) towards False, so a "
            "row on the boundary with label False is 'predicted right' yet still updates"
            + (" -- the first row (score 0 from zero weights) has label False" if first_false else "")
        )
    if not sk_equal:
        notes.append(
            f"sklearn made {ent[SKLEARN]['mistakes']} updates on its {rows_sk} rows, learn_many "
            f"{ent[SKLEARN]['learn_many_mistakes_same_rows']}; first differing row "
            f"{ent[SKLEARN]['first_row_differing_from_learn_many']}. sklearn's perceptron loss "
            "also updates on y*score <= 0 with step 1, so a difference means a score within "
            "rounding of 0: its dot product sums in another order than numpy's pairwise sum"
        )
    if not river_equal:
        notes.append(
            f"river made {ent[RIVER]['mistakes']} updates, learn_many "
            f"{ent[RIVER]['learn_many_mistakes_same_rows']} on the same rows; first differing row "
            f"{ent[RIVER]['first_row_differing_from_learn_many']} (river sums dict entries in "
            "insertion order, so a score within rounding of 0 can fall the other way)"
        )

    speedup = ent[LEARN_MANY]["speedup_vs_river_learn_one"]
    mistake_fraction = ent[LEARN_MANY]["mistakes"] / n
    target = {
        "description": f"learn_many >= {TARGET_SPEEDUP:g}x river learn_one at {TARGET_D} "
        "features on a mostly-right stream",
        "required_speedup": TARGET_SPEEDUP,
        "measured_speedup": speedup,
        "applies": d == TARGET_D and mistake_fraction < 0.05,
        "met": speedup >= TARGET_SPEEDUP,
        "learn_many_mistake_fraction": mistake_fraction,
    }

    # ------------------------------------------------------------- print
    say("")
    header = (
        f"{'contender':<40} {'rows':>8} {'median s':>9} {'examples/s':>12} "
        f"{'spread':>7} {'x river':>8} {'mistakes':>9} {'learn_many same rows':>21}"
    )
    say(header)
    say("-" * len(header))
    for e in results:
        star = "*" if e["subsampled"] else " "
        say(
            f"{e['contender']:<40} {e['rows']:>7}{star} {e['median_s']:>9.4f} "
            f"{e['examples_per_s']:>12,.0f} {e['spread']:>6.0%} "
            f"{e['speedup_vs_river_learn_one']:>7.2f}x "
            f"{e['mistakes']:>9} {e['learn_many_mistakes_same_rows']:>21}"
        )
    if any(e["subsampled"] for e in results):
        say("* subsampled: a prefix of the stream; compare rates, not times")
    say("spread = (slowest - fastest run) / median")
    lm = ent[LEARN_MANY]
    say(
        f"learn_many back to back ({len(back_to_back)} consecutive calls, warm heap and caches, not "
        f"interleaved): median {lm['back_to_back_median_s'] * 1e3:.1f} ms = "
        f"{lm['back_to_back_speedup_vs_river_learn_one']:.1f}x river (informational; the table's "
        "interleaved median is the headline)"
    )
    say(
        f"learn_many in CPU time (process_time, the same interleaved runs): median "
        f"{lm['cpu_median_s'] * 1e3:.1f} ms = {lm['cpu_speedup_vs_river_learn_one']:.1f}x river's CPU time "
        "(informational: on a shared machine CPU time moves less with other jobs than wall time)"
    )
    say("")
    say(
        "mistakes: learn_many = learn_one: "
        + ("yes, row for row, and bit-identical final weights" if exact_ours else "NO")
        + f" | sklearn = learn_many on its {rows_sk} rows: "
        + ("yes" if sk_equal else "NO")
        + f" (max |weight diff| {finals[SKLEARN]:.3g})"
        + f" | river updates = learn_many on its {rows_one} rows: "
        + ("yes" if river_equal else "NO")
        + f" (max |weight diff| {finals[RIVER]:.3g}; predict_one disagreed with y on "
        + f"{ent[RIVER]['predict_one_disagreements']} rows)"
    )
    for note in notes:
        say(f"note: {note}")
    verdict = "MET" if target["met"] else "NOT MET"
    scope = "" if target["applies"] else " (target is stated for d=20 on a mostly-right stream)"
    say(f"target: learn_many >= {TARGET_SPEEDUP:g}x river learn_one: {verdict} ({speedup:.1f}x){scope}")
    say(f"total timing wall time {t_all:.1f}s (incl. river mistake pass {t_river_pass:.1f}s)")

    profile: dict[str, Any] | None = None
    if args.profile == "always" or (args.profile == "auto" and not target["met"]):
        profile = profile_learn_many(stream, ent[LEARN_MANY]["median_s"])
        fl = profile["floors"]
        say("")
        say(
            f"profile of learn_many: {profile['mistakes']} mistakes; arithmetic floor "
            f"(X*w).sum(axis=1) over the whole stream {fl['rowwise_mul_sum_whole_stream_s'] * 1e3:.2f} ms, "
            f"X@w {fl['matvec_whole_stream_s'] * 1e3:.2f} ms; learn_many median "
            f"{ent[LEARN_MANY]['median_s'] * 1e3:.2f} ms -> "
            f"~{profile['beyond_floor_per_mistake_us']:.1f} us per mistake beyond the floor"
        )
        say(profile["text"].strip())

    report: dict[str, Any] = {
        "benchmark": "bench.bench_core",
        "command": "python -m bench.bench_core " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine,
        "params": {
            "n": n,
            "d": d,
            "repeats": args.repeats,
            "noise": args.noise,
            "seed": args.seed,
            "sklearn_rows": rows_sk,
            "rowwise_rows": rows_one,
        },
        "method": {
            "statistic": "median over repeats of wall time (time.perf_counter)",
            "interleaving": "each repeat runs every contender once; order rotated by one per repeat",
            "fresh_model_per_run": True,
            "untimed": "stream generation, dict conversion, model construction, river mistake pass, "
            "learn_many's first call in the process (first_call_s)",
            "gc": "gc.collect() before each run; the stream frozen out of gc (gc.freeze)",
            "learn_many_back_to_back": "extra, informational: consecutive learn_many calls after the "
            "interleaved repeats (warm heap and caches)",
        },
        "stream": stream.describe(),
        "first_call_s": first_call_s,
        "contenders": results,
        "checks": {
            "learn_many_equals_learn_one": exact_ours,
            "sklearn_mistakes_equal": sk_equal,
            "river_updates_equal": river_equal,
            "max_abs_weight_diff_vs_learn_many": finals,
            "mistakes_many_one_sklearn_equal": exact_ours and sk_equal,
        },
        "target": target,
        "notes": notes,
        "profile": profile,
        "wall_seconds": t_all,
    }
    gc.unfreeze()
    if args.json is not None:
        write_json(args.json, report)
        say(f"wrote {args.json}")
    return report


if __name__ == "__main__":
    res = main()
    sys.exit(0 if res["checks"]["learn_many_equals_learn_one"] else 1)
