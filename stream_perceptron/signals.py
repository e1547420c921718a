"""Stopping on a signal: SIGINT and SIGTERM set an event that a loop checks, instead of raising
inside whatever the main thread is doing.

A KeyboardInterrupt raised in the middle of a Kafka client's poll can leave the client's locks
held and hang its close, and SIGTERM's default ends the process without closing anything. Within
:func:`stopping_on_signals` both set an event: the loop ends after its current wait and closes
its clients. A person who presses Ctrl+C again is asking for more than that: a second SIGINT
calls ``again`` (by default: raise KeyboardInterrupt there, for a close that hangs anyway).
Every command that runs until it is stopped (``watch``, ``dashboard``, ``mixed --follow``,
``broker``) stops through it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a command (Ctrl+C, and a supervisor's stop)."""


def interrupt(signum: int) -> None:
    """Raise KeyboardInterrupt, as Python's own SIGINT handler does."""
    raise KeyboardInterrupt


@contextlib.contextmanager
def stopping_on_signals(
    stop: threading.Event | None = None, *, signums: Iterable[int] = STOPPING_SIGNALS,
    on_stop: Callable[[int], None] | None = None, again: Callable[[int], None] | None = interrupt,
) -> Iterator[threading.Event]:
    """Within it, each of ``signums`` sets ``stop`` (a new event when None; yielded) and then
    calls ``on_stop`` with the signal's number; a SIGINT that comes once ``stop`` is set calls
    ``again`` instead (None: it sets ``stop`` as the first did). The handlers that were there
    are put back after it. Off the main thread, where handlers cannot be set, it sets none.

    Both callables run in the signal handler, between two bytecodes of the main thread: they
    must not take a lock the main thread may hold (a logging handler's, say).

    >>> import os
    >>> with stopping_on_signals() as stop:
    ...     os.kill(os.getpid(), signal.SIGTERM)
    ...     stop.wait(5)
    True
    """
    stop = stop if stop is not None else threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    event = stop

    def handle(signum: int, frame: FrameType | None) -> None:
        if again is not None and signum == signal.SIGINT and event.is_set():
            again(signum)
            return
        event.set()
        if on_stop is not None:
            on_stop(signum)

    previous = {s: signal.getsignal(s) for s in signums}
    try:
        for s in previous:
            signal.signal(s, handle)
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)  # None: not set from Python


__all__ = ["STOPPING_SIGNALS", "interrupt", "stopping_on_signals"]
