"""river's drifting generators: SEA (abrupt drift) and Hyperplane (gradual drift)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from stream_perceptron.sources.base import Example, Source, cap, limited
from stream_perceptron.sources.classes import SeenClasses
from stream_perceptron.sources.spec_args import MAX_D, check, parse_args

__all__ = ["hyperplane_source", "sea_source"]


def sea_source(spec: str, rest: str, limit: int | None) -> Source:
    """river.datasets.synth.SEA: x uniform in [0, 10]^3, y = +1 iff x0 + x1 > theta.

    Keys: ``n`` (examples, default 100000), ``seed`` (0), ``variant`` (0..3: theta = 8, 9, 7,
    9.5), ``noise`` (probability of flipping each label, default 0). Features "0", "1", "2"
    (x2 is irrelevant). The boundary has an offset, so a perceptron needs a bias feature.
    """
    args = parse_args("sea", rest, {"n": 100_000, "seed": 0, "variant": 0, "noise": 0.0})
    n, seed, variant, noise = args["n"], args["seed"], args["variant"], args["noise"]
    check(n >= 0, f"sea: n must be >= 0, got {n}")
    check(variant in (0, 1, 2, 3), f"sea: variant must be 0, 1, 2 or 3, got {variant}")
    check(0.0 <= noise <= 1.0, f"sea: noise must be in [0, 1], got {noise}")

    def examples() -> Iterator[Example]:
        from river.datasets import synth

        gen = synth.SEA(variant=variant, noise=noise, seed=seed)
        for x, y in itertools.islice(gen, n):
            yield [float(x[0]), float(x[1]), float(x[2])], 1 if y else -1

    seen = SeenClasses()
    seen.negative, seen.positive = False, True  # river's SEA labels with bools
    return Source(spec, 3, ["0", "1", "2"], cap(n, limit), limited(examples, limit), classes=seen)


def hyperplane_source(spec: str, rest: str, limit: int | None) -> Source:
    """river.datasets.synth.Hyperplane: x uniform in [0, 1]^d, y = +1 iff w.x >= sum(w) / 2.

    Keys: ``d`` (features, default 10), ``n`` (100000), ``seed`` (0), ``mag_change`` (drift per
    example of the first ``n_drift_features`` weights, 0.001), ``noise`` (river's
    ``noise_percentage``, 0.05), ``n_drift_features`` (2), ``sigma`` (probability of reversing a
    drift direction, 0.1). Note river flips a label when ``0.01 + U <= noise``, so the actual
    flip rate is ``max(0, noise - 0.01)`` (4% for the default 0.05). Labels 1 -> +1, 0 -> -1;
    the boundary has an offset, so a perceptron needs a bias feature.
    """
    args = parse_args(
        "hyperplane",
        rest,
        {
            "d": 10,
            "n": 100_000,
            "seed": 0,
            "mag_change": 0.001,
            "noise": 0.05,
            "n_drift_features": 2,
            "sigma": 0.1,
        },
    )
    d, n = args["d"], args["n"]
    check(1 <= d <= MAX_D, f"hyperplane: d must be in [1, {MAX_D}], got {d}")
    check(n >= 0, f"hyperplane: n must be >= 0, got {n}")
    check(
        0 <= args["n_drift_features"] <= d,
        f"hyperplane: n_drift_features must be in [0, d={d}], got {args['n_drift_features']}",
    )
    for key in ("mag_change", "noise", "sigma"):
        check(0.0 <= args[key] <= 1.0, f"hyperplane: {key} must be in [0, 1], got {args[key]}")

    def examples() -> Iterator[Example]:
        from river.datasets import synth

        gen = synth.Hyperplane(
            seed=args["seed"],
            n_features=d,
            n_drift_features=args["n_drift_features"],
            mag_change=args["mag_change"],
            noise_percentage=args["noise"],
            sigma=args["sigma"],
        )
        keys = range(d)
        for x, y in itertools.islice(gen, n):
            yield [float(x[k]) for k in keys], 1 if y else -1

    names = [str(i) for i in range(d)]
    seen = SeenClasses()
    seen.negative, seen.positive = 0, 1  # river's Hyperplane labels with 0/1
    return Source(spec, d, names, cap(n, limit), limited(examples, limit), classes=seen)
