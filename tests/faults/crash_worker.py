"""``python -m tests.faults.crash_worker run``: the worker CLI with a crash inside a checkpoint write.

``FAULT_CRASH_AT_RENAME=N`` makes the process SIGKILL itself on the N-th checkpoint, after the
temp file is written and fsynced and before it is renamed into place: exactly a power cut or an
OOM kill between the two steps, leaving a complete ``.ckpt-*.json.tmp`` behind.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import stream_perceptron.state.stored as checkpoint_module


class _OsCrashingOnRename:
    """The ``os`` module as ``stored.py`` sees it, with a fatal ``replace``."""

    def __init__(self, at: int) -> None:
        self._at = at
        self._calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def replace(self, src: Any, dst: Any) -> None:
        self._calls += 1
        if self._calls == self._at:
            os.kill(os.getpid(), signal.SIGKILL)
        os.replace(src, dst)


def main() -> None:
    checkpoint_module.os = _OsCrashingOnRename(int(os.environ["FAULT_CRASH_AT_RENAME"]))  # type: ignore[assignment]
    from stream_perceptron.cli import main as cli

    cli(prog_name="stream-perceptron")


if __name__ == "__main__":
    main()
