"""What a report records of the run: the machine, the git state and the client settings."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.worker.contenders import ROOT, confluent_available
from bench.worker.measures import loadavg


def machine_info(bootstrap: str | None, embedded: bool) -> dict[str, Any]:
    import kafka
    import numpy
    import orjson
    import river

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    mem = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/meminfo", encoding="ascii") as fh:
            mem = int(fh.readline().split()[1]) / 1024 / 1024
    try:
        import crc32c  # noqa: F401

        has_crc = True
    except ImportError:
        has_crc = False
    broker = "external"
    if embedded:
        with contextlib.suppress(Exception):
            from stream_perceptron.commands.broker import broker_binary

            broker = "embedded tansu: " + Path(broker_binary()).name
    cf_version = librdkafka = None
    with contextlib.suppress(ImportError):
        import confluent_kafka

        cf_version = getattr(confluent_kafka, "__version__", None)
        librdkafka = confluent_kafka.libversion()[0]
    return {
        "confluent_kafka": cf_version,
        "librdkafka": librdkafka,
        "cpu_model": cpu,
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gb": None if mem is None else round(mem, 1),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "kafka_python": kafka.__version__,
        "crc32c_installed": has_crc,
        "river": getattr(river, "__version__", "?"),
        "numpy": numpy.__version__,
        "orjson": getattr(orjson, "__version__", "?"),
        "broker": broker,
        "bootstrap": bootstrap,
        "loadavg_at_start": loadavg(),
    }


def git_state() -> dict[str, Any]:
    """The repository's HEAD and whether the working tree had changes (what was measured)."""

    def git(*a: str) -> str | None:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return None

    head = git("rev-parse", "HEAD")
    status = git("status", "--porcelain")
    return {
        "commit": head.strip() if head else None,
        "changed_files": None if status is None else len(status.splitlines()),
    }


def kafka_client_settings() -> dict[str, Any]:
    """The client settings every contender uses, and whether the confluent-kafka edge passes the
    worker's ``fetch_max_wait_ms`` on as ``fetch.wait.max.ms`` (checked by building its config)."""
    from stream_perceptron.settings import KafkaSettings

    k = KafkaSettings()
    out: dict[str, Any] = {
        "max_poll_records": k.max_poll_records,
        "poll_timeout_ms": k.poll_timeout_ms,
        "fetch_max_wait_ms": k.fetch_max_wait_ms,
        "fetch_max_bytes": k.fetch_max_bytes,
        "linger_ms": k.linger_ms,
        "batch_size": k.batch_size,
        "acks": "all",
        "source": "stream_perceptron.settings.KafkaSettings defaults; acks as KafkaEdge builds its producer",
    }
    if confluent_available():
        from bench.pipe import confluent_configs, kafka_settings

        consumer, producer = confluent_configs(kafka_settings("127.0.0.1:9092"), "g")
        safe = {"bootstrap.servers", "group.id", "client.id"}
        out["confluent_consumer"] = {k2: v for k2, v in consumer.items() if k2 not in safe}
        out["confluent_producer"] = {k2: v for k2, v in producer.items() if k2 not in safe}
        out["confluent_edge_fetch_wait_max_ms"] = confluent_edge_fetch_wait(10)
        out["confluent_edge_honours_fetch_max_wait_ms"] = confluent_edge_fetch_wait(10) == 10
    return out


def confluent_edge_fetch_wait(fetch_max_wait_ms: int) -> Any:
    """The ``fetch.wait.max.ms`` the confluent-kafka edge gives librdkafka when the worker's
    ``kafka.fetch_max_wait_ms`` is ``fetch_max_wait_ms``."""
    from stream_perceptron.kafka.confluent_edge import ConfluentEdge
    from stream_perceptron.settings import KafkaSettings

    kafka = KafkaSettings(bootstrap_servers="127.0.0.1:9092", fetch_max_wait_ms=fetch_max_wait_ms)
    edge = ConfluentEdge(kafka, "t", lambda _p: None, lambda _p: None)
    return edge._consumer_config().get("fetch.wait.max.ms")
