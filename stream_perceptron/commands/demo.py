"""``stream-perceptron demo``: river's Shuttle stream through a worker, live, with a plot; with
``--multiclass``, river's ``synth.LED`` (10 classes) through a K-class worker.

It creates fresh topics, publishes the dataset in order, runs a worker until it has caught up,
reads the statistics topic back, plots it and prints a summary (with K classes, each class's
mistake rate).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
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
from stream_perceptron.model.class_learner import MulticlassLearner
from stream_perceptron.settings import Settings
from stream_perceptron.sources import Source, open_source
from stream_perceptron.worker.loop import Worker
from stream_perceptron.worker.observe import observer_for

DEMO_SOURCE = "river:Shuttle"
LED_EXAMPLES = 50_000
"""The multiclass demo's length: about the binary demo's time on one core."""
LED_NOISE = 0.1
"""river's ``noise_percentage``: a segment flips when 0.01 + U <= it, so with probability 0.09;
noisy digits can look alike, so no classifier is free of mistakes on this stream."""


def led_source(n: int = LED_EXAMPLES, *, seed: int = 42, noise: float = LED_NOISE) -> Source:
    """river's ``synth.LED`` with its 17 irrelevant features: 24 features of 0/1 (the 7 segments
    of a digit, noisy, then 17 random), the label the digit 0–9 (an ``int``, a class name to a
    K-class worker, where every other source's label is -1/+1). Seeded: every iteration yields
    the same examples.

    >>> src = led_source(3)
    >>> (src.n_features, src.length, [len(x) for x, _ in src], all(0 <= y <= 9 for _, y in src))
    (24, 3, [24, 24, 24], True)
    """
    def examples() -> Iterator[tuple[list[float], int]]:
        from river.datasets import synth

        gen = synth.LED(seed=seed, noise_percentage=noise, irrelevant_features=True)
        for x, y in gen.take(n):
            yield [float(x[i]) for i in range(len(x))], int(y)

    return Source(spec=f"synth.LED(noise={noise}, seed={seed})", n_features=24,
                  feature_names=[f"x{i}" for i in range(24)], length=n, factory=examples)


@dataclass(frozen=True)
class DemoSummary:
    """The figures the demo ends with."""

    examples: int
    stats: dict[str, Any]
    examples_per_s: float
    checkpoint: str | None
    plot: Path
    dead_letters: int

    def class_lines(self) -> list[str]:
        """One line per class of a K-class worker's statistics (none for a binary one)."""
        per_class = self.stats.get("per_class") or []
        if not per_class:
            return []
        lines = ["class   labeled  mistakes  mistake rate"]
        for c in per_class:
            rate = c["mistakes"] / c["labeled"] if c["labeled"] else None
            lines.append(f"{c['class']!s:<7} {c['labeled']:>7}  {c['mistakes']:>8}  "
                         + ("n/a" if rate is None else f"{rate:.4f}"))
        return lines

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
            (f"bound 2(R/gamma)^2  {fmt(s['bound'], '.6g')}" if "per_class" in s
             else f"bound (R/gamma)^2   {fmt(s['bound'], '.6g')}"),
            f"dead letters        {self.dead_letters}",
            f"examples/s          {self.examples_per_s:,.0f}",
            f"checkpoint          {self.checkpoint}",
            f"plot                {self.plot}",
            *self.class_lines(),
        ]


def run_demo(
    settings: Settings, run_dir: Path, *, source_spec: str = DEMO_SOURCE, limit: int | None = None,
    console: Console | None = None, source: Source | None = None,
) -> DemoSummary:
    """Publish ``source_spec`` (or ``source``, when given) to ``settings.topics.input`` and learn it
    with a worker (a K-class one when ``settings.model`` says so)."""
    console = console or Console(stderr=True)
    t = settings.topics
    if source is None:
        source = open_source(source_spec, limit=limit)  # a bad spec creates nothing
    source_spec = source.spec
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
    learner = worker.learner
    return DemoSummary(
        examples=learner.stats.seen,
        stats=(learner.stats.snapshot(learner.model.classes) if isinstance(learner, MulticlassLearner)
               else learner.stats.snapshot()),
        examples_per_s=worker.learner.stats.seen / elapsed if elapsed > 0 else 0.0,
        checkpoint=next((st.saved_at for st in worker.held.values()), None),
        plot=plot,
        dead_letters=sum(st.dead_letters for st in worker.held.values()),
    )
