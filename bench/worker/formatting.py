"""Text for the reports: aligned and Markdown tables, rates, ratios and numbers, and the JSON file
every benchmark writes with ``--json``."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Say = Callable[..., None]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None,
                 markdown: bool = False) -> str:
    """A plain-text (or Markdown) table; ``align`` has one of ``l``/``r`` per column (default: the
    first left, the rest right)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    align = align or "l" + "r" * (len(headers) - 1)
    if markdown:
        rule = "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"
        lines = ["| " + " | ".join(r) + " |" for r in cells]
        return "\n".join([lines[0], rule, *lines[1:]])
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        padded = (c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align, strict=True))
        return "  ".join(padded).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths), *map(line, cells[1:])])


def fmt_rate(rate: float | None) -> str:
    """Records/s with thousands separators (``n/a`` for None)."""
    return fmt_value(rate, ",.0f")


def fmt_ratio(a: float | None, b: float | None) -> str:
    """``a / b`` as ``0.53x`` (``n/a`` when either is missing or ``b`` is 0)."""
    return "n/a" if a is None or not b else f"{a / b:.2f}x"


def fmt_value(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def write_json(path: Path | str | None, report: Any) -> None:
    """``report`` as indented JSON at ``path``, its directories made (no ``path``: nothing)."""
    if not path:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")


def timing_rows(runs: dict[Any, list[float]], records: int, base: Any) -> list[list[str]]:
    """One row per contender of ``runs`` (seconds of each repeat): its median µs per record,
    spread ((slowest − fastest) / median) and median as a multiple of ``base``'s."""
    reference = statistics.median(runs[base])
    rows = []
    for name, times in runs.items():
        med = statistics.median(times)
        label = f"{name:,}" if isinstance(name, int) else str(name)
        rows.append([label, f"{1e6 * med / records:.2f}", f"{(max(times) - min(times)) / med:.0%}",
                     f"{med / reference:.3f}"])
    return rows


def contender_report(args: Any, runs: dict[str, list[float]], *, input_text: str, column: str,
                     **sizes: int) -> dict[str, Any]:
    """The close of a one-table offline benchmark: prints ``args.records`` and ``input_text``, then
    :func:`timing_rows` of ``runs`` (seconds per repeat, by contender) against the first one,
    headed ``column``; writes the report to ``args.json`` if given, and returns it."""
    print(f"{args.records:,} {input_text}; median of {args.repeats} interleaved runs")
    rows = timing_rows(runs, args.records, next(iter(runs)))
    print(format_table([column, "us/record", "spread", "x earlier"], rows))
    report = {"records": args.records, "repeats": args.repeats, **sizes, "seconds": runs}
    write_json(args.json, report)
    return report


def ways_report(args: Any, runs: dict[tuple[str, int], list[float]], ways: Sequence[str], records: int, *,
                base: str, heading: str, columns: list[str]) -> dict[str, Any]:
    """The close of an offline benchmark of ways at several sizes (the ``runs`` of
    :func:`~bench.worker.contenders.interleaved_ways`): prints ``heading``, then one
    :func:`timing_rows` table against ``base`` under ``columns``; writes the report to
    ``args.json`` if given, and returns it."""
    from bench.worker.machine import machine_info

    sizes = list(dict.fromkeys(n for _, n in runs))
    table = [[f"{n:,}", *row] for n in sizes
             for row in timing_rows({w: runs[(w, n)] for w in ways}, records, base)]
    print(heading)
    print(format_table(columns, table))
    report = {"machine": machine_info(), "records": records, "repeats": args.repeats,
              "runs": {f"{w}/{n}": t for (w, n), t in runs.items()}}
    write_json(args.json, report)
    return report
