"""A real Prometheus scrapes a real worker and fires the drift alert of deploy/prometheus/alerts.yml
after the concept of the worker's input changes; the dashboard's queries run on what it scraped.

Prometheus (Debian's ``prometheus`` package) runs from a temporary directory on a free port with
deploy/prometheus/prometheus.yml, its intervals cut to 1 s and its target the worker. The input
is a separable stream whose labels flip at a known offset (y → -y): the model, right almost
everywhere before, is wrong almost everywhere after, and the worker's drift detector raises an
alarm. Prometheus must first see ``stream_perceptron_drifts_total`` at 0 (no alarm on the first
concept), then the alert ``StreamPerceptronDrift`` firing for the input partition. Without
``prometheus`` the test skips, saying so, except in CI, where it fails (tests/monitoring.py).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from stream_perceptron.commands.broker import free_port
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.worker.observe import probe
from tests.integration.helpers import (
    ThreadedWorker,
    encode_stream,
    noisy_stream,
    send_all,
    topics_for,
    wait_for,
    worker_settings,
)
from tests.monitoring import (
    ALERTS,
    PROMETHEUS_CONFIG,
    alert_rules,
    dashboard,
    dashboard_queries,
    named_metrics,
    tool,
)

FLIP_AT = 1500  # the input offset where the concept changes
RATE_INTERVAL = "1m"  # Grafana's $__rate_interval in the dashboard's queries: the whole test


class Prometheus:
    """A Prometheus server of this test: its URL and its log."""

    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``'s ``data``; raises on an HTTP error or an error status."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=5) as resp:  # noqa: S310
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self, name: str) -> list[dict[str, Any]]:
        return [a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name]

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@contextmanager
def prometheus(tmp_path: Path, target: str) -> Iterator[Prometheus]:
    """Prometheus with the example configuration, scraping and evaluating every second."""
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(ALERTS)]
    config["scrape_configs"][0]["static_configs"] = [{"targets": [target]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [tool("prometheus"), f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
        )
    server = Prometheus(f"http://127.0.0.1:{port}", log)
    try:
        wait_for(lambda: proc.poll() is not None or probe(f"{server.url}/-/ready", 1)[0], 20,
                 "Prometheus to be ready")
        assert proc.poll() is None, f"Prometheus exited {proc.returncode}:\n{server.log_tail()}"
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _instant(server: Prometheus, query: str) -> list[dict[str, Any]]:
    return server.api("query", query=query)["result"]  # type: ignore[no-any-return]


def test_prometheus_fires_the_drift_alert_after_a_concept_change(
    kafka_settings: Callable[..., KafkaSettings], new_topic: Callable[..., str], tmp_path: Path
) -> None:
    tool("prometheus")
    kafka = kafka_settings()
    topics = topics_for(new_topic)
    stream = noisy_stream(2 * FLIP_AT, noise=0.0, seed=11)
    flipped = stream[:FLIP_AT] + [(x, -y) for x, y in stream[FLIP_AT:]]
    records = encode_stream(flipped)
    send_all(kafka, topics["input"], records[:FLIP_AT])
    observe_port = free_port()  # Prometheus starts first: its first scrape comes some 5 s after
    where = {"topic": topics["input"], "partition": "0"}
    drifts = f'stream_perceptron_drifts_total{{topic="{where["topic"]}", partition="0"}}'
    with prometheus(tmp_path, f"127.0.0.1:{observe_port}") as server:
        tw = ThreadedWorker(worker_settings(
            kafka, topics, tmp_path / "ckpt", stats={"every_examples": 100, "every_seconds": 0.2},
            checkpoint={"every_examples": 500, "every_seconds": 0.5},
            observe={"host": "127.0.0.1", "port": observe_port},
        )).start()
        try:
            wait_for(lambda: tw.worker.counters.records == FLIP_AT, 60, "the first concept")
            # the first concept, scraped: no alarm
            wait_for(lambda: [s["value"][1] for s in _instant(server, drifts)] == ["0"], 15,
                     f"Prometheus to scrape {drifts} = 0")
            assert server.alerts("StreamPerceptronDrift") == []
            # the concept changes
            send_all(kafka, topics["input"], records[FLIP_AT:])
            wait_for(lambda: tw.worker.counters.records == len(records), 30, "the second concept")
            try:
                wait_for(lambda: any(a["state"] == "firing" for a in server.alerts("StreamPerceptronDrift")),
                         15, "the drift alert to fire", every_s=0.5)
            except TimeoutError as exc:
                raise AssertionError(f"{exc}; {drifts} = {_instant(server, drifts)}; rules: "
                                     f"{server.api('rules')}\n{server.log_tail()}") from exc
            (alert,) = server.alerts("StreamPerceptronDrift")
            assert {k: alert["labels"][k] for k in where} == where
            assert alert["labels"]["severity"] == "warning"
            assert float(_instant(server, drifts)[0]["value"][1]) >= 1

            # every metric the rules and the dashboard name was scraped from the worker
            scraped = set(server.api("label/__name__/values"))
            dash = dashboard()
            named = named_metrics([r["expr"] for r in alert_rules()] + list(dashboard_queries(dash)))
            assert named - scraped == set()
            # and each of the dashboard's queries answers with series for the worker's partition
            for query in dashboard_queries(dash):
                label = re.fullmatch(r"label_values\((.*), (\w+)\)", query)
                promql = (label.group(1) if label else query).replace('"$topic"', '".*"')
                promql = promql.replace('"$partition"', '".*"').replace("$__rate_interval", RATE_INTERVAL)
                result = _instant(server, promql)
                assert result, f"no series for the dashboard's {query!r}"
                if label:
                    assert {s["metric"][label.group(2)] for s in result} == {where[label.group(2)]}
        finally:
            assert tw.stop() == 0
