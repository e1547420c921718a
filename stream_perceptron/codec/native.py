"""The compiled part's codec: the ``stream_perceptron_native`` extension (Rust, built from
``native/`` by ``make install`` where cargo is found; docs/install.md), when it is installed.

Each function it provides has a twin here in Python that gives the same result bit for bit,
and the package runs the twin where the extension is not installed:

* :func:`read_dense`: a batch of plain dense input records read into one float64 matrix, its
  labels and ids, as :class:`~stream_perceptron.codec.dense_json.DenseBatchReader` and the
  msgspec decoder behind it read them; None (the batch goes their way) at any record it does not
  read exactly as they do: a string with an escape, a number spelled another way as a label, an
  integer past 64 bits, "-0", a member besides ``x``, ``y`` and ``id``;
* :func:`encode_predictions`: the prediction records of a batch, byte for byte as msgspec writes
  them (:func:`~stream_perceptron.codec.outputs.encode_predictions`);
* :func:`avro_reader`: a reader of Avro payloads of one writer's schema, giving the values
  fastavro gives (:class:`~stream_perceptron.codec.avro.AvroDecoder` reads with it first); None
  (fastavro reads the record) at any record it does not read exactly as fastavro does.

``tests/unit/test_native.py`` runs both ways on the decoders' fuzzed inputs and random
batches and compares them byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    import stream_perceptron_native as _native
except ImportError:  # not built here: the Python twins serve
    _native = None

from stream_perceptron.codec.limits import Limits


def available() -> bool:
    """Whether the compiled part is installed (its paths run)."""
    return _native is not None


def description() -> str:
    """Which paths run, for the worker's start line."""
    if _native is None:
        return ("the pure-Python paths (the compiled part is not installed: `make install` builds it"
                " where cargo is found, docs/install.md)")
    return ("the compiled part (stream_perceptron_native): the dense input reader, the dense learning"
            " pass, the prediction encoder, ADWIN, the Avro reader")


class DenseReader:
    """:func:`read_dense` bound to ``limits``: ``read(values)`` gives (X, ys, ids) or None."""

    def __init__(self, limits: Limits) -> None:
        self._args = (limits.max_features, limits.max_abs_value, limits.max_id_chars,
                      limits.positive_class, limits.negative_class, limits.max_record_bytes)

    def read(self, values: Sequence[bytes | None]) -> tuple[np.ndarray, list[int], list[Any]] | None:
        """``values`` as one ``len(values) × d`` float64 matrix, their labels (−1, 0 for none,
        +1) and their ids; None where any record is not one the compiled reader takes exactly,
        is null or is longer than ``SP_LIMITS__MAX_RECORD_BYTES``."""
        assert _native is not None
        got = _native.read_dense(values if type(values) is list else list(values), *self._args)
        if got is None:
            return None
        data, width, ys, ids = got
        return np.frombuffer(data, dtype=np.float64).reshape(len(ys), width), ys, ids


def reader(limits: Limits) -> DenseReader | None:
    """The compiled dense reader for ``limits``, or None where the extension is not installed."""
    return None if _native is None else DenseReader(limits)


def _column(values: Any, dtype: Any) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=dtype)


def encode_predictions(
    *, topic: str, partition: int, offsets: Any, keys: Sequence[bytes | None], ids: Sequence[Any],
    predictions: Any, scores: Any, labels: Any, mistakes: Any, margins: Any, updates: Any,
    classes: tuple[str | None, str | None] | None,
) -> list[bytes] | None:
    """The compiled encoder's records, or None where it does not write these (not installed, or
    an id it does not take: the caller's Python way then writes them). The numeric columns may
    be lists or numpy arrays."""
    if _native is None:
        return None
    try:
        encoded: list[bytes] = _native.encode_predictions(
            topic, partition, _column(offsets, np.int64), keys if type(keys) is list else list(keys),
            ids if type(ids) is list else list(ids), _column(predictions, np.int64),
            _column(scores, np.float64), _column(labels, np.int64),
            _column(mistakes, np.bool_).view(np.uint8), _column(margins, np.float64),
            _column(updates, np.int64), classes,
        )
    except (TypeError, ValueError, OverflowError):  # an id past 64 bits, a surrogate: Python's way
        return None
    return encoded


# the kinds of AvroReader's table (native/src/avro.rs)
_AVRO_PRIMITIVES = {"null": 0, "boolean": 1, "int": 2, "long": 2, "float": 3, "double": 4, "bytes": 5,
                    "string": 6}
_FIXED, _ENUM, _ARRAY, _MAP, _UNION, _RECORD = range(7, 13)


class _Declined(Exception):
    """A schema the compiled reader is not built for: fastavro reads its records."""


class _AvroTable:
    """The table of nodes of a writer's schema, each node's children before it, and each named
    type one node however often it is named."""

    def __init__(self, named: dict[str, Any]) -> None:
        self.named = named
        self.nodes: list[tuple[Any, ...]] = []
        self.done: dict[str, int] = {}  # a named type's node, once built

    def node(self, *entry: Any) -> int:
        self.nodes.append(entry)
        return len(self.nodes) - 1

    def walk(self, schema: Any) -> int:
        if isinstance(schema, str):
            return self.name(schema)
        if isinstance(schema, list):
            return self.node(_UNION, [self.walk(branch) for branch in schema])
        if not isinstance(schema, dict) or "logicalType" in schema:
            raise _Declined
        kind = schema.get("type")
        if kind == "array":
            return self.node(_ARRAY, self.walk(schema["items"]))
        if kind == "map":
            return self.node(_MAP, self.walk(schema["values"]))
        if kind in ("record", "error", "enum", "fixed"):
            self.done[schema["name"]] = built = self.named_type(kind, schema)
            return built
        if isinstance(kind, str):
            return self.walk(kind)  # {"type": "long"}, {"type": "a.Named"}
        raise _Declined

    def name(self, name: str) -> int:
        if name in _AVRO_PRIMITIVES:
            return self.node(_AVRO_PRIMITIVES[name])
        if "logicalType" in name:  # fastavro reads a name holding these letters as a logical type
            raise _Declined
        if name not in self.done:
            self.done[name] = self.walk(self.named[name])
        return self.done[name]

    def named_type(self, kind: str, schema: dict[str, Any]) -> int:
        # fastavro gives a symbol and a field's name as the schema holds them: taken only as str
        if kind == "enum":
            return self.node(_ENUM, [_text(symbol) for symbol in schema["symbols"]])
        if kind == "fixed":
            size = schema["size"]
            if type(size) is not int or size < 0:
                raise _Declined
            return self.node(_FIXED, size)
        return self.node(_RECORD, [(_text(f["name"]), self.walk(f["type"])) for f in schema["fields"]])


def _text(value: Any) -> str:
    if type(value) is not str:
        raise _Declined
    return value


def avro_reader(parsed: Any, named: dict[str, Any]) -> Any | None:
    """The compiled reader of the writer's schema ``parsed`` (as fastavro parsed it, its logical
    types removed, its named types in ``named``): ``read(value, start)`` gives the record in
    ``value[start:]``, or None where it declines it. None where the extension is not installed,
    or for a schema it is not built for (a named type fastavro would read as a logical type, a
    type it does not know)."""
    if _native is None:
        return None
    table = _AvroTable(named)
    try:
        root = table.walk(parsed)
    except (_Declined, KeyError, TypeError, ValueError):
        return None
    return _native.AvroReader(table.nodes, root)
