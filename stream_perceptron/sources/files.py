"""CSV and JSON-lines files, plain or gzipped: rows are checked as they are read, and a bad
one is a :class:`~stream_perceptron.errors.SourceError` naming the file and line."""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Generator, Iterator
from contextlib import closing
from pathlib import Path
from typing import IO, Any

from stream_perceptron.contract import finite_text, json_object
from stream_perceptron.errors import DecodeError, SourceError
from stream_perceptron.sources.base import BadRecord, Example, Source, limited, number
from stream_perceptron.sources.classes import Classes, SeenClasses, label_from_text, label_from_value

__all__ = ["csv_source", "existing_file", "jsonl_source"]

# what reading a file can raise: a truncated .gz ends in EOFError, a corrupt one in zlib.error
_UNREADABLE = (OSError, EOFError, zlib.error)


def existing_file(text: str) -> Path:
    if not text:
        raise SourceError("missing file path in source spec")
    path = Path(text).expanduser()
    if not path.exists():
        raise SourceError(f"{text}: no such file")
    if not path.is_file():
        raise SourceError(f"{text}: not a regular file")
    return path


def _open_text(path: Path) -> IO[str]:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return path.open("r", encoding="utf-8-sig", newline="")


def _open_binary(path: Path) -> gzip.GzipFile | io.BufferedReader:
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rb")
    return path.open("rb")


def csv_source(
    spec: str, path: Path, limit: int | None, label: str, classes: Classes
) -> Source:
    """CSV with a header row: column ``label`` is the label, every other column a feature.

    x is the dense list of the other columns in file order. Labels: -1/1, 0/1, true/false
    (case-insensitive), or class names (see :func:`open_source`).
    Blank lines are skipped; a bad row raises ``SourceError("PATH:LINE: reason")``.
    """
    try:
        with _open_text(path) as f:
            header = next(csv.reader(f), None)
    except (*_UNREADABLE, UnicodeDecodeError, csv.Error) as exc:
        raise SourceError(f"{path}: cannot read CSV header: {exc}") from None
    if header is None:
        raise SourceError(f"{path}: empty file (no header row)")
    names = [h.strip() for h in header]
    if len(set(names)) != len(names):
        raise SourceError(f"{path}:1: duplicate column names in header")
    if label not in names:
        raise SourceError(
            f"{path}:1: no label column {label!r} (columns: {', '.join(names)});"
            " name it with the --label option of fit or produce"
        )
    layout = _CsvLayout(path, names, names.index(label), classes)
    if not layout.feature_at:
        raise SourceError(f"{path}:1: no feature columns besides the label {label!r}")
    feature_names = [names[i] for i in layout.feature_at]
    return Source(
        spec, len(feature_names), feature_names, None, limited(layout.rows, limit), from_file=True,
        classes=layout.seen,
    )


class _CsvLayout:
    """Where the label and the features are in each CSV row, and how to read the file."""

    def __init__(
        self, path: Path, names: list[str], label_at: int, classes: Classes
    ) -> None:
        self.path = path
        self.names = names
        self.label_at = label_at
        self.feature_at = [i for i in range(len(names)) if i != label_at]
        self.classes = classes
        self.seen = SeenClasses()

    def parse(self, row: list[str]) -> Example:
        if len(row) != len(self.names):
            raise BadRecord(f"expected {len(self.names)} fields, got {len(row)}")
        x: list[float] = []
        for i in self.feature_at:
            cell = row[i].strip()
            try:
                x.append(finite_text(cell))
            except ValueError as exc:
                raise BadRecord(f"column {self.names[i]!r} {exc}: {cell!r}") from None
        return x, label_from_text(row[self.label_at], self.classes, self.seen)

    def rows(self) -> Iterator[Example]:
        with _open_text(self.path) as f:
            reader = csv.reader(f)
            line = 1
            try:
                next(reader, None)
                for row in reader:
                    line = reader.line_num
                    if any(cell.strip() for cell in row):
                        yield self.parse(row)
            except BadRecord as exc:
                raise SourceError(f"{self.path}:{line}: {exc}") from None
            except (*_UNREADABLE, UnicodeDecodeError, csv.Error) as exc:
                raise SourceError(f"{self.path}:{line}: unreadable: {exc}") from None


def jsonl_source(
    spec: str, path: Path, limit: int | None, label: str, classes: Classes
) -> Source:
    """One JSON object per line, in the worker's input record format.

    ``{"x": [numbers] | {"name": number}, "<label>": -1|1|0|true|false|"class"}``; other keys
    are ignored, blank lines skipped. The first record fixes the kind: a list x makes a dense
    source of that length (every line must match), an object x a sparse one (``n_features`` is
    None). Records without the label are unusable for fitting and raise ``SourceError`` with
    the line number, as does any other bad line.
    """
    first = _first_jsonl_x(path)
    dense_len = len(first) if isinstance(first, list) else None
    seen = SeenClasses()

    def parse(record: dict[str, Any]) -> Example:
        x = _jsonl_x(record, dense_len)
        if record.get(label) is None:
            raise BadRecord(
                f"no label {label!r} (an unlabeled record cannot be used by fit or produce,"
                " whose --label option names the label key)"
            )
        return x, label_from_value(record[label], classes, seen)

    def examples() -> Iterator[Example]:
        with closing(_jsonl_records(path)) as records:
            for line, record in records:
                try:
                    example = parse(record)
                except BadRecord as exc:
                    raise SourceError(f"{path}:{line}: {exc}") from None
                yield example

    return Source(spec, dense_len, None, None, limited(examples, limit), from_file=True, classes=seen)


def _first_jsonl_x(path: Path) -> list[float] | dict[str, float] | None:
    """The x of the first non-blank line (None for an empty file); errors name line numbers."""
    with closing(_jsonl_records(path)) as records:
        for line, record in records:
            try:
                return _jsonl_x(record, None)
            except BadRecord as exc:
                raise SourceError(f"{path}:{line}: {exc}") from None
    return None


def _jsonl_records(path: Path) -> Generator[tuple[int, dict[str, Any]], None, None]:
    """The JSON object on each non-blank line of a JSON-lines file, with its line number (a
    byte-order mark before the first is skipped); a line that is not one, or a file that cannot
    be read, is a ``SourceError`` naming the line."""
    line = 0
    try:
        with _open_binary(path) as f:
            for line, raw in enumerate(f, start=1):
                if line == 1:
                    raw = raw.removeprefix(b"\xef\xbb\xbf")
                if not raw.strip():
                    continue
                try:
                    record = json_object(raw.rstrip(b"\r\n"))  # its positions: in the line
                except DecodeError as exc:
                    raise SourceError(f"{path}:{line}: {exc.reason}") from None
                yield line, record
    except _UNREADABLE as exc:
        where = f"{path}:{line}" if line else str(path)
        raise SourceError(f"{where}: unreadable: {exc}") from None


def _jsonl_x(record: dict[str, Any], dense_len: int | None) -> list[float] | dict[str, float]:
    if "x" not in record:
        raise BadRecord("no 'x'")
    x = record["x"]
    if isinstance(x, list):
        if not x:
            raise BadRecord("'x' is an empty list")
        if dense_len is not None and len(x) != dense_len:
            raise BadRecord(f"'x' has {len(x)} values, earlier lines had {dense_len}")
        return [number(v, f"x[{i}]") for i, v in enumerate(x)]
    if isinstance(x, dict):
        if dense_len is not None:
            raise BadRecord("'x' is an object but earlier lines had lists")
        return {k: number(v, f"x[{k!r}]") for k, v in x.items()}
    raise BadRecord("'x' must be a list of numbers or an object of name -> number")
