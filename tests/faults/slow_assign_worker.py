"""``python -m tests.faults.slow_assign_worker run``: the worker CLI whose first partition takes
``FAULT_SLOW_ASSIGN_S`` seconds to open in the assignment callback (a slow restore, a loaded
machine): with kafka-python, whose callback holds the heartbeats, past the group session the
partition is lost and assigned again."""

from __future__ import annotations

import os
import time
from typing import Any

from stream_perceptron.worker.assignment import Partitions


def main() -> None:
    delay = float(os.environ["FAULT_SLOW_ASSIGN_S"])
    take, taken = Partitions.take, []

    def slow_take(self: Partitions, topic: str, part: int) -> Any:
        if not taken:
            taken.append((topic, part))
            time.sleep(delay)
        return take(self, topic, part)

    Partitions.take = slow_take  # type: ignore[method-assign]
    from stream_perceptron.cli import main as cli

    cli(prog_name="stream-perceptron")


if __name__ == "__main__":
    main()
