"""The per-class part of a K-class statistics record as watch and the dashboard keep it: the most
labeled classes in row order, the others summed so rows and columns keep their totals, class
names cleaned and bounded, and forged records (odd names, junk counts, ragged matrices, 10⁵
classes) shown as far as they can be, never trusted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_perceptron.commands.class_view import CLASSES_READ, CLASSES_SHOWN, class_name, class_view
from stream_perceptron.commands.stats_view import StatsView
from tests.unit.commands.test_watch_render import NOW, class_record, partition_record


def test_a_binary_record_has_no_class_view_and_its_series_json_is_as_before():
    view = StatsView(clock=lambda: NOW)
    view.update([partition_record(0, 1_000, 40, 30)])
    assert view.row("0").classes is None
    assert set(view.snapshot()["series"][0]) == {"id", "label", "topic", "partition", "model", "latest",
                                                 "drifts", "last_drift_offset"}


def test_the_newest_record_of_a_series_gives_its_classes():
    view = StatsView(clock=lambda: NOW)
    view.update([class_record(0, ["a", "b", "c"], [[1, 0, 0], [0, 1, 0], [0, 0, 1]], ts=NOW - 1),
                 class_record(0, ["a", "b"], [[5, 0], [0, 5]], ts=NOW - 5)])  # older: not shown
    classes = view.row("0").classes
    assert classes is not None and classes.count == 3


@given(st.integers(1, 25).flatmap(lambda k: st.tuples(
    st.lists(st.lists(st.integers(0, 50), min_size=k, max_size=k), min_size=k, max_size=k),
    st.integers(0, 12))))
def test_rows_and_columns_keep_their_totals_whichever_classes_are_shown(case: tuple[list[list[int]], int]):
    confusion, shown = case
    confusion[0][0] += 1  # a labeled example at least
    k = len(confusion)
    view = class_view(class_record(0, [f"c{i}" for i in range(k)], confusion), shown=shown)
    assert view is not None and view.confusion is not None
    assert len(view.shown) == min(k, shown) and view.others == k - len(view.shown)
    rows = view.rows
    assert len(view.confusion) == len(rows) and all(len(line) == len(rows) for line in view.confusion)
    for row, line in zip(rows, view.confusion, strict=True):
        assert sum(c or 0 for c in line) == row.labeled
    for j, row in enumerate(rows):
        assert sum(line[j] or 0 for line in view.confusion) == row.predicted
    total = sum(map(sum, confusion))
    assert sum(r.labeled or 0 for r in rows) == total
    assert sum(r.predicted_share or 0 for r in rows) == pytest.approx(1.0 if total else 0.0)
    # the classes shown are the most labeled (ties: the first rows), in row order
    labeled = [sum(line) for line in confusion]
    order = sorted(range(k), key=lambda i: (-labeled[i], i))[:shown]
    assert [r.name for r in view.shown] == [f"c{i}" for i in sorted(order)]


@pytest.mark.parametrize(("name", "shown"), [
    ("cat", "cat"), (7, "7"), (-(2**63), str(-(2**63))), ("", ""),
    ("a\x1b]0;pwned\x07b\x1b[2J\u202ec", "abc"), ("é" * 150, "é" * 100),
    (True, None), (3.0, None), (None, None), ([1], None), ({"a": 1}, None), (2**63, None),
])
def test_a_class_name_is_shown_cleaned_and_bounded_and_anything_else_as_unknown(name: Any, shown: str | None):
    assert class_name(name) == shown


def test_an_integer_name_too_long_to_write_is_unknown():
    assert class_name(10**5000) is None  # str() of it would raise


def test_junk_counts_and_a_ragged_matrix_are_shown_as_unknown():
    rec = {"seen": 9, "mistakes": 1, "classes": ["a", "b", "c", "d"],
           "per_class": [{"labeled": True, "mistakes": -1, "predicted": 2.0}, "not a dict",
                         {"labeled": 4, "mistakes": "1", "predicted": 3}],  # d has none
           "confusion": [[1, "x", None], "not a row", [False, 2, 2, 9, 9]]}
    view = class_view(rec)
    assert view is not None and view.count == 4 and view.other is None
    assert [(r.name, r.labeled, r.mistakes, r.predicted) for r in view.shown] == [
        ("a", None, None, None), ("b", None, None, None), ("c", 4, None, 3), ("d", None, None, None)]
    assert [(r.mistake_rate, r.predicted_share) for r in view.shown][2] == (None, 1.0)
    assert view.confusion == [[1, None, None, None], [None] * 4, [None, 2, 2, 9], [None] * 4]
    assert class_view({**rec, "confusion": "no"}).confusion is None  # type: ignore[union-attr]
    odd = class_view({"classes": "not a list", "per_class": 5})
    assert odd is not None and (odd.count, odd.shown, odd.other) == (0, [], None)


def test_a_forged_record_of_a_hundred_thousand_classes_is_read_to_a_bound_and_shown_in_a_few_lines():
    k = 100_000
    per_class = [{"labeled": 1, "mistakes": 0, "predicted": 1} for _ in range(k)]
    per_class[50_000] = {"labeled": 10**6, "mistakes": 0, "predicted": 1}  # past what is read
    rec = {"seen": k, "mistakes": 0, "classes": [f"c{i}" for i in range(k)], "per_class": per_class,
           "confusion": [[1]] * k}
    view = class_view(rec)
    assert view is not None and view.count == k and view.others == k - CLASSES_SHOWN
    assert [r.name for r in view.shown] == [f"c{i}" for i in range(CLASSES_SHOWN)]
    assert view.other is not None and view.other.labeled == CLASSES_READ - CLASSES_SHOWN  # of those read
    state = StatsView()
    state.update([{**rec, "topic": "in", "partition": 0}])
    assert len(json.dumps(state.snapshot(), allow_nan=False)) < 5_000
