"""The statistics topic as ``watch`` and ``dashboard`` show it: one view, built from the records.

:class:`StatsView` takes statistics records and drift events (README, "Record formats") in arrival
order and keeps what both displays draw: per series (an input partition and its model, or an older
worker's, :class:`~stream_perceptron.commands.series.Series`) its newest record and its last
``history`` points, its drift alarms and the latest drift events, the pending labels, and the
group's sums over the newest record of each input partition
(:class:`~stream_perceptron.commands.series.Group`). :meth:`StatsView.frame` gives all of it at
one moment (:class:`Frame`), for the terminal's renderers (``watch``); :meth:`StatsView.snapshot`
gives it as the JSON the web page polls (``dashboard``) and ``watch --json`` prints.

**Only what is shown is kept, and cleaned.** Of a record, only the numbers named in
:data:`POINT_FIELDS`, :data:`LATEST_FIELDS` and :data:`EVENT_FIELDS` are kept (each checked to be
a finite number) and the short texts of :data:`TEXT_FIELDS`, and of a K-class worker's record
its per-class counts and confusion matrix, bounded to the classes shown
(:func:`~stream_perceptron.commands.class_view.class_view`); whatever else a record holds is never
shown. Anyone who can write to the topic chooses its texts (``topic``, ``client_id``, a detector's
name, a class name), so every text is cleaned as it is taken (:func:`clean_text`): no control character, no
terminal escape sequence, and a bounded length. (Rich markup in a text is the terminal renderer's
to keep literal; the web page escapes HTML.)
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from stream_perceptron.clean import clean_text as _clean_text
from stream_perceptron.commands.class_view import ClassView, class_view
from stream_perceptron.commands.series import (
    Drifts,
    Group,
    GroupFigures,
    Series,
    is_drift_event,
    is_stats_record,
    labels,
    newer,
    number,
    partition_of,
    total_lag,
)

POINT_FIELDS = ("seen", "labeled", "mistakes", "mistake_rate", "window_mistake_rate", "ewma_mistake_rate",
                "window_mistakes", "margin_min", "margin_mean", "R", "gamma", "bound", "examples_per_s",
                "pending_labels", "drifts", "ts")
"""The numbers of a statistics record kept as one point of its series' curves (and ``lag``, summed)."""

LATEST_FIELDS = (*POINT_FIELDS, "served_mistake_rate", "window", "window_labeled", "R_all", "theta_norm",
                 "intercept", "dead_letters", "uptime_s", "last_drift_offset", "label_joins",
                 "label_expiries", "label_delay_s")
"""The numbers of a series' newest record shown beside its curves."""

EVENT_FIELDS = ("offset", "rate_before", "rate_after", "drifts", "labeled", "ts")
"""The numbers of a drift event kept (with its texts: ``detector``, ``stream``, ``client_id``)."""

TEXT_FIELDS = ("detector", "stream", "client_id", "model_id")
"""The texts of a record or event kept, each cut to :data:`MAX_TEXT` characters."""

MAX_TEXT = 64
"""The characters kept of a text shown (an id or a name)."""
MAX_TOPIC = 249
"""The characters kept of a record's ``topic`` (Kafka's longest topic name)."""

HISTORY = 600
"""Points kept per series by default: ten minutes of a record a second."""
EVENTS_KEPT = 200
"""Drift events kept, newest last."""


