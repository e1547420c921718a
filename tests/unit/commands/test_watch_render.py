"""The watch dashboard without a broker: sparklines, the table of two workers, bounded history."""

from __future__ import annotations

import math
from typing import Any

import pytest
from rich.console import Console

from stream_perceptron.commands.watch import SPARK_CHARS, Dashboard, is_stats_record, sparkline

NOW = 1_700_000_000.0


def stats_record(client_id: str, seen: int, mistakes: int, window_rate: float | None, *, ts: float = NOW,
                 **extra: Any) -> dict[str, Any]:
    """A statistics record shaped like a worker's (README, "Statistics")."""
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


def screen(dashboard: Dashboard, width: int = 120) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(dashboard.render())
    return console.export_text()


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


# ------------------------------------------------------------------- the dashboard


def test_empty_dashboard_says_it_is_waiting():
    text = screen(Dashboard(clock=lambda: NOW))
    assert "waiting for statistics records" in text


def test_two_workers_render_side_by_side_with_their_figures():
    dash = Dashboard(clock=lambda: NOW)
    dash.update([
        stats_record("worker-a", 10_000, 123, 0.0456, ts=NOW - 5),
        stats_record("worker-b", 5_000, 17, 0.0034, ts=NOW - 2, gamma=0.0152974, bound=4273.18,
                     window_mistakes=3, lag={"examples": {"0": 30, "1": 12}}),
        stats_record("worker-a", 15_000, 150, 0.0321, ts=NOW - 1),
    ])
    assert dash.workers == ["worker-a", "worker-b"]
    text = screen(dash)
    header = next(line for line in text.splitlines() if "worker-a" in line)
    assert "worker-b" in header  # one column per worker
    for figure in (
        "15,000", "150", "0.0100",  # worker-a: seen, mistakes, E_n = 150/15000
        "0.0321 (32/1,000)",  # its windowed rate with the window's mistakes
        "5,000", "17", "0.0034",  # worker-b
        "0.0152974", "3 ≤ 4,273.18",  # γ and the bound beside window_mistakes
        "n/a (window not separated)", "32 · no bound",  # worker-a has no positive γ
        "-0.0042 / 0.0871", "1.73205 / 2.44949", "14.0357 / -2",  # margins, R, ‖θ‖ / θ0
        "48,123", "examples[0] 15,000", "examples[0] 5,000",
        "42",  # lag: summed over partitions
        "1.0 s", "2.0 s",  # age of the last record
    ):
        assert figure in text, figure
    lag_row = next(line for line in text.splitlines() if line.strip("│ ").startswith("lag"))
    assert "n/a" in lag_row and "42" in lag_row


def test_the_latest_record_wins_by_timestamp_not_arrival():
    dash = Dashboard(clock=lambda: NOW)
    dash.update([stats_record("w", 2000, 20, 0.01, ts=NOW - 1),
                 stats_record("w", 1000, 10, 0.02, ts=NOW - 9)])
    assert dash.latest("w")["seen"] == 2000
    assert dash.rate_history("w") == [0.01, 0.02]  # the history keeps arrival order


def test_workers_sharing_a_client_id_stay_apart_by_their_model():
    a, b = "3f2a9c1d" + "a" * 24, "77e0b512" + "b" * 24
    dash = Dashboard(clock=lambda: NOW)
    dash.update([
        stats_record("stream-perceptron", 1000, 40, 0.04, ts=NOW - 3, model_id=a),
        stats_record("stream-perceptron", 9000, 90, 0.01, ts=NOW - 2, model_id=b),
        stats_record("stream-perceptron", 2000, 50, 0.03, ts=NOW - 1, model_id=a),  # a restarted
    ])
    assert dash.workers == ["stream-perceptron · 3f2a9c1d", "stream-perceptron · 77e0b512"]
    assert dash.latest("stream-perceptron · 3f2a9c1d")["seen"] == 2000
    assert dash.rate_history("stream-perceptron · 3f2a9c1d") == [0.04, 0.03]  # one series
    assert dash.latest("stream-perceptron · 77e0b512")["seen"] == 9000
    header = next(line for line in screen(dash, width=160).splitlines() if "3f2a9c1d" in line)
    assert "77e0b512" in header  # two columns


def test_lag_row_only_when_a_record_has_lag():
    dash = Dashboard(clock=lambda: NOW)
    dash.update([stats_record("w", 1000, 10, 0.01)])
    assert not any(line.strip("│ ").startswith("lag") for line in screen(dash).splitlines())


def test_history_is_bounded_and_the_sparkline_shows_it():
    dash = Dashboard(history=10, clock=lambda: NOW)
    rates = [i / 100 for i in range(25)]
    dash.update(stats_record("w", 1000 * (i + 1), i, r, ts=NOW - 25 + i) for i, r in enumerate(rates))
    assert dash.rate_history("w") == rates[-10:]
    assert dash.records == 25
    text = screen(dash)
    assert sparkline(rates[-10:], dash.spark_width, lo=0.0) in text
    assert "max 0.240" in text


def test_records_that_are_not_statistics_are_skipped():
    dash = Dashboard(clock=lambda: NOW)
    dash.update([{"x": [1.0], "y": 1}, stats_record("w", 10, 1, None)])  # type: ignore[list-item]
    assert dash.workers == ["w"] and dash.skipped == 1
    assert dash.rate_history("w") == [None]
    assert "1 records skipped" in screen(dash)
    assert is_stats_record({"seen": 1, "mistakes": 0}) and not is_stats_record([1, 2])


def test_a_record_without_client_id_or_ts_still_renders():
    dash = Dashboard(clock=lambda: NOW)
    rec = stats_record("x", 100, 5, 0.05)
    del rec["client_id"], rec["ts"], rec["offsets"]
    dash.update([rec])
    text = screen(dash)
    assert "(no client_id)" in text and "0.0500" in text


def test_history_must_be_positive():
    with pytest.raises(ValueError):
        Dashboard(history=0)
