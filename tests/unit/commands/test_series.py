"""Statistics records sorted into series, and the group's figures: sums over the newest record of
each input partition, E_n = Σ mistakes / Σ labeled."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_perceptron.commands.series import Group, Series, group_figures, labels, partition_of

MODEL_A, MODEL_B = "aaaaaaaa" + "0" * 24, "bbbbbbbb" + "0" * 24


def rec(partition: int | None, seen: int, labeled: int, mistakes: int, *, ts: float | None = None,
        topic: str = "in", **extra: Any) -> dict[str, Any]:
    """A statistics record of one input partition (``partition`` None: an older worker's)."""
    out: dict[str, Any] = {"seen": seen, "labeled": labeled, "mistakes": mistakes,
                           "mistake_rate": mistakes / labeled if labeled else None, "client_id": "w1"}
    if partition is not None:
        out.update(topic=topic, partition=partition)
    if ts is not None:
        out["ts"] = ts
    out.update(extra)
    return out


def test_the_group_rate_is_total_mistakes_over_total_labeled_not_the_mean_of_the_rates():
    group = Group()
    for r in [rec(0, 1000, 1000, 100, ts=1), rec(1, 10, 10, 5, ts=1), rec(2, 500, 400, 0, ts=1)]:
        group.add(r)
    g = group.figures()
    assert g is not None
    assert (g.partitions, g.seen, g.labeled, g.mistakes) == (3, 1510, 1410, 105)
    assert g.mistake_rate == 105 / 1410  # 0.0745; the mean of the three rates would be 0.2
    assert g.mistake_rate != pytest.approx((0.1 + 0.5 + 0.0) / 3)


def test_a_partition_counts_once_with_its_newest_record_in_any_arrival_order():
    first, second, third = rec(0, 100, 100, 10, ts=1), rec(0, 200, 200, 12, ts=2), rec(0, 300, 300, 13, ts=3)
    other = rec(1, 50, 50, 5, ts=2)
    orders = [(first, second, third, other), (third, first, other, second), (other, second, third, first)]
    for order in orders:
        group = Group()
        taken = [group.add(r) for r in order]
        g = group.figures()
        assert g is not None and (g.seen, g.labeled, g.mistakes) == (350, 350, 18), order
        assert taken[order.index(third)] is True
        assert group.newest() == {("in", 0): third, ("in", 1): other}


def test_a_partition_whose_state_began_again_counts_with_its_new_model_only():
    group = Group()
    group.add(rec(0, 9000, 9000, 300, ts=5, model_id=MODEL_A))
    group.add(rec(0, 100, 100, 40, ts=9, model_id=MODEL_B))  # the same partition, a new model
    group.add(rec(1, 1000, 1000, 10, ts=9, model_id=MODEL_A))
    g = group.figures()
    assert g is not None and (g.partitions, g.seen, g.mistakes) == (2, 1100, 50)


def test_records_of_older_workers_are_not_summed_and_partitions_of_two_topics_are():
    group = Group()
    assert not group.add(rec(None, 10**6, 10**6, 10**4, ts=1))  # no partition: not the group's
    assert group.figures() is None
    group.add(rec(0, 10, 10, 1, ts=1, topic="a"))
    group.add(rec(0, 30, 20, 3, ts=1, topic="b"))
    g = group.figures()
    assert g is not None and (g.partitions, g.seen, g.labeled, g.mistakes) == (2, 40, 30, 4)


def test_window_throughput_lag_and_dead_letters_are_summed_over_what_is_known():
    newest = [
        rec(0, 100, 100, 10, window_labeled=50, window_mistakes=5, examples_per_s=1000.5,
            lag={"in:0": 7}, dead_letters=2),
        rec(1, 100, 100, 10, window_labeled=150, window_mistakes=1, examples_per_s=None,
            lag={}, dead_letters=1),
        rec(2, 100, 100, 10, window_labeled=0, window_mistakes=0, examples_per_s=2000.25,
            lag={"in:2": 3}),
    ]
    g = group_figures(newest)
    assert g is not None
    assert (g.window_labeled, g.window_mistakes, g.window_mistake_rate) == (200, 6, 6 / 200)
    assert g.examples_per_s == 3000.75 and g.lag == 10 and g.dead_letters == 3
    g = group_figures([rec(0, 5, 0, 0)])  # unlabeled so far, nothing known
    assert g is not None and g.mistake_rate is None and g.window_mistake_rate is None
    assert g.examples_per_s is None and g.lag is None
    assert group_figures([]) is None


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10_000), st.integers(0, 100),
                          st.floats(0, 1000, allow_nan=False)), min_size=1, max_size=60))
def test_the_group_equals_the_sums_over_the_record_with_the_greatest_ts_of_each_partition(rows):
    records = []
    for part, labeled, mistakes, ts in rows:
        records.append(rec(part, labeled + 3, labeled, min(mistakes, labeled), ts=ts))
    group = Group()
    for r in records:
        group.add(r)
    newest: dict[int, dict[str, Any]] = {}
    for r in records:  # ties: the later arrival, as Group takes it
        if r["partition"] not in newest or r["ts"] >= newest[r["partition"]]["ts"]:
            newest[r["partition"]] = r
    g = group.figures()
    assert g is not None and g.partitions == len(newest)
    assert g.seen == sum(r["seen"] for r in newest.values())
    assert g.labeled == sum(r["labeled"] for r in newest.values())
    assert g.mistakes == sum(r["mistakes"] for r in newest.values())
    labeled = sum(r["labeled"] for r in newest.values())
    assert g.mistake_rate == (g.mistakes / labeled if labeled else None)


def test_series_keys_and_labels():
    a0, a1 = Series.of(rec(0, 1, 1, 0, model_id=MODEL_A)), Series.of(rec(1, 1, 1, 0, model_id=MODEL_A))
    old = Series.of(rec(None, 1, 1, 0, model_id=MODEL_B))
    assert (a0.input_partition, old.input_partition) == (("in", 0), None)
    assert sorted([old, a1, a0]) == [a0, a1, old]  # partitions first, then older workers
    assert labels([old, a1, a0]) == {a0: "0", a1: "1", old: "w1 · bbbbbbbb"}
    b0 = Series.of(rec(0, 1, 1, 0, model_id=MODEL_B))
    x3 = Series.of(rec(3, 1, 1, 0, topic="x"))
    assert labels([a0, b0, x3]) == {a0: "in[0] · aaaaaaaa", b0: "in[0] · bbbbbbbb", x3: "x[3]"}
    assert partition_of({"topic": "in", "partition": "0"}) is None  # a partition is a number


def test_a_shuffled_topic_gives_the_same_group():
    records = [rec(p, 100 * i, 100 * i, 7 * i + p, ts=float(i)) for i in range(1, 30) for p in range(3)]
    expected = group_figures([records[-3], records[-2], records[-1]])
    rng = random.Random(4)
    for _ in range(5):
        rng.shuffle(records)
        group = Group()
        for r in records:
            group.add(r)
        assert group.figures() == expected
