"""``watch`` and ``plot``: follow a statistics topic live in the terminal, or draw it to a PNG.

* :func:`~stream_perceptron.commands.follow.follow_stats` (in ``follow``, shared with the web
  dashboard) yields the statistics records and drift events in batches as they arrive.
* :class:`~stream_perceptron.commands.stats_view.StatsView` (shared with the web dashboard) keeps
  what is shown of them: each series' newest record and windowed rates, the group's figures
  summed over the input partitions, the drift events, the pending labels.
* Its terminal renderers: :class:`StatsTable`, a rich table (a row per partition, with its drift
  alarms and pending labels when the records carry them, then the group's, and the latest
  alarms under it, then, for a K-class worker's partitions, :func:`class_table`: the per-class
  rates and the confusion matrix), and, for a pipe or a file, :func:`plain_lines` (a line per
  series per refresh, and per class shown: :func:`class_lines`) and :func:`json_lines`.
* :func:`run_watch` is the live loop (``rich.live.Live``, or lines) until Ctrl+C, SIGTERM or a
  duration.
* :func:`run_plot` reads the topic to its end and writes the PNG of
  :func:`~stream_perceptron.commands.plot.plot_partitions` (each partition's ``E_n`` and the
  group's) or, for one series, :func:`~stream_perceptron.commands.plot.plot_stats`, with the
  drift events marked.

``watch`` reads the topic from its beginning: the table shows each series' newest record and
the sparklines have history at once. Whatever the topic's records say is shown as text only: the
view cleans their texts of control characters and escape sequences, and the table never reads
them as rich markup.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TextIO

from rich import box
from rich.console import Console, RenderableType
from rich.console import Group as Stack
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from stream_perceptron.commands.class_view import ClassView
from stream_perceptron.commands.follow import connect_timeout_s, follow_stats
from stream_perceptron.commands.plot import (
    POINTS,
    Thinned,
    group_curve,
    plot_partitions,
    plot_stats,
    plotted,
)
from stream_perceptron.commands.read import iter_topic
from stream_perceptron.commands.series import (
    GroupFigures,
    Partition,
    Series,
    is_drift_event,
    is_stats_record,
    labels,
    number,
    worker_key,
)
from stream_perceptron.commands.stats_view import DriftEvent, Frame, SeriesRow, StatsView
from stream_perceptron.errors import NoStatsError
from stream_perceptron.kafka.config import check_reachable
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.signals import stopping_on_signals

log = logging.getLogger(__name__)

SPARK_CHARS = "▁▂▃▄▅▆▇█"
"""The eight levels of a sparkline, lowest first."""

# A series with no record for this long is named under the table.
_SILENT_S = 60.0
# The drift events listed under the table, newest first.
_DRIFTS_SHOWN = 5
# The drift events ``plot`` marks per series, the latest.
_DRIFTS_PLOTTED = 1_000
# The windowed rates kept per series for its sparkline (averaged down to its width).
_HISTORY = 120
# The K-class series whose per-class table the terminal shows (the others: --json, the dashboard).
_CLASS_TABLES = 4
# The characters of a class name the per-class table shows (the plain lines show all it keeps).
_CLASS_NAME_WIDTH = 24


# --------------------------------------------------------------------------- the terminal renderers


def sparkline(values: Sequence[float | None], width: int, *, lo: float | None = None,
              hi: float | None = None) -> str:
    """``values`` as a line of exactly ``width`` block characters (▁▂▃▄▅▆▇█), newest on the right.

    Up to ``width`` values get one character each, left-padded with spaces; more are averaged in
    ``width`` contiguous buckets. ``None`` (and NaN) is a gap, shown as a space. The scale runs
    from ``lo`` to ``hi`` (default: the minimum and maximum shown); a flat series sits on the
    lowest level. ``width`` ≤ 0 gives "".

    >>> sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8)
    '▁▂▃▄▅▆▇█'
    >>> sparkline([1.0, None, 3.0], 5, lo=0.0)
    '  ▃ █'
    >>> sparkline([0.5] * 4, 4), sparkline([], 3), sparkline(list(range(8)), 2, lo=0, hi=7)
    ('▁▁▁▁', '   ', '▃▇')
    """
    if width <= 0:
        return ""
    points = [_finite(v) for v in values]
    if len(points) > width:
        points = _buckets(points, width)
    known = [v for v in points if v is not None]
    if not known:
        return " " * width
    low = min(known) if lo is None else lo
    high = max(known) if hi is None else hi
    span = high - low
    top = len(SPARK_CHARS) - 1
    chars = []
    for v in points:
        if v is None:
            chars.append(" ")
            continue
        level = 0 if span <= 0 else round((min(max(v, low), high) - low) / span * top)
        chars.append(SPARK_CHARS[level])
    return "".join(chars).rjust(width)


def _finite(value: float | None) -> float | None:
    """``value`` as a float, None for None, NaN and ±Inf."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _buckets(points: list[float | None], width: int) -> list[float | None]:
    """Mean of each of ``width`` contiguous, nearly equal buckets (None if a bucket is all gaps)."""
    n = len(points)
    out: list[float | None] = []
    for i in range(width):
        chunk = [v for v in points[i * n // width : (i + 1) * n // width] if v is not None]
        out.append(sum(chunk) / len(chunk) if chunk else None)
    return out


@dataclass(frozen=True)
class _Column:
    """One column of the table: its header and how a series' cell is drawn from its row and the
    group's from the group's figures ("" where the group has no such figure)."""

    header: str
    cell: Callable[[SeriesRow], str | Text]
    group: Callable[[GroupFigures], str | Text] = lambda g: ""


def _columns(drifts: bool = False, pending: bool = False, group_drifts: int = 0,
             bound: str = "(R/γ)²") -> list[_Column]:
    """The table's columns after the partition, left to right: with ``drifts``, the drift alarms
    (how many, the last one's input offset; the group's ``group_drifts``), and with ``pending``
    the predictions waiting for their labels (records of workers that have neither show no such
    column); ``bound`` heads the mistake bound's column."""
    def field_(name: str, spec: str = ",") -> Callable[[SeriesRow], str]:
        return lambda row: _fmt(row.latest.get(name), spec)

    extra = []
    if drifts:
        def count(row: SeriesRow) -> Text:
            return Text(_fmt(row.drifts), style="bold red" if row.drifts else "dim")

        extra += [_Column("drifts", count, lambda g: _fmt(group_drifts)),
                  _Column("last drift\noffset", lambda row: _fmt(row.last_drift_offset))]
    if pending:
        extra.append(_Column("pending\nlabels", field_("pending_labels"), lambda g: _fmt(g.pending_labels)))
    return [
        _Column("labeled", field_("labeled"), lambda g: _fmt(g.labeled)),
        _Column("mistakes", field_("mistakes"), lambda g: _fmt(g.mistakes)),
        _Column("E_n", field_("mistake_rate", ".4f"), lambda g: _fmt(g.mistake_rate, ".4f")),
        _Column("window", field_("window_mistake_rate", ".4f"), lambda g: _fmt(g.window_mistake_rate, ".4f")),
        _Column("EWMA", field_("ewma_mistake_rate", ".4f")),
        _Column("margin\nmin", field_("margin_min", ".3g")),
        _Column("R", field_("R", ".4g")),
        _Column("γ", field_("gamma", ".3g")),
        _Column(bound, lambda row: _bound(row.latest)),
        _Column("ex/s", field_("examples_per_s", ",.0f"), lambda g: _fmt(g.examples_per_s, ",.0f")),
        _Column("lag", field_("lag", ",.0f"), lambda g: _fmt(g.lag, ",.0f")),
        *extra,
    ]


def _frame_columns(frame: Frame) -> list[_Column]:
    """The columns of ``frame``'s table (:func:`_columns`): the drift columns when an event was
    seen or a record tells its alarms, the pending labels' when a record tells them, and the
    bound headed as the rows' models have it (:func:`_bound_header`)."""
    latest = [row.latest for row in frame.rows]
    drifts = bool(frame.drift_events) or any(r.get("drifts") is not None for r in latest)
    pending = any(r.get("pending_labels") is not None for r in latest)
    return _columns(drifts, pending, frame.group_drifts, _bound_header(frame))


def _bound_header(frame: Frame) -> str:
    """The bound's header: (R/γ)² for binary models, 2(R/γ)² when every row is a K-class model's
    (a record with ``classes``), "bound" when both are shown."""
    kinds = {row.classes is not None for row in frame.rows}
    return "(R/γ)²" if True not in kinds else "2(R/γ)²" if kinds == {True} else "bound"


class StatsTable:
    """The terminal renderer of a :class:`~stream_perceptron.commands.stats_view.StatsView`: a
    panel holding a table, a row per series (an input partition's, with its drift alarms and
    pending labels when the records carry them, or an older worker's), then the group's, and a
    few lines under it (who holds which partition, the group's sums, the age of the records,
    the latest drift alarms, the late labels, what was skipped).

    Each row's sparkline draws its windowed mistake rates averaged down to ``spark_width``
    characters, every row's on one scale, from 0 to the greatest rate kept (named in the
    column's header). Every text from the topic goes in as :class:`rich.text.Text`, never read as
    markup, and was cleaned of control characters as the view took it.
    """

    def __init__(self, *, title: str = "stream-perceptron", spark_width: int = 8) -> None:
        self.title = title
        self.spark_width = spark_width

    def render(self, frame: Frame) -> RenderableType:
        """A panel holding the table of ``frame`` and the lines under it."""
        title = Text(self.title)
        subtitle = Text(f"{frame.records} records · updated {datetime.fromtimestamp(frame.now):%H:%M:%S}")
        if not frame.rows:
            body: RenderableType = Text("waiting for statistics records…", style="dim")
            return Panel(body, title=title, subtitle=subtitle, expand=False)
        older = any(row.series.worker for row in frame.rows)
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        table.add_column("partition / worker" if older else "partition", style="bold", no_wrap=True)
        columns = _frame_columns(frame)
        for column in columns:
            table.add_column(column.header, justify="right", overflow="fold", header_style="bold cyan")
        top = _spark_top(frame)
        table.add_column(f"window rate\n0 – {_fmt(top, '.3f')}", no_wrap=True, header_style="bold cyan")
        for row in frame.rows:
            table.add_row(Text(row.label), *(_text(c.cell(row)) for c in columns),
                          self._spark(row.rates, top), style="dim" if row.series.worker else "")
        if frame.group is not None:
            table.add_section()
            table.add_row(Text(f"group ({frame.group.partitions})"),
                          *(_text(c.group(frame.group)) for c in columns),
                          self._spark(frame.group_history, top), style="bold")
        return Panel(Stack(table, *_notes(frame), *_class_tables(frame)), title=title, subtitle=subtitle,
                     expand=False)

    def _spark(self, history: Iterable[float | None], top: float | None) -> Text:
        """The sparkline of windowed rates, scaled from 0 to ``top`` (a flat 0 with no top)."""
        return Text(sparkline(list(history), self.spark_width, lo=0.0, hi=top or None), style="magenta")


def _text(cell: str | Text) -> Text:
    """A cell as rich text, never read as markup."""
    return cell if isinstance(cell, Text) else Text(cell)


def _spark_top(frame: Frame) -> float | None:
    """The greatest windowed rate kept, of any series or the group: the sparklines' common top."""
    rates = [r for row in frame.rows for r in row.rates if r is not None]
    rates += [r for r in frame.group_history if r is not None]
    return max(rates) if rates else None


def _notes(frame: Frame) -> list[Text]:
    """The lines under the table: the input topic and who holds what, what the group sums, how
    old the records are (and which series fell silent), the latest drift alarms, the late
    labels, what was skipped."""
    notes = []
    partitions = [row for row in frame.rows if not row.series.worker]
    topics = sorted({row.series.topic for row in partitions})
    holders: dict[str, list[str]] = {}
    for row in partitions:
        holders.setdefault(row.latest.get("client_id") or "(no client_id)", []).append(row.label)
    if holders:
        where = f"input topic {topics[0]}; " if len(topics) == 1 else ""
        held = "; ".join(f"{client} {', '.join(rows)}" for client, rows in sorted(holders.items()))
        notes.append(Text(f"{where}partitions by the worker of their newest record: {held}", style="dim"))
    if frame.group is not None:
        notes.append(Text(f"group: the newest record of each partition summed: {_fmt(frame.group.seen)} seen,"
                          f" {_fmt(frame.group.dead_letters)} dead letters; E_n = Σ mistakes / Σ labeled",
                          style="dim"))
        if len(partitions) < len(frame.rows):
            notes.append(Text("the rows of older workers (no partition in their records) are not in"
                              " the group", style="dim"))
    ages = {row.label: _age(row, frame.now) for row in frame.rows}
    line = Text(f"newest record {_duration(min(ages.values()))} old", style="dim")
    silent = [f"{label} ({_duration(age)})" for label, age in ages.items() if age > _SILENT_S]
    if silent:
        line.append(f"; nothing for over {_SILENT_S:.0f} s from: {', '.join(silent)}", style="red")
    notes.append(line)
    if _bound_header(frame) == "bound":
        notes.append(Text("bound: (R/γ)² for a binary model, 2(R/γ)² for K classes", style="dim"))
    notes += _drift_lines(frame)
    notes += _label_lines(frame)
    if frame.skipped:
        notes.append(Text(f"{frame.skipped} records skipped (not JSON, or not statistics records)",
                          style="dim"))
    return notes


def _drift_lines(frame: Frame) -> list[Text]:
    """The latest drift events, newest first: where, when, the rates before and after."""
    events = frame.drift_events[-_DRIFTS_SHOWN:]
    if not events:
        return []
    lines = [Text(f"drift alarms ({frame.events} events; the latest {len(events)}, newest first):",
                  style="bold red")]
    named = {row.series: row.label for row in frame.rows}
    lines += [Text(f"  {drift_text(event, named, frame.now)}", style="red") for event in reversed(events)]
    return lines


def drift_text(event: DriftEvent, named: Mapping[Series, str], now: float) -> str:
    """A drift event in a line: its series' label (``named``), where, the rates before and after,
    the detector, the alarm's number and its age."""
    fields, series = event.fields, event.series
    label = named.get(series, f"{series.topic}[{series.partition}]")
    ts = number(fields.get("ts"))
    age = "" if ts is None else f", {_duration(max(now - ts, 0.0))} ago"
    return (f"{label} at offset {_fmt(fields.get('offset'))}: {fields.get('stream') or 'mistakes'}"
            f" rate {_fmt(fields.get('rate_before'), '.4f')} → {_fmt(fields.get('rate_after'), '.4f')}"
            f" ({fields.get('detector') or '?'}, alarm {_fmt(fields.get('drifts'))}{age})")


def _label_lines(frame: Frame) -> list[Text]:
    """The late labels of the group: joins, expiries and the mean delay of the newest records."""
    latest = [row.latest for row in frame.rows if not row.series.worker]
    if not any(r.get("label_joins") is not None for r in latest):
        return []
    joins = sum(int(number(r.get("label_joins")) or 0) for r in latest)
    expiries = sum(int(number(r.get("label_expiries")) or 0) for r in latest)
    delays = [d for r in latest if (d := number(r.get("label_delay_s"))) is not None]
    delay = f"{sum(delays) / len(delays):.3g} s" if delays else "n/a"
    return [Text(f"late labels: {joins:,} joined, {expiries:,} expired; mean delay of the partitions'"
                 f" windows {delay}", style="dim")]


def _class_tables(frame: Frame) -> list[RenderableType]:
    """The per-class tables of the K-class series (:func:`class_table`), the first
    :data:`_CLASS_TABLES` of them, and a line naming how many more there are."""
    rows = [row for row in frame.rows if row.classes is not None]
    shown: list[RenderableType] = [class_table(_what(row), row.classes) for row in rows[:_CLASS_TABLES]
                                   if row.classes is not None]
    if len(rows) > _CLASS_TABLES:
        shown.append(Text(f"the per-class tables of {len(rows) - _CLASS_TABLES} more series: watch --json,"
                          " or the dashboard", style="dim"))
    return shown


def class_table(what: str, view: ClassView) -> RenderableType:
    """The per-class table of a K-class series (``what``: its name) under a line saying what it
    shows: a row per class shown (numbered, in row order), then the other classes summed; its
    labeled examples, mistakes, mistake rate and share of the served predictions, then its row of
    the confusion matrix, a column per served prediction (numbered as the rows), the diagonal in
    green. Class names are rich text, never read as markup."""
    heading = Text(f"{what}: {view.count:,} classes", style="bold")
    if view.other is not None:
        heading.append(f" ({len(view.shown)} with the most labeled examples shown, {view.others:,} summed in"
                       " \"other\")")
    if view.confusion is not None:
        heading.append("; rows: the true class, numbered columns: the served prediction", style="dim")
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", style="dim")
    table.add_column("class", no_wrap=True, overflow="ellipsis", max_width=_CLASS_NAME_WIDTH)
    for header in ("labeled", "mistakes", "mistake\nrate", "predicted\nshare"):
        table.add_column(header, justify="right", header_style="bold cyan")
    numbers = [str(k) for k in range(1, len(view.shown) + 1)] + (["other"] if view.other is not None else [])
    if view.confusion is not None:
        for number_ in numbers:
            table.add_column(number_, justify="right", header_style="bold magenta")
    for k, row in enumerate(view.rows):
        cells: list[Text] = []
        if view.confusion is not None:
            cells = [Text(_fmt(count), style="green" if j == k else "dim" if not count else "")
                     for j, count in enumerate(view.confusion[k])]
        name = _class_text(row.name) if k < len(view.shown) else Text(f"other ({view.others:,})", style="dim")
        table.add_row(numbers[k] if k < len(view.shown) else "", name,
                      _fmt(row.labeled), _fmt(row.mistakes), _fmt(row.mistake_rate, ".4f"),
                      _share(row.predicted_share), *cells)
    return Stack(Text(""), heading, table)


def _class_text(name: str | None) -> Text:
    """A class's name as rich text, never read as markup: "?" where the record's is not a class
    name, "\"\"" for the empty name."""
    return Text("?", style="dim") if name is None else Text(name or '""')


def _share(value: float | None) -> str:
    """A share as a percentage, or "n/a".

    >>> _share(0.1234), _share(None)
    ('12.3%', 'n/a')
    """
    return "n/a" if value is None else f"{value:.1%}"


def _what(row: SeriesRow) -> str:
    """A series as the plain lines and the per-class tables name it: "partition 0", "worker w1"."""
    return f"worker {row.label}" if row.series.worker else f"partition {row.label}"


def _fmt(value: Any, spec: str = ",") -> str:
    """A figure, or "n/a" when it is absent or not a number.

    >>> _fmt(12345), _fmt(0.012345, ".4f"), _fmt(None), _fmt(3, ".4f")
    ('12,345', '0.0123', 'n/a', '3.0000')
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "n/a"
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    if isinstance(value, int) and spec == ",":
        return f"{value:,}"
    return format(value, "," if spec == "," else spec)


def _bound(rec: Mapping[str, Any]) -> Text:
    """The mistake bound (R/γ)² while the window is separated (n/a otherwise), green while the
    window's mistakes are within it, yellow past it."""
    mistakes, bound = number(rec.get("window_mistakes")), number(rec.get("bound"))
    if bound is None:
        return Text("n/a", style="dim")
    within = mistakes is not None and mistakes <= bound
    return Text(f"{bound:,.4g}", style="green" if within else "yellow")


def _age(row: SeriesRow, now: float) -> float:
    """Seconds since the series' newest record was published (its ``ts``; else since it was received)."""
    ts = number(row.latest.get("ts"))
    return max(now - (ts if ts is not None else row.received), 0.0)


def _duration(seconds: float | None) -> str:
    """Seconds in a short human form.

    >>> _duration(2.34), _duration(125), _duration(7300), _duration(None)
    ('2.3 s', '2 min 5 s', '2 h 1 min', 'n/a')
    """
    if seconds is None:
        return "n/a"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


# --------------------------------------------------------------------------- the commands


WatchOutput = Literal["table", "plain", "json"]
"""What ``watch`` draws: the live table (a terminal), plain lines, or JSON lines."""


def plain_lines(frame: Frame, since: int = 0) -> list[str]:
    """``frame`` as plain lines: one per series (its label, then each column's header and value
    where it has one, then the client id of its newest record), after a K-class series' one per
    class shown and one for the others (:func:`class_lines`), the group's, and one per drift
    event numbered after ``since``; each begins with the time.

    >>> view = StatsView(clock=lambda: 0.0)
    >>> view.update([{"topic": "in", "partition": 0, "seen": 10, "labeled": 10, "mistakes": 2,
    ...               "mistake_rate": 0.2, "lag": {"in:0": 3}, "client_id": "w\x1b[2J1"}])
    >>> partition, group = plain_lines(view.frame())
    >>> print(partition[9:])  # doctest: +NORMALIZE_WHITESPACE
    partition 0  labeled 10  mistakes 2  E_n 0.2000  window n/a  EWMA n/a  margin min n/a
    R n/a  γ n/a  (R/γ)² n/a  ex/s n/a  lag 3  client_id w1
    >>> print(group[9:])
    group (1)  labeled 10  mistakes 2  E_n 0.2000  window n/a  ex/s n/a  lag 3
    """
    when = f"{datetime.fromtimestamp(frame.now):%H:%M:%S}"
    columns = _frame_columns(frame)

    def line(what: str, cells: Iterable[str | Text], client: str | None = None) -> str:
        shown = [(c.header.replace("\n", " "), _text(cell).plain)
                 for c, cell in zip(columns, cells, strict=True)]
        if client is not None:
            shown.append(("client_id", client))
        return f"{when} {what}  " + "  ".join(f"{header} {value}" for header, value in shown if value)

    lines = []
    for row in frame.rows:
        lines.append(line(_what(row), [c.cell(row) for c in columns], row.latest.get("client_id")))
        if row.classes is not None:
            lines += [f"{when} {_what(row)} {text}" for text in class_lines(row.classes)]
    group = frame.group
    if group is not None:
        lines.append(line(f"group ({group.partitions})", [c.group(group) for c in columns]))
    named = {row.series: row.label for row in frame.rows}
    lines += [f"{when} drift alarm {drift_text(e, named, frame.now)}"
              for e in frame.drift_events if e.seq > since]
    return lines


def class_lines(view: ClassView) -> list[str]:
    """The per-class part of a K-class series as lines: one per class shown (its number, name,
    labeled examples, mistakes, mistake rate, share of the served predictions, and its row of the
    confusion matrix: how many it was served as, by the number of each class shown, then the
    others), then one for the other classes summed.

    >>> from stream_perceptron.commands.class_view import class_view
    >>> view = class_view({"classes": ["cat", "dog", "eel"], "confusion": [[5, 1, 0], [2, 6, 0], [0, 0, 1]],
    ...                    "per_class": [{"labeled": 6, "mistakes": 1, "predicted": 7},
    ...                                  {"labeled": 8, "mistakes": 2, "predicted": 7},
    ...                                  {"labeled": 1, "mistakes": 0, "predicted": 1}]}, shown=2)
    >>> print("\\n".join(class_lines(view)))  # doctest: +NORMALIZE_WHITESPACE
    class 1 cat  labeled 6  mistakes 1  mistake rate 0.1667  predicted share 46.7%
      predicted as 1:5 2:1 other:0
    class 2 dog  labeled 8  mistakes 2  mistake rate 0.2500  predicted share 46.7%
      predicted as 1:2 2:6 other:0
    other classes (1)  labeled 1  mistakes 0  mistake rate 0.0000  predicted share 6.7%
      predicted as 1:0 2:0 other:1
    """
    numbers = [str(k) for k in range(1, len(view.shown) + 1)] + (["other"] if view.other is not None else [])
    lines = []
    for k, row in enumerate(view.rows):
        what = (f"class {numbers[k]} {_class_text(row.name).plain}" if k < len(view.shown)
                else f"other classes ({view.others:,})")
        text = (f"{what}  labeled {_fmt(row.labeled)}  mistakes {_fmt(row.mistakes)}  mistake rate"
                f" {_fmt(row.mistake_rate, '.4f')}  predicted share {_share(row.predicted_share)}")
        if view.confusion is not None:
            text += "  predicted as " + " ".join(f"{numbers[j]}:{_fmt(count)}"
                                                 for j, count in enumerate(view.confusion[k]))
        lines.append(text)
    return lines


def json_lines(view: StatsView, since: int = 0) -> list[str]:
    """The view as JSON lines: one per series (``{"now", "series": …}``, as the web page is given
    it), the group's (``{"now", "group": …}``), and one per drift event numbered after ``since``
    (``{"now", "event": …}``)."""
    snap = view.snapshot(since)
    lines = [{"now": snap["now"], "series": series} for series in snap["series"]]
    if snap["group"] is not None:
        lines.append({"now": snap["now"], "group": snap["group"]})
    lines += [{"now": snap["now"], "event": event} for event in snap["events"]]
    return [json.dumps(line, allow_nan=False) for line in lines]  # non-ASCII escaped: nothing raw


def run_watch(
    kafka: KafkaSettings, topic: str, *, refresh_s: float = 1.0, duration_s: float | None = None,
    console: Console | None = None, from_beginning: bool = True, output: WatchOutput = "table",
    stream: TextIO | None = None,
) -> int:
    """Show the statistics of ``topic`` live until Ctrl+C, SIGTERM or ``duration_s``; returns 0.

    ``output``: the live table (:class:`StatsTable` on ``console``, redrawn every ``refresh_s``
    seconds: the age of the records keeps counting between records), or, every ``refresh_s``
    seconds, :func:`plain_lines` or :func:`json_lines` written to ``stream`` (standard output by
    default), for a pipe or a file. The topic is read from its beginning unless
    ``from_beginning`` is False; a topic that does not exist yet is waited for. Raises
    :class:`~stream_perceptron.errors.KafkaEdgeError` when Kafka cannot be reached.
    """
    if refresh_s <= 0:
        raise ValueError("refresh_s must be positive")
    view = StatsView(history=_HISTORY)
    table = StatsTable(title=f"stream-perceptron watch · {topic}")
    deadline = None if duration_s is None else time.monotonic() + duration_s
    poll_ms = max(50, min(500, int(refresh_s * 1000)))
    batches = follow_stats(
        kafka, topic, from_beginning=from_beginning, poll_timeout_ms=poll_ms, on_skip=view.count_skipped
    )
    shown = 0  # the version of the view last written as lines

    def draw(live: Live | None) -> None:
        nonlocal shown
        if live is not None:
            live.update(table.render(view.frame()), refresh=True)
            return
        frame = view.frame()
        lines = json_lines(view, shown) if output == "json" else plain_lines(frame, shown)
        shown = frame.version
        out = stream or sys.stdout
        out.writelines(f"{line}\n" for line in lines)
        out.flush()

    try:
        with stopping_on_signals() as interrupted, contextlib.ExitStack() as stack:
            live = None
            if output == "table":
                live = stack.enter_context(Live(table.render(view.frame()), console=console or Console(),
                                                auto_refresh=False))
            next_refresh = time.monotonic() + refresh_s
            for batch in batches:
                view.update(batch)
                now = time.monotonic()
                done = interrupted.is_set() or (deadline is not None and now >= deadline)
                if now >= next_refresh or done:
                    draw(live)
                    next_refresh = now + refresh_s
                if done:
                    break
    except KeyboardInterrupt:  # a second Ctrl+C, or one before the handlers were set
        log.debug("watch interrupted")
    finally:
        batches.close()
    return 0


def run_plot(
    kafka: KafkaSettings, topic: str, out: Path, *, size: tuple[int, int] = (1200, 700),
    client_id: str | None = None, timeout_s: float = 30.0, points: int = POINTS,
) -> tuple[Path, int, int]:
    """Read ``topic`` to its end and plot its statistics records to the PNG ``out``.

    The records of input partitions (README, "Statistics": ``topic`` and ``partition`` in each)
    are drawn with :func:`~stream_perceptron.commands.plot.plot_partitions`: each partition's
    ``E_n`` and the group's over all of them; a single partition's, with
    :func:`~stream_perceptron.commands.plot.plot_stats`. ``client_id`` then keeps the partitions
    whose newest record that client (or worker key, :func:`worker_key`) published. A topic of an
    older worker's records only (no partition in them) is drawn as before: one worker's, the one
    ``client_id`` names (a worker key, or a client id: its worker of the most recent record), by
    default the worker of the most recent record, the others named in a warning. Records without
    a partition beside records with one are not drawn (a line says how many). Drift events are
    marked where they were raised (dotted lines; the latest 1,000 of each series).

    Returns the path written, the number of records plotted and the number they were drawn from:
    the drawn series' records with labeled examples, of which at most ``points`` in all (each
    series an even share, and its latest) are plotted, evenly spaced through the topic
    (:class:`Thinned`), so a topic of any length is read in bounded memory. Raises
    :class:`NoStatsError` when the topic has no statistics records to plot (it is empty, missing,
    or holds other records), :class:`~stream_perceptron.errors.KafkaEdgeError` when Kafka cannot
    be reached.
    """
    histories, drifts, values = _read_histories(kafka, topic, timeout_s, points)
    if not histories:
        detail = (f"it holds {values} records, none a statistics record" if values
                  else "it is empty or does not exist")
        raise NoStatsError(f"no statistics records in topic {topic!r} ({detail}); "
                           "is a worker publishing to it (SP_TOPICS__STATS)?")
    partitions = {s: h for s, h in histories.items() if not s.worker}
    if not partitions:
        workers = {s.worker: h for s, h in histories.items()}
        chosen = _pick_worker(workers, topic, client_id)
        return _plot_one(workers[chosen], topic, chosen, out, size)
    older = sum(h.records for s, h in histories.items() if s.worker)
    if older:
        log.info("%d statistics records of %s name no partition (an older worker's): not drawn",
                 older, topic)
    if client_id is not None:
        partitions = _held_by(partitions, topic, client_id)
    named = labels(partitions)
    if len(partitions) == 1:
        ((series, history),) = partitions.items()
        return _plot_one(history, topic, f"{series.topic}[{series.partition}]", out, size,
                         drifts.get(series, ()))
    kept = {s: h.labeled.kept() for s, h in partitions.items()}
    if not any(kept.values()):
        raise NoStatsError(f"the {sum(h.records for h in partitions.values())} statistics records in"
                           f" topic {topic!r} have no labeled examples yet: nothing to plot")
    newest: dict[Partition, list[dict[str, Any]]] = {}
    for series, records in kept.items():  # a partition of several models: each model's records
        newest.setdefault((series.topic, series.partition), []).extend(records)
    curve = group_curve(newest, points)
    topics = sorted({s.topic for s in partitions})
    title = f"stream-perceptron · {topic} · input {', '.join(topics)}"
    path = plot_partitions({named[s]: kept[s] for s in partitions}, curve, out, title=title, size=size,
                           drifts={named[s]: list(drifts.get(s, ())) for s in partitions})
    used = sum(len(records) for records in kept.values())
    of = sum(h.labeled.seen for h in partitions.values())
    spacing = "" if used == of else f" (at most {max(1, points // len(histories))} of each, evenly spaced)"
    log.info("plotted %d statistics records of %d partitions of %s%s to %s", used, len(partitions),
             topic, spacing, path)
    return path, used, of


def _read_histories(
    kafka: KafkaSettings, topic: str, timeout_s: float, points: int,
) -> tuple[dict[Series, _History], dict[Series, deque[dict[str, Any]]], int]:
    """Read ``topic`` to its end: each series' :class:`_History` (``points`` records in all,
    evenly shared), the latest drift events of each series (where each was raised), and the
    number of records read."""
    connect_s = connect_timeout_s(kafka)
    check_reachable(kafka, connect_s)
    histories: dict[Series, _History] = {}
    drifts: dict[Series, deque[dict[str, Any]]] = {}
    values = 0
    for _, _, _, value in iter_topic(kafka, topic, timeout_s=timeout_s, connect_timeout_s=connect_s):
        values += 1
        if is_drift_event(value):  # marked where it was raised; the latest _DRIFTS_PLOTTED of each
            drifts.setdefault(Series.of(value), deque(maxlen=_DRIFTS_PLOTTED)).append(
                {"labeled": value.get("labeled"), "offset": value.get("offset")})
            continue
        if not is_stats_record(value):  # not JSON (None), or not a statistics record: skipped
            continue
        key = Series.of(value)
        history = histories.get(key)
        if history is None:
            history = histories[key] = _History(Thinned(points))
            share = max(1, points // len(histories))  # POINTS in all, evenly shared
            for each in histories.values():
                each.labeled.shrink(share)
        history.add(value)
    return histories, drifts, values


def _plot_one(
    history: _History, topic: str, name: str, out: Path, size: tuple[int, int],
    drifts: Iterable[dict[str, Any]] = (),
) -> tuple[Path, int, int]:
    """Plot one series (:func:`plot_stats`): a worker's, or one input partition's, with its drift
    events."""
    labeled = history.labeled
    plotted = labeled.kept()
    if not plotted:
        raise NoStatsError(f"the {history.records} statistics records in topic {topic!r} have no "
                           "labeled examples yet: nothing to plot")
    title = f"stream-perceptron · {topic}" + (f" · {name}" if name else "")
    path = plot_stats(plotted, out, title=title, size=size, drifts=list(drifts))
    thinned = "" if labeled.stride == 1 else f" (1 in {labeled.stride} of {labeled.seen}, evenly spaced)"
    log.info("plotted %d statistics records of %s%s to %s", len(plotted), topic, thinned, path)
    return path, len(plotted), labeled.seen


@dataclass
class _History:
    """What ``plot`` holds of one series' statistics records: how many, the newest ``ts``, the
    newest record's client id and worker key, and an evenly spaced part of those with labeled
    examples, each cut to the fields drawn (:func:`~stream_perceptron.commands.plot.plotted`; a
    week of a busy worker's records is millions; held whole, gigabytes)."""

    labeled: Thinned
    client_id: str = ""
    worker: str = ""
    records: int = 0
    latest_ts: float = float("-inf")

    def add(self, value: dict[str, Any]) -> None:
        self.records += 1
        ts = number(value.get("ts")) or 0.0
        if ts >= self.latest_ts:
            self.latest_ts = ts
            self.client_id, self.worker = str(value.get("client_id") or ""), worker_key(value)
        if value.get("labeled"):
            self.labeled.add(plotted(value))


def _held_by(partitions: Mapping[Series, _History], topic: str, client_id: str) -> dict[Series, _History]:
    """The partitions whose newest record ``client_id`` published (a client id, or a worker key)."""
    held = {s: h for s, h in partitions.items() if client_id in (h.client_id, h.worker)}
    if not held:
        known = ", ".join(sorted({h.client_id for h in partitions.values()}))
        raise NoStatsError(f"no statistics records of client_id {client_id!r} in topic {topic!r} "
                           f"(found: {known})")
    return held


def _pick_worker(workers: Mapping[str, _History], topic: str, client_id: str | None) -> str:
    """The worker to plot: the one asked for (a worker key, or a client id), else the one of the
    most recent record; the others are named in a warning."""
    candidates = list(workers)
    if client_id is not None:
        # a worker key, or a client id: its workers of every model (records from before model_id
        # are keyed by the client id alone), of which the one of the most recent record
        candidates = [k for k, h in workers.items() if client_id in (k, h.client_id)]
        if not candidates:
            known = ", ".join(sorted(workers))
            raise NoStatsError(f"no statistics records of client_id {client_id!r} in topic {topic!r} "
                               f"(found: {known})")
    latest = max(candidates, key=lambda key: workers[key].latest_ts)
    if len(candidates) > 1:
        others = ", ".join(sorted(k for k in candidates if k != latest))
        log.warning("topic %s has statistics of several workers; plotting %s (others: %s)",
                    topic, latest, others)
    return latest


__all__ = [
    "SPARK_CHARS",
    "StatsTable",
    "WatchOutput",
    "class_lines",
    "class_table",
    "connect_timeout_s",
    "drift_text",
    "follow_stats",
    "is_stats_record",
    "json_lines",
    "plain_lines",
    "run_plot",
    "run_watch",
    "sparkline",
    "worker_key",
]
