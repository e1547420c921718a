"""The store of predictions waiting for late labels: its bounds (count, age by Kafka timestamps,
offset distance), what a label for a finished id is told, and an exact state round trip."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron.model.pending import (
    EXPIRED,
    JOINED,
    PendingEvent,
    PendingLabels,
    kept_features,
)


def event(offset: int, ts: int = -1, x: list[float] | None = None) -> PendingEvent:
    return PendingEvent(x or [float(offset)], 1 if offset % 2 else -1, offset / 8, offset, ts)


def feed(p: PendingLabels, rid: object, e: PendingEvent) -> int:
    return p.advance(e.offset, e.timestamp_ms) + p.add(rid, e)  # type: ignore[arg-type]


def test_the_count_bound_drops_the_oldest_as_expired():
    p = PendingLabels(max_entries=3)
    for o in range(5):
        feed(p, f"e{o}", event(o))
    assert len(p) == 3 and p.expiries == 2
    assert [rid in p for rid in ("e0", "e1", "e2", "e3", "e4")] == [False, False, True, True, True]
    assert p.take("e0", 5, -1) == (None, EXPIRED)
    assert p.gone("e0") == (EXPIRED, 3)  # dropped when the event at offset 3 came
    got, why = p.take("e2", 6, -1)
    assert why is None and got == event(2)


def test_age_is_measured_by_record_timestamps_and_stream_time_never_goes_back():
    p = PendingLabels(max_entries=100, ttl_ms=1_000)
    feed(p, "a", event(0, ts=10_000))
    feed(p, "b", event(1, ts=10_500))
    assert p.advance(2, 5_000) == 0 and p.stream_ms == 10_500  # an older timestamp: no step back
    assert p.advance(3, -1) == 0 and p.stream_ms == 10_500  # no timestamp
    assert p.advance(4, 11_000) == 0  # "a" is exactly 1,000 ms behind: not past the bound
    assert p.advance(5, 11_001) == 1 and "a" not in p and "b" in p
    assert p.take("a", 6, 11_001) == (None, EXPIRED)
    assert p.take("b", 7, 11_400)[0] == event(1, ts=10_500)
    assert p.delay_mean == 0.9  # 11,400 − 10,500 ms, the label's own timestamp minus the event's


def test_an_entry_past_the_ttl_behind_a_younger_one_is_refused_as_expired():
    p = PendingLabels(max_entries=100, ttl_ms=1_000)
    feed(p, "young", event(0, ts=5_000))
    feed(p, "old", event(1, ts=1_000))  # timestamps out of offset order: 4,000 ms behind at once
    assert p.advance(2, 5_000) == 0 and "old" in p  # it waits behind the oldest, "young"
    assert p.take("old", 3, 5_000) == (None, EXPIRED) and "old" not in p  # refused all the same
    assert p.expiries == 1
    assert p.take("young", 4, 5_500)[1] is None


def test_the_offset_distance_bound():
    p = PendingLabels(max_entries=100, max_offsets=10)
    feed(p, "a", event(0))
    feed(p, "b", event(5))
    assert p.advance(10, -1) == 0
    assert p.advance(11, -1) == 1 and "a" not in p
    assert p.take("b", 16, -1) == (None, EXPIRED)  # 11 behind: past the bound at the label itself
    assert p.expiries == 2


def test_a_repeated_id_replaces_the_older_event_which_counts_as_expired():
    p = PendingLabels(max_entries=10)
    feed(p, "a", event(0))
    assert feed(p, "a", event(3)) == 1 and p.expiries == 1 and len(p) == 1
    got, why = p.take("a", 4, -1)
    assert why is None and got.offset == 3
    assert p.take("a", 5, -1) == (None, JOINED) and p.gone("a") == (JOINED, 4)
    feed(p, "a", event(6))  # pending again: a label joins the new event
    assert p.gone("a") is None and p.take("a", 7, -1)[0].offset == 6
    assert p.take("zz", 8, -1) == (None, None)  # never seen


def test_ids_equal_as_numbers_are_one_id_but_a_string_is_not_a_number():
    p = PendingLabels(max_entries=10)
    feed(p, 7, event(0))
    feed(p, "7", event(1))
    assert p.take(7.0, 2, -1)[0].offset == 0
    assert p.take("7", 3, -1)[0].offset == 1


def test_zero_keeps_nothing_and_remembers_nothing():
    p = PendingLabels(max_entries=0, ttl_ms=5)
    assert feed(p, "a", event(0, ts=1)) == 0 and len(p) == 0
    assert p.take("a", 1, 2) == (None, None)


def test_kept_features_are_the_float64_the_model_sees_in_the_record_order():
    import numpy as np

    assert kept_features(np.array([1, 2.5])) == [1.0, 2.5]
    kept = kept_features({"z": 1, "a": -2})
    assert list(kept) == ["z", "a"] and all(type(v) is float for v in kept.values())


def test_a_smaller_bound_at_restore_drops_the_oldest_as_expired():
    p = PendingLabels(max_entries=5)
    for o in range(5):
        feed(p, o, event(o))
    q = PendingLabels(max_entries=2)
    q.set_state(json.loads(json.dumps(p.get_state())))
    assert len(q) == 2 and q.expiries == 3 and 3 in q and 4 in q


ops = st.lists(
    st.tuples(st.sampled_from(["event", "label", "plain"]), st.integers(0, 6), st.integers(-1, 3_000)),
    max_size=60,
)


def run(p: PendingLabels, steps: list[tuple[str, int, int]], start: int) -> list[object]:
    """Apply ``steps`` (from offset ``start``); returns what each label was told."""
    told: list[object] = []
    for k, (kind, rid, ts) in enumerate(steps):
        offset = start + k
        if kind == "event":
            feed(p, rid, PendingEvent({"f": float(rid), "g": ts / 7}, 1, ts / 3, offset, ts))
        elif kind == "label":
            got, why = p.take(rid, offset, ts)
            told.append(why if got is None else got)
        else:
            p.advance(offset, ts)
    return told


@settings(max_examples=200, deadline=None)
@given(ops, ops, st.integers(1, 6), st.sampled_from([None, 500, 2_000]), st.sampled_from([None, 8]))
def test_a_state_round_trip_through_json_replays_exactly(first, second, cap, ttl, distance):
    """Storing the state after ``first`` and going on from the restored copy is the same as
    going on uninterrupted: same answers to every label, same state, same counters."""
    whole = PendingLabels(cap, ttl, distance, delay_window=4)
    told_whole = run(whole, first, 0) + run(whole, second, len(first))
    part = PendingLabels(cap, ttl, distance, delay_window=4)
    told = run(part, first, 0)
    state = json.loads(json.dumps(part.get_state()))
    assert state == part.get_state()
    restored = PendingLabels(cap, ttl, distance, delay_window=4)
    restored.set_state(state)
    assert restored.get_state() == part.get_state()
    told += run(restored, second, len(first))
    assert told == told_whole
    assert restored.get_state() == whole.get_state()
    assert len(restored) <= cap
