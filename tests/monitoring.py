"""What the tests of deploy/prometheus and deploy/grafana share: the tools they need, where those
may be missing, the metric names the files name, and the names a worker's observer exposes.

A tool missing here skips its tests with the reason, except in CI, where ``.ci/run`` installs it
(Debian's ``prometheus`` package gives ``prometheus`` and ``promtool``): there a missing tool
fails the test. CI is recognised as the Kafka tests recognise it (tests/integration/conftest.py):
``SP_REQUIRE_APACHE_KAFKA`` set (``.ci/run`` exports it) or ``CI=true``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from stream_perceptron import Perceptron
from stream_perceptron.model.learner import Learner
from stream_perceptron.model.stats import RunningStats
from stream_perceptron.worker.observe import Observer, probe

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
ALERTS = PROMETHEUS_DIR / "alerts.yml"
ALERT_TESTS = PROMETHEUS_DIR / "alerts.test.yml"
PROMETHEUS_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "stream-perceptron.json"

# a worker's series: every name starts so (observe.PREFIX); PromQL names nothing else of ours
METRIC = re.compile(r"\bstream_perceptron_[A-Za-z0-9_]+")


def required_in_ci() -> bool:
    """Whether a missing tool must fail the test rather than skip it (in CI)."""
    return (os.environ.get("SP_REQUIRE_APACHE_KAFKA", "") not in ("", "0")
            or os.environ.get("CI", "").lower() in ("true", "1"))


def tool(name: str) -> str:
    """The path of executable ``name``; skips the test without it, or fails it in CI."""
    path = shutil.which(name)
    if path is None:
        reason = f"{name} is not installed (Debian: apt-get install prometheus)"
        if required_in_ci():
            pytest.fail(f"{reason}, and CI must run this test (.ci/run installs it)", pytrace=False)
        pytest.skip(reason)
    return path


def alert_rules() -> list[dict[str, Any]]:
    """Every rule of deploy/prometheus/alerts.yml."""
    doc = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def dashboard_queries(dash: dict[str, Any]) -> Iterator[str]:
    """Every PromQL query of the dashboard: panel targets, annotations, template variables."""
    for panel in dash["panels"]:
        for target in panel.get("targets", ()):
            yield target["expr"]
    for annotation in dash["annotations"]["list"]:
        if "expr" in annotation:
            yield annotation["expr"]
    for variable in dash["templating"]["list"]:
        if variable["type"] == "query":
            yield variable["definition"]


def named_metrics(queries: Iterator[str] | list[str]) -> set[str]:
    """The worker metrics (``stream_perceptron_*``) that these PromQL queries name."""
    return {name for query in queries for name in METRIC.findall(query)}


def exposed_metrics(text: str) -> dict[str, set[str]]:
    """The sample names in a /metrics page (a counter's ``_total``, not its family's name), each
    with the label names its samples carry."""
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


def observer_metrics() -> dict[str, set[str]]:
    """The metric names a worker's observer serves on /metrics once it holds a partition that has
    learned: it is told what the worker tells it (an assignment, a batch, the partition's
    statistics record from a real learner, the lag, a checkpoint) and is scraped over HTTP."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    y = np.where(X @ np.array([1.0, -2.0, 0.5, 1.0]) > 0, 1, -1)
    learner = Learner(Perceptron(), RunningStats(window=100))
    learner.step(X, y)
    record = {**learner.stats.snapshot(), "topic": "examples", "partition": 0, "dead_letters": 0,
              "updates": learner.model.mistakes, "examples_per_s": 1000.0, "model_id": "m" * 32}
    with Observer(host="127.0.0.1", port=0) as observer:
        observer.assigned([("examples", 0)])
        observer.polled()
        observer.batch(topic="examples", partition=0, records=200, labeled=200,
                       mistakes=learner.model.mistakes, dead_letters=0)
        observer.feature_names(0, None, topic="examples", partition=0)
        observer.stats(record)
        observer.lag({("examples", 0): 0})
        observer.checkpoint(ok=True, duration_s=0.01)
        ok, text = probe(f"http://127.0.0.1:{observer.port}/metrics")
    assert ok, text
    return exposed_metrics(text + "\n")
