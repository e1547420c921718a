"""The loop's small bookkeeping objects: when a checkpoint or a statistics record falls due
(:class:`Every`), and what the worker has done since it started (:class:`Counters`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Every:
    """A policy that falls due every ``examples`` examples or ``seconds`` seconds (monotonic)."""

    examples: int
    seconds: float
    clock: Callable[[], float] = time.monotonic
    count: int = 0
    since: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.since = self.clock()

    def tick(self, n: int) -> None:
        self.count += n

    def due(self) -> bool:
        return self.count >= self.examples or self.clock() - self.since >= self.seconds

    def reset(self) -> None:
        self.count, self.since = 0, self.clock()


@dataclass
class Counters:
    """What the worker has done since it started (dead letters are also kept in checkpoints)."""

    records: int = 0
    predictions: int = 0
    dead_letters: int = 0
    checkpoints: int = 0
    checkpoint_failures: int = 0
    rebalances: int = 0
