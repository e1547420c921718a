"""PNGs of a statistics history, and :class:`Thinned`, which keeps a bounded, evenly spaced part of a
long history to draw.

* :func:`plot_stats`: one series (a worker's, or one input partition's): the cumulative, windowed
  and EWMA mistake rates and the window's min margin against examples seen, and, for a K-class
  worker's records, each class's mistake rate below them.
* :func:`plot_partitions`: several input partitions: each partition's ``E_n`` against its own
  examples seen, and the group's (:func:`group_curve`) against the examples of all of them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from stream_perceptron.commands.class_view import most_labeled
from stream_perceptron.commands.series import Group, Partition, number
from stream_perceptron.errors import OutputError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOTTED = ("seen", "labeled", "mistakes", "mistake_rate", "window_labeled", "window_mistakes",
           "window_mistake_rate", "ewma_mistake_rate", "margin_min", "ts")
"""The fields of a statistics record that the plots draw from (and the group's curve sums)."""

CLASS_CURVES = 10
"""The classes of a K-class record whose curves ``plot`` draws: the most labeled in the newest."""
_CLASS_LABEL = 30  # the characters of a class name in the legend

POINTS = 10_000
"""The most records that ``plot`` draws, shared among the series drawn (its PNG is about 1,200
pixels wide)."""


@dataclass
class Thinned:
    """At most ``limit`` items of a stream, evenly spaced in arrival, and the last one.

    Item i (counting from 0) is kept while i is a multiple of ``stride``; when more than ``limit``
    are kept, every other one is dropped and the stride doubles. The kept items are then items
    0, s, 2s, … of the n seen, with s the least power of two for which there are at most
    ``limit``, so the memory held is bounded however long the stream. ``last`` is the latest
    item, kept or not.
    """

    limit: int = POINTS
    items: list[dict[str, Any]] = field(default_factory=list)
    stride: int = 1
    seen: int = 0
    last: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError("limit must be at least 1")

    def add(self, item: dict[str, Any]) -> None:
        if self.seen % self.stride == 0:
            self.items.append(item)
            self._fit()
        self.seen += 1
        self.last = item

    def shrink(self, limit: int) -> None:
        """Keep at most ``limit`` items from now on (no more than before): every other one is
        dropped, and the stride doubled, until they fit. Still items 0, s, 2s, … of those seen."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = min(self.limit, limit)
        self._fit()

    def kept(self) -> list[dict[str, Any]]:
        """The kept items in arrival order, the last one included."""
        if self.last is None or (self.items and self.items[-1] is self.last):
            return list(self.items)
        return [*self.items, self.last]

    def _fit(self) -> None:
        while len(self.items) > self.limit:
            del self.items[1::2]
            self.stride *= 2


def group_curve(partitions: Mapping[Partition, Sequence[Mapping[str, Any]]],
                points: int = POINTS) -> list[dict[str, Any]]:
    """The group's figures through time, from the records kept of each input partition.

    The records of all the partitions are taken in order of ``ts`` (a record without one, at
    the start), each in turn the newest of its partition (:class:`~stream_perceptron.commands.series.Group`);
    after each, the group's ``seen``, ``labeled``, ``mistakes`` and ``E_n`` = Σ mistakes /
    Σ labeled (``mistake_rate``), and its pooled ``window_mistake_rate``, make a point. At most
    ``points`` of them are returned, evenly spaced, and the last. From every record of each
    partition the curve is exact; from an evenly spaced part (:class:`Thinned`), a partition's
    share of a point may be up to one spacing old.

    >>> curve = group_curve({("in", 0): [{"seen": 10, "labeled": 10, "mistakes": 4, "ts": 1.0},
    ...                                  {"seen": 20, "labeled": 20, "mistakes": 5, "ts": 3.0}],
    ...                      ("in", 1): [{"seen": 10, "labeled": 10, "mistakes": 0, "ts": 2.0}]})
    >>> [(p["seen"], p["mistakes"], p["mistake_rate"]) for p in curve]
    [(10, 4, 0.4), (20, 4, 0.2), (30, 5, 0.16666666666666666)]
    """
    merged = sorted(
        ((number(rec.get("ts")) or float("-inf"), i, topic, part, rec)
         for (topic, part), records in partitions.items() for i, rec in enumerate(records)),
        key=lambda row: row[:2],
    )
    group, curve = Group(), Thinned(points)
    for _, _, topic, part, rec in merged:
        group.add({**rec, "topic": topic, "partition": part})
        figures = group.figures()
        if figures is not None and figures.labeled:
            curve.add({"seen": figures.seen, "labeled": figures.labeled, "mistakes": figures.mistakes,
                       "mistake_rate": figures.mistake_rate,
                       "window_mistake_rate": figures.window_mistake_rate})
    return curve.kept()


def drift_marks(events: Iterable[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> list[float]:
    """Where drift events fall on a curve of examples seen: each event's ``labeled`` (the labeled
    examples when it was raised) mapped to examples seen by the series' records ``rows`` (sorted
    by ``seen``), linearly between two records, clamped to the first and the last. Events without
    ``labeled``, or rows without labeled examples, give none.

    >>> rows = [{"seen": 100, "labeled": 50}, {"seen": 300, "labeled": 150}]
    >>> drift_marks([{"labeled": 100}, {"labeled": 10}, {"offset": 7}], rows)
    [200.0, 100.0]
    """
    points = [(float(r["labeled"]), float(r["seen"])) for r in rows
              if number(r.get("labeled")) is not None and number(r.get("seen")) is not None]
    if not points:
        return []
    xs: list[float] = []
    for event in events:
        labeled = number(event.get("labeled"))
        if labeled is None:
            continue
        below = [p for p in points if p[0] <= labeled]
        above = [p for p in points if p[0] >= labeled]
        if not below or not above:
            xs.append((below or above)[-1 if below else 0][1])
            continue
        (l0, s0), (l1, s1) = below[-1], above[0]
        xs.append(s0 if l1 == l0 else s0 + (labeled - l0) / (l1 - l0) * (s1 - s0))
    return xs


def _mark_drifts(ax: Any, xs: Sequence[float], color: str = "tab:red", label: str = "drift alarm") -> None:
    """Dotted vertical lines at ``xs``, named once in the legend."""
    for i, x in enumerate(xs):
        ax.axvline(x, color=color, linestyle=":", linewidth=1.2, label=label if i == 0 else None)


def plotted(rec: Mapping[str, Any]) -> dict[str, Any]:
    """What ``plot`` keeps of a statistics record: the fields of :data:`PLOTTED`, and of a K-class
    worker's record the labeled examples and mistakes of its :data:`CLASS_CURVES` most labeled
    classes (``class_counts``: name → (labeled, mistakes);
    :func:`~stream_perceptron.commands.class_view.most_labeled`).

    >>> plotted({"seen": 4, "labeled": 4, "x": 1})["seen"], "class_counts" in plotted({"seen": 4})
    (4, False)
    >>> plotted({"seen": 4, "classes": ["a"], "per_class": [{"labeled": 4, "mistakes": 1}]})["class_counts"]
    {'a': (4, 1)}
    """
    kept = {key: rec.get(key) for key in PLOTTED}
    if "classes" in rec:
        kept["class_counts"] = most_labeled(rec, CLASS_CURVES)
    return kept


def _class_counts(rec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The per-class counts drawn of a record: those :func:`plotted` kept, else read from a whole
    statistics record (empty for a binary one)."""
    kept = rec.get("class_counts")
    return kept if isinstance(kept, Mapping) else most_labeled(rec, CLASS_CURVES)


