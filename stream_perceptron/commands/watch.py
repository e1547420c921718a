"""``watch`` and ``plot``: follow a statistics topic live in the terminal, or draw it to a PNG.

* :func:`follow_stats` reads a statistics topic without a consumer group (every partition
  assigned by hand) and yields the decoded records in batches as they arrive, ``[]`` on an
  idle poll so a display can refresh.
* :class:`Dashboard` keeps the latest record of each worker (:func:`worker_key`: its
  ``client_id`` and model) and a bounded history of its windowed mistake rate, and renders them
  as a rich table, one column per worker.
* :func:`run_watch` is the live loop (``rich.live.Live``) until Ctrl+C or a duration.
* :func:`run_plot` reads the topic to its end and writes the PNG of
  :func:`~stream_perceptron.commands.plot.plot_stats`.

``watch`` reads the topic from its beginning: the table shows each worker's latest record and
the sparkline has history at once. (The end of a partition is taken from fetch responses,
``highwater``, never from ``end_offsets``/``seek_to_end``, which some brokers get wrong.)
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from stream_perceptron.codec.outputs import decode
from stream_perceptron.commands.plot import PLOTTED, POINTS, Thinned, plot_stats
from stream_perceptron.commands.read import iter_topic
from stream_perceptron.errors import NoStatsError
from stream_perceptron.kafka.admin import consumer_config, reaching
from stream_perceptron.kafka.config import check_reachable
from stream_perceptron.settings import KafkaSettings

log = logging.getLogger(__name__)

SPARK_CHARS = "▁▂▃▄▅▆▇█"
"""The eight levels of a sparkline, lowest first."""

# Records per poll; a statistics topic is small, this only bounds one batch.
_MAX_POLL_RECORDS = 1_000
# How long the first connection may take before follow_stats gives up.
_CONNECT_TIMEOUT_S = 10.0
# Offsets shown per worker before "… (+N)".
_MAX_OFFSETS_SHOWN = 4


def worker_key(rec: Mapping[str, Any]) -> str:
    """The worker a statistics record belongs to: ``client_id · <first 8 digits of model_id>``.

    Workers left at the same ``client_id`` (the default) stay apart by their model, and one
    worker stays one series across restarts and moves, since its model keeps its id in the
    checkpoint. A record without ``model_id`` (an older worker's) is keyed by its client id.

    >>> worker_key({"client_id": "w1", "model_id": "3f2a9c1d" + "0" * 24})
    'w1 · 3f2a9c1d'
    >>> worker_key({"client_id": "w1"}), worker_key({})
    ('w1', '(no client_id)')
    """
    cid = str(rec.get("client_id") or "(no client_id)")
    model = rec.get("model_id")
    return f"{cid} · {model[:8]}" if isinstance(model, str) and model else cid


def _connect_timeout_s(kafka: KafkaSettings) -> float:
    """How long ``watch`` and ``plot`` wait for their first connection: a port that accepts and
    does not answer as Kafka is named within it, not after a whole request timeout."""
    return min(_CONNECT_TIMEOUT_S, kafka.request_timeout_ms / 1000)


# --------------------------------------------------------------------------- reading


def is_stats_record(value: Any) -> bool:
    """Whether a decoded value looks like a statistics record (a dict with the counters).

    >>> is_stats_record({"seen": 3, "mistakes": 1}), is_stats_record({"x": [1.0], "y": 1})
    (True, False)
    """
    return isinstance(value, dict) and "seen" in value and "mistakes" in value


def follow_stats(
    kafka: KafkaSettings, topic: str, *, from_beginning: bool = True, poll_timeout_ms: int = 500,
    on_skip: Callable[[int], None] | None = None,
) -> Generator[list[dict[str, Any]], None, None]:
    """Yield batches of statistics records from ``topic`` as they arrive; ``[]`` on an idle poll.

    Every partition is assigned (no consumer group, nothing committed). With ``from_beginning``
    each partition is read from its first record; otherwise only records published after the
    start are yielded (the end is the high-water mark of the first fetch). While the topic does
    not exist the generator yields ``[]`` every ``poll_timeout_ms`` and assigns the topic's
    partitions once it appears. Records that are not JSON or not statistics records are skipped
    (the first with a warning); ``on_skip``, if given, is called with the number skipped in each
    batch that skipped any. The consumer is created on the first ``next()`` and closed when the generator
    is closed (or garbage-collected). Raises :class:`~stream_perceptron.errors.KafkaEdgeError`
    when no bootstrap server can be reached.
    """
    connect_s = _connect_timeout_s(kafka)
    check_reachable(kafka, connect_s)
    with reaching(kafka):
        consumer = KafkaConsumer(**consumer_config(kafka), group_id=None, enable_auto_commit=False,
                                 bootstrap_timeout_ms=int(connect_s * 1000))
    try:
        tps: list[TopicPartition] = []
        # From the end: the first offset to yield per partition, once its high-water mark is known.
        start: dict[TopicPartition, int] = {}
        skipped = 0  # only the first skipped record is logged as a warning
        while True:
            if not tps:
                tps = _assign(consumer, topic)
                if not tps:
                    time.sleep(max(poll_timeout_ms, 100) / 1000)
                    yield []
                    continue
            got = consumer.poll(timeout_ms=poll_timeout_ms, max_records=_MAX_POLL_RECORDS)
            if not from_beginning:
                _seek_past_start(consumer, tps, start)
            batch: list[dict[str, Any]] = []
            skipped_before = skipped
            for tp in sorted(got):
                first = 0 if from_beginning else start.get(tp, 0)
                for record in got[tp]:
                    stats = _decode_stats(record, quiet=skipped > 0) if record.offset >= first else None
                    if stats is not None:
                        batch.append(stats)
                    elif record.offset >= first:
                        skipped += 1
            if on_skip is not None and skipped > skipped_before:
                on_skip(skipped - skipped_before)
            yield batch
    finally:
        consumer.close()


def _assign(consumer: Any, topic: str) -> list[TopicPartition]:
    """Assign every partition of ``topic`` from its beginning; [] while the topic is missing."""
    parts = consumer.partitions_for_topic(topic)
    if not parts:
        return []
    tps = [TopicPartition(topic, p) for p in sorted(parts)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    log.debug("following %s, partitions %s", topic, sorted(parts))
    return tps


def _seek_past_start(consumer: Any, tps: list[TopicPartition], start: dict[TopicPartition, int]) -> None:
    """Record each partition's first high-water mark and move its position there."""
    for tp in tps:
        if tp in start:
            continue
        hw = consumer.highwater(tp)
        if hw is None:
            continue
        start[tp] = hw
        if consumer.position(tp) < hw:
            consumer.seek(tp, hw)


def _decode_stats(record: Any, *, quiet: bool = False) -> dict[str, Any] | None:
    """The statistics record in a consumed record, or None (logged; at debug level if ``quiet``)."""
    level = logging.DEBUG if quiet else logging.WARNING
    where = f"{record.topic}/{record.partition}@{record.offset}"
    more = "" if quiet else "; further ones are logged at debug level"
    if record.value is None:
        return None
    try:
        value = decode(record.value)
    except ValueError as exc:
        log.log(level, "skipping %s: not JSON (%s)%s", where, exc, more)
        return None
    if not is_stats_record(value):
        log.log(level, "skipping %s: not a statistics record%s", where, more)
        return None
    stats: dict[str, Any] = value
    return stats


# --------------------------------------------------------------------------- the dashboard


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


@dataclass
class _WorkerView:
    """What the dashboard keeps per worker."""

    latest: dict[str, Any]
    received: float
    history: deque[float | None]
    records: int = 0


@dataclass(frozen=True)
class _Row:
    """One figure of the table: its label and how a worker's cell is drawn."""

    label: str
    cell: Callable[[_WorkerView, float], str | Text]
    only_if: str | None = None  # shown only when some worker's record has this field


class Dashboard:
    """The latest statistics record of each worker and its windowed mistake-rate history.

    ``history`` bounds the rates kept per worker (the sparkline averages them down to
    ``spark_width`` characters); ``clock`` gives wall time in seconds (for the age of a record).
    """

    def __init__(
        self, history: int = 120, *, title: str = "stream-perceptron", spark_width: int = 24,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if history < 1:
            raise ValueError("history must be at least 1")
        self.history = history
        self.title = title
        self.spark_width = spark_width
        self._clock = clock
        self._workers: dict[str, _WorkerView] = {}
        self.records = 0
        self.skipped = 0

    @property
    def workers(self) -> list[str]:
        """The workers seen so far (:func:`worker_key`), sorted."""
        return sorted(self._workers)

    def latest(self, worker: str) -> dict[str, Any]:
        """The latest statistics record of ``worker`` (a :func:`worker_key`)."""
        return self._workers[worker].latest

    def rate_history(self, worker: str) -> list[float | None]:
        """The windowed mistake rates of ``worker`` kept for the sparkline, oldest first."""
        return list(self._workers[worker].history)

    def count_skipped(self, n: int) -> None:
        """Count ``n`` records skipped before they reached :meth:`update` (not JSON, say)."""
        self.skipped += n

    def update(self, records: Iterable[dict[str, Any]]) -> None:
        """Take statistics records in arrival order; others (not dicts, no counters) are skipped.

        The latest record of a worker is the one with the greatest ``ts`` (arrival order when a
        record has none); every record adds its ``window_mistake_rate`` to the history.
        """
        now = self._clock()
        for rec in records:
            if not is_stats_record(rec):
                self.skipped += 1
                continue
            key = worker_key(rec)
            view = self._workers.get(key)
            if view is None:
                view = _WorkerView(rec, now, deque(maxlen=self.history))
                self._workers[key] = view
            elif _newer(rec, view.latest):
                view.latest, view.received = rec, now
            view.history.append(_number(rec.get("window_mistake_rate")))
            view.records += 1
            self.records += 1

    def render(self) -> RenderableType:
        """A panel holding one table: a row per figure, a column per worker."""
        now = self._clock()
        subtitle = f"{self.records} records · updated {datetime.fromtimestamp(now):%H:%M:%S}"
        if not self._workers:
            body: RenderableType = Text("waiting for statistics records…", style="dim")
            return Panel(body, title=self.title, subtitle=subtitle, expand=False)
        views = [self._workers[c] for c in self.workers]
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        table.add_column("", style="bold", no_wrap=True)
        for key in self.workers:
            table.add_column(key, justify="right", overflow="fold", header_style="bold cyan")
        for row in self._rows():
            if row.only_if and not any(row.only_if in v.latest for v in views):
                continue
            table.add_row(row.label, *(row.cell(v, now) for v in views))
        parts: list[RenderableType] = [table]
        if self.skipped:
            skipped = f"{self.skipped} records skipped (not JSON, or not statistics records)"
            parts.append(Text(skipped, style="dim"))
        return Panel(Group(*parts), title=self.title, subtitle=subtitle, expand=False)

    def _rows(self) -> list[_Row]:
        """The table's rows, top to bottom."""
        def field_(name: str, spec: str = ",") -> Callable[[_WorkerView, float], str]:
            return lambda v, now: _fmt(v.latest.get(name), spec)

        return [
            _Row("seen", field_("seen")),
            _Row("labeled", field_("labeled")),
            _Row("mistakes", field_("mistakes")),
            _Row("mistake rate E_n", field_("mistake_rate", ".4f")),
            _Row("window rate", _window_rate),
            _Row("EWMA rate", field_("ewma_mistake_rate", ".4f")),
            _Row("margin min / mean", lambda v, now: _pair(v.latest, "margin_min", "margin_mean", ".4g")),
            _Row("R window / ever", lambda v, now: _pair(v.latest, "R", "R_all", ".6g")),
            _Row("γ (window)", _gamma),
            _Row("window mistakes vs (R/γ)²", _bound),
            _Row("‖θ‖ / θ0", lambda v, now: _pair(v.latest, "theta_norm", "intercept", ".6g")),
            _Row("examples/s", field_("examples_per_s", ",.0f")),
            _Row("dead letters", field_("dead_letters")),
            _Row("offsets", lambda v, now: _offsets(v.latest.get("offsets"))),
            _Row("lag", lambda v, now: _fmt(_lag(v.latest.get("lag")), ","), only_if="lag"),
            _Row("last record age", _age),
            _Row("uptime", lambda v, now: _duration(_number(v.latest.get("uptime_s")))),
            _Row("records", lambda v, now: f"{v.records:,}"),
            _Row("window rate history", self._spark),
        ]

    def _spark(self, view: _WorkerView, now: float) -> Text:
        """The sparkline of the worker's windowed rates (scaled from 0) and their maximum."""
        rates = list(view.history)
        known = [r for r in rates if r is not None]
        top = max(known) if known else None
        line = sparkline(rates, self.spark_width, lo=0.0)
        text = Text(line, style="magenta")
        text.append(f" max {_fmt(top, '.3f')}", style="dim")
        return text


def _newer(rec: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    """Whether ``rec`` replaces ``than`` as the latest (by ``ts``; True when either has none)."""
    a, b = _number(rec.get("ts")), _number(than.get("ts"))
    return a is None or b is None or a >= b


def _number(value: Any) -> float | None:
    """A finite JSON number as a float, else None (booleans are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return _finite(float(value))


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


def _pair(rec: Mapping[str, Any], a: str, b: str, spec: str) -> str:
    """Two fields of ``rec`` as ``a / b``."""
    return f"{_fmt(rec.get(a), spec)} / {_fmt(rec.get(b), spec)}"


def _window_rate(view: _WorkerView, now: float) -> str:
    """The windowed mistake rate with its mistakes and labeled examples: ``0.0123 (12/1,000)``."""
    rec = view.latest
    rate = _fmt(rec.get("window_mistake_rate"), ".4f")
    return f"{rate} ({_fmt(rec.get('window_mistakes'))}/{_fmt(rec.get('window_labeled'))})"


def _gamma(view: _WorkerView, now: float) -> Text:
    """γ of the window, or why there is none."""
    gamma = view.latest.get("gamma")
    if gamma is None:
        return Text("n/a (window not separated)", style="dim")
    return Text(_fmt(gamma, ".6g"))


def _bound(view: _WorkerView, now: float) -> Text:
    """``window_mistakes ≤ bound`` when the window is separated, else the mistakes alone."""
    mistakes, bound = _number(view.latest.get("window_mistakes")), _number(view.latest.get("bound"))
    shown = _fmt(view.latest.get("window_mistakes"))
    if bound is None or mistakes is None:
        return Text(f"{shown} · no bound")
    if mistakes <= bound:
        return Text(f"{shown} ≤ {bound:,.6g}", style="green")
    return Text(f"{shown} > {bound:,.6g}", style="yellow")


def _offsets(offsets: Any) -> str:
    """``{"examples": {"0": 17, "1": 4}}`` → ``examples[0] 17, examples[1] 4``.

    >>> _offsets({"in": {"1": 4, "0": 17}}), _offsets({}), _offsets(None)
    ('in[0] 17, in[1] 4', 'none', 'n/a')
    """
    if not isinstance(offsets, dict):
        return "n/a"
    items = []
    for topic in sorted(offsets):
        parts = offsets[topic]
        if isinstance(parts, dict):
            for p in sorted(parts, key=lambda k: (len(str(k)), str(k))):
                items.append(f"{topic}[{p}] {_fmt(parts[p])}")
    if not items:
        return "none"
    more = len(items) - _MAX_OFFSETS_SHOWN
    shown = ", ".join(items[:_MAX_OFFSETS_SHOWN])
    return f"{shown} … (+{more})" if more > 0 else shown


def _lag(lag: Any) -> int | float | None:
    """The sum of the numbers in a ``lag`` field (a number, or nested per topic/partition).

    >>> _lag({"in": {"0": 3, "1": 4}}), _lag(5), _lag(None), _lag({})
    (7, 5, None, None)
    """
    if isinstance(lag, bool):
        return None
    if isinstance(lag, int | float):
        return lag
    if isinstance(lag, dict):
        parts = [v for v in (_lag(x) for x in lag.values()) if v is not None]
        return sum(parts) if parts else None
    return None


def _age(view: _WorkerView, now: float) -> Text:
    """Time since the latest record was published (its ``ts``; else since it was received)."""
    ts = _number(view.latest.get("ts"))
    age = now - (ts if ts is not None else view.received)
    return Text(_duration(max(age, 0.0)), style="red" if age > 60 else "")


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


def run_watch(
    kafka: KafkaSettings, topic: str, *, refresh_s: float = 1.0, duration_s: float | None = None,
    console: Console | None = None, from_beginning: bool = True,
) -> int:
    """Show the statistics of ``topic`` live until Ctrl+C or ``duration_s``; returns 0.

    The screen is redrawn every ``refresh_s`` seconds (the age of the records keeps counting
    between records). The topic is read from its beginning unless ``from_beginning`` is False;
    a topic that does not exist yet is waited for. Raises
    :class:`~stream_perceptron.errors.KafkaEdgeError` when Kafka cannot be reached.
    """
    if refresh_s <= 0:
        raise ValueError("refresh_s must be positive")
    console = console or Console()
    dashboard = Dashboard(title=f"stream-perceptron watch · {topic}")
    deadline = None if duration_s is None else time.monotonic() + duration_s
    poll_ms = max(50, min(500, int(refresh_s * 1000)))
    batches = follow_stats(
        kafka, topic, from_beginning=from_beginning, poll_timeout_ms=poll_ms, on_skip=dashboard.count_skipped
    )
    interrupted = threading.Event()
    restore = _stop_on_interrupt(interrupted)
    try:
        with Live(dashboard.render(), console=console, auto_refresh=False) as live:
            next_refresh = time.monotonic() + refresh_s
            for batch in batches:
                dashboard.update(batch)
                now = time.monotonic()
                done = interrupted.is_set() or (deadline is not None and now >= deadline)
                if now >= next_refresh or done:
                    live.update(dashboard.render(), refresh=True)
                    next_refresh = now + refresh_s
                if done:
                    break
    except KeyboardInterrupt:  # a second Ctrl+C, or one before the handler was installed
        log.debug("watch interrupted")
    finally:
        restore()
        batches.close()
    return 0


def _stop_on_interrupt(interrupted: threading.Event) -> Callable[[], None]:
    """Make Ctrl+C set ``interrupted`` (the loop then ends after its current poll, at most
    ``poll_ms`` later); a second Ctrl+C raises KeyboardInterrupt. Returns the function that puts
    the previous handler back. A KeyboardInterrupt raised inside the client's poll could leave
    its locks held and hang the consumer's close, so the first one is never raised there. Off
    the main thread (where handlers cannot be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)

    def handle(_signum: int, _frame: Any) -> None:
        interrupted.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def restore() -> None:
        signal.signal(signal.SIGINT, previous)

    signal.signal(signal.SIGINT, handle)
    return restore


def run_plot(
    kafka: KafkaSettings, topic: str, out: Path, *, size: tuple[int, int] = (1200, 700),
    client_id: str | None = None, timeout_s: float = 30.0, points: int = POINTS,
) -> tuple[Path, int, int]:
    """Read ``topic`` to its end and plot its statistics records to the PNG ``out``.

    Returns the path written, the number of records plotted and the number they were drawn
    from: the worker's records with labeled examples, of which at most ``points`` (and the
    latest) are plotted, evenly spaced through the topic (:class:`Thinned`), so a topic of any
    length is read in bounded memory. When several workers (:func:`worker_key`) publish to the
    topic, ``client_id`` picks one: a worker key, or a client id (its worker of the most recent
    record); by default the worker of the most recent record is plotted and the others are named
    in a warning. Raises :class:`NoStatsError` when the topic has no
    statistics records to plot (it is empty, missing, or holds other records),
    :class:`~stream_perceptron.errors.KafkaEdgeError` when Kafka cannot be reached.
    """
    connect_s = _connect_timeout_s(kafka)
    check_reachable(kafka, connect_s)
    workers: dict[str, _History] = {}
    values = 0
    for _, _, _, value in iter_topic(kafka, topic, timeout_s=timeout_s, connect_timeout_s=connect_s):
        values += 1
        if not is_stats_record(value):  # not JSON (None), or not a statistics record: skipped
            continue
        key = worker_key(value)
        history = workers.get(key)
        if history is None:
            history = workers[key] = _History(Thinned(points), str(value.get("client_id") or ""))
        history.add(value)
    if not workers:
        detail = (f"it holds {values} records, none a statistics record" if values
                  else "it is empty or does not exist")
        raise NoStatsError(f"no statistics records in topic {topic!r} ({detail}); "
                           "is a worker publishing to it (SP_TOPICS__STATS)?")
    chosen = _pick_worker(workers, topic, client_id)
    history = workers[chosen]
    labeled = history.labeled
    plotted = labeled.kept()
    if not plotted:
        raise NoStatsError(f"the {history.records} statistics records in topic {topic!r} have no "
                           "labeled examples yet: nothing to plot")
    title = f"stream-perceptron · {topic}" + (f" · {chosen}" if chosen else "")
    path = plot_stats(plotted, out, title=title, size=size)
    thinned = "" if labeled.stride == 1 else f" (1 in {labeled.stride} of {labeled.seen}, evenly spaced)"
    log.info("plotted %d statistics records of %s%s to %s", len(plotted), topic, thinned, path)
    return path, len(plotted), labeled.seen


@dataclass
class _History:
    """What ``plot`` holds of one worker's statistics records: how many, the latest ``ts``, and
    an evenly spaced part of those with labeled examples, each cut to the fields drawn (a week of
    a busy worker's records is millions; held whole, gigabytes)."""

    labeled: Thinned
    client_id: str = ""
    records: int = 0
    latest_ts: float = float("-inf")

    def add(self, value: dict[str, Any]) -> None:
        self.records += 1
        self.latest_ts = max(self.latest_ts, _number(value.get("ts")) or 0.0)
        if value.get("labeled"):
            self.labeled.add({key: value.get(key) for key in PLOTTED})


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
    "Dashboard",
    "follow_stats",
    "is_stats_record",
    "run_plot",
    "run_watch",
    "sparkline",
    "worker_key",
]
