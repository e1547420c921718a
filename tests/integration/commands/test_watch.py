"""``watch`` and ``plot`` on a real broker: the live dashboard in a pseudo-terminal, the PNG, the errors."""

from __future__ import annotations

import errno
import fcntl
import io
import itertools
import json
import logging
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from PIL import Image
from rich.console import Console

from stream_perceptron import Perceptron, RunningStats
from stream_perceptron.codec.outputs import encode
from stream_perceptron.commands.read import read_topic
from stream_perceptron.commands.watch import follow_stats, run_plot, run_watch
from stream_perceptron.errors import NoStatsError
from stream_perceptron.kafka.admin import ensure_topics
from stream_perceptron.model.learner import Learner
from stream_perceptron.settings import KafkaSettings
from stream_perceptron.sources import open_source
from tests.integration.helpers import send_all

ROOT = Path(__file__).resolve().parents[3]
SCREENSHOT = ROOT / "docs" / "watch-screenshot.txt"
COLS, ROWS = 120, 40

# Control sequences: CSI (cursor moves, erase, colours, private modes) and OSC (titles, links).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]")


class WorkerStats:
    """Statistics records computed the way a worker computes them: a learner over a generated stream.

    With ``partition``, the records of input partition ``examples``/``partition`` as a worker
    publishes them now (``topic``, ``partition``, its offsets and lag only); without, an older
    worker's (no partition in them)."""

    def __init__(self, client_id: str, every: int = 500, n: int = 6000, seed: int = 7,
                 noise: float = 0.02, gamma: float = 0.05, model_id: str | None = None,
                 partition: int | None = None, input_topic: str = "examples") -> None:
        stream = list(open_source(f"separable:d=6,gamma={gamma},n={n},seed={seed},noise={noise}"))
        self.X = np.array([x for x, _ in stream], dtype=np.float64)
        self.y = np.array([y for _, y in stream], dtype=np.int8)
        self.learner = Learner(Perceptron(), RunningStats(window=1000, ewma_alpha=0.01))
        self.client_id, self.every, self.seen, self.seed = client_id, every, 0, seed
        self.model_id = model_id
        self.partition, self.input_topic, self.n = partition, input_topic, n
        self.started = time.time()

    def next(self) -> dict[str, Any]:
        lo, hi = self.seen, self.seen + self.every
        self.learner.step(self.X[lo:hi], self.y[lo:hi])
        self.seen = hi
        now = time.time()
        record = {
            **self.learner.stats.snapshot(),
            "updates": self.learner.model.mistakes,
            "intercept": self.learner.model.intercept,
            "examples_per_s": 38_000.0 + 1_250.0 * (hi // self.every) + 3_100.0 * (self.seed % 5),
            "dead_letters": 2,
            "offsets": {self.input_topic: {str(self.partition or 0): hi}},
            "ts": now,
            "uptime_s": now - self.started + 1.0,
            "client_id": self.client_id,
            **({} if self.model_id is None else {"model_id": self.model_id}),
        }
        if self.partition is not None:
            where = f"{self.input_topic}:{self.partition}"
            record.update(topic=self.input_topic, partition=self.partition, lag={where: self.n - hi})
        return orjson.loads(encode(record))  # JSON-native, as a consumer decodes it

    def many(self, count: int) -> list[dict[str, Any]]:
        return [self.next() for _ in range(count)]


def publish(kafka: KafkaSettings, topic: str, records: list[dict[str, Any]],
            partition: int | None = 0) -> None:
    """Send ``records`` to ``topic``, keyed as a worker keys them: ``"<topic>:<partition>"`` for an
    input partition's, else by index; to ``partition``, or (None) where the key hashes."""
    keys = [(f"{r['topic']}:{r['partition']}" if "partition" in r else str(i)).encode()
            for i, r in enumerate(records)]
    send_all(kafka, topic, [encode(r) for r in records], partition=partition, keys=keys)


def row(frame: str, label: str) -> list[str]:
    """The cells of the dashboard's row ``label`` (cells are at least two spaces apart); [] when
    the row is not on the screen."""
    for line in frame.splitlines():
        cells = [c for c in re.split(r"\s{2,}", line.strip("│ ")) if c]
        if cells and cells[0] == label:
            return cells
    return []


def group_cells(records: list[dict[str, Any]]) -> list[str]:
    """The group row's cells expected from the newest record of each partition: Σ labeled,
    Σ mistakes, E_n = Σ mistakes / Σ labeled, the pooled window, Σ examples/s, Σ lag."""
    labeled = sum(r["labeled"] for r in records)
    mistakes = sum(r["mistakes"] for r in records)
    window = sum(r["window_mistakes"] for r in records) / sum(r["window_labeled"] for r in records)
    lag = sum(v for r in records for v in r["lag"].values())
    return [f"group ({len(records)})", f"{labeled:,}", f"{mistakes:,}", f"{mistakes / labeled:.4f}",
            f"{window:.4f}", f"{sum(r['examples_per_s'] for r in records):,.0f}", f"{lag:,}"]


def partition_cells(rec: dict[str, Any]) -> list[str]:
    """A partition row's cells from its newest record: labeled, mistakes, E_n, window, EWMA."""
    return [str(rec["partition"]), f"{rec['labeled']:,}", f"{rec['mistakes']:,}",
            f"{rec['mistake_rate']:.4f}", f"{rec['window_mistake_rate']:.4f}",
            f"{rec['ewma_mistake_rate']:.4f}"]


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text.replace("\r\n", "\n")).replace("\r", "")


