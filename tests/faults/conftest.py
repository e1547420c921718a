"""Fixtures for the fault-injection tests.

The broker fixtures are the integration tests' (``tests/integration/conftest.py``), re-exported
by name so that this directory needs no root conftest. ``kafka_bootstrap`` is session scoped, so
a run of both directories starts one broker per directory.

Every test here carries the ``faults`` marker (registered here too, so that ``--strict-markers``
accepts it before the project's ``pyproject.toml`` lists it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stream_perceptron.settings import KafkaSettings
from tests.integration.conftest import group_id, kafka_bootstrap, kafka_settings, new_topic

from .support import group_timeouts

__all__ = ["fast_kafka", "group_id", "kafka_bootstrap", "kafka_settings", "new_topic"]


@pytest.fixture
def fast_kafka(kafka_settings: Callable[..., KafkaSettings], kafka_bootstrap: str
               ) -> Callable[..., KafkaSettings]:
    """``kafka_settings`` with the shortest group timeouts the broker accepts (1 s on tansu,
    whose joins wait session_timeout_ms / 2; 6 s, Apache Kafka's minimum, elsewhere)."""

    def make(**overrides: Any) -> KafkaSettings:
        return kafka_settings(**{**group_timeouts(kafka_bootstrap), **overrides})

    return make
