"""Named datasets of labeled examples, for the ``fit``, ``produce`` and ``demo`` commands and the
benchmarks.

Every source yields :data:`Example` pairs ``(x, y)`` with ``y`` an ``int`` in ``{-1, +1}`` and
``x`` either a dense ``list[float]`` (in the order of :attr:`Source.feature_names`, when known)
or, for sparse sources, a ``dict[str, float]``. Sources are re-iterable: every ``iter(source)``
starts over and yields the same examples.

Spec grammar (one line)::

    spec   := PATH                     file, chosen by suffix: .csv / .csv.gz -> CSV,
                                       .jsonl / .jsonl.gz / .ndjson -> JSON lines
            | "csv:" PATH | "jsonl:" PATH       file of that format, whatever its suffix
            | "river:" NAME            a dataset bundled with river (Phishing, Bananas, Shuttle)
            | "separable" [":" args]   generated separable stream with a known margin
            | "sea" [":" args]         river.datasets.synth.SEA (abrupt-drift concept)
            | "hyperplane" [":" args]  river.datasets.synth.Hyperplane (gradual drift)
    args   := key "=" value ("," key "=" value)*

Scheme names are case-insensitive; unknown keys, malformed ``key=value`` pairs, unknown schemes
and missing files raise :class:`~stream_perceptron.errors.SourceError` with a one-line message.
``limit`` (of :func:`open_source`) caps the number of examples of any source; a limited
generated stream is a prefix of the unlimited one.

>>> src = open_source("separable:d=3,n=5,seed=1")
>>> (src.n_features, src.length, len(list(src)))
(3, 5, 5)
>>> sorted({y for _, y in src}) in ([-1], [1], [-1, 1])
True
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import math
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt
import orjson

from stream_perceptron.errors import SourceError

__all__ = [
    "SUPPORTED_RIVER_DATASETS",
    "Example",
    "Source",
    "dense_matrix",
    "no_positive_class",
    "open_source",
    "separable_params",
]

Example = tuple[list[float] | dict[str, float], int]
"""``(x, y)``: features (dense list or sparse dict) and a label in ``{-1, +1}``."""

FloatArray = npt.NDArray[np.float64]
LabelArray = npt.NDArray[np.int8]
Chunk = tuple[FloatArray, LabelArray]

SUPPORTED_RIVER_DATASETS: tuple[str, ...] = ("Phishing", "Bananas", "Shuttle")
"""Binary-classification datasets shipped inside the river wheel (usable offline)."""

_SCHEMES = ("csv", "jsonl", "river", "separable", "sea", "hyperplane")
_CSV_SUFFIXES = (".csv", ".csv.gz")
_JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
_POSITIVE_TEXT = frozenset({"1", "+1", "1.0", "+1.0", "true"})
_NEGATIVE_TEXT = frozenset({"-1", "0", "-1.0", "0.0", "false"})
# what reading a file can raise: a truncated .gz ends in EOFError, a corrupt one in zlib.error
_UNREADABLE = (OSError, EOFError, zlib.error)
# generators: the widest x (the worker's default limits.max_features), and the longest noisy
# separable stream (its flipped positions are drawn from all n: up to 8 bytes per example)
_MAX_D = 100_000
_MAX_NOISY_N = 10_000_000
_LABEL_HELP = "not -1/1, 0/1 or true/false (name the positive class with positive_class)"


@dataclass(frozen=True)
class Source:
    """A named, re-iterable dataset of labeled examples.

    ``spec`` is the string it was opened from; ``n_features`` the dimension of dense ``x`` (None
    for sparse/dict sources); ``feature_names`` the column names in ``x`` order when known;
    ``length`` the number of examples when known without reading the data (after ``limit``).
    ``factory`` makes a fresh iterator over the examples; ``chunks``, when set, makes a fresh
    iterator over the same examples as ``(X, y)`` numpy blocks (used by :func:`dense_matrix`).
    ``from_file`` is True for CSV and JSONL files, whose rows are only checked as they are read.
    """

    spec: str
    n_features: int | None
    feature_names: list[str] | None
    length: int | None
    factory: Callable[[], Iterator[Example]] = field(repr=False, compare=False)
    chunks: Callable[[], Iterator[Chunk]] | None = field(default=None, repr=False, compare=False)
    from_file: bool = False

    def __iter__(self) -> Iterator[Example]:
        """Start over: yield every example from the beginning."""
        return self.factory()


class _BadRecord(Exception):
    """Internal: one record is unusable; the caller adds where (line number, example index)."""


# --------------------------------------------------------------------------------------------
# entry points


def open_source(
    spec: str,
    *,
    limit: int | None = None,
    label: str = "y",
    positive_class: str | None = None,
    negative_class: str | None = None,
) -> Source:
    """Open the source named by ``spec`` (see the module docstring for the grammar).

    ``limit`` caps the number of examples (None: all). ``label`` is the CSV column (JSONL key)
    holding the label. ``positive_class``, when given, maps *string* labels, and every CSV
    label is a string: that exact string (after stripping spaces) is +1; with
    ``negative_class`` also given, that string is -1 and any other is a bad record, as the
    worker refuses it; without, every other string is -1 (one class against the rest).
    Boolean and numeric JSON labels keep their fixed meaning (true/1 -> +1, false/0/-1 -> -1).
    Files are checked (exist, header) here; bad rows raise :class:`SourceError` when iteration
    reaches them.
    """
    if limit is not None and limit < 0:
        raise SourceError(f"limit must be >= 0, got {limit}")
    classes = _Classes(positive_class, negative_class)
    text = spec.strip()
    if not text:
        raise SourceError("empty source spec")
    head, sep, rest = text.partition(":")
    scheme = head.strip().lower()
    if scheme in _SCHEMES and (sep or scheme not in ("csv", "jsonl")):
        return _open_scheme(spec, scheme, rest.strip(), limit, label, classes)
    lower = text.lower()
    if lower.endswith(_CSV_SUFFIXES):
        return _csv_source(spec, _existing_file(text), limit, label, classes)
    if lower.endswith(_JSONL_SUFFIXES):
        return _jsonl_source(spec, _existing_file(text), limit, label, classes)
    if sep and head.isidentifier():
        raise SourceError(
            f"unknown source scheme {head!r} in {spec!r} (expected one of "
            f"{', '.join(s + ':' for s in _SCHEMES)} or a .csv/.jsonl file path)"
        )
    raise SourceError(
        f"unknown source spec {spec!r}: expected a .csv/.jsonl file path or one of "
        f"{', '.join(s + ':' for s in _SCHEMES)}"
    )


def dense_matrix(source: Source) -> tuple[FloatArray, LabelArray]:
    """All examples of a dense source as ``X`` (float64, shape ``(n, d)``) and ``y`` (int8).

    Raises :class:`SourceError` for sparse sources (``n_features is None``) and for examples
    whose ``x`` is not a list of length ``n_features``.
    """
    d = source.n_features
    if d is None:
        raise SourceError(f"{source.spec}: sparse source (dict features) has no dense matrix")
    if source.chunks is not None:
        blocks = list(source.chunks())
        if not blocks:
            return np.empty((0, d), dtype=np.float64), np.empty(0, dtype=np.int8)
        X = np.concatenate([b[0] for b in blocks]).astype(np.float64, copy=False)
        y = np.concatenate([b[1] for b in blocks]).astype(np.int8, copy=False)
        return X, y
    rows: list[list[float]] = []
    labels: list[int] = []
    for i, (x, label) in enumerate(source):
        if not isinstance(x, list) or len(x) != d:
            raise SourceError(
                f"{source.spec}: example #{i + 1} is not a dense vector of length {d}"
            )
        rows.append(x)
        labels.append(label)
    X = np.array(rows, dtype=np.float64).reshape(len(rows), d)
    return X, np.array(labels, dtype=np.int8)


def separable_params(spec: str, *, limit: int | None = None) -> dict[str, Any]:
    """Generate a ``separable:`` stream once and report its geometry.

    Returns ``d, n, seed, noise, radius, gamma`` (the parsed spec; ``n`` after ``limit``),
    ``u`` (the hidden unit normal, float64 array), ``R`` (the largest ``||x||``, <= radius),
    ``margin`` (the smallest ``|u.x|``, >= gamma), ``n_flipped`` (labels that disagree with
    ``sign(u.x)``) and ``mistake_bound`` = ``(R / gamma) ** 2`` (Novikoff's bound on perceptron
    mistakes, valid when ``noise == 0``; ``inf`` when gamma is 0).
    """
    text = spec.strip()
    head, _, rest = text.partition(":")
    if head.strip().lower() != "separable":
        raise SourceError(f"separable_params needs a 'separable:' spec, got {spec!r}")
    params = _separable_args(rest.strip(), limit)
    total = params.n if limit is None else min(params.n, limit)
    u = _hidden_normal(params)
    big_r = 0.0
    margin = math.inf
    flipped = 0
    count = 0
    for X, y in _separable_chunks(params, total):
        dots = X @ u
        if X.shape[0]:
            big_r = max(big_r, float(np.sqrt(np.max(np.einsum("ij,ij->i", X, X)))))
            margin = min(margin, float(np.min(np.abs(dots))))
        flipped += int(np.count_nonzero(np.where(dots >= 0, 1, -1) != y))
        count += X.shape[0]
    return {
        "d": params.d,
        "n": count,
        "seed": params.seed,
        "noise": params.noise,
        "radius": params.radius,
        "gamma": params.gamma,
        "u": u,
        "R": big_r,
        "margin": margin,
        "n_flipped": flipped,
        "mistake_bound": (big_r / params.gamma) ** 2 if params.gamma > 0 else math.inf,
    }


# --------------------------------------------------------------------------------------------
# helpers shared by the parsers


def _open_scheme(
    spec: str, scheme: str, rest: str, limit: int | None, label: str, classes: _Classes
) -> Source:
    if scheme == "csv":
        return _csv_source(spec, _existing_file(rest), limit, label, classes)
    if scheme == "jsonl":
        return _jsonl_source(spec, _existing_file(rest), limit, label, classes)
    if scheme == "river":
        return _river_source(spec, rest, limit, classes)
    if scheme == "separable":
        return _separable_source(spec, _separable_args(rest, limit), limit)
    if scheme == "sea":
        return _sea_source(spec, rest, limit)
    return _hyperplane_source(spec, rest, limit)


def _existing_file(text: str) -> Path:
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


def _limited(
    factory: Callable[[], Iterator[Example]], limit: int | None
) -> Callable[[], Iterator[Example]]:
    if limit is None:
        return factory

    def take() -> Iterator[Example]:
        it = factory()
        try:
            yield from itertools.islice(it, limit)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    return take


def _cap(length: int | None, limit: int | None) -> int | None:
    if length is None or limit is None:
        return length
    return min(length, limit)


@dataclass(frozen=True)
class _Classes:
    """The class names of string labels (``limits.positive_class``, ``limits.negative_class``)."""

    positive: str | None = None
    negative: str | None = None


def no_positive_class(spec: str, positive_class: str | None, count: int, positives: int) -> None:
    """Raise :class:`SourceError` when a positive class is named but no label of ``spec`` is it:
    a misspelt name would otherwise make every example -1."""
    if positive_class is not None and count and not positives:
        raise SourceError(
            f"{spec}: no label is positive_class {positive_class!r} (SP_LIMITS__POSITIVE_CLASS),"
            f" so all {count} examples would be -1"
        )


def _label_from_text(text: str, classes: _Classes) -> int:
    value = text.strip()
    if not value:
        raise _BadRecord("empty label")
    if classes.positive is not None and value == classes.positive.strip():
        return 1
    if classes.negative is not None and value == classes.negative.strip():
        return -1
    if classes.positive is not None:
        if classes.negative is None:
            return -1  # one class against the rest
        raise _BadRecord(
            f"label {value!r} is neither positive_class {classes.positive!r}"
            f" nor negative_class {classes.negative!r}"
        )
    key = value.lower()
    if key in _POSITIVE_TEXT:
        return 1
    if key in _NEGATIVE_TEXT:
        return -1
    raise _BadRecord(f"label {value!r} is {_LABEL_HELP}")


def _label_from_value(value: object, classes: _Classes) -> int:
    """Label of a JSON or river value: bools and numbers fixed, strings via positive_class."""
    if isinstance(value, bool | np.bool_):
        return 1 if value else -1
    if isinstance(value, str):
        return _label_from_text(value, classes)
    if isinstance(value, int | float | np.integer | np.floating):
        if value == 1:
            return 1
        if value in (0, -1):
            return -1
    raise _BadRecord(f"label {value!r} is {_LABEL_HELP}")


def _number(value: object, name: str) -> float:
    """A finite float from a JSON/river feature value (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise _BadRecord(f"feature {name} is not a number: {value!r}")
    try:
        out = float(value)
    except OverflowError:
        raise _BadRecord(f"feature {name} is too large: {value!r}") from None
    if not math.isfinite(out):
        raise _BadRecord(f"feature {name} is not finite: {value!r}")
    return out


def _parse_args(scheme: str, text: str, defaults: Mapping[str, int | float]) -> dict[str, Any]:
    """``key=value,...`` -> dict; a key's type is its default's type (int or float)."""
    out: dict[str, Any] = dict(defaults)
    seen: set[str] = set()
    for piece in text.split(","):
        if not piece.strip():
            continue
        key, eq, raw = piece.partition("=")
        key, raw = key.strip(), raw.strip()
        if not eq or not key or not raw:
            raise SourceError(f"{scheme}: bad key=value {piece.strip()!r}")
        if key not in defaults:
            raise SourceError(f"{scheme}: unknown key {key!r} (known: {', '.join(defaults)})")
        if key in seen:
            raise SourceError(f"{scheme}: key {key!r} given twice")
        seen.add(key)
        out[key] = _parse_value(scheme, key, raw, isinstance(defaults[key], int))
    return out


def _parse_value(scheme: str, key: str, raw: str, integer: bool) -> int | float:
    try:
        number = float(raw)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise SourceError(f"{scheme}: {key}={raw!r} is not {kind}") from None
    if not math.isfinite(number):
        raise SourceError(f"{scheme}: {key}={raw!r} is not finite")
    if not integer:
        return number
    try:
        return int(raw)
    except ValueError:
        if number.is_integer():
            return int(number)
        raise SourceError(f"{scheme}: {key}={raw!r} is not an integer") from None


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise SourceError(message)


# --------------------------------------------------------------------------------------------
# CSV


def _csv_source(
    spec: str, path: Path, limit: int | None, label: str, classes: _Classes
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
        raise SourceError(f"{path}:1: no label column {label!r} (columns: {', '.join(names)})")
    layout = _CsvLayout(path, names, names.index(label), classes)
    if not layout.feature_at:
        raise SourceError(f"{path}:1: no feature columns besides the label {label!r}")
    feature_names = [names[i] for i in layout.feature_at]
    return Source(
        spec, len(feature_names), feature_names, None, _limited(layout.rows, limit), from_file=True
    )


class _CsvLayout:
    """Where the label and the features are in each CSV row, and how to read the file."""

    def __init__(
        self, path: Path, names: list[str], label_at: int, classes: _Classes
    ) -> None:
        self.path = path
        self.names = names
        self.label_at = label_at
        self.feature_at = [i for i in range(len(names)) if i != label_at]
        self.classes = classes

    def parse(self, row: list[str]) -> Example:
        if len(row) != len(self.names):
            raise _BadRecord(f"expected {len(self.names)} fields, got {len(row)}")
        x: list[float] = []
        for i in self.feature_at:
            cell = row[i].strip()
            try:
                value = float(cell)
            except ValueError:
                raise _BadRecord(f"column {self.names[i]!r} is not a number: {cell!r}") from None
            if not math.isfinite(value):
                raise _BadRecord(f"column {self.names[i]!r} is not finite: {cell!r}")
            x.append(value)
        return x, _label_from_text(row[self.label_at], self.classes)

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
            except _BadRecord as exc:
                raise SourceError(f"{self.path}:{line}: {exc}") from None
            except (*_UNREADABLE, UnicodeDecodeError, csv.Error) as exc:
                raise SourceError(f"{self.path}:{line}: unreadable: {exc}") from None


# --------------------------------------------------------------------------------------------
# JSON lines


def _jsonl_source(
    spec: str, path: Path, limit: int | None, label: str, classes: _Classes
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

    def parse(raw: bytes) -> Example:
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _BadRecord(f"invalid JSON: {exc}") from None
        if not isinstance(record, dict):
            raise _BadRecord("not a JSON object")
        x = _jsonl_x(record, dense_len)
        if record.get(label) is None:
            raise _BadRecord(
                f"no label {label!r} (an unlabeled record cannot be used by fit or produce)"
            )
        return x, _label_from_value(record[label], classes)

    def examples() -> Iterator[Example]:
        with _open_binary(path) as f:
            line = 0
            try:
                for line, raw in enumerate(f, start=1):
                    if line == 1:
                        raw = raw.removeprefix(b"\xef\xbb\xbf")
                    if raw.strip():
                        yield parse(raw)
            except _BadRecord as exc:
                raise SourceError(f"{path}:{line}: {exc}") from None
            except _UNREADABLE as exc:
                raise SourceError(f"{path}:{line}: unreadable: {exc}") from None

    return Source(spec, dense_len, None, None, _limited(examples, limit), from_file=True)


def _first_jsonl_x(path: Path) -> list[float] | dict[str, float] | None:
    """The x of the first non-blank line (None for an empty file); errors name line numbers."""
    try:
        with _open_binary(path) as f:
            for line, raw in enumerate(f, start=1):
                if line == 1:
                    raw = raw.removeprefix(b"\xef\xbb\xbf")
                if not raw.strip():
                    continue
                try:
                    record = orjson.loads(raw)
                    if not isinstance(record, dict):
                        raise _BadRecord("not a JSON object")
                    return _jsonl_x(record, None)
                except orjson.JSONDecodeError as exc:
                    raise SourceError(f"{path}:{line}: invalid JSON: {exc}") from None
                except _BadRecord as exc:
                    raise SourceError(f"{path}:{line}: {exc}") from None
    except _UNREADABLE as exc:
        raise SourceError(f"{path}: unreadable: {exc}") from None
    return None


def _jsonl_x(record: dict[str, Any], dense_len: int | None) -> list[float] | dict[str, float]:
    if "x" not in record:
        raise _BadRecord("no 'x'")
    x = record["x"]
    if isinstance(x, list):
        if not x:
            raise _BadRecord("'x' is an empty list")
        if dense_len is not None and len(x) != dense_len:
            raise _BadRecord(f"'x' has {len(x)} values, earlier lines had {dense_len}")
        return [_number(v, f"x[{i}]") for i, v in enumerate(x)]
    if isinstance(x, dict):
        if dense_len is not None:
            raise _BadRecord("'x' is an object but earlier lines had lists")
        return {k: _number(v, f"x[{k!r}]") for k, v in x.items()}
    raise _BadRecord("'x' must be a list of numbers or an object of name -> number")


# --------------------------------------------------------------------------------------------
# river datasets


def _river_source(spec: str, name: str, limit: int | None, classes: _Classes) -> Source:
    """A river dataset: x dense in the dataset's feature order, y mapped to -1/+1.

    Phishing (1,250 x 9; y True = phishing -> +1), Bananas (5,300 x 2, features "1", "2"; y
    bool), Shuttle (49,097 x 9, features f1..f9 as ints -> floats; y ``anomaly`` 1 -> +1, 0 ->
    -1, about 7% positive) ship inside river. Any other binary dataset of ``river.datasets``
    works if its files are already on disk (river's own cache); nothing is downloaded. A
    multi-class dataset works when ``positive_class`` names the positive class, every other
    class being -1; with ``negative_class`` also set, a third class is a bad example.
    """
    from river import datasets as river_datasets
    from river.datasets import base as river_base

    dataset = _river_dataset(name, river_datasets, river_base)
    task = dataset.task
    title = f"river:{type(dataset).__name__}"
    if task != river_base.BINARY_CLF and not (
        task == river_base.MULTI_CLF and classes.positive is not None
    ):
        raise SourceError(
            f"{title}: task is {task!r}, not binary classification "
            f"(supported: {', '.join(SUPPORTED_RIVER_DATASETS)}; "
            "multi-class datasets need positive_class)"
        )
    sparse = bool(getattr(dataset, "sparse", False))
    names = None if sparse else _river_feature_names(dataset, title)

    def examples() -> Iterator[Example]:
        it = iter(dataset)
        index = 0
        try:
            for x, y in it:
                index += 1
                yield _river_example(x, y, names, classes)
        except _BadRecord as exc:
            raise SourceError(f"{title}: example #{index}: {exc}") from None
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    n_samples = getattr(dataset, "n_samples", None)
    length = n_samples if isinstance(n_samples, int) else None
    n_features = None if names is None else len(names)
    return Source(spec, n_features, names, _cap(length, limit), _limited(examples, limit))


def _river_dataset(name: str, module: Any, base: Any) -> Any:
    wanted = name.strip()
    if not wanted:
        raise SourceError(
            f"river: missing dataset name (supported: {', '.join(SUPPORTED_RIVER_DATASETS)})"
        )
    classes = {
        attr: obj
        for attr in dir(module)
        if isinstance(obj := getattr(module, attr), type) and issubclass(obj, base.Dataset)
    }
    match = classes.get(wanted) or next(
        (c for a, c in classes.items() if a.lower() == wanted.lower()), None
    )
    if match is None:
        raise SourceError(
            f"river:{wanted}: not a river dataset (supported: "
            f"{', '.join(SUPPORTED_RIVER_DATASETS)})"
        )
    try:
        dataset = match()
    except Exception as exc:  # any constructor failure is a source problem
        raise SourceError(f"river:{wanted}: cannot construct: {exc}") from None
    if isinstance(dataset, base.RemoteDataset) and not dataset.is_downloaded:
        raise SourceError(
            f"river:{match.__name__}: not bundled with river and not downloaded "
            f"(this project never downloads; bundled: {', '.join(SUPPORTED_RIVER_DATASETS)})"
        )
    return dataset


def _river_feature_names(dataset: Any, title: str) -> list[str]:
    it = iter(dataset)
    try:
        first = next(it, None)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
    if first is None:
        raise SourceError(f"{title}: the dataset is empty")
    x = first[0]
    if not isinstance(x, dict):
        raise SourceError(f"{title}: features are not a dict ({type(x).__name__})")
    return [str(k) for k in x]


def _river_example(
    x: dict[Any, Any], y: object, names: list[str] | None, classes: _Classes
) -> Example:
    label = _label_from_value(y, classes)
    if names is None:
        return {str(k): _number(v, repr(k)) for k, v in x.items()}, label
    if len(x) != len(names):
        raise _BadRecord(f"{len(x)} features, expected {len(names)}")
    values = list(x.values())
    keys = [str(k) for k in x]
    if keys != names:
        by_name = {str(k): v for k, v in x.items()}
        try:
            values = [by_name[n] for n in names]
        except KeyError as exc:
            raise _BadRecord(f"missing feature {exc.args[0]!r}") from None
    return [_number(v, n) for n, v in zip(names, values, strict=True)], label


# --------------------------------------------------------------------------------------------
# river drifting generators


def _sea_source(spec: str, rest: str, limit: int | None) -> Source:
    """river.datasets.synth.SEA: x uniform in [0, 10]^3, y = +1 iff x0 + x1 > theta.

    Keys: ``n`` (examples, default 100000), ``seed`` (0), ``variant`` (0..3: theta = 8, 9, 7,
    9.5), ``noise`` (probability of flipping each label, default 0). Features "0", "1", "2"
    (x2 is irrelevant). The boundary has an offset, so a perceptron needs a bias feature.
    """
    args = _parse_args("sea", rest, {"n": 100_000, "seed": 0, "variant": 0, "noise": 0.0})
    n, seed, variant, noise = args["n"], args["seed"], args["variant"], args["noise"]
    _check(n >= 0, f"sea: n must be >= 0, got {n}")
    _check(variant in (0, 1, 2, 3), f"sea: variant must be 0, 1, 2 or 3, got {variant}")
    _check(0.0 <= noise <= 1.0, f"sea: noise must be in [0, 1], got {noise}")

    def examples() -> Iterator[Example]:
        from river.datasets import synth

        gen = synth.SEA(variant=variant, noise=noise, seed=seed)
        for x, y in itertools.islice(gen, n):
            yield [float(x[0]), float(x[1]), float(x[2])], 1 if y else -1

    return Source(spec, 3, ["0", "1", "2"], _cap(n, limit), _limited(examples, limit))


def _hyperplane_source(spec: str, rest: str, limit: int | None) -> Source:
    """river.datasets.synth.Hyperplane: x uniform in [0, 1]^d, y = +1 iff w.x >= sum(w) / 2.

    Keys: ``d`` (features, default 10), ``n`` (100000), ``seed`` (0), ``mag_change`` (drift per
    example of the first ``n_drift_features`` weights, 0.001), ``noise`` (river's
    ``noise_percentage``, 0.05), ``n_drift_features`` (2), ``sigma`` (probability of reversing a
    drift direction, 0.1). Note river flips a label when ``0.01 + U <= noise``, so the actual
    flip rate is ``max(0, noise - 0.01)`` (4% for the default 0.05). Labels 1 -> +1, 0 -> -1;
    the boundary has an offset, so a perceptron needs a bias feature.
    """
    args = _parse_args(
        "hyperplane",
        rest,
        {
            "d": 10,
            "n": 100_000,
            "seed": 0,
            "mag_change": 0.001,
            "noise": 0.05,
            "n_drift_features": 2,
            "sigma": 0.1,
        },
    )
    d, n = args["d"], args["n"]
    _check(1 <= d <= _MAX_D, f"hyperplane: d must be in [1, {_MAX_D}], got {d}")
    _check(n >= 0, f"hyperplane: n must be >= 0, got {n}")
    _check(
        0 <= args["n_drift_features"] <= d,
        f"hyperplane: n_drift_features must be in [0, d={d}], got {args['n_drift_features']}",
    )
    for key in ("mag_change", "noise", "sigma"):
        _check(0.0 <= args[key] <= 1.0, f"hyperplane: {key} must be in [0, 1], got {args[key]}")

    def examples() -> Iterator[Example]:
        from river.datasets import synth

        gen = synth.Hyperplane(
            seed=args["seed"],
            n_features=d,
            n_drift_features=args["n_drift_features"],
            mag_change=args["mag_change"],
            noise_percentage=args["noise"],
            sigma=args["sigma"],
        )
        keys = range(d)
        for x, y in itertools.islice(gen, n):
            yield [float(x[k]) for k in keys], 1 if y else -1

    names = [str(i) for i in range(d)]
    return Source(spec, d, names, _cap(n, limit), _limited(examples, limit))


# --------------------------------------------------------------------------------------------
# generated linearly separable stream


@dataclass(frozen=True)
class _SeparableParams:
    d: int
    gamma: float
    n: int
    seed: int
    noise: float
    radius: float
    accept: float  # probability that a uniform point of the ball has |u.x| >= gamma


_SEPARABLE_DEFAULTS: dict[str, int | float] = {
    "d": 20,
    "gamma": 0.1,
    "n": 100_000,
    "seed": 0,
    "noise": 0.0,
    "radius": 1.0,
}
_MAX_CANDIDATES = 500_000_000  # refuse specs whose rejection sampling would need more draws


def _separable_args(rest: str, limit: int | None = None) -> _SeparableParams:
    """The parameters of a ``separable:`` spec, checked; ``limit`` caps the examples drawn."""
    args = _parse_args("separable", rest, _SEPARABLE_DEFAULTS)
    d, n, seed = args["d"], args["n"], args["seed"]
    gamma, noise, radius = float(args["gamma"]), float(args["noise"]), float(args["radius"])
    _check(1 <= d <= _MAX_D, f"separable: d must be in [1, {_MAX_D}], got {d}")
    _check(n >= 0, f"separable: n must be >= 0, got {n}")
    _check(seed >= 0, f"separable: seed must be >= 0, got {seed}")
    _check(radius > 0, f"separable: radius must be > 0, got {radius}")
    _check(0 <= gamma < radius, f"separable: gamma must be in [0, radius={radius}), got {gamma}")
    _check(0.0 <= noise <= 1.0, f"separable: noise must be in [0, 1], got {noise}")
    _check(
        noise == 0 or n <= _MAX_NOISY_N,
        f"separable: with noise, n must be at most {_MAX_NOISY_N}, got {n}"
        " (the flipped positions are drawn from all n)",
    )
    accept = _acceptance(d, gamma / radius)
    drawn = n if limit is None else min(n, limit)
    if drawn > 0 and (accept <= 0 or 1 / accept > _MAX_CANDIDATES):
        typical = radius / math.sqrt(d + 2)
        raise SourceError(
            f"separable: gamma={gamma} is too large for d={d}, radius={radius}: only a fraction "
            f"{accept:.3g} of the ball has |u.x| >= gamma (typical |u.x| ~ {typical:.3g})"
        )
    if drawn > 0 and drawn / accept > _MAX_CANDIDATES:
        raise SourceError(
            f"separable: n={drawn} would take about {drawn / accept:.3g} draws (a fraction {accept:.3g}"
            f" of the ball has |u.x| >= gamma={gamma}), over the {_MAX_CANDIDATES:,} allowed:"
            " lower n (or gamma)"
        )
    return _SeparableParams(d, gamma, n, seed, noise, radius, accept)


def _acceptance(d: int, ratio: float) -> float:
    """P(|u.x| >= ratio) for x uniform in the unit ball of R^d (density ~ (1 - t^2)^((d-1)/2))."""
    if d == 1:
        return 1.0 - ratio
    t = np.linspace(0.0, 1.0, 200_001)
    with np.errstate(divide="ignore"):
        log_density = 0.5 * (d - 1) * np.log1p(-(t * t))
    density = np.exp(log_density)
    total = float(density.sum())
    return float(density[t >= ratio].sum()) / total


def _separable_source(spec: str, params: _SeparableParams, limit: int | None) -> Source:
    """Linearly separable through the origin, with margin ``gamma`` w.r.t. a hidden unit ``u``.

    Keys: ``d`` (dimension, default 20), ``gamma`` (0.1), ``n`` (100000), ``seed`` (0),
    ``noise`` (0.0), ``radius`` (1.0). ``u`` is a seeded uniformly random unit vector; the points
    are uniform in the ball ``||x|| <= radius`` of R^d conditioned on ``|u.x| >= gamma``
    (exact rejection sampling of the 1-D component ``u.x`` from its marginal, then a uniform
    point of the orthogonal slice; every point is re-checked in floating point); ``y =
    sign(u.x)``. Then exactly ``round(noise * n)`` labels, at seeded positions, are flipped.
    u, points and flips use independent seeded streams, so ``noise`` changes only the labels
    and ``limit`` yields a prefix. Deterministic for a given seed (and numpy version).
    Without noise the perceptron makes at most ``(R / gamma)^2`` mistakes; see
    :func:`separable_params` for u, R and the observed margin.
    """
    total = params.n if limit is None else min(params.n, limit)

    def chunks() -> Iterator[Chunk]:
        return _separable_chunks(params, total)

    def examples() -> Iterator[Example]:
        for X, y in _separable_chunks(params, total):
            yield from zip(X.tolist(), y.tolist(), strict=True)

    names = [f"x{i}" for i in range(params.d)]
    return Source(spec, params.d, names, total, examples, chunks)


def _seed_streams(params: _SeparableParams) -> list[np.random.SeedSequence]:
    return np.random.SeedSequence(params.seed).spawn(3)  # u, points, label flips


def _hidden_normal(params: _SeparableParams) -> FloatArray:
    rng = np.random.default_rng(_seed_streams(params)[0])
    while True:
        v = rng.standard_normal(params.d)
        norm = float(np.linalg.norm(v))
        if norm > 0:
            return v / norm


def _chunk_rows(d: int) -> int:
    return max(1, min(8192, (1 << 21) // d))


def _separable_chunks(params: _SeparableParams, total: int) -> Iterator[Chunk]:
    """The first ``total`` examples, in blocks whose boundaries depend only on n and d."""
    if total <= 0:
        return
    u = _hidden_normal(params)
    _, point_seq, flip_seq = _seed_streams(params)
    n_flip = math.floor(params.noise * params.n + 0.5)
    flips = np.sort(np.random.default_rng(flip_seq).choice(params.n, size=n_flip, replace=False))
    rng = np.random.default_rng(point_seq)
    rows = _chunk_rows(params.d)
    start = 0
    while start < total:
        m = min(rows, params.n - start)
        X, dots = _draw_points(rng, u, m, params)
        y = np.where(dots >= 0, 1, -1).astype(np.int8)
        lo, hi = np.searchsorted(flips, [start, start + m])
        y[flips[lo:hi] - start] *= -1
        take = min(m, total - start)
        yield X[:take], y[:take]
        start += m


def _draw_points(
    rng: np.random.Generator, u: FloatArray, m: int, params: _SeparableParams
) -> tuple[FloatArray, FloatArray]:
    """Exactly m points uniform in the ball with |u.x| >= gamma, and their u.x."""
    d, gamma, radius = params.d, params.gamma, params.radius
    xs: list[FloatArray] = []
    dots: list[FloatArray] = []
    have = 0
    while have < m:
        need = m - have
        batch = min(int(need / params.accept * 1.1) + 64, 1 << 24)
        # (u.x / radius)^2 ~ Beta(1/2, (d+1)/2) for x uniform in the ball
        t = radius * np.sqrt(rng.beta(0.5, (d + 1) / 2, size=batch))
        t = t[t >= gamma][:need]
        if t.size == 0:
            continue
        t = np.where(rng.random(t.size) < 0.5, -t, t)
        x = t[:, None] * u[None, :]
        if d > 1:
            g = rng.standard_normal((t.size, d))
            g -= np.outer(g @ u, u)
            norms = np.linalg.norm(g, axis=1)
            g /= np.where(norms > 0, norms, 1.0)[:, None]
            slice_radius = np.sqrt(np.maximum(radius * radius - t * t, 0.0))
            s = slice_radius * rng.random(t.size) ** (1.0 / (d - 1))
            x += s[:, None] * g
        proj = x @ u
        ok = (np.abs(proj) >= gamma) & (np.einsum("ij,ij->i", x, x) <= radius * radius)
        xs.append(x[ok])
        dots.append(proj[ok])
        have += int(np.count_nonzero(ok))
    return np.concatenate(xs)[:m], np.concatenate(dots)[:m]