def plot_stats(
    records: Sequence[dict[str, Any]], path: str | Path, *, title: str = "stream-perceptron",
    size: tuple[int, int] = (1200, 700), drifts: Sequence[Mapping[str, Any]] = (),
) -> Path:
    """Draw the cumulative, windowed and EWMA mistake rates and the window's min geometric margin
    of one series, and its drift events (``drifts``) as dotted red lines where they were raised;
    below them, when the newest record is a K-class worker's (whole, or kept by :func:`plotted`), the mistake
    rate of each of its most labeled classes (mistakes / labeled examples of that class) in a
    panel of its own, from the records where the class was among the most labeled.

    ``records`` are statistics records in any order (sorted by ``seen`` here; events among them,
    such as drift events, are left out); ``size`` is in pixels. Returns the path written.
    """
    rows = sorted((r for r in records if "event" not in r and r.get("labeled")),
                  key=lambda r: r["seen"])
    seen = [r["seen"] for r in rows]
    counts = [_class_counts(r) for r in rows]
    classes = list(counts[-1]) if counts else []
    fig, ax, class_ax = _figure(size, with_classes=bool(classes))
    for key, label in (
        ("mistake_rate", "cumulative mistake rate (E_n)"),
        ("window_mistake_rate", "windowed mistake rate"),
        ("ewma_mistake_rate", "EWMA mistake rate"),
    ):
        ax.plot(seen, [_num(r.get(key)) for r in rows], label=label)
    if class_ax is None:  # else the panel below, sharing this x axis, names it
        ax.set_xlabel("examples seen")
    _mark_drifts(ax, drift_marks(drifts, rows))
    ax2 = ax.twinx()
    ax2.plot(seen, [_num(r.get("margin_min")) for r in rows], color="tab:gray", linestyle="--",
             label="window min margin")
    ax2.set_ylabel("min geometric margin over the window")
    if class_ax is not None:
        _plot_classes(class_ax, seen, counts, classes)
    return _finish(fig, ax, [ax, ax2], path, title=title, size=size)


