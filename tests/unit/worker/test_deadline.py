"""The shutdown deadline: once, from the first arm, never after a disarm, never at inf."""

from __future__ import annotations

import math
import threading
import time

import pytest

from stream_perceptron.worker.deadline import ShutdownDeadline


class _Expiries:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float, str]] = []
        self.event = threading.Event()

    def __call__(self, phase: str, elapsed: float, why: str) -> None:
        self.calls.append((phase, elapsed, why))
        self.event.set()


def test_it_expires_once_with_the_phase_and_what_began_it():
    seen = _Expiries()
    d = ShutdownDeadline(0.2, seen)
    started = time.monotonic()
    d.arm("SIGTERM")
    with d.during("writing the shutdown checkpoint"):
        assert seen.event.wait(5)
    waited = time.monotonic() - started
    time.sleep(0.3)
    assert len(seen.calls) == 1
    phase, elapsed, why = seen.calls[0]
    assert (phase, why) == ("writing the shutdown checkpoint", "SIGTERM")
    assert 0.2 <= elapsed <= waited + 0.05


def test_it_counts_from_the_first_arm():
    seen = _Expiries()
    d = ShutdownDeadline(0.3, seen)
    d.arm("SIGTERM")
    timer = d._timer
    d.arm("the shutdown began")  # the shutdown starts after the signal: no new count
    assert d._timer is timer
    assert seen.event.wait(5)
    assert [why for _, _, why in seen.calls] == ["SIGTERM"]


def test_a_shutdown_done_in_time_never_expires():
    seen = _Expiries()
    d = ShutdownDeadline(0.1, seen)
    d.arm("SIGTERM")
    d.disarm()
    assert not seen.event.wait(0.4)
    d.arm("SIGTERM")  # a signal after the shutdown finished starts nothing
    assert not seen.event.wait(0.3)


def test_an_infinite_deadline_starts_no_timer():
    seen = _Expiries()
    d = ShutdownDeadline(math.inf, seen)
    d.arm("SIGTERM")
    assert d.armed and d._timer is None
    d.disarm()
    assert seen.calls == []


def test_a_disarm_during_an_expiry_waits_for_it():
    entered, release = threading.Event(), threading.Event()

    def slow_expiry(phase: str, elapsed: float, why: str) -> None:
        entered.set()
        release.wait(5)

    d = ShutdownDeadline(0.05, slow_expiry)
    d.arm("SIGTERM")
    assert entered.wait(5)
    disarmed = threading.Event()
    t = threading.Thread(target=lambda: (d.disarm(), disarmed.set()))
    t.start()
    assert not disarmed.wait(0.2)  # the expiry (in the worker: exiting the process) goes first
    release.set()
    t.join(5)
    assert disarmed.is_set()


@pytest.mark.parametrize("seconds", [0, -1.0, math.nan])
def test_a_deadline_must_be_positive(seconds):
    with pytest.raises(ValueError, match="positive"):
        ShutdownDeadline(seconds, lambda *a: None)
