"""bench/bench_fit_memory.py measures what it says (its figures are quoted from a run, not here)."""

from __future__ import annotations

import numpy as np

import stream_perceptron.commands.fit as offline
from bench.bench_fit_memory import main, read_as_read
from stream_perceptron.codec.limits import Limits
from stream_perceptron.sources import open_source


def test_the_two_readings_give_the_model_the_same_rows():
    spec = "separable:d=4,n=500,seed=2"
    rows, ys = read_as_read(spec, open_source(spec), Limits())
    packed, packed_ys = offline._read(spec, open_source(spec), Limits())
    assert isinstance(rows, list) and isinstance(packed, np.ndarray)
    assert np.array(rows, dtype=np.float64).tobytes() == packed.tobytes() and ys == packed_ys


def test_it_reports_the_peak_of_each_way_in_fresh_processes(capsys):
    out = main(["--n", "100000", "--d", "10", "--repeats", "1"])  # rows as lists: about 40 MB
    assert out["as_read_mb"] > out["packed_mb"] >= out["baseline_mb"] > 10
    assert "packed / as read" in capsys.readouterr().out
