"""Repeated log lines suppressed: at most one of a kind every so many seconds, with a count.

A worker runs for months; a broker that is away for an hour makes its client say the same
thing thousands of times. :class:`Throttle` lets the first line of a kind through, suppresses the
rest for ``every_s`` seconds, and tells how many it suppressed on the next line it lets through. A
kind that stops recurring (the broker is back) would keep its last count for good: its writer
asks :meth:`Throttle.overdue` for such counts now and then, and writes each with the last line
suppressed.

:func:`kind` is the key most lines want: the text with its numbers blanked, so that
"node 1: connection refused (try 7)" and "node 2: connection refused (try 8)" are one kind.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

# Repeated log lines / client errors of one kind: at most one per this many seconds.
EVERY_S = 60.0

# Kinds remembered before those past their interval are forgotten (a text with an id in hex,
# such as a group member's, is a kind of its own each time).
_MAX_KINDS = 1_000

_NUMBERS = re.compile(r"\d+")


def kind(text: str) -> str:
    """``text`` with every run of digits as ``#``.

    >>> kind("node 1 at 127.0.0.1:9092: error 111")
    'node # at #.#.#.#:#: error #'
    """
    return _NUMBERS.sub("#", text)


def suppressed(held: int) -> str:
    """The suffix that counts the lines suppressed since the last of their kind (or '')."""
    return f" ({held} similar suppressed)" if held else ""


class Throttle:
    """At most one message per key every ``every_s`` seconds; counts what it suppressed.

    >>> now = [0.0]
    >>> t = Throttle(60.0, clock=lambda: now[0])
    >>> for now[0] in (0.0, 1.0, 2.0, 61.0):
    ...     print(t.allow("k", f"line at {now[0]}"))
    0
    None
    None
    2
    >>> for now[0] in (62.0, 63.0):
    ...     t.allow("k", f"line at {now[0]}")
    >>> now[0] = 121.0
    >>> t.overdue()  # two suppressed since 61.0, and no line of their kind came since
    [('k', 'line at 63.0', 1)]
    """

    def __init__(self, every_s: float = EVERY_S, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._every_s = every_s
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._suppressed: dict[Hashable, int] = {}
        self._samples: dict[Hashable, Any] = {}  # the last line suppressed of each kind
        self._due_at = math.inf  # no suppressed count is past its interval before this
        self._lock = threading.Lock()
        self._forget_above = _MAX_KINDS

    def allow(self, key: Hashable, sample: Any = None) -> int | None:
        """None to drop the message, else how many of its kind were dropped since the last.
        ``sample`` is what :meth:`overdue` gives back if this is the last one dropped."""
        now = self._clock()
        with self._lock:
            if len(self._last) > self._forget_above:
                self._forget(now)
            last = self._last.get(key)
            if last is not None and now - last < self._every_s:
                held = self._suppressed[key] = self._suppressed.get(key, 0) + 1
                self._samples[key] = sample
                if held == 1:
                    self._due_at = min(self._due_at, last + self._every_s)
                return None
            self._last[key] = now
            self._samples.pop(key, None)
            return self._suppressed.pop(key, 0)

    def overdue(self, *, every: bool = False) -> list[tuple[Hashable, Any, int]]:
        """``(key, sample, others)`` for each kind with messages suppressed past its interval (any
        suppressed, with ``every``: at exit). ``sample`` is the last one suppressed, for its writer to write
        now, and ``others`` how many besides it were suppressed. The counts are taken, and the
        intervals start again now, as if ``sample`` had been let through. Cheap when nothing is
        due: the writer may ask at every line."""
        now = self._clock()
        with self._lock:
            if not every and now < self._due_at:
                return []
            due = [k for k in self._suppressed if every or now - self._last[k] >= self._every_s]
            out = [(k, self._samples.pop(k, None), self._suppressed.pop(k) - 1) for k in due]
            for k in due:
                self._last[k] = now
            self._due_at = min((self._last[k] + self._every_s for k in self._suppressed), default=math.inf)
        return out

    def _forget(self, now: float) -> None:
        """Drop the kinds last let through over ``every_s`` ago with nothing suppressed: their next
        line goes through anyway (those with a count wait for :meth:`overdue`)."""
        quiet = [k for k, t in self._last.items() if now - t >= self._every_s and k not in self._suppressed]
        for key in quiet:
            del self._last[key]
        self._forget_above = max(_MAX_KINDS, 2 * len(self._last))  # no scan per line in a flood