def clean_text(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` as it may be shown (:func:`stream_perceptron.clean.clean_text`), at most
    ``limit`` characters (:data:`MAX_TEXT` unless told).

    >>> clean_text("w1\\x1b]0;pwned\\x07\\x1b[2J x\\x9b31m\\ty\\u202e")
    'w1 x y'
    """
    return _clean_text(text, limit)


def _cleaned(rec: Mapping[str, Any]) -> dict[str, Any]:
    """``rec`` with each of its texts cleaned (:func:`clean_text`, to :data:`MAX_TOPIC`
    characters), so that the series, labels and worker keys made of them are clean too."""
    return {key: clean_text(v, MAX_TOPIC) if isinstance(v, str) else v for key, v in rec.items()}


def _numbers(rec: Mapping[str, Any], names: Iterable[str]) -> dict[str, int | float | None]:
    """The finite numbers ``rec`` holds under ``names``, integers kept integers (None where absent
    or not a number).

    >>> _numbers({"a": 3, "b": 0.5, "c": "x", "d": True, "e": float("inf")}, "abcdef")
    {'a': 3, 'b': 0.5, 'c': None, 'd': None, 'e': None, 'f': None}
    """
    out: dict[str, int | float | None] = {}
    for name in names:
        value = rec.get(name)
        out[name] = value if isinstance(value, int) and not isinstance(value, bool) else number(value)
    return out


def _texts(rec: Mapping[str, Any]) -> dict[str, str | None]:
    """The texts of ``rec`` kept (:data:`TEXT_FIELDS`), cleaned and cut to :data:`MAX_TEXT`."""
    return {name: (clean_text(v) if isinstance(v := rec.get(name), str) else None) for name in TEXT_FIELDS}


def _lag(rec: Mapping[str, Any]) -> float | None:
    """The record's lag summed over its partitions, as a number (None when unknown)."""
    return number(total_lag(rec.get("lag")))


def series_id(series: Series) -> str:
    """A series' id: ``topic:partition:model`` (an older worker's: its worker key).

    >>> series_id(Series("", "in", 2, "3f2a9c1d")), series_id(Series("w1", "", -1, ""))
    ('in:2:3f2a9c1d', 'w1')
    """
    return series.worker or f"{series.topic}:{series.partition}:{series.model}"


@dataclass(frozen=True)
class SeriesRow:
    """One series as shown: its id and label, its newest record's numbers and texts (``latest``:
    :data:`LATEST_FIELDS`, :data:`TEXT_FIELDS` and ``lag`` summed), its points oldest first
    (each ``seq`` and :data:`POINT_FIELDS`, ``lag``), when its newest record was taken (wall
    time), its drift alarms and the last one's input offset (None while nothing tells of one),
    and the per-class part of its newest record when that is a K-class worker's (``classes``:
    :class:`~stream_perceptron.commands.class_view.ClassView`; None for a binary record)."""

    series: Series
    id: str
    label: str
    latest: dict[str, Any]
    points: list[dict[str, Any]]
    received: float
    drifts: int | None
    last_drift_offset: int | None
    classes: ClassView | None = None

    @property
    def rates(self) -> list[float | None]:
        """The windowed mistake rate of each point, oldest first."""
        return [p["window_mistake_rate"] for p in self.points]


@dataclass(frozen=True)
class DriftEvent:
    """A drift event as kept: its sequence number, its series, and its numbers and texts
    (:data:`EVENT_FIELDS`, :data:`TEXT_FIELDS`, with ``seq`` and the series' id)."""

    seq: int
    series: Series
    fields: dict[str, Any]


@dataclass(frozen=True)
class Frame:
    """The view at one moment (wall time ``now``): the rows in label order (input partitions
    first), the group's figures (None before a partition's record) and its drift alarms, the
    group's pooled windowed rate after each partition's record (oldest first), the drift events
    kept (oldest first), and what was taken: ``version`` records and events in all, of which
    ``records`` statistics records and ``events`` drift events, and ``skipped`` others."""

    now: float
    version: int
    records: int
    events: int
    skipped: int
    rows: list[SeriesRow]
    group: GroupFigures | None
    group_drifts: int
    group_history: list[float | None]
    drift_events: list[DriftEvent]


@dataclass
class _SeriesData:
    latest: dict[str, Any]
    received: float
    points: deque[dict[str, Any]]
    classes: ClassView | None


class StatsView:
    """What ``watch`` and ``dashboard`` show of a statistics topic (the module's docstring).

    Each record or event taken gets the next sequence number (``version`` is the last). A series
    keeps its last ``history`` points, and the group as many of its pooled windowed rates; the
    latest ``events_kept`` drift events are kept. ``clock`` gives wall time in seconds (for the
    age of a record). Thread-safe: a follower adds while a server's threads read.

    >>> import json
    >>> view = StatsView()
    >>> view.update([{"topic": "in", "partition": 0, "seen": 10, "labeled": 10, "mistakes": 2,
    ...               "mistake_rate": 0.2, "ts": 1.0, "password": "never kept"}])
    >>> snap = view.snapshot()
    >>> snap["version"], snap["series"][0]["label"], snap["points"][0]["mistake_rate"]
    (1, '0', 0.2)
    >>> "password" in json.dumps(snap), view.snapshot(since=1)["points"]
    (False, [])
    """

    def __init__(self, history: int = HISTORY, *, topic: str = "", events_kept: int = EVENTS_KEPT,
                 clock: Callable[[], float] = time.time) -> None:
        if history < 1:
            raise ValueError("history must be at least 1")
        self.history = history
        self.topic = topic
        self._clock = clock
        self._lock = threading.Lock()
        self._series: dict[Series, _SeriesData] = {}
        self._group = Group()
        self._group_history: deque[float | None] = deque(maxlen=history)
        self._drifts = Drifts(latest=0)  # the events are kept here, as shown
        self._events: deque[DriftEvent] = deque(maxlen=events_kept)
        self.version = 0
        self.records = 0
        self.events = 0
        self.skipped = 0

    def now(self) -> float:
        """Wall time, by the view's clock."""
        return self._clock()

    def count_skipped(self, n: int) -> None:
        """Count ``n`` records skipped before they reached :meth:`update` (not JSON, say)."""
        with self._lock:
            self.skipped += n

    def update(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Take statistics records and drift events in arrival order; anything else (not a dict,
        no counters) is counted as skipped.

        The newest record of a series is the one with the greatest ``ts`` (arrival order when a
        record has none); every record adds a point to its series, and every input partition's
        record the group's pooled windowed rate to the group's history. A drift event counts in
        its series' alarms (:class:`~stream_perceptron.commands.series.Drifts`).
        """
        with self._lock:
            now = self._clock()
            for rec in records:
                if is_drift_event(rec):
                    self._take_event(_cleaned(rec))
                elif is_stats_record(rec):
                    self._take_record(_cleaned(rec), now)
                else:
                    self.skipped += 1

    def _take_record(self, rec: Mapping[str, Any], now: float) -> None:
        self.version += 1
        self.records += 1
        series = Series.of(rec)
        latest = {**_numbers(rec, LATEST_FIELDS), **_texts(rec), "lag": _lag(rec)}
        data = self._series.get(series)
        if data is None:
            data = _SeriesData(latest, now, deque(maxlen=self.history), class_view(rec))
            self._series[series] = data
        elif newer(rec, data.latest):
            data.latest, data.received, data.classes = latest, now, class_view(rec)
        data.points.append({"seq": self.version, **_numbers(rec, POINT_FIELDS), "lag": _lag(rec)})
        if partition_of(rec) is not None:
            self._group.add(rec)
            figures = self._group.figures()
            self._group_history.append(None if figures is None else figures.window_mistake_rate)

    def _take_event(self, event: Mapping[str, Any]) -> None:
        self.version += 1
        self.events += 1
        series = self._drifts.add(event)
        fields = {"seq": self.version, "series": series_id(series), **_numbers(event, EVENT_FIELDS),
                  **_texts(event)}
        self._events.append(DriftEvent(self.version, series, fields))

    def frame(self) -> Frame:
        """Everything shown, at this moment (:class:`Frame`)."""
        with self._lock:
            rows = [SeriesRow(s, series_id(s), label, dict(data.latest), list(data.points), data.received,
                              self._drifts.count(s, data.latest), self._drifts.last_offset(s, data.latest),
                              data.classes)
                    for s, label in labels(self._series).items()
                    for data in (self._series[s],)]
            return Frame(
                now=self._clock(), version=self.version, records=self.records, events=self.events,
                skipped=self.skipped, rows=rows, group=self._group.figures(),
                group_drifts=self._drifts.total(self._group.newest().values()),
                group_history=list(self._group_history), drift_events=list(self._events),
            )

    def row(self, label: str) -> SeriesRow:
        """The series labelled ``label`` (:func:`~stream_perceptron.commands.series.labels`)."""
        for row in self.frame().rows:
            if row.label == label:
                return row
        raise KeyError(label)

    def snapshot(self, since: int = 0) -> dict[str, Any]:
        """The view as JSON: what is numbered after ``since``, and everything's state now.

        ``series``: each series' id, label, topic, partition, model, newest record (``latest``),
        drift count and last drift offset (and ``classes`` when the newest record is a K-class
        worker's, :func:`series_json`); ``points``: each series' points after ``since`` (with
        the series' id), oldest first; ``events``: the drift events after ``since``; ``group``:
        the group's sums (None before a partition's record); ``version``, ``history``, ``topic``,
        ``skipped`` and ``now``.
        """
        frame = self.frame()
        points = sorted(({"series": row.id, **p} for row in frame.rows for p in row.points
                         if p["seq"] > since), key=lambda p: p["seq"])
        return {
            "version": frame.version, "history": self.history, "topic": self.topic,
            "skipped": frame.skipped, "now": frame.now, "series": [series_json(row) for row in frame.rows],
            "points": points, "events": [e.fields for e in frame.drift_events if e.seq > since],
            "group": group_json(frame.group, frame.group_drifts),
        }


def series_json(row: SeriesRow) -> dict[str, Any]:
    """A series as JSON: its id, label, topic, partition, model, newest record, drift count and
    last drift offset, and, when its newest record is a K-class worker's, ``classes``
    (:meth:`~stream_perceptron.commands.class_view.ClassView.json`)."""
    s = row.series
    out = {"id": row.id, "label": row.label, "topic": s.topic or None,
           "partition": None if s.worker else s.partition, "model": s.model or None,
           "latest": row.latest, "drifts": row.drifts or 0, "last_drift_offset": row.last_drift_offset}
    if row.classes is not None:
        out["classes"] = row.classes.json()
    return out


def group_json(figures: GroupFigures | None, drifts: int) -> dict[str, Any] | None:
    """The group's sums as JSON (None before a partition's record)."""
    if figures is None:
        return None
    return {
        "partitions": figures.partitions, "seen": figures.seen, "labeled": figures.labeled,
        "mistakes": figures.mistakes, "mistake_rate": figures.mistake_rate,
        "window_mistake_rate": figures.window_mistake_rate, "examples_per_s": figures.examples_per_s,
        "lag": figures.lag, "dead_letters": figures.dead_letters,
        "pending_labels": figures.pending_labels, "drifts": drifts,
    }


__all__ = ["EVENTS_KEPT", "EVENT_FIELDS", "HISTORY", "LATEST_FIELDS", "MAX_TEXT", "MAX_TOPIC", "POINT_FIELDS",
           "TEXT_FIELDS", "DriftEvent", "Frame", "SeriesRow", "StatsView", "clean_text", "group_json",
           "series_id", "series_json"]
