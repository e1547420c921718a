"""Tests for stream_perceptron.sources.spec: the spec grammar, limits and bad specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_perceptron.errors import SourceError
from stream_perceptron.sources import open_source, separable_params

from .support import write


def test_limit_on_files(tmp_path: Path) -> None:
    path = write(tmp_path / "d.csv", "a,y\n" + "".join(f"{i},1\n" for i in range(10)))
    src = open_source(str(path), limit=3)
    assert [x for x, _ in src] == [[0.0], [1.0], [2.0]]
    assert list(src) == list(src)
    with pytest.raises(SourceError, match="limit"):
        open_source(str(path), limit=-1)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty"),
        ("ftp:whatever", "unknown source scheme 'ftp'"),
        ("something", "unknown source spec"),
        ("missing.csv", "no such file"),
        ("jsonl:missing.txt", "no such file"),
        ("csv:", "missing file path"),
        ("separable:d=3,x=1", "unknown key 'x'"),
        ("separable:d", "bad key=value 'd'"),
        ("separable:d=abc", "not an integer"),
        ("separable:d=2.5", "not an integer"),
        ("separable:gamma=zz", "not a number"),
        ("separable:d=3,d=4", "twice"),
        ("separable:d=0", r"d must be in \[1, 100000\], got 0"),
        ("separable:d=100001,n=1", r"d must be in \[1, 100000\]"),
        ("hyperplane:d=100001", r"d must be in \[1, 100000\]"),
        ("separable:d=2,n=10000001,noise=0.5", "with noise, n must be at most 10000000, got 10000001"),
        ("separable:gamma=1.0", "gamma must be in"),
        ("separable:noise=1.5", "noise must be in"),
        ("separable:radius=0", "radius must be > 0"),
        ("sea:variant=7", "variant"),
        ("hyperplane:d=2,n_drift_features=3", "n_drift_features"),
        ("hyperplane:sigma=2", "sigma"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(SourceError, match=message) as info:
        open_source(spec)
    assert "\n" not in str(info.value)


def test_numeric_forms_in_specs() -> None:
    assert open_source("separable:n=1e3,d=2").length == 1000
    assert open_source("SEA: n = 1_000 , seed=1").length == 1000
    with pytest.raises(SourceError, match="separable:"):
        separable_params("sea:n=10")
