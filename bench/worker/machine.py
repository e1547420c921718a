"""What a report records of where it ran: the machine, library versions, the git state and the
client settings."""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
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


def git(*args: str) -> str:
    """The output of ``git args`` in the checkout; SystemExit with git's message when it fails."""
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def git_state() -> dict[str, Any]:
    """The checkout's HEAD and the files its working tree has changed, tracked ones apart (what
    was measured); None where there is no git checkout."""
    try:
        changed = git("status", "--porcelain").splitlines()
        return {"commit": git("rev-parse", "HEAD").strip(), "changed_files": len(changed),
                "tracked_changed": sum(not line.startswith("??") for line in changed)}
    except (OSError, SystemExit):
        return {"commit": None, "changed_files": None, "tracked_changed": None}


@contextlib.contextmanager
def worktree(ref: str) -> Iterator[tuple[Path, str]]:
    """``ref`` checked out (detached) in a temporary git worktree: its path and commit."""
    commit = git("rev-parse", "--verify", f"{ref}^{{commit}}").strip()
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        path = Path(tmp) / "base"
        git("worktree", "add", "--detach", str(path), commit)
        try:
            yield path, commit
        finally:
            git("worktree", "remove", "--force", str(path))


def kafka_client_settings() -> dict[str, Any]:
    """The client settings every contender uses: the worker's defaults (``acks`` is "all"), and the
    librdkafka properties its confluent-kafka edge builds from them."""
    from bench.pipe import confluent_configs, kafka_settings

    kafka = kafka_settings("127.0.0.1:9092")
    out: dict[str, Any] = kafka.model_dump(include={"max_poll_records", "poll_timeout_ms",
                                                    "fetch_max_wait_ms", "fetch_max_bytes", "linger_ms",
                                                    "batch_size"})
    if confluent_available():
        out["confluent_consumer"], out["confluent_producer"] = confluent_configs(kafka, "g")
    return out
