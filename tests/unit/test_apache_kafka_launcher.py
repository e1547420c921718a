"""The Apache Kafka launcher's decisions that need no broker: which Java it takes, what each node
is configured with, and when a test that needs Apache Kafka may skip (the launch itself runs in
the integration tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import apache_kafka as jars
from tests.integration import conftest


def _fake_java(tmp_path: Path, says: str) -> Path:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir(parents=True, exist_ok=True)
    java.write_text(f"#!/bin/sh\necho '{says}' >&2\n")
    java.chmod(0o755)
    return java


@pytest.mark.parametrize(("says", "major"), [
    ('openjdk version "17.0.15" 2025-04-15', 17),
    ('openjdk version "25" 2025-09-16', 25),
    ('java version "1.8.0_392"', 8),
    ("no version here", None),
])
def test_the_java_major_version_is_read_from_java_version(tmp_path, says, major):
    assert jars.java_version(str(_fake_java(tmp_path, says))) == major


def test_an_old_java_is_named_as_the_reason(tmp_path, monkeypatch):
    java = _fake_java(tmp_path, 'java version "1.8.0_392"')
    monkeypatch.setenv("PATH", f"{java.parent}{os.pathsep}{os.environ['PATH']}")
    assert jars.why_not() == "`java` is version 8, Apache Kafka 4.x needs 17 or later"


def test_three_nodes_form_one_quorum_and_replicate_on_all(tmp_path):
    cluster = jars.ApacheKafka(nodes=3, root=tmp_path)
    configs = [cluster._config(node) for node in cluster.nodes]
    voters = {line for c in configs for line in c.splitlines()
              if line.startswith("controller.quorum.voters=")}
    assert len(voters) == 1 and voters.pop().count("@127.0.0.1:") == 3
    for node, config in zip(cluster.nodes, configs, strict=True):
        assert f"node.id={node.node_id}\n" in config
        assert "default.replication.factor=3\n" in config and "transaction.state.log.min.isr=2\n" in config
        assert f"PLAINTEXT://127.0.0.1:{node.ports['PLAINTEXT']}" in config
    assert "SASL_SSL" not in configs[0]  # secure=False: PLAINTEXT and the controller's only
    assert len(cluster.bootstrap.split(",")) == 3


def test_a_secure_node_serves_ssl_and_both_sasl_mechanisms(tmp_path):
    cluster = jars.ApacheKafka(nodes=1, secure=True, root=tmp_path)
    cluster.tls = jars.Tls(tmp_path / "ca.pem", tmp_path / "server.p12", "store-password")
    config = cluster._config(cluster.nodes[0])
    assert "sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN\n" in config
    assert f"SSL://localhost:{cluster.nodes[0].ports['SSL']}" in config
    assert f'user_{jars.PLAIN_USER}="{cluster.passwords[jars.PLAIN_USER]}"' in config
    assert cluster.sasl_bootstrap == f"localhost:{cluster.nodes[0].ports['SASL_SSL']}"


@pytest.mark.parametrize(("cannot_run", "what"), [(conftest._no_apache_kafka, "Apache Kafka"),
                                                  (conftest._no_schema_registry, "the schema registry")])
def test_a_test_needing_apache_kafka_or_the_registry_skips_only_where_it_is_not_required(
        monkeypatch, cannot_run, what):
    monkeypatch.delenv("SP_REQUIRE_APACHE_KAFKA", raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"needs {what}: no java"):
        cannot_run("no java")
    for name, value in (("SP_REQUIRE_APACHE_KAFKA", "1"), ("CI", "true")):
        with monkeypatch.context() as env:
            env.setenv(name, value)
            with pytest.raises(pytest.fail.Exception, match=f"{what} is required here"):
                cannot_run("no java")


def test_the_session_broker_can_be_forced_and_a_wrong_name_is_refused(monkeypatch):
    monkeypatch.setenv("SP_TEST_BROKER", "Tansu")
    assert conftest.broker_choice() == "tansu"
    monkeypatch.setenv("SP_TEST_BROKER", "redpanda")
    with pytest.raises(pytest.UsageError, match="choose one of auto, tansu, apache-kafka, docker"):
        conftest.broker_choice()
