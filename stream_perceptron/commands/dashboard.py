"""``dashboard``: the statistics topic of a whole group as a live web page on localhost.

* :class:`DashboardState` turns statistics records and drift events (README, "Record formats")
  into what the page draws: per series (an input partition and its model, or an
  older worker's, :class:`~stream_perceptron.commands.series.Series`) its newest record and the
  last ``history`` points of its curves against its labeled examples (``E_n``, the windowed and
  EWMA mistake rates, the window's margins, R, γ and the bound (R/γ)² beside the window's
  mistakes, throughput, lag, pending labels), its drift alarms, and the group's sums
  (:func:`~stream_perceptron.commands.series.group_figures`). :meth:`DashboardState.snapshot`
  gives the JSON the page polls: only what came after the version the page already has.
* :class:`DashboardServer` serves the page (plain HTML, JavaScript and SVG shipped in
  ``dashboard_page/``; no build step, nothing fetched from elsewhere) and ``/api/state`` from a
  thread (the standard library's ``http.server``).
* :func:`run_dashboard` follows the topic (:func:`~stream_perceptron.commands.follow.follow_stats`,
  every partition from its beginning, no consumer group) until Ctrl+C or a duration.

Only the fields named in :data:`POINT_FIELDS`, :data:`LATEST_FIELDS` and :data:`EVENT_FIELDS`
reach the page, each checked to be a number (or, for ids, a short string): whatever else a
record holds is never served, and the settings (the cluster's secrets) are never read here.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from stream_perceptron.commands.follow import connect_timeout_s, follow_stats
from stream_perceptron.commands.series import (
    Drifts,
    Group,
    Series,
    is_drift_event,
    is_stats_record,
    labels,
    newer,
    number,
    partition_of,
    total_lag,
)
from stream_perceptron.errors import OutputError
from stream_perceptron.kafka.config import check_reachable
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.signals import stopping_on_signals

log = logging.getLogger(__name__)

POINT_FIELDS = ("seen", "labeled", "mistakes", "mistake_rate", "window_mistake_rate", "ewma_mistake_rate",
                "window_mistakes", "margin_min", "margin_mean", "R", "gamma", "bound", "examples_per_s",
                "pending_labels", "drifts", "ts")
"""The numbers of a statistics record kept as one point of its series' curves (and ``lag``, summed)."""

LATEST_FIELDS = (*POINT_FIELDS, "served_mistake_rate", "window", "window_labeled", "R_all", "theta_norm",
                 "intercept", "dead_letters", "uptime_s", "last_drift_offset", "label_joins",
                 "label_expiries", "label_delay_s")
"""The numbers of a series' newest record shown beside its curves."""

EVENT_FIELDS = ("offset", "rate_before", "rate_after", "drifts", "labeled", "ts")
"""The numbers of a drift event served (with its ``detector``, ``stream`` and ``client_id``)."""

_TEXT_FIELDS = ("detector", "stream", "client_id", "model_id")
_MAX_TEXT = 64  # a served id or name is cut to this many characters
HISTORY = 600
"""Points kept per series (the page keeps as many): ten minutes of a record a second."""
_EVENTS_KEPT = 200  # drift events kept for the page, newest last

PAGE = "dashboard_page"
"""The package-data directory of the page, beside this module."""
_PAGE_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
               "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
               "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8")}


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
    """The short text fields of ``rec`` (ids, names), cut to :data:`_MAX_TEXT` characters."""
    return {name: (v[:_MAX_TEXT] if isinstance(v := rec.get(name), str) else None) for name in _TEXT_FIELDS}


@dataclass
class _SeriesData:
    """What the page is given of one series: its newest record and its last points."""

    latest: dict[str, Any]
    points: deque[dict[str, Any]]


def series_id(series: Series) -> str:
    """A series' id on the page: ``topic:partition:model`` (an older worker's: its worker key).

    >>> series_id(Series("", "in", 2, "3f2a9c1d")), series_id(Series("w1", "", -1, ""))
    ('in:2:3f2a9c1d', 'w1')
    """
    return series.worker or f"{series.topic}:{series.partition}:{series.model}"


