"""deploy/prometheus: the alert rules load, their unit tests (alerts.test.yml) pass under
``promtool test rules``, the example configuration loads them, and every metric they name is one
a worker exports.

``promtool`` comes with Debian's ``prometheus`` package; without it these tests skip, saying so,
except in CI, where they fail (tests/monitoring.py)."""

from __future__ import annotations

import subprocess

import yaml

from tests.monitoring import (
    ALERT_TESTS,
    ALERTS,
    PROMETHEUS_CONFIG,
    alert_rules,
    named_metrics,
    observer_metrics,
    tool,
)


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("promtool"), *args], capture_output=True, text=True, timeout=60,
                          check=False)


def test_promtool_checks_the_rules() -> None:
    proc = _promtool("check", "rules", str(ALERTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in proc.stdout


def test_the_rules_unit_tests_pass() -> None:
    proc = _promtool("test", "rules", str(ALERT_TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    """Each alert of alerts.yml has, in alerts.test.yml, an evaluation where it fires and one where
    it does not (promtool checks what is written; this checks that nothing is left unwritten)."""
    tests = yaml.safe_load(ALERT_TESTS.read_text(encoding="utf-8"))
    assert tests["rule_files"] == [ALERTS.name]
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    alerts = {rule["alert"] for rule in alert_rules()}
    assert firing == alerts and quiet == alerts


def test_the_example_configuration_loads_the_rules() -> None:
    proc = _promtool("check", "config", str(PROMETHEUS_CONFIG))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    assert config["rule_files"] == [ALERTS.name]
    (job,) = config["scrape_configs"]
    assert job["static_configs"][0]["targets"] == ["localhost:9464"]  # SP_OBSERVE__PORT's default
    # the job StreamPerceptronDown watches
    assert any(f'job="{job["job_name"]}"' in rule["expr"] for rule in alert_rules())


def test_every_metric_the_rules_name_is_exported() -> None:
    named = named_metrics(rule["expr"] for rule in alert_rules())
    assert "stream_perceptron_drifts_total" in named
    assert named - set(observer_metrics()) == set()


def test_every_rule_says_what_it_means() -> None:
    for rule in alert_rules():
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
