"""watch's table without a broker (the statistics view drawn by StatsTable): sparklines, a row per
input partition and the group's row, older workers' records, bounded history."""

from __future__ import annotations

import io
import json
import math
import re
from typing import Any

import pytest
from rich.console import Console

from stream_perceptron.commands.stats_view import StatsView, clean_text
from stream_perceptron.commands.watch import (
    SPARK_CHARS,
    StatsTable,
    is_stats_record,
    json_lines,
    plain_lines,
    sparkline,
)

NOW = 1_700_000_000.0


def stats_record(client_id: str, seen: int, mistakes: int, window_rate: float | None, *, ts: float = NOW,
                 **extra: Any) -> dict[str, Any]:
    """A statistics record shaped like an older worker's (README, "Statistics"): no partition."""
    rec: dict[str, Any] = {
        "seen": seen, "labeled": seen, "mistakes": mistakes, "updates": mistakes,
        "mistake_rate": mistakes / seen, "ewma_mistake_rate": 0.0123,
        "window": 1000, "window_labeled": 1000,
        "window_mistakes": None if window_rate is None else round(window_rate * 1000),
        "window_mistake_rate": window_rate, "margin_min": -0.0042, "margin_mean": 0.0871,
        "R": 1.73205, "R_all": 2.44949, "gamma": None, "bound": None, "theta_norm": 14.0357,
        "intercept": -2.0, "examples_per_s": 48123.4, "dead_letters": 3,
        "offsets": {"examples": {"0": seen}}, "ts": ts, "uptime_s": 12.5, "client_id": client_id,
    }
    rec.update(extra)
    return rec


def partition_record(partition: int, seen: int, mistakes: int, window_mistakes: int, *, ts: float = NOW,
                     client_id: str = "w1", **extra: Any) -> dict[str, Any]:
    """A statistics record of one input partition, as a worker publishes it now."""
    rec = stats_record(client_id, seen, mistakes, window_mistakes / 1000, ts=ts,
                       window_mistakes=window_mistakes, topic="examples", partition=partition,
                       model_id=f"{partition}" * 32, offsets={"examples": {str(partition): seen}},
                       lag={f"examples:{partition}": 10 + partition},
                       examples_per_s=1000.0 * (partition + 1), dead_letters=partition)
    rec.update(extra)
    return rec


def screen(view: StatsView, width: int = 120) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(StatsTable().render(view.frame()))
    return console.export_text()


def rows(view: StatsView) -> list[str]:
    """The label of each series seen so far, in the table's order (partitions first)."""
    return [row.label for row in view.frame().rows]


# ------------------------------------------------------------------- sparkline


def test_sparkline_empty_and_nonpositive_width():
    assert sparkline([], 5) == " " * 5
    assert sparkline([1.0, 2.0], 0) == ""
    assert sparkline([1.0, 2.0], -3) == ""


def test_sparkline_spans_the_eight_levels():
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8) == SPARK_CHARS
    assert sparkline([7, 0], 2) == "█▁"


def test_sparkline_constant_series_sits_on_the_lowest_level():
    assert sparkline([0.25] * 6, 6) == "▁" * 6
    assert sparkline([0.0] * 3, 3, lo=0.0) == "▁▁▁"
    # with an explicit floor a constant non-zero rate is at the top of its own scale
    assert sparkline([0.3] * 3, 3, lo=0.0) == "███"


def test_sparkline_none_and_nan_are_gaps():
    assert sparkline([None, None], 4) == " " * 4
    line = sparkline([0.0, None, 1.0, math.nan, 0.5], 5)
    assert line[1] == " " and line[3] == " "
    assert line[0] == "▁" and line[2] == "█"


def test_sparkline_is_exactly_width_padded_on_the_left():
    line = sparkline([1.0, 2.0, 3.0], 10)
    assert len(line) == 10
    assert line == "       ▁▅█"


def test_sparkline_averages_long_series_into_width_buckets():
    values = [0.0] * 50 + [1.0] * 50
    line = sparkline(values, 10)
    assert len(line) == 10
    assert line == "▁" * 5 + "█" * 5
    # a bucket of gaps only stays a gap
    assert sparkline([None] * 10 + [1.0] * 10, 2, lo=0.0) == " █"


