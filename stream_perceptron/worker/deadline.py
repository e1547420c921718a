"""A bound on how long the worker's shutdown may take, and what it says when the bound is passed.

A shutdown publishes statistics, writes its checkpoint after flushing the outputs, commits, and
closes the clients. Against a broker that does not answer, each of those waits on retries: a
round of flush retries alone is 5 × ``request_timeout_ms`` plus backoff, about 2.5 minutes at
the default 30 s. An orchestrator ends such a wait with SIGKILL at the end of its grace period,
which loses nothing (the last checkpoint stands and the records after it are processed again),
but says nothing either. :class:`ShutdownDeadline` ends it first, and says so: once the shutdown
has taken ``seconds``, it calls ``on_expiry`` with what the shutdown was doing and how long it
had taken, from a thread of its own, while the main thread is still waiting.

It knows no Kafka and no model; the worker tells it the phase and decides what expiry does
(one ERROR line, then exiting the process as SIGKILL would). The worker bounds only a process
of its own (``stream-perceptron run``); run by another program, its deadline is ``inf``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class ShutdownDeadline:
    """Calls ``on_expiry(phase, elapsed_s, why)`` once, ``seconds`` after :meth:`arm`, unless
    :meth:`disarm` came first. ``seconds`` may be ``inf``: never.

    >>> seen = []
    >>> d = ShutdownDeadline(0.05, lambda phase, elapsed, why: seen.append((phase, why)))
    >>> d.arm("SIGTERM")
    >>> with d.during("closing the Kafka clients"):
    ...     time.sleep(0.3)
    >>> seen
    [('closing the Kafka clients', 'SIGTERM')]
    >>> d = ShutdownDeadline(0.05, lambda *a: seen.append(a))
    >>> d.arm("SIGTERM"); d.disarm(); time.sleep(0.2); len(seen)
    1
    """

    def __init__(self, seconds: float, on_expiry: Callable[[str, float, str], None]) -> None:
        if not seconds > 0:
            raise ValueError(f"a shutdown deadline must be positive, got {seconds}")
        self.seconds = seconds
        self._on_expiry = on_expiry
        self._phase = "finishing the batch in progress"
        self._why = ""
        self._armed_at: float | None = None
        self._timer: threading.Timer | None = None
        # Taken by the expiry and by disarm, never by arm: arm runs in signal handlers, which
        # interrupt the main thread wherever it is, disarm included.
        self._lock = threading.Lock()
        self._done = False

    @property
    def armed(self) -> bool:
        """Whether :meth:`arm` has run (and the deadline runs, or has run, out)."""
        return self._armed_at is not None

    def arm(self, why: str) -> None:
        """Start counting, from now; ``why`` names what began the shutdown. Later calls change
        nothing: the deadline counts from the first. Safe in a signal handler."""
        if self._armed_at is not None or self._done:
            return
        self._armed_at, self._why = time.monotonic(), why
        if math.isinf(self.seconds):
            return
        timer = threading.Timer(self.seconds, self._expire)
        timer.name, timer.daemon = "sp-shutdown-deadline", True
        self._timer = timer
        try:
            timer.start()
        except RuntimeError:  # no thread to be had: the grace period's SIGKILL still bounds it
            self._timer = None

    @contextmanager
    def during(self, what: str) -> Iterator[None]:
        """What the shutdown is doing while the block runs, for the line that reports an expiry;
        what it was doing before is put back after."""
        previous, self._phase = self._phase, what
        try:
            yield
        finally:
            self._phase = previous

    def disarm(self) -> None:
        """The shutdown finished: never expire (returns after an expiry in progress)."""
        with self._lock:
            self._done = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            assert self._armed_at is not None  # the timer starts in arm
            self._on_expiry(self._phase, time.monotonic() - self._armed_at, self._why)


class Shutdown:
    """The worker's stop: asked (by a signal, :meth:`ask`, or outputs given up), begun (the
    shutdown's statistics record and checkpoint run), and how it ended; bounded by ``deadline``.
    Safe to ask from any thread and from a signal handler."""

    def __init__(self, deadline: ShutdownDeadline) -> None:
        self.deadline = deadline
        self._asked = threading.Event()
        self.begun = False
        """The shutdown has begun: its checkpoint flushes in full."""
        self.failed = False
        """The shutdown's checkpoint failed: the revocation the clients' close runs then does not
        try again."""

    @property
    def event(self) -> threading.Event:
        """Set once a stop is asked (for a signal handler to set)."""
        return self._asked

    def ask(self) -> None:
        """Ask the loop to finish its batch, checkpoint and return."""
        self._asked.set()

    @property
    def asked(self) -> bool:
        return self._asked.is_set()

    @property
    def pending(self) -> bool:
        """A stop was asked and the shutdown has not begun. A flush in progress then gives up:
        the shutdown's checkpoint flushes again at once, and against a broker that does not
        answer each round of retries costs 5 × request_timeout_ms and more."""
        return self._asked.is_set() and not self.begun

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking when a stop is asked; returns whether one was."""
        return self._asked.wait(seconds)
