"""bench/pipe.py: its doctests, and that a settings override reaches each client's configuration
(the pipes themselves run against a broker in tests/integration/test_bench_pipe.py)."""

from __future__ import annotations

import doctest

import pytest

from bench import pipe


def test_the_pipes_doctests_pass():
    result = doctest.testmod(pipe)
    assert result.attempted >= 2 and result.failed == 0


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