def test_sparkline_clamps_to_the_given_scale():
    assert sparkline([-1.0, 0.5, 2.0], 3, lo=0.0, hi=1.0) == "▁▅█"


# ------------------------------------------------------------------- the table


def cells(text: str, label: str) -> list[str]:
    """The cells of the table's row ``label`` (cells are at least two spaces apart)."""
    for line in text.splitlines():
        parts = [c for c in re.split(r"\s{2,}", line.strip("│ ")) if c]
        if parts and parts[0] == label:
            return parts
    raise AssertionError(f"no row {label!r} in:\n{text}")


def test_an_empty_table_says_it_is_waiting():
    text = screen(StatsView(clock=lambda: NOW))
    assert "waiting for statistics records" in text


def test_a_row_per_partition_and_the_group_row_sums_them():
    view = StatsView(clock=lambda: NOW)
    view.update([
        partition_record(0, 10_000, 170, 68, ts=NOW - 5),
        partition_record(1, 9_000, 14, 0, ts=NOW - 2, gamma=0.0322085, bound=1927.89),
        partition_record(2, 1_000, 300, 100, ts=NOW - 3, client_id="w2"),
        partition_record(0, 12_000, 180, 20, ts=NOW - 1),  # partition 0's newer record
    ])
    assert rows(view) == ["0", "1", "2"]
    group = view.frame().group
    assert group is not None
    assert (group.partitions, group.seen, group.labeled, group.mistakes) == (3, 22_000, 22_000, 494)
    assert group.mistake_rate == 494 / 22_000
    text = screen(view)
    # labeled, mistakes, E_n, window, EWMA, margin, R, γ, bound, ex/s, lag
    assert cells(text, "0")[1:12] == ["12,000", "180", "0.0150", "0.0200", "0.0123", "-0.0042", "1.732",
                                      "n/a", "n/a", "1,000", "10"]
    assert cells(text, "1")[1:12] == ["9,000", "14", "0.0016", "0.0000", "0.0123", "-0.0042", "1.732",
                                      "0.0322", "1,928", "2,000", "11"]
    assert cells(text, "2")[1:4] == ["1,000", "300", "0.3000"]
    # E_n over all the labeled examples, the window pooled (120/3000), throughput and lag summed
    assert cells(text, "group (3)")[1:7] == ["22,000", "494", "0.0225", "0.0400", "6,000", "33"]
    assert "input topic examples; partitions by the worker of their newest record: w1 0, 1; w2 2" in text
    assert "22,000 seen, 3 dead letters" in text
    assert "newest record 1.0 s old" in text


def test_the_latest_record_wins_by_timestamp_not_arrival():
    view = StatsView(clock=lambda: NOW)
    view.update([partition_record(0, 2000, 20, 10, ts=NOW - 1),
                 partition_record(0, 1000, 10, 20, ts=NOW - 9)])
    assert view.row("0").latest["seen"] == 2000
    assert view.row("0").rates == [0.01, 0.02]  # the history keeps arrival order
    group = view.frame().group
    assert group is not None and group.seen == 2000  # the older record did not replace it


def test_a_partition_with_two_models_has_two_rows_and_counts_once_in_the_group():
    view = StatsView(clock=lambda: NOW)
    view.update([
        partition_record(0, 9000, 90, 10, ts=NOW - 3, model_id="a" * 32),
        partition_record(1, 1000, 10, 10, ts=NOW - 3),
        partition_record(0, 500, 50, 10, ts=NOW - 1, model_id="b" * 32),  # its state began again
    ])
    assert rows(view) == ["0 · aaaaaaaa", "0 · bbbbbbbb", "1"]
    group = view.frame().group
    assert group is not None and (group.partitions, group.seen, group.mistakes) == (2, 1500, 60)
    assert cells(screen(view, width=160), "group (2)")[1:3] == ["1,500", "60"]


