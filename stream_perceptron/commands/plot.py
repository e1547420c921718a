"""A PNG of a statistics history: mistake rates and the window's min margin against examples seen,
and :class:`Thinned`, which keeps a bounded, evenly spaced part of a long history to draw."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from stream_perceptron.errors import OutputError  # noqa: E402

PLOTTED = ("seen", "labeled", "mistake_rate", "window_mistake_rate", "ewma_mistake_rate", "margin_min")
"""The fields of a statistics record that :func:`plot_stats` draws from."""

POINTS = 10_000
"""The most records of one worker that ``plot`` draws (its PNG is about 1,200 pixels wide)."""


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
            if len(self.items) > self.limit:
                del self.items[1::2]
                self.stride *= 2
        self.seen += 1
        self.last = item

    def kept(self) -> list[dict[str, Any]]:
        """The kept items in arrival order, the last one included."""
        if self.last is None or (self.items and self.items[-1] is self.last):
            return list(self.items)
        return [*self.items, self.last]


def plot_stats(
    records: Sequence[dict[str, Any]], path: str | Path, *, title: str = "stream-perceptron",
    size: tuple[int, int] = (1200, 700),
) -> Path:
    """Draw the cumulative, windowed and EWMA mistake rates and the window's min geometric margin.

    ``records`` are statistics records in any order (sorted by ``seen`` here); ``size`` is in
    pixels. Returns the path written.
    """
    rows = sorted((r for r in records if r.get("labeled")), key=lambda r: r["seen"])
    seen = [r["seen"] for r in rows]
    dpi = 100
    fig, ax = plt.subplots(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi, layout="constrained")
    for key, label in (
        ("mistake_rate", "cumulative mistake rate (E_n)"),
        ("window_mistake_rate", "windowed mistake rate"),
        ("ewma_mistake_rate", "EWMA mistake rate"),
    ):
        ax.plot(seen, [_num(r.get(key)) for r in rows], label=label)
    ax.set_xlabel("examples seen")
    ax.set_ylabel("mistake rate")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax2 = ax.twinx()
    ax2.plot(seen, [_num(r.get("margin_min")) for r in rows], color="tab:gray", linestyle="--",
             label="window min margin")
    ax2.set_ylabel("min geometric margin over the window")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    # below the axes: inside them it hides the curves, and the twin axes' margin line is drawn
    # over a legend that belongs to the first axes. One row takes about 900 pixels; two below that.
    fig.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="outside lower center",
               ncol=4 if size[0] >= 1000 else 2, frameon=False)
    ax.set_title(title)
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=dpi, format="png")  # a PNG whatever the name ends in
    except OSError as exc:
        raise OutputError(f"cannot write the plot to {out}: {exc}") from None
    finally:
        plt.close(fig)
    return out


def _num(value: Any) -> float:
    return float("nan") if value is None else float(value)
