"""``stream-perceptron demo``: river's Shuttle stream through a worker, live, with a plot.

It creates fresh topics, publishes the dataset in order, runs a worker until it has caught up,
reads the statistics topic back, plots it and prints a summary.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from stream_perceptron.commands.plot import plot_stats
from stream_perceptron.commands.produce import produce_source
from stream_perceptron.commands.read import read_topic
from stream_perceptron.commands.series import is_drift_event, is_stats_record
from stream_perceptron.errors import StreamPerceptronError
from stream_perceptron.kafka.admin import ensure_topics
from stream_perceptron.settings import Settings
from stream_perceptron.sources import open_source
from stream_perceptron.worker.loop import Worker
from stream_perceptron.worker.observe import observer_for

DEMO_SOURCE = "river:Shuttle"


@dataclass(frozen=True)
class DemoSummary:
    """The figures the demo ends with."""

    examples: int
    stats: dict[str, Any]
    examples_per_s: float
    checkpoint: str | None
    plot: Path
    dead_letters: int

    def lines(self) -> list[str]:
        s = self.stats

        def fmt(v: Any, spec: str = ".4f") -> str:
            return "n/a" if v is None else format(v, spec)

        return [
            f"examples            {self.examples}",
            f"mistakes            {s['mistakes']}",
            f"mistake rate (E_n)  {fmt(s['mistake_rate'])}",
            f"window rate (last {s['window']})  {fmt(s['window_mistake_rate'])}",
            f"EWMA rate           {fmt(s['ewma_mistake_rate'])}",
            f"window min margin   {fmt(s['margin_min'], '.6g')}",
            f"R (window)          {fmt(s['R'], '.6g')}",
            f"gamma (window)      {fmt(s['gamma'], '.6g')}"
            + ("" if s["gamma"] is not None else "  (the window is not separated: no bound)"),
            f"bound (R/gamma)^2   {fmt(s['bound'], '.6g')}",
            f"dead letters        {self.dead_letters}",
            f"examples/s          {self.examples_per_s:,.0f}",
            f"checkpoint          {self.checkpoint}",
            f"plot                {self.plot}",
        ]


def run_demo(
    settings: Settings, run_dir: Path, *, source_spec: str = DEMO_SOURCE, limit: int | None = None,
    console: Console | None = None,
) -> DemoSummary:
    """Publish ``source_spec`` to ``settings.topics.input`` and learn it with a worker."""
    console = console or Console(stderr=True)
    t = settings.topics
    source = open_source(source_spec, limit=limit)  # a bad spec creates nothing
    ensure_topics(settings.kafka, {t.input: 1, t.predictions: 1, t.stats: 1, t.dead_letter: 1})
    total = source.length or 0
    columns = (
        TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("produce", total=total, info="")
        sent = produce_source(
            settings.kafka, source, t.input, on_progress=lambda n: progress.advance(task, n)
        )
        learn = progress.add_task("learn", total=sent, info="")
        worker = Worker(settings, observer=observer_for(settings.observe))
        started = time.monotonic()

        def until(w: Worker) -> bool:
            snap = w.learner.stats
            rate = snap.mistakes / snap.labeled if snap.labeled else 0.0
            progress.update(learn, completed=snap.seen,
                            info=f"mistake rate {rate:.4f}  updates {w.learner.model.updates}")
            return w.counters.records >= sent and w.caught_up()

        if worker.run(until=until) != 0:  # its last checkpoint failed: the log above says why
            raise StreamPerceptronError(
                f"the demo's worker could not checkpoint when it stopped (see above); run {run_dir}"
            )
        elapsed = time.monotonic() - started
    on_topic = [v for _, _, _, v in read_topic(settings.kafka, t.stats)]
    plot = plot_stats([v for v in on_topic if is_stats_record(v)], run_dir / "mistake-rate.png",
                      title=f"{source_spec}: {sent} examples through stream-perceptron",
                      drifts=[v for v in on_topic if is_drift_event(v)])
    return DemoSummary(
        examples=worker.learner.stats.seen,
        stats=worker.learner.stats.snapshot(),
        examples_per_s=worker.learner.stats.seen / elapsed if elapsed > 0 else 0.0,
        checkpoint=next((st.saved_at for st in worker.held.values()), None),
        plot=plot,
        dead_letters=sum(st.dead_letters for st in worker.held.values()),
    )