def test_records_of_older_workers_are_rows_of_their_own_outside_the_group():
    a, b = "3f2a9c1d" + "a" * 24, "77e0b512" + "b" * 24
    view = StatsView(clock=lambda: NOW)
    view.update([
        stats_record("stream-perceptron", 1000, 40, 0.04, ts=NOW - 3, model_id=a),
        stats_record("stream-perceptron", 9000, 90, 0.01, ts=NOW - 2, model_id=b),
        stats_record("stream-perceptron", 2000, 50, 0.03, ts=NOW - 1, model_id=a),  # a restarted
    ])
    assert rows(view) == ["stream-perceptron · 3f2a9c1d", "stream-perceptron · 77e0b512"]
    assert view.row("stream-perceptron · 3f2a9c1d").latest["seen"] == 2000
    assert view.row("stream-perceptron · 3f2a9c1d").rates == [0.04, 0.03]  # one series
    assert view.frame().group is None
    text = screen(view, width=160)
    assert cells(text, "stream-perceptron · 3f2a9c1d")[1:4] == ["2,000", "50", "0.0250"]
    assert cells(text, "stream-perceptron · 77e0b512")[1:4] == ["9,000", "90", "0.0100"]
    assert "group" not in text

    view.update([partition_record(0, 100, 5, 5)])  # the workers were upgraded
    group = view.frame().group
    assert group is not None and (group.partitions, group.seen) == (1, 100)
    text = screen(view, width=160)
    assert cells(text, "group (1)")[1:3] == ["100", "5"]
    assert "the rows of older workers (no partition in their records) are not in the group" in text


def test_a_partition_silent_for_over_a_minute_is_named():
    view = StatsView(clock=lambda: NOW)
    view.update([partition_record(0, 1000, 10, 1, ts=NOW - 2),
                 partition_record(1, 1000, 10, 1, ts=NOW - 125)])
    text = screen(view, width=160)
    assert "newest record 2.0 s old; nothing for over 60 s from: 1 (2 min 5 s)" in text


def test_history_is_bounded_and_the_sparklines_show_it():
    view = StatsView(history=10, clock=lambda: NOW)
    rates = [i / 100 for i in range(25)]
    view.update(partition_record(0, 1000 * (i + 1), i, round(r * 1000), ts=NOW - 25 + i)
                for i, r in enumerate(rates))
    assert view.row("0").rates == rates[-10:]
    assert view.frame().group_history == rates[-10:]  # one partition: the group's window is its window
    assert view.records == 25
    text = screen(view)
    line = sparkline(rates[-10:], StatsTable().spark_width, lo=0.0, hi=0.24)  # one scale, up to the top kept
    assert cells(text, "0")[-1] == cells(text, "group (1)")[-1] == line.strip()
    assert "0 – 0.240" in text  # the scale, in the header


def test_the_sparklines_share_one_scale():
    view = StatsView(clock=lambda: NOW)
    view.update([partition_record(0, 1000, 10, 100, ts=NOW - 2),
                 partition_record(1, 1000, 10, 50, ts=NOW - 2),
                 partition_record(0, 2000, 20, 100, ts=NOW - 1),
                 partition_record(1, 2000, 20, 50, ts=NOW - 1)])
    text = screen(view)
    assert cells(text, "0")[-1] == "██" and cells(text, "1")[-1] == "▅▅"  # 0.05 is half of 0.1
    assert "0 – 0.100" in text


def test_records_that_are_not_statistics_are_skipped():
    view = StatsView(clock=lambda: NOW)
    view.update([{"x": [1.0], "y": 1}, stats_record("w", 10, 1, None)])  # type: ignore[list-item]
    assert rows(view) == ["w"] and view.skipped == 1
    assert view.row("w").rates == [None]
    assert "1 records skipped" in screen(view)
    assert is_stats_record({"seen": 1, "mistakes": 0}) and not is_stats_record([1, 2])


def test_a_record_without_client_id_or_ts_still_renders():
    view = StatsView(clock=lambda: NOW)
    rec = stats_record("x", 100, 5, 0.05)
    del rec["client_id"], rec["ts"], rec["offsets"]
    view.update([rec])
    text = screen(view)
    assert "(no client_id)" in text and "0.0500" in text


def test_history_must_be_positive():
    with pytest.raises(ValueError):
        StatsView(history=0)


def drift_event(partition: int, offset: int, drifts: int, *, ts: float = NOW, **extra: Any) -> dict[str, Any]:
    """A drift alarm as a worker publishes it (README, "Record formats": drift event)."""
    return {"event": "drift", "topic": "examples", "partition": partition, "offset": offset,
            "detector": "adwin", "stream": "mistakes", "rate_before": 0.02, "rate_after": 0.31,
            "drifts": drifts, "labeled": offset, "model_id": f"{partition}" * 32, "client_id": "w1",
            "ts": ts, **extra}


