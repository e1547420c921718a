"""Stopping on a signal: SIGINT and SIGTERM set the event and nothing is raised; a second Ctrl+C
is ``again``'s (by default KeyboardInterrupt); the handlers that were there come back; off the
main thread nothing is set."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from stream_perceptron.signals import stopping_on_signals


def _send(signum: int, stop: threading.Event | None = None) -> None:
    """Send ``signum`` to this process and let its handler run (it runs in the main thread,
    between two bytecodes)."""
    os.kill(os.getpid(), signum)
    if stop is not None:
        assert stop.wait(5)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_sets_the_event_and_the_previous_handler_comes_back(signum):
    before = signal.getsignal(signum)
    stopped: list[int] = []
    with stopping_on_signals(on_stop=stopped.append) as stop:
        assert not stop.is_set()
        _send(signum, stop)
    assert stopped == [signum]
    assert signal.getsignal(signum) is before


def test_a_second_ctrl_c_raises_keyboard_interrupt_and_a_second_sigterm_does_not():
    with pytest.raises(KeyboardInterrupt), stopping_on_signals() as stop:
        _send(signal.SIGTERM, stop)
        _send(signal.SIGTERM)  # a supervisor repeating itself: still only a stop
        _send(signal.SIGINT)
        for _ in range(100):  # the handler runs between two bytecodes of this loop
            threading.Event().wait(0.01)
    assert stop.is_set()


def test_again_replaces_what_a_second_ctrl_c_does():
    again: list[int] = []
    with stopping_on_signals(again=again.append) as stop:
        _send(signal.SIGINT, stop)
        _send(signal.SIGINT)
        for _ in range(100):
            if again:
                break
            threading.Event().wait(0.01)
    assert again == [signal.SIGINT]


def test_the_event_given_is_the_one_set():
    mine = threading.Event()
    with stopping_on_signals(mine, signums=[signal.SIGTERM]) as stop:
        assert stop is mine
        _send(signal.SIGTERM, mine)


def test_off_the_main_thread_no_handler_is_set():
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def run() -> None:
        with stopping_on_signals() as stop:
            seen.append(signal.getsignal(signal.SIGTERM))
            seen.append(stop)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(5)
    assert seen[0] is before and isinstance(seen[1], threading.Event)
