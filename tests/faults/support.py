"""Shared pieces for the fault-injection tests: broker detection, processes, logs, offsets.

Everything here waits with a deadline; nothing sleeps unboundedly.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_perceptron.kafka.admin import client_config
from stream_perceptron.settings import KafkaSettings, Settings
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.state.stored import StoredState
from tests.integration.helpers import worker_env, worker_settings

ROOT = Path(__file__).resolve().parents[2]

def fault_settings(kafka: KafkaSettings, topics: dict[str, str], ckpt_dir: Path,
                   log_level: str | None = None, **sections: Any) -> Settings:
    """:func:`worker_settings` without the HTTP observe endpoint (several workers run at once)."""
    sections.setdefault("observe", {"enabled": False})
    settings = worker_settings(kafka, topics, ckpt_dir, **sections)
    return settings if log_level is None else settings.model_copy(update={"log_level": log_level})


def start_worker(settings: Settings, *args: str, log: Path, module: str = "stream_perceptron.cli",
                 extra_env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``python -m <module> run ARGS`` configured by ``settings`` (SP_* env), output to ``log``."""
    env = worker_env(settings)
    env.update(extra_env or {})
    with open(log, "ab") as fh:
        return subprocess.Popen(
            [sys.executable, "-m", module, "run", *args],
            env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
        )


def run_cli(args: list[str], env: Mapping[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run ``python -m stream_perceptron.cli ARGS`` to completion (killed at the deadline)."""
    return subprocess.run(
        [sys.executable, "-m", "stream_perceptron.cli", *args], env=dict(env), cwd=ROOT,
        capture_output=True, text=True, timeout=timeout_s, check=False,
    )


def reap(proc: subprocess.Popen[bytes] | None, timeout_s: float = 10) -> int | None:
    """SIGKILL ``proc`` if it still runs, then wait for it: for ``finally`` blocks."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    return proc.wait(timeout=timeout_s)


def run_until_caught_up(settings: Settings, log: Path, timeout_s: float = 60) -> None:
    """Run a worker with ``--until-caught-up`` to the end of its input; it must exit 0."""
    proc = start_worker(settings, "--until-caught-up", log=log)
    try:
        assert proc.wait(timeout=timeout_s) == 0, log.read_text()[-3000:]
    finally:
        reap(proc)


def stopped(pid: int) -> bool:
    """Every thread of the process is stopped (SIGSTOP): state T in ``/proc/<pid>/task/*/stat``."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # a thread that ended meanwhile
            continue
        states.append(text[text.rindex(")") + 2])
    return bool(states) and all(state == "T" for state in states)


def kill9(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL


class LogTail:
    """Reads a growing log file incrementally and keeps what matters to the tests."""

    _SEEN = re.compile(rb"seen (\d+), labeled")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pos = 0
        self.text = b""
        self.seen = -1  # the last "seen N" statistics line: examples the model has seen

    def poll(self) -> LogTail:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._pos)
                new = fh.read()
        except FileNotFoundError:
            return self
        # keep only complete lines
        cut = new.rfind(b"\n") + 1
        new = new[:cut]
        self._pos += cut
        self.text += new
        found = self._SEEN.findall(new)
        if found:
            self.seen = int(found[-1])
        return self

    def contains(self, needle: str) -> bool:
        return needle.encode() in self.poll().text

    def count(self, needle: str) -> int:
        return self.poll().text.count(needle.encode())

    def lines(self, needle: str) -> list[str]:
        return [ln for ln in self.poll().text.decode(errors="replace").splitlines() if needle in ln]


def trouble_lines(text: str, containing: str = "") -> list[str]:
    """The WARNING and ERROR lines of a worker's log ``text`` that contain ``containing``."""
    return [ln for ln in text.splitlines() if (" WARNING " in ln or " ERROR " in ln) and containing in ln]


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str,
               every_s: float = 0.05, alive: subprocess.Popen[bytes] | None = None,
               log: Path | None = None) -> None:
    """Poll ``condition`` until true; fail at the deadline, or at once if ``alive`` exits."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if alive is not None and alive.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log is not None else ""
            raise AssertionError(f"worker exited ({alive.returncode}) waiting for {what}\n{tail}")
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log is not None else ""
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}\n{tail}")
        time.sleep(every_s)


def checkpoint_offset(ckpt_dir: Path, topic: str, partition: int = 0) -> int:
    ckpt = DirectoryStore(ckpt_dir).load(topic, partition)
    return 0 if ckpt is None else ckpt.offsets.get(topic, {}).get(partition, 0)


def committed(kafka: KafkaSettings, topic: str, partitions: int = 1) -> dict[int, int | None]:
    """The group's committed offsets (``kafka.group_id``), read by a consumer that does not join."""
    consumer = KafkaConsumer(**client_config(kafka), group_id=kafka.group_id,
                             enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()


def rss_kb(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (``VmRSS`` in /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def ckpt_files(ckpt_dir: Path) -> list[Path]:
    """The checkpoint files of the input partitions' states under ``ckpt_dir`` (the rows here
    use a one-partition input: those of its partition), oldest first."""
    return sorted(ckpt_dir.glob("partitions/*/*/ckpt-*.json"), key=lambda p: p.name)


def temp_files(ckpt_dir: Path) -> list[Path]:
    return sorted(ckpt_dir.glob("partitions/*/*/.ckpt-*.json.tmp"), key=lambda p: p.name)


def stored(ckpt_dir: Path, topic: str, partition: int = 0) -> StoredState | None:
    """``topic[partition]``'s newest stored state under ``ckpt_dir`` (the directory store)."""
    return DirectoryStore(ckpt_dir).load(topic, partition)


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if not value else int(value)