def last_frame(raw: str) -> str:
    """The last frame rich.live drew: what follows its last erase-line sequence, ANSI stripped."""
    cut = raw.rfind("\x1b[2K")
    frame = raw[cut + len("\x1b[2K"):] if cut >= 0 else raw
    lines = [line.rstrip() for line in strip_ansi(frame).split("\n")]
    return "\n".join(lines).strip("\n") + "\n"


def cell(frame: str, label: str, worker: str) -> str | None:
    """The text of the dashboard's row ``label`` in the column of ``worker`` (cells are right-aligned
    under their header); None when the row or the column is not on the screen."""
    lines = frame.splitlines()
    named = re.compile(rf"(?<=\s){re.escape(worker)}(?=\s)")
    header = next((line for line in lines if named.search(line)), None)
    row = next((line for line in lines if line.startswith(f"│ {label} ")), None)
    if header is None or row is None:
        return None
    found = named.search(header)
    assert found is not None
    ends = [m.end() for m in re.finditer(r"[^\s│]+", header)]
    start = max((e for e in ends if e <= found.start()), default=len(f"│ {label}"))
    return row[start:found.end()].strip() or None


class PtyProcess:
    """A child process whose stdin/stdout/stderr is a pseudo-terminal of COLS x ROWS."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        try:
            self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                         cwd=ROOT, start_new_session=True)
        finally:
            os.close(slave)
        self.raw = b""

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", errors="replace")

    def read(self, timeout_s: float) -> bool:
        """Read what the child wrote within ``timeout_s``; False at end of output."""
        ready, _, _ = select.select([self.master], [], [], timeout_s)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError as exc:  # EIO: the child side is closed
            if exc.errno != errno.EIO:
                raise
            return False
        self.raw += chunk
        return bool(chunk)

    def read_until(self, condition: Callable[[str], bool], timeout_s: float, what: str) -> str:
        """Read until ``condition(last whole frame)`` holds; bounded by ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            alive = self.read(0.2)
            frame = last_frame(self.text)
            if "╰" in frame and condition(frame):  # a whole frame, down to the panel's bottom edge
                return frame
            if not alive:
                break
        raise AssertionError(f"watch never showed {what}; last screen:\n{last_frame(self.text)}"
                             f"\nexit code {self.proc.poll()}")

    def finish(self, timeout_s: float) -> int:
        """Read to the end of the output and reap the child (killed if it outlives ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.read(0.2):
            pass
        try:
            return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        os.close(self.master)


def watch_argv(kafka: KafkaSettings, topic: str, duration_s: float) -> list[str]:
    code = (
        "import sys\n"
        "from stream_perceptron.settings import KafkaSettings\n"
        "from stream_perceptron.commands.watch import run_watch\n"
        f"kafka = KafkaSettings(bootstrap_servers={kafka.bootstrap_servers!r}, client_id='sp-watch')\n"
        f"sys.exit(run_watch(kafka, {topic!r}, refresh_s=0.25, duration_s={duration_s!r}))\n"
    )
    return [sys.executable, "-c", code]


def terminal_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SP_") and k not in {"COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR"}}
    env.update(TERM="xterm-256color", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    return env


def test_watch_shows_a_row_per_partition_and_the_group_in_a_terminal(kafka_settings, new_topic):
    kafka = kafka_settings()
    topic = new_topic()
    # three input partitions: 0 and 1 held by worker-1, 2 by worker-2; partition 2 converges
    parts = [
        WorkerStats("worker-1", noise=0.02, partition=0, model_id="5e0b1c2d" + "0" * 24),
        WorkerStats("worker-1", noise=0.05, seed=11, partition=1, model_id="9c4d2e71" + "0" * 24),
        WorkerStats("worker-2", noise=0.0, gamma=0.2, seed=3, partition=2, model_id="a71f3e90" + "0" * 24),
    ]
    history = [p.many(3) for p in parts]
    history[2] += parts[2].many(1)  # 2,000 examples: its window is separated
    publish(kafka, topic, [r for records in zip(*history, strict=False) for r in records] + history[2][3:])
    newest = [records[-1] for records in history]
    assert newest[2]["gamma"] is not None and newest[0]["gamma"] is None

    def shows(records: list[dict[str, Any]]) -> Callable[[str], bool]:
        return lambda f: (all(row(f, str(r["partition"]))[:6] == partition_cells(r) for r in records)
                          and row(f, f"group ({len(records)})")[:7] == group_cells(records))

    child = PtyProcess(watch_argv(kafka, topic, duration_s=60.0), terminal_env())
    try:
        child.read_until(shows(newest), timeout_s=30,
                         what="the newest record of each partition and their sums")
        newer = parts[1].next()  # partition 1 moves on while watch runs
        assert newer["mistakes"] != newest[1]["mistakes"]
        publish(kafka, topic, [newer])
        newest[1] = newer
        child.read_until(shows(newest), timeout_s=15, what="partition 1's record published while it ran")
        time.sleep(0.5)
        child.proc.send_signal(signal.SIGINT)  # Ctrl+C: a clean exit with code 0
        assert child.finish(timeout_s=20) == 0
    finally:
        child.close()

    screen = last_frame(child.text)
    assert "Traceback" not in child.text and "sp-watch" not in screen
    assert shows(newest)(screen)
    converged = newest[2]
    cells = row(screen, "2")
    # margin min, R, γ and (R/γ)² beside the rates; throughput and lag
    assert cells[6:12] == [f"{converged['margin_min']:.3g}", f"{converged['R']:.4g}",
                           f"{converged['gamma']:.3g}", f"{converged['bound']:,.4g}",
                           f"{converged['examples_per_s']:,.0f}", f"{converged['lag']['examples:2']:,}"]
    assert row(screen, "0")[8:10] == ["n/a", "n/a"]  # not separated: no γ, no bound
    assert ("input topic examples; partitions by the worker of their newest record: worker-1 0, 1;"
            " worker-2 2") in screen
    seen = sum(r["seen"] for r in newest)
    assert f"group: the newest record of each partition summed: {seen:,} seen, 6 dead letters" in screen
    spark = row(screen, "1")[-1]
    assert len(re.findall("[▁▂▃▄▅▆▇█]", spark)) == 4  # its four records
    if os.environ.get("RECORD_WATCH_SCREENSHOT"):  # refresh docs/watch-screenshot.txt on request
        SCREENSHOT.write_text(screen, encoding="utf-8")


def test_watch_reads_the_partitions_from_a_stats_topic_of_several_partitions(kafka_settings, new_topic):
    kafka = kafka_settings()
    topic = new_topic(partitions=3)
    parts = [WorkerStats(f"w{p}", seed=p + 1, partition=p, noise=0.03) for p in range(3)]
    records = [r for p in parts for r in p.many(4)]
    publish(kafka, topic, records, partition=None)  # each partition's records land where its key hashes
    assert len({part for part, _, _, _ in read_topic(kafka, topic)}) > 1  # spread over the topic
    out = io.StringIO()
    assert run_watch(kafka, topic, refresh_s=0.2, duration_s=4.0,
                     console=Console(file=out, width=140, color_system=None)) == 0
    frame = out.getvalue()[out.getvalue().rfind("╭"):]
    newest = [records[4 * p + 3] for p in range(3)]
    assert row(frame, "group (3)")[:7] == group_cells(newest), frame
    for rec in newest:
        assert row(frame, str(rec["partition"]))[:6] == partition_cells(rec), frame


# What anyone who writes to the statistics topic, or picks a client id, could put in a text: a
# window title (OSC), a screen clear (CSI, 7-bit and 8-bit), rich markup.
HOSTILE = "\x1b]0;pwned\x07[bold red]x[/]\x1b[2J\x9b2J"
SHOWN = "[bold red]x[/]"  # what is left of it: the markup, as text


def publish_hostile(kafka: KafkaSettings, topic: str) -> list[dict[str, Any]]:
    """Two partitions' records whose client_id and topic carry HOSTILE, and a drift event whose
    detector does; returns the records."""
    records = []
    for p in range(2):
        stats = WorkerStats(f"w{HOSTILE}", seed=p + 1, partition=p, model_id=f"{p}" * 32).many(2)
        records += [{**r, "topic": f"examples{HOSTILE}"} for r in stats]
    event = {"event": "drift", "topic": f"examples{HOSTILE}", "partition": 0, "offset": 1_200,
             "detector": f"adwin{HOSTILE}", "stream": "mistakes", "rate_before": 0.02, "rate_after": 0.3,
             "drifts": 1, "labeled": 1_200, "model_id": "0" * 32, "client_id": HOSTILE, "ts": time.time()}
    send_all(kafka, topic, [encode(r) for r in [*records, event]], partition=0)
    return records


def assert_no_control_bytes(raw: bytes, *, allowed: re.Pattern[bytes] | None = None) -> None:
    """``raw`` holds none of HOSTILE's sequences, and no control character at all but line ends
    and what ``allowed`` matches (a terminal renderer's own sequences)."""
    for sequence in (b"\x1b]", b"\x07", b"\x1b[2J", b"\xc2\x9b", b"pwned"):
        assert sequence not in raw, (sequence, raw[-2000:])
    bare = allowed.sub(b"", raw) if allowed is not None else raw
    assert not re.search(rb"[\x00-\x09\x0b\x0c\x0e-\x1f\x7f]", bare), bare[-2000:]


def test_watch_in_a_terminal_shows_what_the_topic_says_as_text_only(kafka_settings, new_topic):
    kafka = kafka_settings()
    topic = new_topic()
    publish_hostile(kafka, topic)
    child = PtyProcess(watch_argv(kafka, topic, duration_s=6.0), terminal_env())
    try:
        frame = child.read_until(lambda f: "drift alarms" in f and "group (2)" in f, timeout_s=30,
                                 what="the hostile records' rows and their drift alarm")
        assert child.finish(timeout_s=20) == 0
    finally:
        child.close()
    # rich's own: styles, cursor moves and erases, the cursor hidden and shown again
    assert_no_control_bytes(child.raw, allowed=re.compile(rb"\x1b\[[0-9;?]*[mAKlhG]|\r"))
    assert f"w{SHOWN} 0, 1" in frame  # the worker holding both partitions, its markup as text
    assert f"adwin{SHOWN}, alarm 1" in frame
    assert f"input topic examples{SHOWN}" in frame


def _watch_cli(kafka: KafkaSettings, topic: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``stream-perceptron watch`` with its output to a pipe (no terminal), for ``--duration 4``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SP_")}
    env.update(SP_KAFKA__BOOTSTRAP_SERVERS=str(kafka.bootstrap_servers), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "stream_perceptron.cli", "watch", "--topic", topic,
                           "--refresh", "0.5", "--duration", "4", *args],
                          env=env, cwd=ROOT, capture_output=True, timeout=60)


def test_watch_without_a_terminal_prints_a_plain_line_per_partition_per_refresh(kafka_settings, new_topic):
    kafka = kafka_settings()
    topic = new_topic()
    records = publish_hostile(kafka, topic)
    proc = _watch_cli(kafka, topic)
    assert proc.returncode == 0, proc.stderr
    assert_no_control_bytes(proc.stdout)
    lines = proc.stdout.decode().splitlines()
    kinds = [line[9:].split("  ")[0] for line in lines]
    assert all(re.match(r"\d\d:\d\d:\d\d ", line) for line in lines), lines
    refreshes = kinds.count("group (2)")
    assert refreshes >= 2 and kinds.count("partition 0") == kinds.count("partition 1") == refreshes, kinds
    assert len(lines) == 3 * refreshes + 1  # and the drift alarm, once
    newest = records[1]  # partition 0's newest
    first = lines[kinds.index("partition 0")]
    assert f"labeled {newest['labeled']:,}  mistakes {newest['mistakes']:,}" in first
    assert first.endswith(f"client_id w{SHOWN}")
    (alarm,) = [line for line in lines if "drift alarm" in line]
    assert f"drift alarm 0 at offset 1,200: mistakes rate 0.0200 → 0.3000 (adwin{SHOWN}, alarm 1" in alarm


def test_watch_json_prints_json_lines(kafka_settings, new_topic):
    kafka = kafka_settings()
    topic = new_topic()
    records = publish_hostile(kafka, topic)
    proc = _watch_cli(kafka, topic, "--json")
    assert proc.returncode == 0, proc.stderr
    assert_no_control_bytes(proc.stdout)
    parsed = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    series = [p["series"] for p in parsed if "series" in p]
    groups = [p["group"] for p in parsed if "group" in p]
    events = [p["event"] for p in parsed if "event" in p]
    assert len(groups) >= 2 and len(series) == 2 * len(groups) and len(parsed) == 3 * len(groups) + 1
    assert {(s["label"], s["topic"], s["latest"]["client_id"]) for s in series} == {
        ("0", f"examples{SHOWN}", f"w{SHOWN}"), ("1", f"examples{SHOWN}", f"w{SHOWN}")}
    assert groups[-1]["labeled"] == records[1]["labeled"] + records[3]["labeled"]
    assert [(e["offset"], e["detector"]) for e in events] == [(1_200, f"adwin{SHOWN}")]


def test_run_watch_stops_after_its_duration(kafka_settings, new_topic):
    kafka = kafka_settings()
    topic = new_topic()
    records = WorkerStats("worker-a").many(2) + WorkerStats("worker-b", seed=11).many(3)
    publish(kafka, topic, records)
    send_all(kafka, topic, [b"not json"], partition=0)
    out = io.StringIO()
    started = time.monotonic()
    code = run_watch(kafka, topic, refresh_s=0.2, duration_s=3.0,
                     console=Console(file=out, width=120, color_system=None))
    elapsed = time.monotonic() - started
    assert code == 0
    assert 3.0 <= elapsed < 20
    text = out.getvalue()
    frame = text[text.rfind("╭"):]
    # records of older workers (no partition): a row per worker, as before, and no group
    assert row(frame, "worker-a")[1:3] == [f"{records[1]['labeled']:,}", f"{records[1]['mistakes']:,}"]
    assert row(frame, "worker-b")[1:3] == [f"{records[-1]['labeled']:,}", f"{records[-1]['mistakes']:,}"]
    assert "group (" not in frame
    assert "1 records skipped (not JSON, or not statistics records)" in text


def test_follow_stats_from_the_end_yields_only_new_records(kafka_settings, new_topic):
    kafka = kafka_settings()
    topic = new_topic()
    worker = WorkerStats("worker-1")
    old = worker.many(3)
    publish(kafka, topic, old)

    def collect(batches, want: int, timeout_s: float) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            got.extend(next(batches))
        return got

    tail = follow_stats(kafka, topic, from_beginning=False, poll_timeout_ms=200)
    full = follow_stats(kafka, topic, poll_timeout_ms=200)
    try:
        assert collect(full, 3, timeout_s=20) == old
        # a few idle polls: the end is known once a fetch has answered
        idle = [next(tail) for _ in range(5)]
        assert idle == [[]] * 5
        new = worker.next()
        publish(kafka, topic, [new])
        assert collect(tail, 1, timeout_s=20) == [new]
        assert collect(full, 1, timeout_s=20) == [new]
    finally:
        tail.close()
        full.close()


def test_follow_stats_skips_records_that_are_not_statistics(kafka_settings, new_topic, caplog):
    kafka = kafka_settings()
    topic = new_topic()
    good = WorkerStats("worker-1").many(2)
    values = [b"not json", encode(good[0]), orjson.dumps({"x": [1.0], "y": 1}), encode(good[1])]
    send_all(kafka, topic, values, partition=0)
    counted: list[int] = []
    batches = follow_stats(kafka, topic, poll_timeout_ms=200, on_skip=counted.append)
    got: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            got.extend(next(batches))
    finally:
        batches.close()
    assert got == good
    assert sum(counted) == 2 and all(n > 0 for n in counted)
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "skipping" in r.getMessage()]
    assert len(warnings) == 1 and "not JSON" in warnings[0].getMessage()


