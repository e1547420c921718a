"""Records the model refuses (another width, names past the bound) are dead letters, and the
worker says so once at WARNING; a configuration that cannot match the checkpoint stops it at
start. An in-memory edge stands in for Kafka."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from stream_perceptron.codec.inputs import input_record
from stream_perceptron.commands.fit import fit_source
from stream_perceptron.errors import CheckpointMismatchError
from stream_perceptron.kafka.edge import Batch, InRecord
from stream_perceptron.settings import Settings
from stream_perceptron.worker.loop import Worker
from tests.unit.worker.test_batch import MemoryEdge


def _batch(xs: list, start: int = 0) -> Batch:
    return Batch.of([InRecord("in", 0, start + i, None, input_record(x, 1, start + i), 0)
                     for i, x in enumerate(xs)])


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.name.startswith("stream_perceptron")]


def _dead_letters(edge: MemoryEdge, settings: Settings) -> dict[int, str]:
    return {v["offset"]: v["error"] for t, _, v in edge.sent if t == settings.topics.dead_letter}


def _fit(ck, d: int, n_features: int | None):
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(ck)},
                        model={"n_features": n_features})
    return fit_source(settings, f"separable:d={d},n=200,seed=1", passes=1).checkpoint


_IN0 = {"topic": "in", "partition": "0"}  # the labels of in[0]'s series


def _restored(ck, **model) -> tuple[Worker, MemoryEdge, Settings]:
    """A worker on an in-memory edge, restored from the checkpoint in ``ck``."""
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(ck)}, model=model)
    edge = MemoryEdge()
    worker = Worker(settings, edge=edge)
    worker.restore()
    return worker, edge, settings


@pytest.mark.parametrize("written_with", [None, 10], ids=["written-unset", "written-10"])
def test_a_first_record_of_another_width_than_the_restored_state_is_a_dead_letter(
        tmp_path, caplog, written_with):
    # fit on d=10, then records of 20 with SP_MODEL__N_FEATURES unset: the partition's first
    # record since its state was restored does not fit. It is a dead letter with its reason and
    # one WARNING, and the records of the state's width behind it are learned and predicted.
    caplog.set_level(logging.DEBUG, logger="stream_perceptron")
    path = _fit(tmp_path / "ck", 10, written_with)
    worker, edge, settings = _restored(tmp_path / "ck")
    rng = np.random.default_rng(0)
    worker.process(_batch([rng.normal(size=20).tolist(), *rng.normal(size=(49, 10)).tolist()]))
    dead = _dead_letters(edge, settings)
    assert dead == {0: "x has 20 features, the model has 10"}
    predicted = [v["offset"] for t, _, v in edge.sent if t == settings.topics.predictions]
    assert predicted == list(range(1, 50))
    assert worker.offsets == {"in": {0: 50}} and worker.counters.records == 50
    assert _warnings(caplog) == [
        "in[0]@0 went to the dead-letter topic: x has 20 features, the model has 10; so will every"
        " record that does not fit the model's 10 features (said once): that width is checkpoint"
        f" {path}'s, adopted with SP_MODEL__N_FEATURES unset; to learn records of another width,"
        " point SP_CHECKPOINT__DIR at a directory of their own"
    ]
    assert worker.checkpoint("shutdown")


def test_the_checkpoints_width_once_confirmed_dead_letters_records_of_another(tmp_path, caplog):
    # a record of the checkpoint's width came first: later ones of another width are bad input
    caplog.set_level(logging.DEBUG, logger="stream_perceptron")
    path = _fit(tmp_path / "ck", 10, None)
    worker, edge, settings = _restored(tmp_path / "ck")
    rng = np.random.default_rng(0)
    worker.process(_batch([rng.normal(size=10).tolist(), *rng.normal(size=(49, 20)).tolist()]))
    worker.process(_batch(rng.normal(size=(50, 20)).tolist(), start=50))
    dead = _dead_letters(edge, settings)
    assert sorted(dead) == list(range(1, 100))
    assert set(dead.values()) == {"x has 20 features, the model has 10"}
    assert _warnings(caplog) == [
        "in[0]@1 went to the dead-letter topic: x has 20 features, the model has 10; so will every"
        " record that does not fit the model's 10 features (said once): that width is checkpoint"
        f" {path}'s, adopted with SP_MODEL__N_FEATURES unset; to learn records of another width,"
        " point SP_CHECKPOINT__DIR at a directory of their own"
    ]


def test_a_set_n_features_equal_to_the_checkpoints_dead_letters_records_of_another(tmp_path):
    # the way out the stopping line names: keep the model, refuse the records that do not fit it
    _fit(tmp_path / "ck", 10, None)
    worker, edge, settings = _restored(tmp_path / "ck", n_features=10)
    worker.process(_batch(np.random.default_rng(0).normal(size=(5, 20)).tolist()))
    assert sorted(_dead_letters(edge, settings)) == [0, 1, 2, 3, 4]


def test_a_set_n_features_the_checkpoint_cannot_match_stops_the_worker_at_start(tmp_path):
    # written with SP_MODEL__N_FEATURES unset (10 wide), restarted with it set to 20
    _fit(tmp_path / "ck", 10, None)
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path / "ck")},
                        model={"n_features": 20})
    with pytest.raises(CheckpointMismatchError,
                       match=r"n_features=10 there, 20 here \(SP_MODEL__N_FEATURES\)"):
        Worker(settings, edge=MemoryEdge()).restore()


def test_records_of_another_width_than_a_set_n_features_are_one_warning(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="stream_perceptron")
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)},
                        model={"n_features": 3})
    edge = MemoryEdge()
    worker = Worker(settings, edge=edge)
    worker.process(_batch([[1.0, 2.0, 3.0], [1.0, 2.0], {"a": 1.0}, [1.0, 2.0, 3.0, 4.0]]))
    assert sorted(_dead_letters(edge, settings)) == [1, 3]  # named rows fit a set width
    assert _warnings(caplog) == [
        "in[0]@1 went to the dead-letter topic: x has 2 features, the model has 3; so will every"
        " record that does not fit the model's 3 features (said once): that width is"
        " SP_MODEL__N_FEATURES"
    ]


def test_named_records_for_a_model_of_dense_records_are_one_warning(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="stream_perceptron")
    settings = Settings(observe={"enabled": False}, checkpoint={"dir": str(tmp_path)})
    edge = MemoryEdge()
    worker = Worker(settings, edge=edge)
    worker.process(_batch([[1.0, 2.0], {"a": 1.0}, {"b": 1.0}, [1.0, 2.0]]))
    worker.process(_batch([{"a": 1.0}], start=4))
    assert sorted(_dead_letters(edge, settings)) == [1, 2, 4]
    assert _warnings(caplog) == [
        "in[0]@1 went to the dead-letter topic: x has named features but the model was fixed by dense"
        " vectors; so will every record that does not fit the model's 2 features (said once)"
    ]


def test_reaching_the_names_bound_is_one_warning_and_the_names_are_metrics(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="stream_perceptron")
    settings = Settings(checkpoint={"dir": str(tmp_path)}, limits={"max_names": 5})
    edge = MemoryEdge()
    worker = Worker(settings, edge=edge)  # its observer is made, not started: read its registry
    registry = worker.observer.registry
    worker.process(_batch([{"a": 1.0, "b": 1.0, "c": 1.0}, {"d": 1.0, "e": 1.0, "f": 1.0},
                           {"d": 1.0, "e": 1.0}, {"f": 1.0}]))
    assert registry.get_sample_value("stream_perceptron_feature_names", _IN0) == 5
    worker.process(_batch([{"g": 1.0}, {"a": 2.0}, {"h": 1.0, "a": 1.0}], start=4))
    assert _dead_letters(edge, settings) == {
        1: "x brings 3 new feature names; the model allows 5 in all (SP_LIMITS__MAX_NAMES)",
        3: "x brings 1 new feature names; the model allows 5 in all (SP_LIMITS__MAX_NAMES)",
        4: "x brings 1 new feature names; the model allows 5 in all (SP_LIMITS__MAX_NAMES)",
        6: "x brings 1 new feature names; the model allows 5 in all (SP_LIMITS__MAX_NAMES)",
    }
    assert _warnings(caplog) == [
        "in[0]@1 went to the dead-letter topic: x brings 3 new feature names; the model allows 5 in"
        " all (SP_LIMITS__MAX_NAMES); so will every later record whose new feature names would pass"
        " SP_LIMITS__MAX_NAMES=5 (5 names in use; said once, the count is"
        " stream_perceptron_feature_names on /metrics; SP_MODEL__HASH_BITS hashes names into a fixed"
        " width instead)"
    ]
    assert registry.get_sample_value("stream_perceptron_feature_names", _IN0) == 5
    assert registry.get_sample_value("stream_perceptron_feature_names_limit", _IN0) == 5