def _plot_classes(ax: Any, seen: Sequence[Any], counts: Sequence[Mapping[str, Any]],
                  classes: Sequence[str]) -> None:
    """The mistake rate of each class of ``classes`` through the records' per-class ``counts``, in
    its own panel ``ax``, the legend beside it (a name shown as text: "$" is not read as
    mathematics)."""
    for name in classes:
        rates = [_class_rate(c.get(name)) for c in counts]
        shown = name[:_CLASS_LABEL] + ("…" if len(name) > _CLASS_LABEL else "")
        ax.plot(seen, rates, linewidth=1.0, marker="o" if len(counts) < _MARKED else None, markersize=2,
                label="class " + (shown.replace("$", r"\$") or '""'))
    ax.set_xlabel("examples seen")
    ax.set_ylabel("mistake rate of the class")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)


def _class_rate(counts: Any) -> float:
    """A class's mistakes / labeled examples from its kept (labeled, mistakes), NaN when unknown."""
    if not counts or not counts[0] or counts[1] is None:
        return float("nan")
    return float(counts[1] / counts[0])


def plot_partitions(
    partitions: Mapping[str, Sequence[dict[str, Any]]], group: Sequence[dict[str, Any]],
    path: str | Path, *, title: str = "stream-perceptron", size: tuple[int, int] = (1200, 700),
    drifts: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> Path:
    """Draw each input partition's cumulative mistake rate ``E_n`` against its own examples seen
    (``partitions``: label → its statistics records), its drift events (``drifts``: label → its
    events) as dotted lines of its colour, and the group's (:func:`group_curve`) ``E_n``
    over all the labeled examples and pooled windowed rate against the examples seen by all of
    them. ``size`` is in pixels. Returns the path written.
    """
    fig, ax, _ = _figure(size)
    for label, records in partitions.items():
        rows = sorted((r for r in records if r.get("labeled")), key=lambda r: r["seen"])
        # a short history (one point, or a partition learned at once) shows as points, not as nothing
        (line,) = ax.plot([r["seen"] for r in rows], [_num(r.get("mistake_rate")) for r in rows],
                          linewidth=1.0, marker="o" if len(rows) < _MARKED else None, markersize=3,
                          label=f"partition {label} (E_n)")
        _mark_drifts(ax, drift_marks((drifts or {}).get(label, ()), rows), color=line.get_color(),
                     label=f"partition {label}: drift alarm")
    seen = [p["seen"] for p in group]
    ax.plot(seen, [_num(p.get("mistake_rate")) for p in group], color="black", linewidth=2.2,
            marker="o" if len(group) < _MARKED else None, markersize=3,
            label=f"group E_n ({len(partitions)} partitions)")
    ax.plot(seen, [_num(p.get("window_mistake_rate")) for p in group], color="black", linewidth=1.0,
            linestyle="--", label="group windowed rate (pooled)")
    ax.set_xlabel("examples seen: a partition's own; the group's, all of them")
    return _finish(fig, ax, [ax], path, title=title, size=size)


@functools.cache
def pyplot() -> ModuleType:
    """matplotlib's pyplot, drawing to files only (Agg), imported at the first plot: ``watch``
    imports this module, and runs without matplotlib (the ``[plot]`` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _figure(size: tuple[int, int], *, with_classes: bool = False) -> tuple[Figure, Any, Any]:
    """A figure of ``size`` pixels, its main axes and, ``with_classes``, a second panel under them
    sharing their x axis, for the classes' curves (else None)."""
    figsize = (size[0] / _DPI, size[1] / _DPI)
    if not with_classes:
        fig, ax = pyplot().subplots(figsize=figsize, dpi=_DPI, layout="constrained")
        return fig, ax, None
    fig, (ax, below) = pyplot().subplots(2, 1, figsize=figsize, dpi=_DPI, layout="constrained",
                                         sharex=True, height_ratios=(3, 2))
    return fig, ax, below


_DPI = 100
_MARKED = 50  # curves of fewer points than this mark each point


def _finish(fig: Figure, ax: Any, axes: Sequence[Any], path: str | Path, *, title: str,
            size: tuple[int, int]) -> Path:
    """Label the rate axis, put the legend of ``axes`` below them, the title, and write the PNG."""
    ax.set_ylabel("mistake rate")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    handles: list[Any] = []
    names: list[str] = []
    for each in axes:
        h, n = each.get_legend_handles_labels()
        handles += h
        names += n
    # below the axes: inside them it hides the curves, and a twin axes' line is drawn over a
    # legend that belongs to the first axes. One row of four takes about 900 pixels; two below that.
    fig.legend(handles, names, loc="outside lower center", ncol=4 if size[0] >= 1000 else 2,
               frameon=False)
    ax.set_title(title)
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=_DPI, format="png")  # a PNG whatever the name ends in
    except OSError as exc:
        raise OutputError(f"cannot write the plot to {out}: {exc}") from None
    finally:
        pyplot().close(fig)
    return out


def _num(value: Any) -> float:
    return float("nan") if value is None else float(value)