class DashboardState:
    """The page's data, from statistics records and drift events taken in arrival order.

    Each record or event taken gets the next sequence number (``version`` is the last); a
    :meth:`snapshot` since version v holds the points and events numbered after v, and every
    series' newest record and the group's figures as they are now. A series keeps its last
    ``history`` points. Thread-safe: the follower adds while the server's threads read.

    >>> state = DashboardState()
    >>> state.update([{"topic": "in", "partition": 0, "seen": 10, "labeled": 10, "mistakes": 2,
    ...                "mistake_rate": 0.2, "ts": 1.0, "password": "never served"}])
    >>> snap = state.snapshot()
    >>> snap["version"], snap["series"][0]["label"], snap["points"][0]["mistake_rate"]
    (1, '0', 0.2)
    >>> "password" in json.dumps(snap), state.snapshot(since=1)["points"]
    (False, [])
    """

    def __init__(self, history: int = HISTORY, *, topic: str = "",
                 clock: Callable[[], float] = time.time) -> None:
        if history < 1:
            raise ValueError("history must be at least 1")
        self.history = history
        self.topic = topic
        self._clock = clock
        self._lock = threading.Lock()
        self._series: dict[Series, _SeriesData] = {}
        self._group = Group()
        self._drifts = Drifts(latest=_EVENTS_KEPT)
        self._events: deque[dict[str, Any]] = deque(maxlen=_EVENTS_KEPT)
        self.version = 0
        self.skipped = 0

    def count_skipped(self, n: int) -> None:
        """Count ``n`` records skipped before they reached :meth:`update` (not JSON, say)."""
        with self._lock:
            self.skipped += n

    def update(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Take statistics records and drift events; anything else is counted as skipped."""
        with self._lock:
            for rec in records:
                if is_drift_event(rec):
                    self._take_event(rec)
                elif is_stats_record(rec):
                    self._take_record(rec)
                else:
                    self.skipped += 1

    def _take_record(self, rec: Mapping[str, Any]) -> None:
        self.version += 1
        series = Series.of(rec)
        latest = {**_numbers(rec, LATEST_FIELDS), **_texts(rec), "lag": _lag(rec)}
        data = self._series.get(series)
        if data is None:
            data = self._series[series] = _SeriesData(latest, deque(maxlen=self.history))
        elif newer(rec, data.latest):
            data.latest = latest
        data.points.append({"seq": self.version, **_numbers(rec, POINT_FIELDS), "lag": _lag(rec)})
        if partition_of(rec) is not None:
            self._group.add(rec)

    def _take_event(self, event: Mapping[str, Any]) -> None:
        self.version += 1
        series = self._drifts.add(event)
        served = {"seq": self.version, "series": series_id(series), **_numbers(event, EVENT_FIELDS),
                  **_texts(event)}
        self._events.append(served)

    def snapshot(self, since: int = 0) -> dict[str, Any]:
        """The page's data: what is numbered after ``since``, and everything's state now.

        ``series``: each series' id, label, partition, model, newest record (:data:`LATEST_FIELDS`,
        ``lag`` summed), drift count and last drift offset; ``points``: each series' points after
        ``since`` (:data:`POINT_FIELDS` and ``lag``, with the series id), oldest first;
        ``events``: the drift events after ``since``; ``group``: the group's sums (None before a
        partition's record); ``version``, ``history``, ``topic``, ``skipped`` and ``now``.
        """
        with self._lock:
            named = labels(self._series)
            series, points = [], []
            for s, label in named.items():
                data = self._series[s]
                sid = series_id(s)
                series.append({
                    "id": sid, "label": label, "topic": s.topic or None,
                    "partition": None if s.worker else s.partition, "model": s.model or None,
                    "latest": data.latest, "drifts": self._drifts.count(s, data.latest) or 0,
                    "last_drift_offset": self._drifts.last_offset(s, data.latest),
                })
                points += [{"series": sid, **p} for p in data.points if p["seq"] > since]
            points.sort(key=lambda p: p["seq"])
            return {
                "version": self.version, "history": self.history, "topic": self.topic,
                "skipped": self.skipped, "now": self._clock(), "series": series, "points": points,
                "events": [e for e in self._events if e["seq"] > since], "group": self._group_json(),
            }

    def _group_json(self) -> dict[str, Any] | None:
        figures = self._group.figures()
        if figures is None:
            return None
        return {
            "partitions": figures.partitions, "seen": figures.seen, "labeled": figures.labeled,
            "mistakes": figures.mistakes, "mistake_rate": figures.mistake_rate,
            "window_mistake_rate": figures.window_mistake_rate, "examples_per_s": figures.examples_per_s,
            "lag": figures.lag, "dead_letters": figures.dead_letters,
            "pending_labels": figures.pending_labels,
            "drifts": self._drifts.total(self._group.newest().values()),
        }


def _lag(rec: Mapping[str, Any]) -> float | None:
    """The record's lag summed over its partitions, as a number (None when unknown)."""
    return number(total_lag(rec.get("lag")))


