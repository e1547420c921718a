"""The throttle of repeated log lines: one of a kind per interval, a count, bounded memory."""

from __future__ import annotations

from stream_perceptron import throttle
from stream_perceptron.throttle import Throttle, kind, suppressed


def test_one_line_of_a_kind_per_interval_and_the_count_of_those_held() -> None:
    now = [0.0]
    t = Throttle(60.0, clock=lambda: now[0])
    assert t.allow("a") == 0 and t.allow("b") == 0
    for at in (10.0, 20.0, 59.9):
        now[0] = at
        assert t.allow("a") is None
    now[0] = 60.0
    assert t.allow("a") == 3 and t.allow("b") == 0
    assert suppressed(3) == " (3 similar suppressed)" and suppressed(0) == ""


def test_kinds_differ_only_in_their_numbers() -> None:
    assert kind("node 1 refused (try 7)") == kind("node 22 refused (try 8)") == "node # refused (try #)"
    assert kind("member a3f-1 left") != kind("member b7c-1 left")


def test_kinds_past_their_interval_are_forgotten_once_there_are_many(monkeypatch) -> None:
    monkeypatch.setattr(throttle, "_MAX_KINDS", 10)
    now = [0.0]
    t = Throttle(60.0, clock=lambda: now[0])
    for k in range(10):
        assert t.allow(k) == 0
    assert t.allow(0) is None  # held, within its interval
    now[0] = 61.0
    for k in range(10, 15):  # new kinds past the bound: the old ones are forgotten
        assert t.allow(k) == 0
    assert len(t._last) <= 10
    assert t.allow(3) == 0  # forgotten, so let through again
    now[0] = 62.0
    for k in range(100, 130):  # a flood of new kinds within one interval: all kept, all let through
        assert t.allow(k) == 0
    assert all(t.allow(k) is None for k in range(100, 130))


def test_a_count_whose_kind_stopped_recurring_is_given_back_once_with_its_last_line() -> None:
    now = [0.0]
    t = Throttle(60.0, clock=lambda: now[0])
    assert t.allow("a", "a at 0") == 0 and t.allow("b", "b at 0") == 0
    for at in (5.0, 6.0):
        now[0] = at
        assert t.allow("a", f"a at {at}") is None
    assert t.overdue() == []  # within the minute: the next line of its kind may still carry it
    now[0] = 60.0
    assert t.overdue() == [("a", "a at 6.0", 1)]  # the last held, to write, and 1 besides; b: none
    assert t.overdue() == []  # taken
    now[0] = 61.0
    assert t.allow("a", "a at 61") is None  # the line written at 60 s counts as one let through
    assert t.overdue(every=True) == [("a", "a at 61", 0)]  # at exit, whatever the interval


def test_a_kind_with_a_count_is_never_forgotten_before_its_count_is_written(monkeypatch) -> None:
    monkeypatch.setattr(throttle, "_MAX_KINDS", 3)
    now = [0.0]
    t = Throttle(60.0, clock=lambda: now[0])
    for k in range(4):
        assert t.allow(k, k) == 0
    assert t.allow(0, "0 again") is None
    now[0] = 61.0
    for k in range(10, 20):  # past the bound: the kinds with nothing held are forgotten
        assert t.allow(k, k) == 0
    assert 1 not in t._last and 0 in t._last
    assert t.overdue() == [(0, "0 again", 0)]
