"""What a report records of where it ran: the machine, library versions, the git state and the
client settings."""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from bench.worker.contenders import ROOT, confluent_available
from bench.worker.measures import loadavg


def machine_info(modules: Sequence[str] = ()) -> dict[str, Any]:
    """The CPU, cores, memory, platform and Python, and the version of each of ``modules`` (None
    when it is not installed)."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.lower().startswith("model name")), cpu)
    mem = None
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo", encoding="ascii") as fh:
        mem = round(int(fh.readline().split()[1]) / 1024 / 1024, 1)
    versions: dict[str, str | None] = {}
    for name in modules:
        try:
            versions[name] = str(getattr(importlib.import_module(name), "__version__", "installed"))
        except ImportError:
            versions[name] = None
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu_model": cpu, "logical_cores": os.cpu_count(), "usable_cores": usable,
            "memory_gb": mem, "platform": platform.platform(), "python": sys.version.split()[0],
            "versions": versions, "loadavg_at_start": loadavg()}


def git_state() -> dict[str, Any]:
    """The checkout's HEAD and how many files the working tree has changed (what was measured)."""

    def git(*a: str) -> str | None:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return None

    head, status = git("rev-parse", "HEAD"), git("status", "--porcelain")
    return {"commit": head.strip() if head else None,
            "changed_files": None if status is None else len(status.splitlines())}


def kafka_client_settings() -> dict[str, Any]:
    """The client settings every contender uses: the worker's defaults, and the librdkafka
    properties its confluent-kafka edge builds from them."""
    from stream_perceptron.settings import KafkaSettings

    k = KafkaSettings()
    out: dict[str, Any] = {name: getattr(k, name) for name in ("max_poll_records", "poll_timeout_ms",
                                                               "fetch_max_wait_ms", "fetch_max_bytes",
                                                               "linger_ms", "batch_size")}
    out["acks"] = "all"
    if confluent_available():
        from bench.pipe import confluent_configs, kafka_settings

        consumer, producer = confluent_configs(kafka_settings("127.0.0.1:9092"), "g")
        named = {"bootstrap.servers", "group.id", "client.id"}
        out["confluent_consumer"] = {p: v for p, v in consumer.items() if p not in named}
        out["confluent_producer"] = {p: v for p, v in producer.items() if p not in named}
    return out