def test_drift_events_and_pending_labels_get_columns_and_the_latest_events_are_listed():
    view = StatsView(clock=lambda: NOW)
    view.update([
        partition_record(0, 10_000, 170, 68, ts=NOW - 5, drifts=0, last_drift_offset=None,
                         pending_labels=40, label_joins=900, label_expiries=3, label_delay_s=2.5),
        partition_record(1, 9_000, 14, 0, ts=NOW - 4, drifts=0, last_drift_offset=None,
                         pending_labels=7, label_joins=100, label_expiries=1, label_delay_s=0.5),
        drift_event(0, 10_412, 1, ts=NOW - 3),
        drift_event(0, 11_007, 2, ts=NOW - 2, rate_after=0.45),
    ])
    assert rows(view) == ["0", "1"]  # an event is not a row of its own
    assert view.records == 2 and view.events == 2 and view.skipped == 0
    text = screen(view, width=160)
    # after lag: the alarms (the events seen count before the next record states them), the
    # last one's offset, the pending labels
    assert cells(text, "0")[11:15] == ["10", "2", "11,007", "40"]
    assert cells(text, "1")[12:15] == ["0", "n/a", "7"]
    assert cells(text, "group (2)")[-3:-1] == ["2", "47"]
    lines = [line.strip("│ ") for line in text.splitlines()]
    at = lines.index("drift alarms (2 events; the latest 2, newest first):")
    newest = "0 at offset 11,007: mistakes rate 0.0200 → 0.4500 (adwin, alarm 2, 2.0 s ago)"
    assert lines[at + 1] == newest
    assert lines[at + 2].startswith("0 at offset 10,412:")
    assert "late labels: 1,000 joined, 4 expired; mean delay of the partitions' windows 1.5 s" in text


def test_a_newer_record_states_the_alarms_of_its_partition_state():
    view = StatsView(clock=lambda: NOW)
    view.update([partition_record(0, 10_000, 170, 68, drifts=5, last_drift_offset=9_000),
                 drift_event(0, 8_000, 4, ts=NOW - 9)])  # an older event read after
    assert view.row("0").drifts == 5
    assert view.row("0").last_drift_offset == 9_000


def test_older_records_show_no_drift_or_label_columns():
    view = StatsView(clock=lambda: NOW)
    view.update([partition_record(0, 10_000, 170, 68)])
    text = screen(view, width=160)
    assert "drifts" not in text and "pending" not in text and "late labels" not in text


# ------------------------------------------------------------------- what the topic says is text only

# What anyone who writes to the statistics topic, or picks a client id, could put in a text: a
# window title (OSC), a screen clear (CSI, 7-bit and 8-bit), rich markup.
HOSTILE = "\x1b]0;pwned\x07[bold red]x[/]\x1b[2J\x9b2J\x9d0;pwned\x9c"
SHOWN = "[bold red]x[/]"  # what is left of it: the markup as literal text
_SGR = re.compile(r"\x1b\[[0-9;]*m")  # the colours and styles the renderer itself writes


def hostile_view() -> StatsView:
    """A view of records whose texts (topic, client_id, model_id, detector, stream) carry HOSTILE."""
    view = StatsView(clock=lambda: NOW)
    view.update([
        partition_record(0, 1_000, 40, 30, client_id=f"w{HOSTILE}", topic=f"examples{HOSTILE}",
                         model_id=f"{HOSTILE}abc", drifts=1),
        stats_record(f"old{HOSTILE}", 500, 10, 0.02),
        drift_event(0, 900, 1, topic=f"examples{HOSTILE}", detector=f"adwin{HOSTILE}",
                    stream=f"mistakes{HOSTILE}", client_id=HOSTILE),
    ])
    return view


def assert_text_only(out: str) -> None:
    """``out`` holds no control character but the renderer's own colours, and no part of HOSTILE
    but its markup, shown as text."""
    bare = _SGR.sub("", out)
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", bare), repr(bare)
    assert "pwned" not in out and "2J" not in out
    assert SHOWN in bare


