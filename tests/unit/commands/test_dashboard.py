"""The dashboard without a broker: the page's JSON (the statistics view's snapshot) from statistics
records and drift events, only what came after a version, the fields allowed and no other, bounded
history; and its HTTP server."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from stream_perceptron.commands.dashboard import DashboardServer, page_file
from stream_perceptron.commands.stats_view import LATEST_FIELDS, StatsView
from stream_perceptron.errors import OutputError
from tests.unit.commands.test_watch_render import (
    NOW,
    class_record,
    drift_event,
    partition_record,
    stats_record,
)


def test_each_partition_is_a_series_with_its_points_and_the_group_sums_the_newest():
    state = StatsView(clock=lambda: NOW)
    state.update([
        partition_record(0, 1_000, 40, 30, ts=NOW - 3),
        partition_record(1, 900, 9, 9, ts=NOW - 2, gamma=0.03, bound=2000.0),
        partition_record(0, 2_000, 60, 20, ts=NOW - 1),
    ])
    snap = state.snapshot()
    assert snap["version"] == 3 and snap["now"] == NOW
    assert [(s["id"], s["label"], s["partition"]) for s in snap["series"]] == [
        ("examples:0:00000000", "0", 0), ("examples:1:11111111", "1", 1)]
    zero, one = snap["series"]
    assert zero["latest"]["labeled"] == 2_000 and zero["latest"]["mistakes"] == 60
    assert zero["latest"]["lag"] == 10 and one["latest"]["bound"] == 2000.0
    assert [(p["series"], p["seq"], p["labeled"], p["window_mistakes"]) for p in snap["points"]] == [
        ("examples:0:00000000", 1, 1_000, 30), ("examples:1:11111111", 2, 900, 9),
        ("examples:0:00000000", 3, 2_000, 20)]
    group = snap["group"]
    assert (group["partitions"], group["labeled"], group["mistakes"]) == (2, 2_900, 69)
    assert group["mistake_rate"] == 69 / 2_900 and group["window_mistake_rate"] == 29 / 2_000
    assert group["examples_per_s"] == 3_000.0 and group["lag"] == 21 and group["drifts"] == 0


def test_since_gives_only_what_came_after_and_the_state_now():
    state = StatsView()
    state.update([partition_record(0, 1_000, 40, 30, ts=NOW - 3)])
    version = state.snapshot()["version"]
    state.update([partition_record(0, 2_000, 60, 20, ts=NOW - 1), drift_event(0, 1_500, 1)])
    later = state.snapshot(since=version)
    assert [p["labeled"] for p in later["points"]] == [2_000]
    events = [(e["offset"], e["seq"], e["series"]) for e in later["events"]]
    assert events == [(1_500, 3, "examples:0:00000000")]
    assert later["series"][0]["latest"]["labeled"] == 2_000
    assert state.snapshot(since=later["version"])["points"] == []
    assert state.snapshot(since=later["version"])["events"] == []


def test_drift_events_count_in_their_series_and_the_group():
    state = StatsView()
    state.update([
        partition_record(0, 1_000, 40, 30, drifts=0, last_drift_offset=None),
        partition_record(1, 1_000, 40, 30, drifts=2, last_drift_offset=700),  # stated by its state
        drift_event(0, 812, 1, rate_after=0.4),
        drift_event(0, 950, 2),
    ])
    snap = state.snapshot()
    zero, one = snap["series"]
    assert (zero["drifts"], zero["last_drift_offset"]) == (2, 950)
    assert (one["drifts"], one["last_drift_offset"]) == (2, 700)
    assert snap["group"]["drifts"] == 4
    first = snap["events"][0]
    assert (first["offset"], first["labeled"], first["rate_before"], first["rate_after"], first["detector"],
            first["stream"], first["drifts"]) == (812, 812, 0.02, 0.4, "adwin", "mistakes", 1)


def test_only_the_fields_named_reach_the_page_and_every_number_is_finite():
    secret = "sasl-password-123"
    rec = partition_record(0, 1_000, 40, 30, password=secret, sasl_plain_password=secret,
                           margin_min=float("nan"), R=float("inf"), pending_labels=5, client_id="w" * 100)
    event = drift_event(0, 10, 1, note=secret, rate_before=True)
    state = StatsView()
    state.update([rec, event])
    text = json.dumps(state.snapshot(), allow_nan=False)  # raises on NaN or Infinity
    assert secret not in text
    snap = json.loads(text)
    latest = snap["series"][0]["latest"]
    assert set(latest) == {*LATEST_FIELDS, "lag", "detector", "stream", "client_id", "model_id"}
    assert latest["margin_min"] is None and latest["R"] is None and latest["pending_labels"] == 5
    assert latest["client_id"] == "w" * 64  # an id is cut to 64 characters
    assert "note" not in snap["events"][0] and snap["events"][0]["rate_before"] is None


def test_older_records_without_the_new_fields_show_none_of_them():
    state = StatsView()
    state.update([partition_record(0, 1_000, 40, 30)])
    latest = state.snapshot()["series"][0]["latest"]
    assert latest["pending_labels"] is None and latest["drifts"] is None and latest["label_delay_s"] is None
    assert state.snapshot()["group"]["pending_labels"] == 0


def test_an_older_workers_records_are_a_series_of_their_own_outside_the_group():
    state = StatsView()
    state.update([stats_record("w1", 500, 10, 0.02), {"x": [1.0], "y": 1}, "not a record"])
    snap = state.snapshot()
    assert [(s["id"], s["label"], s["partition"]) for s in snap["series"]] == [("w1", "w1", None)]
    assert snap["group"] is None and snap["skipped"] == 2


def test_each_series_keeps_its_last_history_points():
    state = StatsView(history=3)
    state.update([partition_record(0, 100 * i, i, i) for i in range(1, 8)])
    assert [p["labeled"] for p in state.snapshot()["points"]] == [500, 600, 700]
    with pytest.raises(ValueError, match="history"):
        StatsView(history=0)


def test_the_page_fetches_nothing_from_elsewhere():
    for name in ("index.html", "dashboard.js", "dashboard.css"):
        text = page_file(name).decode()
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.\w+[^\s\"'`)]*", text))
        assert urls <= {"http://www.w3.org/2000/svg"}, (name, urls)  # a namespace, never fetched


# ------------------------------------------------------------------------------ the HTTP server


@pytest.fixture
def served() -> Iterator[tuple[str, StatsView]]:
    state = StatsView()
    server = DashboardServer("127.0.0.1", 0, state, refresh_s=0.5)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.url, state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(exc.headers), exc.read()


def test_the_server_serves_the_page_its_files_and_the_state(served):
    url, state = served
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url)
    status, headers, body = get(url)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert body == page_file("index.html")
    assert headers["Content-Security-Policy"].startswith("default-src 'self'")
    assert get(url + "dashboard.js")[2] == page_file("dashboard.js")
    assert get(url + "dashboard.css")[1]["Content-Type"].startswith("text/css")
    state.update([partition_record(0, 1_000, 40, 30), drift_event(0, 900, 1)])
    status, headers, body = get(url + "api/state?since=0")
    snap: dict[str, Any] = json.loads(body)
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert snap["version"] == 2 and snap["refresh_s"] == 0.5 and len(snap["points"]) == 1
    assert json.loads(get(url + "api/state?since=2")[2])["points"] == []
    assert get(url + "api/state?since=x")[0] == 400
    assert get(url + "secrets")[0] == 404


def test_the_state_gives_a_k_class_series_its_classes_and_a_binary_one_none(served):
    url, state = served
    state.update([class_record(0, ["cat", "<b>dog</b>", 3], [[5, 1, 0], [2, 6, 0], [0, 0, 1]]),
                  partition_record(1, 1_000, 40, 30)])
    snap = json.loads(get(url + "api/state")[2])
    zero, one = snap["series"]
    assert "classes" not in one
    classes = zero["classes"]
    # names as text: the page sets text
    assert [c["class"] for c in classes["per_class"]] == ["cat", "<b>dog</b>", "3"]
    assert classes["confusion"] == [[5, 1, 0], [2, 6, 0], [0, 0, 1]] and classes["other"] is None
    assert [c["predicted"] for c in classes["per_class"]] == [7, 7, 1] and classes["count"] == 3


def test_an_address_in_use_is_one_clear_error(served):
    url, _ = served
    port = int(url.rsplit(":", 1)[1].strip("/"))
    with pytest.raises(OutputError, match=rf"cannot serve the dashboard on 127\.0\.0\.1:{port}"):
        DashboardServer("127.0.0.1", port, StatsView())
