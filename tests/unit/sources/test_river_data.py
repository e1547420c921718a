"""Tests for stream_perceptron.sources.river_data: river's bundled datasets."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stream_perceptron.errors import SourceError
from stream_perceptron.sources import SUPPORTED_RIVER_DATASETS, dense_matrix, open_source


def test_river_phishing() -> None:
    src = open_source("river:Phishing")
    data = list(src)
    assert src.length == 1250 and len(data) == 1250
    assert src.n_features == 9 and src.feature_names is not None
    assert src.feature_names[:2] == ["empty_server_form_handler", "popup_window"]
    assert {y for _, y in data} == {-1, 1}
    assert sum(y == 1 for _, y in data) == 548  # is_phishing == True
    assert all(isinstance(x, list) and len(x) == 9 for x, _ in data)
    assert all(isinstance(v, float) for v in data[0][0])
    X, y = dense_matrix(src)
    assert X.shape == (1250, 9) and y.dtype == np.int8


def test_river_bananas_and_shuttle() -> None:
    bananas = open_source("river:bananas")  # names are case-insensitive
    assert bananas.length == 5300 and bananas.feature_names == ["1", "2"]
    _, y = dense_matrix(bananas)
    assert y.shape == (5300,) and set(y.tolist()) == {-1, 1}
    assert int((y == 1).sum()) == 2376

    shuttle = open_source("river:Shuttle")
    assert shuttle.length == 49097 and shuttle.n_features == 9
    assert shuttle.feature_names == [f"f{i}" for i in range(1, 10)]
    _, y = dense_matrix(shuttle)
    assert y.shape == (49097,) and int((y == 1).sum()) == 3511  # anomalies are +1


def test_river_limit_and_reiteration() -> None:
    src = open_source("river:Shuttle", limit=10)
    assert src.length == 10
    first = list(src)
    assert len(first) == 10 and list(src) == first
    assert first == list(itertools.islice(open_source("river:Shuttle"), 10))


def test_river_multiclass_needs_positive_class() -> None:
    with pytest.raises(SourceError, match="not binary"):
        open_source("river:ImageSegments")
    src = open_source("river:ImageSegments", positive_class="sky", limit=300)
    assert {y for _, y in src} == {-1, 1}


@pytest.mark.parametrize("spec", ["river:Nope", "river:", "river:TrumpApproval", "river:Elec2"])
def test_river_bad_names(spec: str) -> None:
    with pytest.raises(SourceError) as info:
        open_source(spec)
    assert all(name in str(info.value) for name in SUPPORTED_RIVER_DATASETS)
