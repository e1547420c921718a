"""``fit``'s reading of a source: dense rows packed as read, anything else kept as read, and the
same fit either way (the command's report is tested in test_cli.py)."""

from __future__ import annotations

import numpy as np
import pytest

import stream_perceptron.commands.fit as offline
from stream_perceptron.codec.limits import Limits
from stream_perceptron.errors import SourceError
from stream_perceptron.settings import Settings
from stream_perceptron.sources import open_source


def _rows(n: int, d: int = 3, seed: int = 0) -> list[tuple[list[float], int]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.exp(rng.normal(size=(n, 1)))  # awkward floats
    return [([*map(float, x[:-1]), int(i)], 1 if x[0] > 0 else -1) for i, x in enumerate(X)]


def test_dense_rows_are_packed_block_by_block_into_the_matrix_of_the_whole_list(monkeypatch):
    monkeypatch.setattr(offline, "_BLOCK_ROWS", 4)
    source = _rows(11)
    X, ys = offline._read("s", iter(source), Limits())
    assert isinstance(X, np.ndarray) and X.dtype == np.float64 and X.shape == (11, 3)
    assert X.tobytes() == np.array([x for x, _ in source], dtype=np.float64).tobytes()
    assert list(ys) == [y for _, y in source] and ys.typecode == "b"


@pytest.mark.parametrize("odd", [{"a": 1.0}, [1.0, 2.0]])  # named features, another width
def test_a_row_that_cannot_be_packed_gives_back_every_row_as_read(monkeypatch, odd):
    monkeypatch.setattr(offline, "_BLOCK_ROWS", 4)
    source = [*_rows(9), (odd, 1), *_rows(2, seed=1)]  # two blocks packed before it
    xs, ys = offline._read("s", iter(source), Limits())
    assert xs == [x for x, _ in source]  # the packed floats, unpacked, equal the ones read
    assert all(type(v) is float for v in xs[0]) and len(ys) == 12


def test_an_empty_source_or_a_row_past_the_limits_is_one_error():
    with pytest.raises(SourceError, match="s has no examples"):
        offline._read("s", iter([]), Limits())
    with pytest.raises(SourceError, match=r"s: example 3: x has 4 features, over the limit of 3"):
        offline._read("s", iter([*_rows(2), ([1.0] * 4, 1)]), Limits(max_features=3))


def test_the_fit_is_the_same_whatever_the_blocks(tmp_path, monkeypatch):
    spec = "separable:d=8,gamma=0.05,n=3000,seed=4,noise=0.05"

    def fit(block_rows: int, where: str) -> offline.FitReport:
        monkeypatch.setattr(offline, "_BLOCK_ROWS", block_rows)
        settings = Settings(checkpoint={"dir": str(tmp_path / where)}, observe={"enabled": False})
        return offline.fit_source(settings, spec, passes=3)

    one, many = fit(10_000, "one"), fit(7, "many")
    assert one.weights == many.weights and one.intercept == many.intercept
    assert one.per_pass == many.per_pass and sum(one.per_pass) > 0
    assert (one.R, one.gamma, one.training_error) == (many.R, many.gamma, many.training_error)
    # and the matrix is what the rows make, row by row
    X, _ = offline._read(spec, open_source(spec), Limits())
    assert X.tobytes() == np.array([x for x, _ in open_source(spec)], dtype=np.float64).tobytes()


def test_an_averaged_fit_is_a_checkpoint_the_averaged_worker_restores(tmp_path):
    from stream_perceptron.state.stored import StateFiles
    from stream_perceptron.worker.loop import Worker

    spec = "separable:d=5,gamma=0.05,n=1000,seed=2,noise=0.1"
    settings = Settings(checkpoint={"dir": str(tmp_path)}, observe={"enabled": False},
                        model={"average": True})
    offline.fit_source(settings, spec, passes=2)
    ckpt = StateFiles(tmp_path).load()
    assert ckpt is not None and ckpt.config["average"] is True
    assert ckpt.model["average"]["steps"] > 1000  # two passes of labeled examples
    worker = Worker(settings)
    worker.restore()  # the seed of every partition without a state of its own
    assert worker.partitions.state("examples", 0).learner.model.get_state() == ckpt.model


def _fitted(tmp_path, spec: str, **limits) -> dict:
    from stream_perceptron.state.stored import StateFiles

    settings = Settings(checkpoint={"dir": str(tmp_path)}, observe={"enabled": False}, limits=limits)
    offline.fit_source(settings, spec, passes=1)
    stored = StateFiles(tmp_path).load()
    assert stored is not None
    return stored.model


def test_a_fit_checkpoint_keeps_the_names_of_its_river_dataset_and_scores_its_dict_rows(tmp_path):
    """Issue 54: it stored ``features: []`` and ``classes: [-1, 1]``."""
    from river import datasets

    from stream_perceptron import Perceptron

    state = _fitted(tmp_path, "river:Phishing")
    rows = list(datasets.Phishing())
    assert state["features"] == list(rows[0][0]) and state["classes"] == [False, True]
    model = Perceptron()
    model.set_state(state)
    dense = Perceptron()
    dense.set_state({**state, "features": []})
    for x, _ in rows[:200]:
        assert model.predict_one(x) is (dense.score_one(list(x.values())) > 0)


def test_a_fit_checkpoint_keeps_a_csv_header_and_its_class_names(tmp_path):
    path = tmp_path / "spam.csv"
    path.write_text("words,links,y\n3,1,spam\n0,0,ham\n5,2,spam\n1,0,ham\n")
    state = _fitted(tmp_path / "ck", str(path), positive_class="spam", negative_class="ham")
    assert state["features"] == ["words", "links"] and state["classes"] == ["ham", "spam"]
    plain = tmp_path / "ints.csv"
    plain.write_text("a,y\n1,1\n-1,0\n")
    assert _fitted(tmp_path / "ck2", str(plain))["classes"] == [0, 1]