def page_file(name: str) -> bytes:
    """A file of the page (package data in :data:`PAGE`)."""
    return resources.files("stream_perceptron.commands").joinpath(PAGE, name).read_bytes()


class DashboardServer(ThreadingHTTPServer):
    """The page and ``/api/state?since=N`` (:meth:`DashboardState.snapshot` as JSON), served from
    ``state``; ``refresh_s`` is how often the page polls. Bound at construction: port 0 takes a
    free one, :attr:`url` names it. Raises :class:`OutputError` when the address cannot be bound."""

    daemon_threads = True

    def __init__(self, host: str, port: int, state: DashboardState, *, refresh_s: float = 1.0) -> None:
        self.state = state
        self.refresh_s = refresh_s
        self.files = {path: (page_file(name), kind) for path, (name, kind) in _PAGE_FILES.items()}
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            raise OutputError(f"cannot serve the dashboard on {host}:{port}: {exc.strerror or exc}") from exc

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = host if isinstance(host, str) else host.decode()
        return f"http://{f'[{shown}]' if ':' in shown else shown}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    server_version = "stream-perceptron-dashboard"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        parts = urlsplit(self.path)
        if parts.path == "/api/state":
            query = parse_qs(parts.query)
            try:
                since = int(query.get("since", ["0"])[0])
            except ValueError:
                self._send(HTTPStatus.BAD_REQUEST, b"since: not an integer\n", "text/plain; charset=utf-8")
                return
            body = {**self.server.state.snapshot(since), "refresh_s": self.server.refresh_s}
            self._send(HTTPStatus.OK, json.dumps(body, allow_nan=False).encode(), "application/json")
        elif parts.path in self.server.files:
            self._send(HTTPStatus.OK, *self.server.files[parts.path])
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        # nothing from elsewhere: the page, its script and its style come from here only
        self.send_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
        log.debug("%s " + format, self.address_string(), *args)


def run_dashboard(
    kafka: KafkaSettings, topic: str, *, host: str = "127.0.0.1", port: int = 8765, refresh_s: float = 1.0,
    duration_s: float | None = None, history: int = HISTORY, on_ready: Callable[[str], None] | None = None,
) -> int:
    """Serve the dashboard of ``topic`` on ``host``:``port`` until Ctrl+C or ``duration_s``; 0.

    ``on_ready`` is called with the page's URL once it is served. The topic is read from its
    beginning, every partition, with no consumer group; a topic that does not exist yet is waited
    for. Raises :class:`OutputError` when the address cannot be bound,
    :class:`~stream_perceptron.errors.KafkaEdgeError` when Kafka cannot be reached.
    """
    if refresh_s <= 0:
        raise ValueError("refresh_s must be positive")
    check_reachable(kafka, connect_timeout_s(kafka))  # before the page is offered
    state = DashboardState(history, topic=topic)
    server = DashboardServer(host, port, state, refresh_s=refresh_s)
    thread = threading.Thread(target=server.serve_forever, name="dashboard-http", daemon=True)
    batches = follow_stats(kafka, topic, poll_timeout_ms=max(50, min(500, int(refresh_s * 500))),
                           on_skip=state.count_skipped)
    deadline = None if duration_s is None else time.monotonic() + duration_s
    thread.start()
    try:
        with stopping_on_signals() as interrupted:
            if on_ready is not None:
                on_ready(server.url)
            for batch in batches:
                state.update(batch)
                if interrupted.is_set() or (deadline is not None and time.monotonic() >= deadline):
                    break
    except KeyboardInterrupt:  # a second Ctrl+C
        log.debug("dashboard interrupted")
    finally:
        batches.close()
        server.shutdown()
        server.server_close()
        thread.join(5)
    return 0


__all__ = ["EVENT_FIELDS", "HISTORY", "LATEST_FIELDS", "POINT_FIELDS", "DashboardServer", "DashboardState",
           "page_file", "run_dashboard", "series_id"]
