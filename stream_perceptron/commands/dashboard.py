"""``dashboard``: the statistics topic of a whole group as a live web page on localhost.

* :class:`~stream_perceptron.commands.stats_view.StatsView` (shared with ``watch``) turns
  statistics records and drift events (README, "Record formats") into what the page draws: per
  series (an input partition and its model, or an older worker's) its newest record and the last
  ``history`` points of its curves against its labeled examples (``E_n``, the windowed and EWMA
  mistake rates, the window's margins, R, γ and the bound (R/γ)² beside the window's mistakes,
  throughput, lag, pending labels), its drift alarms, the group's sums, and, for a K-class
  worker's partition, the per-class rates and the confusion matrix of its newest record
  (:mod:`~stream_perceptron.commands.class_view`: the ten most labeled classes, the others
  summed; 2(R/γ)² is then its bound).
  :meth:`~stream_perceptron.commands.stats_view.StatsView.snapshot` gives the JSON the page
  polls: only what came after the version the page already has.
* :class:`DashboardServer` serves the page (plain HTML, JavaScript and SVG shipped in
  ``dashboard_page/``; no build step, nothing fetched from elsewhere), the web renderer of that
  view, and ``/api/state`` from a thread: a :class:`~stream_perceptron.http_server.HTTPServer`,
  bounded against hostile clients, which asks for a token when given one
  (``SP_DASHBOARD__TOKEN``).
* :func:`run_dashboard` follows the topic (:func:`~stream_perceptron.commands.follow.follow_stats`,
  every partition from its beginning, no consumer group) until Ctrl+C, SIGTERM or a duration.

Only the fields named in :data:`~stream_perceptron.commands.stats_view.POINT_FIELDS`,
:data:`~stream_perceptron.commands.stats_view.LATEST_FIELDS` and
:data:`~stream_perceptron.commands.stats_view.EVENT_FIELDS`, and a K-class record's classes shown
(their counts and their cells of the confusion matrix), reach the page, each checked to be a
number (or, for ids and class names, a short, cleaned string, which the page sets as text, never
as HTML): whatever else a record holds is never served, and the settings (the cluster's secrets)
are never read here.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from importlib import resources
from urllib.parse import parse_qs

from stream_perceptron.commands.follow import connect_timeout_s, follow_stats
from stream_perceptron.commands.stats_view import HISTORY, StatsView
from stream_perceptron.errors import OutputError
from stream_perceptron.http_server import HTTPServer, Limits, Request, Response
from stream_perceptron.kafka.config import check_reachable
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.signals import stopping_on_signals

log = logging.getLogger(__name__)

PAGE = "dashboard_page"
"""The package-data directory of the page, beside this module."""
_PAGE_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
               "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
               "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8")}


def page_file(name: str) -> bytes:
    """A file of the page (package data in :data:`PAGE`)."""
    return resources.files("stream_perceptron.commands").joinpath(PAGE, name).read_bytes()


class DashboardServer(HTTPServer):
    """The page and ``/api/state?since=N`` (:meth:`StatsView.snapshot` as JSON), served from
    ``state``; ``refresh_s`` is how often the page polls; with a ``token``, every path asks for it.
    Bound at construction: port 0 takes a free one, :attr:`url` names it. Raises
    :class:`OutputError` when the address cannot be bound."""

    def __init__(self, host: str, port: int, state: StatsView, *, refresh_s: float = 1.0,
                 token: str | None = None, limits: Limits | None = None) -> None:
        self.state = state
        self.refresh_s = refresh_s
        routes = {path: _file(page_file(name), kind) for path, (name, kind) in _PAGE_FILES.items()}
        routes["/api/state"] = self._api_state
        try:
            super().__init__((host, port), routes, token=token, limits=limits,
                             name="stream-perceptron-dashboard")
        except OSError as exc:
            raise OutputError(f"cannot serve the dashboard on {host}:{port}: {exc.strerror or exc}") from exc

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"

    def _api_state(self, request: Request) -> Response:
        try:
            since = int(parse_qs(request.query).get("since", ["0"])[0])
        except ValueError:
            return Response(HTTPStatus.BAD_REQUEST, b"since: not an integer\n")
        body = {**self.state.snapshot(since), "refresh_s": self.refresh_s}
        return Response(HTTPStatus.OK, json.dumps(body, allow_nan=False).encode(), "application/json")


def _file(body: bytes, kind: str) -> Callable[[Request], Response]:
    """The route of a file of the page."""
    return lambda request: Response(HTTPStatus.OK, body, kind)


def run_dashboard(
    kafka: KafkaSettings, topic: str, *, host: str = "127.0.0.1", port: int = 8765, refresh_s: float = 1.0,
    duration_s: float | None = None, history: int = HISTORY, on_ready: Callable[[str], None] | None = None,
    token: str | None = None,
) -> int:
    """Serve the dashboard of ``topic`` on ``host``:``port`` until Ctrl+C or ``duration_s``; 0.
    With a ``token``, every page asks for it.

    ``on_ready`` is called with the page's URL once it is served. The topic is read from its
    beginning, every partition, with no consumer group; a topic that does not exist yet is waited
    for. Raises :class:`OutputError` when the address cannot be bound,
    :class:`~stream_perceptron.errors.KafkaEdgeError` when Kafka cannot be reached.
    """
    if refresh_s <= 0:
        raise ValueError("refresh_s must be positive")
    check_reachable(kafka, connect_timeout_s(kafka))  # before the page is offered
    state = StatsView(history, topic=topic)
    server = DashboardServer(host, port, state, refresh_s=refresh_s, token=token)
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


__all__ = ["DashboardServer", "page_file", "run_dashboard"]
