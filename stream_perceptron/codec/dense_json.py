"""A batch of dense input records read straight into one float64 matrix, by simdjson.

The common input is a batch of records ``{"x": [d numbers], "y": ..., "id": ...}`` of one width
``d``. :class:`DenseBatchReader` parses each with simdjson and copies its ``x`` out as ``d``
doubles (``as_buffer``), so no Python float is made for a feature; the batch's ``x`` become one
``n × d`` matrix in one ``frombuffer``. It reads only what it can read exactly as the typed msgspec
decoder of :class:`~stream_perceptron.codec.inputs.BatchDecoder` does, and gives up on the whole batch
(returns None) at the first record it is not sure of; the batch then goes the msgspec way. It
takes a record only when:

* the value is one valid JSON object with nothing after it, holds no byte-order mark and one
  ``[`` in all (``as_buffer`` would flatten a nested array), and has no member besides ``x``,
  ``y`` and ``id``, each once;
* ``x`` is a non-empty array of JSON numbers (no booleans, no null), each within 64 bits as
  an integer and finite as a double, the batch's widths all equal and at most
  ``limits.max_features``, every ``|v| <= limits.max_abs_value``;
* ``y`` is absent or one of the decoder's labels (``labels[y]``: the same mapping, so ``1.0``,
  ``True`` and ``1`` are the positive class as there);
* ``id`` is absent, null, an integer within int64, a float, or a string of at most
  ``limits.max_id_chars`` characters.

Numbers are parsed correctly rounded by simdjson as by msgspec, and a JSON integer becomes the
double nearest it in both, so the matrix holds the same bits as ``np.array`` of msgspec's
lists.

simdjson (the PyPI package ``pysimdjson``) has wheels for CPython 3.11–3.13; without it
:func:`available` is False and every batch goes the msgspec way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

try:
    import simdjson
except ImportError:  # pragma: no cover - no wheel for this Python; the msgspec path serves
    simdjson = None  # type: ignore[assignment]

_MISSING = object()
_BOM = b"\xef\xbb\xbf"  # simdjson skips one before a document; msgspec refuses it
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def available() -> bool:
    """Whether simdjson is installed, so :class:`DenseBatchReader` can read."""
    return simdjson is not None


class DenseBatchReader:
    """Reads a batch of dense records into ``(X, ys, ids)``, or None (see the module).

    >>> from stream_perceptron.contract import label_table
    >>> r = DenseBatchReader(max_features=10, max_abs_value=1e6, max_id_chars=8, labels=label_table())
    >>> X, ys, ids = r.read([b'{"x": [1, 2.5], "y": 0, "id": 7}', b'{"x": [-3, 0.25], "id": "a"}'])
    >>> X.tolist(), ys, ids
    ([[1.0, 2.5], [-3.0, 0.25]], [-1, 0], [7, 'a'])
    >>> r.read([b'{"x": [1, 2]}', b'{"x": [1, 2], "extra": 0}']) is None   # not sure: give up
    True
    """

    def __init__(
        self, *, max_features: int, max_abs_value: float, max_id_chars: int, labels: Mapping[Any, int]
    ) -> None:
        if simdjson is None:
            raise RuntimeError("simdjson is not installed (pip install pysimdjson)")
        self._parser = simdjson.Parser()
        self._max_features = max_features
        self._max_abs_value = max_abs_value
        self._max_id_chars = max_id_chars
        self._labels = labels

    def read(self, values: Sequence[bytes], labels: Mapping[Any, int] | None = None
             ) -> tuple[np.ndarray, list[int], list[Any]] | None:
        """``values`` as one ``len(values) × d`` float64 matrix, their labels (−1, 0 for none,
        +1; or as ``labels``, this call's lookup, finds them) and their ids; None if any record
        is not one this reader takes exactly."""
        if not values:
            return None
        try:
            parts = self._read_records(values, self._labels if labels is None else labels)
        except Exception:  # malformed, of another shape, or an edge: the msgspec way decides
            self._parser = simdjson.Parser()  # a failed document may still hold the old one
            return None
        if parts is None:
            return None
        buffers, widths, ys, ids = parts
        width = widths[0]
        if not 0 < width <= self._max_features or min(widths) != max(widths):
            return None
        data = b"".join(buffers)
        if len(data) != 8 * width * len(buffers):
            return None
        X = np.frombuffer(data, dtype=np.float64).reshape(len(buffers), width)
        if not np.all(np.abs(X) <= self._max_abs_value):
            return None
        return X, ys, ids

    def _read_records(
        self, values: Sequence[bytes], labels: Mapping[Any, int]
    ) -> tuple[list[Any], list[int], list[int], list[Any]] | None:
        every = b"\n".join(values)
        if every.count(b"[") != len(values) or _BOM in every:  # as_buffer would flatten nesting
            return None
        parse, max_id_chars = self._parser.parse, self._max_id_chars
        missing = _MISSING
        buffers: list[Any] = []
        widths: list[int] = []
        ys: list[int] = []
        ids: list[Any] = []
        doc: Any = None
        x: Any = None
        for value in values:
            doc = x = None  # the parser refuses a new document while the last is referenced
            doc = parse(value)
            x = doc["x"]  # TypeError unless an object, KeyError unless it has x
            widths.append(len(x))
            buffers.append(x.as_buffer(of_type="d"))  # TypeError unless all numbers
            members = len(doc)
            if members == 3:  # x, y and id, each once (KeyError otherwise)
                y, rid = doc["y"], doc["id"]
            elif members == 1:  # x alone
                y = rid = None
            else:  # x and one of y and id; anything else: another member, or one given twice
                y, rid = doc.get("y", missing), doc.get("id", missing)
                if members != 2 or (y is missing) is (rid is missing):
                    return None
                y, rid = (None, rid) if y is missing else (y, None)
            ys.append(labels[y])  # KeyError, TypeError: not a label
            if type(rid) is int:
                if not _INT64_MIN <= rid <= _INT64_MAX:
                    return None
            elif type(rid) is str:
                if len(rid) > max_id_chars:
                    return None
            elif rid is not None and type(rid) is not float:
                return None
            ids.append(rid)
        return buffers, widths, ys, ids
