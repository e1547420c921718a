"""``stream-perceptron dashboard`` in a real browser: a worker learns from a real broker, the
dashboard follows its statistics topic, and headless Chromium (Debian's ``chromium``) loads the
page and sees the curves move as more records are learned, with a drift alarm marked where it was
raised. The page's screenshot is written to the test's directory (``docs/dashboard.png`` is one
such). Skips without Chromium, saying why; in CI (``CI=true``) that is a failure."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from stream_perceptron.codec.outputs import encode
from tests.integration.commands.headless_chromium import Chromium, need_chromium
from tests.integration.helpers import (
    ThreadedWorker,
    encode_stream,
    noisy_stream,
    send_all,
    topics_for,
    wait_for,
    worker_env,
    worker_settings,
)

PER_PHASE = 1_200  # input records per phase, spread over both partitions


def start_dashboard(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``stream-perceptron dashboard --port 0`` in a process; its URL, from its first line."""
    with open(log, "ab") as err:  # the child keeps its own descriptor
        proc = subprocess.Popen([sys.executable, "-m", "stream_perceptron.cli", "dashboard", "--port", "0",
                                 "--refresh", "0.2"], env=env, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    line = proc.stdout.readline().decode() if ready else ""
    assert " at http://127.0.0.1:" in line, f"no URL from the dashboard: {line!r} {log.read_text()}"
    return proc, line.split(" at ", 1)[1].split()[0]


def state(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}api/state", timeout=5) as response:
        body: dict[str, Any] = json.loads(response.read())
    return body


def page(chromium: Chromium, session: str) -> dict[str, Any]:
    """What the page says it holds (``window.spDashboard.snapshot()``), empty before its script ran."""
    value = chromium.evaluate(session, "window.spDashboard ? window.spDashboard.snapshot() : null")
    return value or {"series": {}, "updates": 0}


def drift_event(rec: dict[str, Any], drifts: int) -> dict[str, Any]:
    """A drift alarm in the agreed format (README, "Record formats": drift event) at the
    partition's latest record."""
    return {"event": "drift", "topic": rec["topic"], "partition": rec["partition"],
            "offset": int(rec["labeled"]) - 1, "detector": "adwin", "stream": "mistakes", "rate_before": 0.05,
            "rate_after": 0.3, "drifts": drifts, "labeled": rec["labeled"], "model_id": rec["model_id"],
            "client_id": rec["client_id"], "ts": time.time()}


def test_the_page_shows_each_partition_live_and_marks_a_drift(fast_kafka, new_topic, tmp_path):
    binary = need_chromium()
    kafka = fast_kafka()
    topics = topics_for(new_topic, partitions=2)
    settings = worker_settings(kafka, topics, tmp_path / "ckpt",
                               stats={"every_examples": 100, "every_seconds": 0.3})
    records = encode_stream(noisy_stream(2 * PER_PHASE, noise=0.1))
    worker = ThreadedWorker(settings).start()
    dashboard, url = start_dashboard(worker_env(settings), tmp_path / "dashboard.log")
    try:
        with Chromium(binary, tmp_path / "profile", tmp_path / "chromium.log") as chromium:
            session = chromium.open(url)
            send_all(kafka, topics["input"], records[:PER_PHASE])
            def drawn() -> bool:
                series = page(chromium, session)["series"]
                return len(series) == 2 and all(s["points"] >= 2 and s["paths"].get("mistake_rate")
                                                for s in series.values())

            wait_for(drawn, 15, "both partitions' curves on the page", every_s=0.2)
            first = page(chromium, session)

            # a drift alarm on partition 0's model, where its newest record is
            zero = next(s for s in state(url)["series"] if s["partition"] == 0)
            rec = {**zero["latest"], "topic": zero["topic"], "partition": 0}
            send_all(kafka, topics["stats"], [encode(drift_event(rec, 1))],
                     keys=[f"{zero['topic']}:0".encode()])
            send_all(kafka, topics["input"], records[PER_PHASE:])

            def moved() -> bool:
                now = page(chromium, session)
                grown = [s["lastLabeled"] > first["series"][sid]["lastLabeled"]
                         for sid, s in now["series"].items()]
                return now["rows"] == 1 and all(grown)

            wait_for(moved, 15, "the curves to move on the page", every_s=0.2)
            second = page(chromium, session)
            shot = chromium.screenshot(session, tmp_path / "dashboard.png")
    finally:
        dashboard.terminate()
        dashboard.wait(10)
        assert dashboard.stdout is not None
        dashboard.stdout.close()
        worker.stop()

    assert second["updates"] > first["updates"]
    for sid, now in second["series"].items():
        before = first["series"][sid]
        assert now["points"] > before["points"]
        for key in ("mistake_rate", "window_mistake_rate", "ewma_mistake_rate"):
            assert now["paths"][key] and now["paths"][key] != before["paths"][key], (sid, key)
    marked = {sid: s["marks"] for sid, s in second["series"].items()}
    assert marked[zero["id"]] == 1 and sum(marked.values()) == 1, marked
    # the page's group sums the partitions' newest records
    group = second["group"]
    assert group["partitions"] == 2 and group["drifts"] == 1
    assert group["labeled"] == sum(s["lastLabeled"] for s in second["series"].values())
    assert 0 < group["mistakes"] <= group["labeled"] <= 2 * PER_PHASE
    image = Image.open(shot)
    assert image.format == "PNG" and image.width == 1400 and image.height >= 600
    rgb = np.asarray(image.convert("RGB")).astype(int)
    red = int(((rgb[..., 0] > 190) & (rgb[..., 1] < 80) & (rgb[..., 2] < 80)).sum())
    assert red > 20, "no drift marker drawn"
