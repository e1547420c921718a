"""Tests for stream_perceptron.sources.drifting: river's SEA and Hyperplane generators."""

from __future__ import annotations

import itertools

from stream_perceptron.sources import open_source


def test_sea_matches_river() -> None:
    from river.datasets import synth

    src = open_source("sea:n=300,seed=4,variant=2,noise=0.1")
    assert src.n_features == 3 and src.length == 300 and src.feature_names == ["0", "1", "2"]
    data = list(src)
    expected = [
        ([x[0], x[1], x[2]], 1 if y else -1)
        for x, y in itertools.islice(synth.SEA(variant=2, noise=0.1, seed=4), 300)
    ]
    assert data == expected
    assert list(src) == data
    assert {y for _, y in data} == {-1, 1}


def test_hyperplane_matches_river() -> None:
    from river.datasets import synth

    src = open_source("hyperplane:d=4,n=400,seed=9,mag_change=0.01,noise=0.0")
    assert src.n_features == 4 and src.length == 400
    data = list(src)
    gen = synth.Hyperplane(seed=9, n_features=4, mag_change=0.01, noise_percentage=0.0)
    expected = [([x[i] for i in range(4)], 1 if y else -1) for x, y in itertools.islice(gen, 400)]
    assert data == expected
    assert list(src) == data
    assert len(list(open_source("hyperplane:n=1000", limit=7))) == 7
