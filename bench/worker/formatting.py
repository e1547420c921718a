"""Text formatting for the report: aligned and Markdown tables, rates, ratios and numbers, and the
JSON file every benchmark writes with ``--json``."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """A plain-text table; ``align`` has one of ``l``/``r`` per column (default: first left, rest right).

    >>> print(format_table(["name", "rec/s"], [["pipe", "1,000"], ["worker", "900"]]))
    name    rec/s
    ------  -----
    pipe    1,000
    worker    900
    """
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    ncol = len(headers)
    align = align or ("l" + "r" * (ncol - 1))
    widths = [max(len(r[i]) for r in cells) for i in range(ncol)]

    def fmt(row: list[str]) -> str:
        parts = [row[i].ljust(widths[i]) if align[i] == "l" else row[i].rjust(widths[i]) for i in range(ncol)]
        return "  ".join(parts).rstrip()

    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells[1:]]
    return "\n".join(lines)


def timing_rows(runs: dict[Any, list[float]], records: int, base: Any) -> list[list[str]]:
    """One row per contender of ``runs`` (seconds of each repeat): its median µs per record,
    spread ((slowest − fastest) / median) and median as a multiple of ``base``'s.

    >>> timing_rows({"a": [2.0, 1.0, 1.5], 500: [3.0, 3.0, 3.0]}, 1_000_000, base="a")
    [['a', '1.50', '67%', '1.000'], ['500', '3.00', '0%', '2.000']]
    """
    reference = statistics.median(runs[base])
    rows = []
    for name, times in runs.items():
        med = statistics.median(times)
        spread = (max(times) - min(times)) / med
        label = f"{name:,}" if isinstance(name, int) else str(name)
        rows.append([label, f"{1e6 * med / records:.2f}", f"{spread:.0%}", f"{med / reference:.3f}"])
    return rows


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None) -> str:
    """The same table in Markdown.

    >>> print(markdown_table(["a", "b"], [[1, 2]]))
    | a | b |
    |---|---:|
    | 1 | 2 |
    """
    ncol = len(headers)
    align = align or ("l" + "r" * (ncol - 1))
    out = ["| " + " | ".join(str(h) for h in headers) + " |"]
    out.append("|" + "|".join("---" if a == "l" else "---:" for a in align) + "|")
    out += ["| " + " | ".join("" if c is None else str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def fmt_rate(rate: float | None) -> str:
    """Records/s with thousands separators (``n/a`` for None).

    >>> fmt_rate(12345.6), fmt_rate(None)
    ('12,346', 'n/a')
    """
    return "n/a" if rate is None else f"{rate:,.0f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    """``a / b`` as ``0.53x``.

    >>> fmt_ratio(1.0, 2.0), fmt_ratio(None, 1.0)
    ('0.50x', 'n/a')
    """
    if a is None or not b:
        return "n/a"
    return f"{a / b:.2f}x"


Say = Callable[..., None]


def fmt_value(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def write_json(path: Path, report: dict[str, Any]) -> None:
    """``report`` as indented JSON at ``path``, its directories made (values JSON does not know
    are written as text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")


def contender_report(
    args: Any, runs: dict[str, list[float]], *, input_text: str, column: str, **sizes: int
) -> dict[str, Any]:
    """The close of a one-table offline benchmark: prints ``args.records`` and ``input_text``,
    then one :func:`timing_rows` table of ``runs`` (seconds per repeat, by contender) against the
    first contender, headed ``column``; writes the report to ``args.json`` if given, and returns
    it: ``records``, ``repeats``, ``sizes`` and the ``seconds``."""
    print(f"{args.records:,} {input_text}; median of {args.repeats} interleaved runs")
    rows = timing_rows(runs, args.records, base=next(iter(runs)))
    print(format_table([column, "us/record", "spread", "x earlier"], rows))
    report = {"records": args.records, "repeats": args.repeats, **sizes, "seconds": runs}
    if args.json is not None:
        write_json(args.json, report)
    return report
