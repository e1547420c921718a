"""The peak memory of ``stream-perceptron fit`` on a long dense stream: rows packed into float64
blocks as they are read (``offline._read``), against rows held as read, as Python lists of
floats, until the model vectorizes them whole (how ``fit`` read a source before).

Run from the repository root::

    .venv/bin/python -m bench.bench_fit_memory                      # n = 1,000,000, d = 20
    .venv/bin/python -m bench.bench_fit_memory --n 200000 --repeats 5

Each run is a fresh process running the whole ``fit_source`` (one pass) on
``separable:d=D,n=N``; it reports its peak resident set (``VmHWM``; not ``ru_maxrss``, which a
process started by a larger one inherits). The two ways alternate,
``--repeats`` times each, and the table gives their medians, their ratio, and the matrix the
model learns from (N × D × 8 bytes) for scale. A process that only imports the package and opens
the source gives the interpreter's own share.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path

import stream_perceptron.commands.fit as offline
from stream_perceptron.codec.inputs import check_features
from stream_perceptron.codec.limits import Limits
from stream_perceptron.errors import DecodeError, SourceError
from stream_perceptron.model.perceptron import Features
from stream_perceptron.settings import Settings
from stream_perceptron.sources import open_source

WAYS = ("as read", "packed")


def read_as_read(spec: str, source: Iterable[tuple[Features, int]], limits: Limits) -> tuple[
        list[Features], array[int]]:
    """The reading ``fit`` did before: every row kept as the source gave it."""
    xs: list[Features] = []
    ys: array[int] = array("b")
    for x, y_i in source:
        try:
            check_features(x, limits)
        except DecodeError as exc:
            raise SourceError(f"{spec}: example {len(xs) + 1}: {exc}") from None
        xs.append(x)
        ys.append(y_i)
    return xs, ys


def child(way: str, spec: str) -> dict[str, float]:
    """Fit ``spec`` one pass the given way (or only open it: ``way`` "baseline"); peak RSS in MB."""
    if way == "baseline":
        next(iter(open_source(spec)))
    else:
        if way == "as read":
            offline._read = read_as_read  # type: ignore[assignment]
        with tempfile.TemporaryDirectory() as d:
            settings = Settings(checkpoint={"dir": d}, observe={"enabled": False})
            offline.fit_source(settings, spec, epochs=1)
    return {"peak_mb": peak_rss_kb() / 1024}


def peak_rss_kb() -> int:
    """This process's peak resident set in kB, from ``/proc/self/status``."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def measure(way: str, spec: str) -> float:
    """Peak RSS in MB of a fresh process fitting ``spec`` the given way."""
    out = subprocess.run([sys.executable, "-m", "bench.bench_fit_memory", "--child", way, "--spec", spec],
                         check=True, capture_output=True, text=True)
    return float(json.loads(out.stdout.splitlines()[-1])["peak_mb"])


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", choices=(*WAYS, "baseline"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        out = child(args.child, args.spec)
        print(json.dumps(out))
        return out
    if args.n < 1 or args.d < 1 or args.repeats < 1:
        parser.error("--n, --d and --repeats must be >= 1")
    spec = f"separable:d={args.d},n={args.n},seed=0"
    runs: dict[str, list[float]] = {way: [] for way in WAYS}
    for _ in range(args.repeats):
        for way in WAYS:
            runs[way].append(measure(way, spec))
    base = measure("baseline", spec)
    med = {way: statistics.median(v) for way, v in runs.items()}
    matrix = args.n * args.d * 8 / 2**20
    print(f"fit {spec}, one pass; peak RSS of a fresh process, median of {args.repeats}:")
    print(f"  interpreter and package, source opened   {base:9,.0f} MB")
    for way in WAYS:
        each = ", ".join(f"{v:,.0f}" for v in runs[way])
        print(f"  {way:<9} {med[way]:9,.0f} MB  (runs: {each})")
    print(f"  packed / as read {med['packed'] / med['as read']:.2f}x; "
          f"the matrix itself {matrix:,.0f} MB")
    return {"as_read_mb": med["as read"], "packed_mb": med["packed"], "baseline_mb": base,
            "matrix_mb": matrix}


if __name__ == "__main__":
    main()
