"""Fixtures for the fault-injection tests.

The broker fixtures are the integration tests' (``tests/integration/conftest.py``), re-exported
by name so that this directory needs no root conftest. ``kafka_bootstrap`` is session scoped, so
a run of both directories starts one broker per directory (per pytest-xdist process: ``make test``
runs three).

Every test module here sets ``pytestmark = pytest.mark.faults`` (the marker is registered in
``pyproject.toml``).
"""

from __future__ import annotations

from tests.integration.conftest import (
    _kafka_client_sockets_finalized,
    _local_kafka,
    apache_kafka,
    backend,
    fast_kafka,
    group_id,
    kafka_bootstrap,
    kafka_settings,
    kafka_trio,
    new_topic,
    pytest_runtest_makereport,
)

__all__ = [
    "_kafka_client_sockets_finalized", "_local_kafka", "apache_kafka", "backend", "fast_kafka", "group_id",
    "kafka_bootstrap", "kafka_settings", "kafka_trio", "new_topic", "pytest_runtest_makereport",
]