def test_the_table_in_a_terminal_shows_the_topics_texts_as_text_only():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system="truecolor", width=250)
    console.print(StatsTable().render(hostile_view().frame()))
    raw = out.getvalue()
    assert _SGR.search(raw)  # a terminal: styled
    assert_text_only(raw)
    assert f"w{SHOWN} 0" in _SGR.sub("", raw)  # the worker holding partition 0, markup and all
    assert f"adwin{SHOWN}, alarm 1" in _SGR.sub("", raw)
    assert "\x1b[1;31mx" not in raw and "\x1b[31;1mx" not in raw  # the markup was not applied


def test_plain_lines_show_the_topics_texts_as_text_only():
    lines = plain_lines(hostile_view().frame())
    assert_text_only("\n".join(lines))
    assert [line[9:].split("  ")[0] for line in lines] == [
        "partition 0", f"worker old{SHOWN}", "group (1)",
        f"drift alarm examples{SHOWN}[0] at offset 900: mistakes{SHOWN} rate 0.0200 → 0.3100"
        f" (adwin{SHOWN}, alarm 1, 0.0 s ago)"]  # the event's model is not the record's: no row of its own
    assert lines[0].endswith(f"client_id w{SHOWN}")


def test_json_lines_parse_and_carry_the_topics_texts_cleaned():
    lines = json_lines(hostile_view())
    assert all(line.isascii() for line in lines)  # whatever was missed, nothing raw reaches a terminal
    parsed = [json.loads(line) for line in lines]
    assert [next(k for k in p if k != "now") for p in parsed] == ["series", "series", "group", "event"]
    series = parsed[0]["series"]
    assert (series["label"], series["topic"], series["latest"]["client_id"]) == ("0", f"examples{SHOWN}",
                                                                                  f"w{SHOWN}")
    assert parsed[1]["series"]["id"] == f"old{SHOWN}"
    assert parsed[3]["event"]["detector"] == f"adwin{SHOWN}"
    assert parsed[2]["group"]["labeled"] == 1_000 and all(p["now"] == NOW for p in parsed)
    assert_text_only("\n".join(json.dumps(p, ensure_ascii=False) for p in parsed))
    assert json_lines(hostile_view(), since=3) == lines[:3]  # the event is numbered 3: not again


