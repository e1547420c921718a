"""bench/pipe.py: its doctests, and that a settings override reaches each client's configuration
(the pipes themselves run against a broker in tests/integration/test_bench_pipe.py)."""

from __future__ import annotations

import json

import pytest

from bench import pipe


def test_the_pipes_fetch_bound_follows_the_override():
    assert pipe.consumer_kwargs(pipe.kafka_settings("h:1"))["fetch_max_bytes"] == 1_048_576  # the worker's
    kafka = pipe.kafka_settings("h:1", fetch_max_bytes=52_428_800, fetch_max_wait_ms=10)
    kwargs = pipe.consumer_kwargs(kafka)
    assert kwargs["fetch_max_bytes"] == 52_428_800 and kwargs["fetch_max_wait_ms"] == 10


def test_the_confluent_pipes_fetch_bound_follows_the_override():
    pytest.importorskip("confluent_kafka")
    assert pipe.confluent_configs(pipe.kafka_settings("h:1"), "g")[0]["fetch.max.bytes"] == 1_048_576
    kafka = pipe.kafka_settings("h:1", fetch_max_bytes=52_428_800, fetch_max_wait_ms=10)
    consumer, _ = pipe.confluent_configs(kafka, "g")
    assert consumer["fetch.max.bytes"] == 52_428_800 and consumer["group.id"] == "g"
    assert consumer["fetch.wait.max.ms"] == 10


def test_the_codec_stage_fills_every_field_as_the_worker_and_counts_the_records_it_refuses():
    from stream_perceptron.kafka.edge import Batch

    stage = pipe.CodecStage()  # θ = linspace(-1, 1, 2) = [-1, 1], fixed
    keys, values = stage.encode(Batch("in", 0, [5, 6], [b"a", None], [b'{"x":[1,3],"y":1}', b'{"x":[2,0]}'],
                                      [0, 0]))
    assert keys == [b"a", None] and json.loads(values[0]) == {
        "topic": "in", "partition": 0, "offset": 5, "key": "a", "id": None, "prediction": 1, "score": 2.0,
        "label": 1, "mistake": False, "margin": 2 / 2**0.5, "updates": 0}
    assert [json.loads(values[1])[k] for k in ("prediction", "score", "label", "mistake", "margin")] == [
        -1, -2.0, None, None, None]
    rows = [b'{"x":[]}', b'{"x":[1,-1],"y":1}']
    _, values = stage.encode(Batch("in", 0, [7, 8], [None, None], rows, [0, 0]))
    assert [json.loads(values[0])[k] for k in ("mistake", "updates")] == [True, 1] and stage.rejected == 1
    assert stage.encode(Batch("in", 0, [9], [None], [b"not json"], [0])) == ([], []) and stage.rejected == 2