def test_follow_stats_waits_for_a_missing_topic_and_reads_it_once_it_appears(kafka_settings):
    kafka = kafka_settings()
    topic = f"test-stats-late-{uuid.uuid4().hex[:12]}"
    batches = follow_stats(kafka, topic, poll_timeout_ms=100)
    try:
        assert [next(batches) for _ in range(3)] == [[], [], []]
        ensure_topics(kafka, {topic: 1})
        records = WorkerStats("late-worker", n=1000).many(2)
        publish(kafka, topic, records)
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got.extend(next(batches))
        assert got == records
    finally:
        batches.close()


def test_run_plot_writes_a_png_of_the_expected_size(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topic = new_topic()
    publish(kafka, topic, WorkerStats("worker-1").many(10))
    out = tmp_path / "plots" / "stats.png"
    path, used, of = run_plot(kafka, topic, out)
    assert (path, used, of) == (out, 10, 10)
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size == (1200, 700)
    small, _, _ = run_plot(kafka, topic, tmp_path / "small.png", size=(640, 480))
    with Image.open(small) as image:
        assert image.size == (640, 480)


def test_run_plot_draws_an_evenly_spaced_part_of_a_long_history(kafka_settings, new_topic, tmp_path,
                                                                 caplog, monkeypatch):
    import stream_perceptron.commands.watch as watch

    kafka = kafka_settings()
    topic = new_topic()
    publish(kafka, topic, WorkerStats("worker-1").many(10))
    drawn: list[list[dict[str, Any]]] = []
    real = watch.plot_stats
    def plot_stats(rows: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        drawn.append(rows)
        return real(rows, *args, **kwargs)

    monkeypatch.setattr(watch, "plot_stats", plot_stats)
    caplog.set_level(logging.INFO, logger="stream_perceptron.commands.watch")
    _, used, of = run_plot(kafka, topic, tmp_path / "thin.png", points=3)
    # records 0, 4, 8 of the 10 (stride 4 leaves at most 3), and the last; record i saw 500 (i + 1)
    assert (used, of) == (4, 10) and [r["seen"] for r in drawn[0]] == [500, 2500, 4500, 5000]
    assert "(1 in 4 of 10, evenly spaced)" in caplog.text


def test_run_plot_picks_one_worker(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topic = new_topic()
    publish(kafka, topic, WorkerStats("worker-a").many(4) + WorkerStats("worker-b", seed=3).many(6))
    assert run_plot(kafka, topic, tmp_path / "a.png", client_id="worker-a")[1] == 4
    assert run_plot(kafka, topic, tmp_path / "latest.png")[1] == 6  # the worker of the newest record
    with pytest.raises(NoStatsError, match="no statistics records of client_id 'worker-c'"):
        run_plot(kafka, topic, tmp_path / "c.png", client_id="worker-c")


def test_run_plot_tells_apart_workers_that_share_a_client_id(kafka_settings, new_topic, tmp_path, caplog):
    kafka = kafka_settings()
    topic = new_topic()
    a, b = "aaaaaaaa" + "0" * 24, "bbbbbbbb" + "0" * 24
    legacy = WorkerStats("w", seed=5).many(2)  # from before model_id: keyed by the client id alone
    publish(kafka, topic, legacy + WorkerStats("w", model_id=a).many(3)
            + WorkerStats("w", seed=3, model_id=b).many(5))
    assert run_plot(kafka, topic, tmp_path / "a.png", client_id="w · aaaaaaaa")[1] == 3
    caplog.set_level(logging.WARNING, logger="stream_perceptron.commands.watch")
    assert run_plot(kafka, topic, tmp_path / "w.png", client_id="w")[1] == 5  # its latest model
    assert "plotting w · bbbbbbbb (others: w, w · aaaaaaaa)" in caplog.text


def capture(monkeypatch: pytest.MonkeyPatch, name: str) -> list[tuple[Any, ...]]:
    """Record the arguments of each call of ``watch.<name>`` (a plot), still drawing it."""
    import stream_perceptron.commands.watch as watch

    calls: list[tuple[Any, ...]] = []
    real = getattr(watch, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append((*args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(watch, name, spy)
    return calls


def test_run_plot_draws_each_partition_and_the_group(kafka_settings, new_topic, tmp_path, monkeypatch):
    kafka = kafka_settings()
    topic = new_topic(partitions=2)
    parts = [WorkerStats("w1", seed=p + 2, partition=p, noise=0.01 * (p + 1)) for p in range(3)]
    intervals = [[p.next() for p in parts] for _ in range(6)]  # each interval, a record per partition
    history = [list(records) for records in zip(*intervals, strict=True)]
    # keyed, so spread over the two stats partitions, and read back partition by partition
    publish(kafka, topic, [r for interval in intervals for r in interval], partition=None)
    assert len({part for part, _, _, _ in read_topic(kafka, topic)}) == 2
    calls = capture(monkeypatch, "plot_partitions")
    path, used, of = run_plot(kafka, topic, tmp_path / "group.png")
    assert (path, used, of) == (tmp_path / "group.png", 18, 18)
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == (1200, 700)
    ((drawn, curve, _, kwargs),) = calls
    assert list(drawn) == ["0", "1", "2"]
    for p, records in enumerate(history):
        assert [(r["seen"], r["mistake_rate"]) for r in drawn[str(p)]] == [
            (r["seen"], r["mistake_rate"]) for r in records]
    # the group's curve: after each record, the sums over the newest record of each partition
    assert len(curve) == 18 and [pt["seen"] for pt in curve] == sorted(pt["seen"] for pt in curve)
    newest = [records[-1] for records in history]
    mistakes, labeled = sum(r["mistakes"] for r in newest), sum(r["labeled"] for r in newest)
    assert (curve[-1]["seen"], curve[-1]["mistakes"]) == (sum(r["seen"] for r in newest), mistakes)
    assert curve[-1]["mistake_rate"] == mistakes / labeled
    first_round = [records[0] for records in history]  # when each partition had published once
    assert curve[2]["mistakes"] == sum(r["mistakes"] for r in first_round)
    assert "input examples" in kwargs["title"]


def test_run_plot_of_one_partition_draws_its_rates_and_margin(kafka_settings, new_topic, tmp_path,
                                                              monkeypatch):
    kafka = kafka_settings()
    topic = new_topic()
    publish(kafka, topic, WorkerStats("w1", partition=4).many(5))
    calls = capture(monkeypatch, "plot_stats")
    assert run_plot(kafka, topic, tmp_path / "one.png")[1:] == (5, 5)
    ((rows, _, kwargs),) = calls
    assert [r["seen"] for r in rows] == [500, 1000, 1500, 2000, 2500]
    assert kwargs["title"] == f"stream-perceptron · {topic} · examples[4]"


def test_run_plot_leaves_out_older_records_beside_partitions_and_keeps_one_workers_partitions(
        kafka_settings, new_topic, tmp_path, monkeypatch, caplog):
    kafka = kafka_settings()
    topic = new_topic()
    older = WorkerStats("w1", seed=9).many(3)  # before the upgrade: no partition
    parts = [WorkerStats("w1" if p < 2 else "w2", seed=p + 1, partition=p) for p in range(3)]
    publish(kafka, topic, older + [r for p in parts for r in p.many(4)])
    calls = capture(monkeypatch, "plot_partitions")
    caplog.set_level(logging.INFO, logger="stream_perceptron.commands.watch")
    assert run_plot(kafka, topic, tmp_path / "all.png")[1:] == (12, 12)
    assert f"3 statistics records of {topic} name no partition (an older worker's): not drawn" in caplog.text
    assert run_plot(kafka, topic, tmp_path / "w1.png", client_id="w1")[1:] == (8, 8)
    assert list(calls[-1][0]) == ["0", "1"]  # the partitions worker w1 published last
    with pytest.raises(NoStatsError, match=r"no statistics records of client_id 'w3' .*\(found: w1, w2\)"):
        run_plot(kafka, topic, tmp_path / "w3.png", client_id="w3")


def test_run_plot_shares_its_bound_among_the_partitions(kafka_settings, new_topic, tmp_path, caplog):
    kafka = kafka_settings()
    topic = new_topic()
    parts = [WorkerStats("w1", seed=p + 1, partition=p) for p in range(3)]
    publish(kafka, topic, [r for p in parts for r in p.many(10)])
    caplog.set_level(logging.INFO, logger="stream_perceptron.commands.watch")
    _, used, of = run_plot(kafka, topic, tmp_path / "thin.png", points=9)
    # 3 of each partition's 10 (records 0, 4, 8) and its last
    assert (used, of) == (12, 30)
    assert "(at most 3 of each, evenly spaced)" in caplog.text


def test_run_plot_on_an_empty_topic_raises_a_clear_error(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topic = new_topic()
    out = tmp_path / "none.png"
    with pytest.raises(NoStatsError, match=rf"no statistics records in topic '{topic}' \(it is empty"):
        run_plot(kafka, topic, out)
    assert not out.exists()


def test_run_plot_on_a_topic_of_other_records_raises_a_clear_error(kafka_settings, new_topic, tmp_path):
    kafka = kafka_settings()
    topic = new_topic()
    send_all(kafka, topic, [orjson.dumps({"x": [1.0, 2.0], "y": 1}), orjson.dumps({"x": [0.5], "y": 0})])
    with pytest.raises(NoStatsError, match="it holds 2 records, none a statistics record"):
        run_plot(kafka, topic, tmp_path / "other.png")


def test_run_plot_skips_a_record_that_is_not_json_and_says_so(kafka_settings, new_topic, tmp_path,
                                                              caplog):
    kafka = kafka_settings()
    topic = new_topic()
    stats = WorkerStats("worker-1").many(6)
    publish(kafka, topic, stats[:3])
    send_all(kafka, topic, [b"oops"])
    publish(kafka, topic, stats[3:])
    assert run_plot(kafka, topic, tmp_path / "stats.png")[1] == 6
    assert f"1 records of {topic} are not JSON" in caplog.text


def test_read_topic_says_so_when_its_deadline_cuts_the_read_short(kafka_settings, new_topic, caplog,
                                                                  monkeypatch):
    import stream_perceptron.commands.read as reader
    import stream_perceptron.kafka.reader as topic_reader

    kafka = kafka_settings()
    topic = new_topic()
    send_all(kafka, topic, [encode({"i": i}) for i in range(20_000)], partition=0)
    assert len(reader.read_topic(kafka, topic)) == 20_000  # all of it, no warning
    assert "stopped short" not in caplog.text

    # the read starts at 0 s and every later look at the clock is at 100 s: the deadline passes
    # after the first poll, which brings at most 5,000 records
    clock = itertools.chain([0.0], itertools.repeat(100.0))
    fake_time = types.SimpleNamespace(monotonic=lambda: next(clock), sleep=time.sleep)
    monkeypatch.setattr(topic_reader, "time", fake_time)  # the reader's clock only, not the client's
    with caplog.at_level("WARNING", logger="stream_perceptron.commands.read"):
        part = reader.read_topic(kafka, topic, timeout_s=8, idle_s=100)
    assert len(part) < 20_000
    assert f"read {len(part)} records of {topic} in 8 s and stopped short of its end" in caplog.text


def test_drift_events_are_followed_and_plotted(kafka_settings, new_topic, tmp_path, caplog):
    kafka = kafka_settings()
    topic = new_topic()
    stats = WorkerStats("w1", partition=0, model_id="a" * 32).many(4)
    event = {"event": "drift", "topic": "examples", "partition": 0, "offset": 1_200, "detector": "adwin",
             "stream": "mistakes", "rate_before": 0.02, "rate_after": 0.3, "drifts": 1, "labeled": 1_200,
             "model_id": "a" * 32, "client_id": "w1", "ts": time.time()}
    publish(kafka, topic, [*stats[:2], event, *stats[2:]])
    batches = follow_stats(kafka, topic, poll_timeout_ms=200)
    got: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            got.extend(next(batches))
    finally:
        batches.close()
    assert got == [*stats[:2], event, *stats[2:]]
    assert not [r for r in caplog.records if "skipping" in r.getMessage()]
    path, used, of = run_plot(kafka, topic, tmp_path / "drift.png")
    assert (used, of) == (4, 4) and path.exists()