@pytest.mark.parametrize(("text", "shown"), [
    ("a\x1bP1$r\x1b\\b", "ab"),  # DCS, ended by ST
    ("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),  # a hyperlink
    ("a\x1b(0b\x1bc", "ab"),  # a character set, a terminal reset
    ("a\x9d0;t\x07b\x90q\x9cc", "abc"),  # 8-bit OSC and DCS
    ("a\x1b]0;never ended", "a"),
    ("r\u202egnp.exe\u2066x\u2069", "rgnp.exex"),  # bidirectional overrides and isolates
    ("tab\there\r\nnext\x00\x7f", "tab here  next"),
    ("plain ünïcode · γ ▁▂", "plain ünïcode · γ ▁▂"),
])
def test_clean_text_removes_escape_sequences_and_control_characters(text, shown):
    assert clean_text(text) == shown


# ------------------------------------------------------------------- K-class records

def class_record(partition: int, names: list[Any], confusion: list[list[int]], *,
                 mistakes: list[int] | None = None, **extra: Any) -> dict[str, Any]:
    """A K-class worker's statistics record (README, "Statistics"): every binary key, ``bound``
    2(R/γ)², ``intercept`` null beside ``intercepts``, and ``classes``, ``per_class`` (labeled, as
    the confusion's rows sum; predicted, as its columns sum) and ``confusion``."""
    k = len(names)
    labeled = [sum(row) for row in confusion]
    wrong = mistakes if mistakes is not None else [labeled[i] - confusion[i][i] for i in range(k)]
    per_class = [{"class": name, "labeled": labeled[i], "mistakes": wrong[i],
                  "predicted": sum(row[i] for row in confusion)} for i, name in enumerate(names)]
    rec = partition_record(partition, sum(labeled), sum(wrong), 20, gamma=0.05,
                           bound=2 * (1.73205 / 0.05) ** 2, intercept=None, intercepts=[0.0] * k,
                           classes=names, per_class=per_class, confusion=confusion)
    rec.update(extra)
    return rec


def class_cells(text: str, name: str) -> list[str]:
    """The cells of the per-class table's row of class ``name`` (after its number), or of
    ``other (n)``."""
    for line in text.splitlines():
        parts = [c for c in re.split(r"\s{2,}", line.strip("│ ")) if c]
        if name in parts[:2]:
            return parts[parts.index(name):]
    raise AssertionError(f"no class {name!r} in:\n{text}")


THREE = ["cat", "dog", 7]  # an integer is a class name too
THREE_CONFUSION = [[50, 3, 1], [4, 30, 0], [0, 2, 10]]


def test_a_k_class_record_gets_its_per_class_table_and_the_bound_is_headed_2_r_over_gamma_squared():
    view = StatsView(clock=lambda: NOW)
    view.update([class_record(0, THREE, THREE_CONFUSION)])
    text = screen(view, width=160)
    assert "2(R/γ)²" in text and "(R/γ)²  " not in text.replace("2(R/γ)²", "")
    assert cells(text, "0")[9] == "2,400"  # 2(R/γ)² of R = 1.732, γ = 0.05
    assert "partition 0: 3 classes; rows: the true class, numbered columns: the served prediction" in text
    # number, name, labeled, mistakes, mistake rate, predicted share, the row of the confusion matrix
    assert "#  class  labeled  mistakes     rate      share   1   2   3" in text
    assert class_cells(text, "cat") == ["cat", "54", "4", "0.0741", "54.0%", "50", "3", "1"]
    assert class_cells(text, "dog") == ["dog", "34", "4", "0.1176", "35.0%", "4", "30", "0"]
    assert class_cells(text, "7") == ["7", "12", "2", "0.1667", "11.0%", "0", "2", "10"]
    assert "other" not in text


def test_a_binary_record_beside_a_k_class_one_heads_the_bound_bound_and_says_which():
    view = StatsView(clock=lambda: NOW)
    view.update([partition_record(0, 1_000, 40, 30, gamma=0.1, bound=300.0),
                 class_record(1, THREE, THREE_CONFUSION)])
    text = screen(view, width=160)
    assert "  bound  " in text and "2(R/γ)²" in text  # the header, and the note under the table
    assert "bound: (R/γ)² for a binary model, 2(R/γ)² for K classes" in text
    assert "partition 1: 3 classes" in text and "partition 0:" not in text


def many_classes(n: int, names: list[Any] | None = None) -> tuple[list[Any], list[list[int]]]:
    """``n`` classes, class i with 10·(i+1) labeled examples, 9·(i+1) of them served as itself and
    the rest as class 0."""
    confusion = [[0] * n for _ in range(n)]
    for i in range(n):
        confusion[i][i] += 9 * (i + 1)
        confusion[i][0] += i + 1
    return names or [f"c{i}" for i in range(n)], confusion


def test_past_ten_classes_the_most_labeled_are_shown_in_row_order_and_the_others_summed():
    names, confusion = many_classes(13)
    view = StatsView(clock=lambda: NOW)
    view.update([class_record(0, names, confusion)])
    text = screen(view, width=200)
    assert "partition 0: 13 classes (10 with the most labeled examples shown, 3 summed in \"other\")" in text
    header = ("#  class      labeled  mistakes     rate      share"
              "   1   2   3   4   5   6   7   8    9   10  other")
    assert header in text
    # c0, c1 and c2 are the least labeled; c3's row: 4 served as c0, which is not shown (other)
    assert class_cells(text, "c3") == ["c3", "40", "4", "0.1000", "4.0%", "36", *["0"] * 9, "4"]
    assert class_cells(text, "c12") == ["c12", "130", "13", "0.1000", "12.9%", *["0"] * 9, "117", "13"]
    # the others' row: c0 (10, as itself), c1 and c2 (2 and 3 served as c0, 18 and 27 as themselves);
    # c0 is served 100 times in all, c1 18 and c2 27: 145 of the 910 predictions
    assert class_cells(text, "other (3)") == ["other (3)", "60", "5", "0.0833", "15.9%", *["0"] * 10, "60"]
    assert "c0" not in text and "c2" not in text


def test_the_terminal_shows_four_per_class_tables_and_says_how_many_more():
    view = StatsView(clock=lambda: NOW)
    view.update([class_record(p, THREE, THREE_CONFUSION) for p in range(6)])
    text = screen(view, width=160)
    assert [f"partition {p}: 3 classes" in text for p in range(6)] == [True] * 4 + [False] * 2
    assert "the per-class tables of 2 more series: watch --json, or the dashboard" in text


def test_plain_lines_give_a_line_per_class_after_its_partition():
    names, confusion = many_classes(12)
    view = StatsView(clock=lambda: NOW)
    view.update([class_record(0, names, confusion), partition_record(1, 1_000, 40, 30)])
    lines = [line[9:] for line in plain_lines(view.frame())]
    assert lines[0].startswith("partition 0  labeled 780  mistakes 77  ") and "  bound 2,400  " in lines[0]
    assert lines[1] == ("partition 0 class 1 c2  labeled 30  mistakes 3  mistake rate 0.1000"
                        "  predicted share 3.5%  predicted as"
                        " 1:27 2:0 3:0 4:0 5:0 6:0 7:0 8:0 9:0 10:0 other:3")
    assert lines[10].startswith("partition 0 class 10 c11  labeled 120  ")
    assert lines[11] == ("partition 0 other classes (2)  labeled 30  mistakes 2  mistake rate 0.0667"
                         "  predicted share 13.5%  predicted as"
                         " 1:0 2:0 3:0 4:0 5:0 6:0 7:0 8:0 9:0 10:0 other:30")
    assert lines[12].startswith("partition 1  labeled 1,000  ")
    assert lines[13].startswith("group (2)  ") and len(lines) == 14


def test_json_lines_carry_the_classes_of_a_k_class_series_only():
    view = StatsView(clock=lambda: NOW)
    view.update([class_record(0, THREE, THREE_CONFUSION), partition_record(1, 1_000, 40, 30)])
    zero, one = (json.loads(line)["series"] for line in json_lines(view)[:2])
    assert "classes" not in one  # a binary series is as it was
    assert zero["classes"] == {
        "count": 3, "other": None, "confusion": THREE_CONFUSION,
        "per_class": [
            {"class": "cat", "labeled": 54, "mistakes": 4, "mistake_rate": 4 / 54, "predicted": 54,
             "predicted_share": 0.54},
            {"class": "dog", "labeled": 34, "mistakes": 4, "mistake_rate": 4 / 34, "predicted": 35,
             "predicted_share": 0.35},
            {"class": "7", "labeled": 12, "mistakes": 2, "mistake_rate": 2 / 12, "predicted": 11,
             "predicted_share": 0.11},
        ],
    }
    assert zero["latest"]["intercept"] is None and zero["latest"]["bound"] == pytest.approx(2400.0)


def hostile_class_view() -> StatsView:
    """A K-class record whose class names carry HOSTILE, HTML and a name of 10⁴ characters."""
    names = [f"cat{HOSTILE}", "<script>alert(1)</script>", "x" * 10_000]
    view = StatsView(clock=lambda: NOW)
    view.update([class_record(0, names, THREE_CONFUSION)])
    return view


def test_the_per_class_table_in_a_terminal_shows_class_names_as_text_only():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system="truecolor", width=250)
    console.print(StatsTable().render(hostile_class_view().frame()))
    raw = out.getvalue()
    assert_text_only(raw)
    bare = _SGR.sub("", raw)
    # cut to the column's width
    assert f"cat{SHOWN}" in bare and "<script>alert(1)</scrip…" in bare
    assert "x" * 23 + "…" in bare and "x" * 24 not in bare


def test_plain_and_json_lines_show_class_names_cleaned_and_bounded():
    view = hostile_class_view()
    lines = plain_lines(view.frame())
    assert_text_only("\n".join(lines))
    assert f" class 1 cat{SHOWN}  labeled 54" in lines[1]
    assert f" class 3 {'x' * 100}  labeled 12" in lines[3]  # a class name is kept to 100 characters
    series = json.loads(json_lines(view)[0])["series"]
    assert [c["class"] for c in series["classes"]["per_class"]] == [
        f"cat{SHOWN}", "<script>alert(1)</script>", "x" * 100]
    assert all(line.isascii() for line in json_lines(view))
