"""Helpers of the sources tests: write a CSV or JSON-lines file."""

from __future__ import annotations

from pathlib import Path

import orjson


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path
