"""Record schemas and their bytes codec: input examples in, predictions, statistics and dead letters out.

Input (UTF-8 JSON object, at most ``limits.max_record_bytes``)::

    {"x": [0.5, 1.0, -2.0], "y": 1, "id": "evt-17"}
    {"x": {"clicks": 3, "age": 41}, "y": "spam"}

* ``x``: a non-empty list of numbers (dense, fixed length) or an object of feature name → number;
  at most ``limits.max_features`` entries, each finite with ``|v| <= limits.max_abs_value``.
  Booleans and strings are not numbers.
* ``y``: −1/1, 0/1 (0 is the negative class), true/false, or a string equal to
  ``limits.positive_class`` / ``limits.negative_class``. Absent or null: unlabeled (predicted,
  never learned).
* ``id`` (optional): a string of at most ``limits.max_id_chars`` characters, or a number; copied
  to the outputs.
* The record's Kafka key: at most ``limits.max_key_bytes`` bytes. With the id it is copied to the
  prediction, so the two bounds keep every output record within a producer request
  (:func:`largest_prediction_bytes`, :func:`largest_dead_letter_bytes`).

Anything else raises :class:`DecodeError` with the reason the dead-letter record carries.
:func:`decode_example` is the reference decoder, one record at a time; :class:`BatchDecoder` is
the worker's fast path to the same result (a typed msgspec decoder validates in C and falls back to
:func:`decode_example` for anything it does not take). The formats of the output records are in
:func:`prediction_record`, :func:`dead_letter_record` and the README; :func:`encode_predictions`
encodes a batch of prediction records (msgspec, one struct per record) and :func:`encode` every
other output record (orjson).
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import numpy as np
import orjson

from stream_perceptron import dense_json
from stream_perceptron.errors import DecodeError

Scalar = str | int | float | None


@dataclass(frozen=True, slots=True)
class Limits:
    """What the decoder accepts (mirrors the ``limits`` settings)."""

    max_record_bytes: int = 1_048_576
    max_features: int = 100_000
    max_name_chars: int = 256
    max_names: int = 1_000_000
    max_abs_value: float = 1e12
    dead_letter_value_bytes: int = 262_144
    max_key_bytes: int = 4_096
    max_id_chars: int = 1_024
    positive_class: str | None = None
    negative_class: str | None = None


@dataclass(frozen=True, slots=True)
class Example:
    """A decoded input: features, label (−1/+1, or 0 when unlabeled) and optional id."""

    x: list[float] | dict[str, float]
    y: int
    id: Scalar = None


_NUMBER = (int, float)


def decode_example(value: bytes | None, limits: Limits, key: bytes | None = None) -> Example:
    """Decode and validate one input record: its value, and its key's size.

    >>> decode_example(b'{"x": [1, 2.5], "y": 0, "id": 7}', Limits())
    Example(x=[1, 2.5], y=-1, id=7)
    >>> decode_example(b'{"x": [1, true]}', Limits())
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.DecodeError: x[1] is not a number (got bool)
    """
    if key is not None and len(key) > limits.max_key_bytes:
        raise DecodeError(
            f"key is {len(key)} bytes, over the limit of {limits.max_key_bytes} (limits.max_key_bytes)"
        )
    if value is None:
        raise DecodeError("record has no value")
    if len(value) > limits.max_record_bytes:
        raise DecodeError(
            f"record is {len(value)} bytes, over the limit of {limits.max_record_bytes}"
            " (limits.max_record_bytes)"
        )
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise DecodeError(f"record must be a JSON object, got {_kind(obj)}")
    if "x" not in obj:
        raise DecodeError("record has no 'x'")
    x = check_features(obj["x"], limits)
    y = decode_label(obj.get("y"), limits)
    rid = obj.get("id")
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, str | int | float)):
        raise DecodeError(f"id must be a string or a number, got {_kind(rid)}")
    if isinstance(rid, str) and len(rid) > limits.max_id_chars:
        raise DecodeError(
            f"id is {len(rid)} characters, over the limit of {limits.max_id_chars} (limits.max_id_chars)"
        )
    return Example(x, y, rid)


def check_features(x: Any, limits: Limits) -> list[float] | dict[str, float]:
    """``x`` if the worker accepts it as features under ``limits``, else :class:`DecodeError`
    with the reason (a list or object of numbers, not empty, within the counts and magnitude).

    >>> check_features({"a": 1, "b": 2.5}, Limits())
    {'a': 1, 'b': 2.5}
    >>> check_features([], Limits())
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.DecodeError: x is empty
    """
    if isinstance(x, list):
        values: list[Any] = x
    elif isinstance(x, dict):
        values = list(x.values())
    else:
        raise DecodeError(f"x must be a list of numbers or an object of numbers, got {_kind(x)}")
    if not values:
        raise DecodeError("x is empty")
    if len(values) > limits.max_features:
        raise DecodeError(
            f"x has {len(values)} features, over the limit of {limits.max_features}"
            " (limits.max_features)"
        )
    if isinstance(x, dict):
        longest = max(map(len, x))
        if longest > limits.max_name_chars:
            raise DecodeError(
                f"x has a feature name of {longest} characters, over the limit of"
                f" {limits.max_name_chars} (limits.max_name_chars)"
            )
    if not set(map(type, values)) <= {int, float}:
        names = list(x) if isinstance(x, dict) else range(len(values))
        for name, v in zip(names, values, strict=True):
            if type(v) not in _NUMBER:
                where = f"x[{name!r}]" if isinstance(x, dict) else f"x[{name}]"
                raise DecodeError(f"{where} is not a number (got {_kind(v)})")
    # The bound holds for the float64 the model sees, as the compiled decoders check it: a JSON
    # integer past 2**53 is compared once rounded (and one past the float range is infinite).
    lo, hi = _as_float(min(values)), _as_float(max(values))
    bound = limits.max_abs_value
    if not (-bound <= lo and hi <= bound):
        bad = lo if not -bound <= lo else hi
        raise DecodeError(
            f"x has a value of magnitude {abs(bad):.6g}, over the limit of {bound:g}"
            " (limits.max_abs_value)"
        )
    return x  # type: ignore[no-any-return]


def _as_float(v: float) -> float:
    """``v`` as the float64 a row holds; an integer past the float range is ±inf.

    >>> _as_float(10**16 + 1), _as_float(-(10**400))
    (1e+16, -inf)
    """
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


@dataclass(slots=True)
class Decoded:
    """A batch of decoded inputs, column-wise: ``rows[k]`` is the position in the batch of the
    k-th accepted record; ``rejected`` maps the others' positions to their reasons. ``xs`` is a
    float64 matrix, one row per record, when every record of the batch was dense, of one width,
    and read by :mod:`~stream_perceptron.dense_json`; otherwise a list of lists and dicts."""

    xs: list[list[float] | dict[str, float]] | np.ndarray = field(default_factory=list)
    ys: list[int] = field(default_factory=list)
    ids: list[Scalar] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    rejected: dict[int, str] = field(default_factory=dict)


# Ids outside int64 are left to the reference decoder (orjson keeps uint64, reads larger as floats).
_ID_INT = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class BatchDecoder:
    """Decodes a batch of input records to the same result as :func:`decode_example`.

    A typed msgspec decoder checks the schema and the limits in C. It has the last word only on
    what it accepts: a value it refuses goes through :func:`decode_example`, which gives the
    reason (or, where the two readers of JSON differ at an edge, accepts it). Dense features come
    out as floats where :func:`decode_example` keeps JSON integers as ints; both make the same
    float64 row. Before all that (unless ``read_dense`` is False), a batch of plain dense records
    of one width is read straight into a matrix by
    :class:`~stream_perceptron.dense_json.DenseBatchReader`, which takes only what the typed
    decoder would take, with the same result.

    >>> d = BatchDecoder(Limits(max_key_bytes=2)).decode_many(
    ...     [b'{"x": [1, 2.5], "y": 0, "id": 7}', b'{"x": []}', None, b'{"x": [1]}'],
    ...     keys=[b"k", None, None, b"key"])
    >>> d.xs, d.ys, d.ids, d.rows
    ([[1.0, 2.5]], [-1], [7], [0])
    >>> d.rejected[3]
    'key is 3 bytes, over the limit of 2 (limits.max_key_bytes)'
    >>> d.rejected[1], d.rejected[2]
    ('x is empty', 'record has no value')
    """

    def __init__(self, limits: Limits, *, read_dense: bool = True) -> None:
        self.limits = limits
        bound = limits.max_abs_value
        value = Annotated[float, msgspec.Meta(ge=-bound, le=bound)]
        text_id = Annotated[str, msgspec.Meta(max_length=limits.max_id_chars)]
        size = msgspec.Meta(min_length=1, max_length=limits.max_features)
        name = Annotated[str, msgspec.Meta(max_length=limits.max_name_chars)]
        features = Annotated[list[value], size] | Annotated[dict[name, value], size]
        schema = msgspec.defstruct(
            "InputRecord",
            [
                ("x", features),
                ("y", bool | int | float | str | None, None),
                ("id", _ID_INT | float | text_id | None, None),
            ],
            # msgspec skips an unknown member without checking its UTF-8 or its numbers: a
            # record with one goes to decode_example, which checks the whole document
            forbid_unknown_fields=True,
        )
        self._decode = msgspec.json.Decoder(schema).decode
        labels: dict[Any, int] = {None: 0, 1: 1, -1: -1, 0: -1}  # True == 1, False == 0, 1.0 == 1
        if limits.negative_class is not None:
            labels[limits.negative_class] = -1
        if limits.positive_class is not None:
            labels[limits.positive_class] = 1
        self._labels = labels
        self._dense = (
            dense_json.DenseBatchReader(
                max_features=limits.max_features,
                max_abs_value=limits.max_abs_value,
                max_id_chars=limits.max_id_chars,
                labels=labels,
            )
            if read_dense and dense_json.available()
            else None
        )

    def decode_many(
        self, values: Sequence[bytes | None], keys: Sequence[bytes | None] | None = None
    ) -> Decoded:
        """Decode ``values`` (one poll batch) and check their ``keys``; see :class:`Decoded`."""
        whole = self._decode_all(values, keys)
        if whole is not None:
            return whole
        decode, labels, limits = self._decode, self._labels, self.limits
        xs: list[list[float] | dict[str, float]] = []
        out = Decoded(xs)
        for i, value in enumerate(values):
            key = None if keys is None else keys[i]
            try:
                if value is None or len(value) > limits.max_record_bytes:
                    raise ValueError
                if key is not None and len(key) > limits.max_key_bytes:
                    raise ValueError
                rec: Any = decode(value)
                y = labels[rec.y]
            except Exception:  # anything at all: the reference decoder decides and explains
                try:
                    example = decode_example(value, limits, key)
                except DecodeError as exc:
                    out.rejected[i] = exc.reason
                    continue
                xs.append(example.x)
                out.ys.append(example.y)
                out.ids.append(example.id)
                out.rows.append(i)
                continue
            xs.append(rec.x)
            out.ys.append(y)
            out.ids.append(rec.id)
            out.rows.append(i)
        return out

    def _decode_all(
        self, values: Sequence[bytes | None], keys: Sequence[bytes | None] | None
    ) -> Decoded | None:
        """The common case, every record valid, one comprehension per column; None if any is not."""
        if None in values:
            return None
        present: Sequence[bytes] = values  # type: ignore[assignment]
        if max(map(len, present), default=0) > self.limits.max_record_bytes:
            return None
        if keys is not None and max(map(len, filter(None, keys)), default=0) > self.limits.max_key_bytes:
            return None
        if self._dense is not None:
            dense = self._dense.read(present)
            if dense is not None:
                X, ys, ids = dense
                return Decoded(X, ys, ids, list(range(len(ids))))
        decode, labels = self._decode, self._labels
        try:
            recs: list[Any] = [decode(value) for value in present]
            ys = [labels[r.y] for r in recs]
        except Exception:  # some record is invalid: decode_many goes one at a time
            return None
        return Decoded([r.x for r in recs], ys, [r.id for r in recs], list(range(len(recs))))


def decode_label(y: Any, limits: Limits) -> int:
    """The label as −1/+1, or 0 when absent (``None``).

    >>> [decode_label(v, Limits(positive_class="spam")) for v in (1, -1, 0, True, False, "spam")]
    [1, -1, -1, 1, -1, 1]
    """
    if y is None:
        return 0
    if y is True or y is False:
        return 1 if y else -1
    if isinstance(y, int | float):
        if y == 1:
            return 1
        if y in (-1, 0):
            return -1
        raise DecodeError(f"unknown label {y!r}: use -1/1, 0/1 or true/false")
    if isinstance(y, str):
        if limits.positive_class is not None and y == limits.positive_class:
            return 1
        if limits.negative_class is not None and y == limits.negative_class:
            return -1
        named = [c for c in (limits.positive_class, limits.negative_class) if c is not None]
        expected = f"one of {named}" if named else "a number or boolean (no class names are set)"
        raise DecodeError(f"unknown label {_clip(y)!r}: expected {expected}")
    raise DecodeError(f"unknown label of type {_kind(y)}")


def _kind(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "bool", type(None): "null"}.get(
        type(v), type(v).__name__
    )


def _clip(s: str, n: int = 64) -> str:
    return s if len(s) <= n else s[:n] + "…"


def key_text(key: bytes | None) -> str | None:
    """A record key as JSON text: UTF-8, invalid bytes shown as ``\\xNN`` escapes."""
    return None if key is None else key.decode("utf-8", errors="backslashreplace")


def prediction_record(
    *,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    id: Scalar,
    prediction: int,
    score: float,
    label: int,
    mistake: bool,
    margin: float,
    updates: int,
) -> dict[str, Any]:
    """The prediction published for one input record.

    ``score`` is θ·x+θ0 before any update; ``label`` −1/+1 or None; ``mistake`` and ``margin``
    (geometric, y·score/‖θ‖) are None when unlabeled, ``margin`` also while θ = 0; ``updates`` is
    the model version, the total number of updates after this record. No wall-clock field: a
    record re-emitted after a restart is identical to the first.
    """
    labeled = label != 0
    return {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": key_text(key),
        "id": id,
        "prediction": prediction,
        "score": score,
        "label": label if labeled else None,
        "mistake": mistake if labeled else None,
        "margin": margin if labeled and not math.isnan(margin) else None,
        "updates": updates,
    }


class _Prediction(msgspec.Struct, gc=False):
    """The fields of :func:`prediction_record`, in its order, for the batch encoder (a struct is
    built and encoded in C; no per-record dict)."""

    topic: str
    partition: int
    offset: int
    key: str | None
    id: Scalar
    prediction: int
    score: float
    label: int | None
    mistake: bool | None
    margin: float | None
    updates: int


_PREDICTION_ENCODER = msgspec.json.Encoder()


def encode_prediction(record: Mapping[str, Any]) -> bytes:
    """A :func:`prediction_record` as compact UTF-8 JSON, as :func:`encode_predictions` writes it.

    Prediction records are written by msgspec: floats in shortest round-trip form with exponents
    written ``1e16`` (:func:`encode`, for the other records, writes ``1e+16``; JSON readers
    parse both to the same number), NaN and ±Inf as null.

    >>> encode_prediction({"score": 1e16, "margin": None})
    b'{"score":1e16,"margin":null}'
    """
    return _PREDICTION_ENCODER.encode(record)


def encode_predictions(
    *,
    topic: str,
    partition: int,
    offsets: Sequence[int],
    keys: Sequence[bytes | None],
    ids: Sequence[Scalar],
    predictions: Sequence[int],
    scores: Sequence[float],
    labels: Sequence[int],
    mistakes: Sequence[bool],
    margins: Sequence[float],
    updates: Sequence[int],
) -> list[bytes]:
    """The encoded :func:`prediction_record` of each row of a batch from one partition, byte for
    byte what ``encode_prediction(prediction_record(...))`` gives, without the per-record calls
    or dicts.

    >>> encode_predictions(topic="in", partition=0, offsets=[4], keys=[b"k"], ids=[None],
    ...                    predictions=[1], scores=[0.5], labels=[0], mistakes=[False],
    ...                    margins=[float("nan")], updates=[3])
    [b'{"topic":"in","partition":0,"offset":4,"key":"k","id":null,"prediction":1,"score":0.5,\
"label":null,"mistake":null,"margin":null,"updates":3}']
    """
    encode_one, row = _PREDICTION_ENCODER.encode, _Prediction
    return [
        encode_one(
            row(
                topic,
                partition,
                offset,
                None if key is None else key.decode("utf-8", errors="backslashreplace"),
                rid,
                prediction,
                score,
                label or None,
                mistake if label else None,
                margin if label and margin == margin else None,  # NaN != NaN
                update,
            )
        )
        for offset, key, rid, prediction, score, label, mistake, margin, update in zip(
            offsets, keys, ids, predictions, scores, labels, mistakes, margins, updates, strict=True
        )
    ]


def dead_letter_record(
    *,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    error: str,
    value: bytes | None,
    max_value_bytes: int = 262_144,
    max_key_bytes: int = 4_096,
) -> dict[str, Any]:
    """What goes to the dead-letter topic: where the record was, why, and its bytes (base64).

    A value over ``max_value_bytes`` keeps only its first ``max_value_bytes``, a key over
    ``max_key_bytes`` its first ``max_key_bytes`` and ``error`` its first 1,024 characters, so the
    dead letter always fits a producer request (:func:`largest_dead_letter_bytes`);
    ``value_bytes``, ``value_sha256`` and ``key_bytes`` still describe the whole.

    >>> r = dead_letter_record(topic="t", partition=0, offset=5, key=b"key", error="e",
    ...                        value=b"abcdef", max_value_bytes=4, max_key_bytes=2)
    >>> r["value"], r["value_bytes"], r["value_truncated"], r["key"], r["key_bytes"], r["key_truncated"]
    ('YWJjZA==', 6, True, 'ke', 3, True)
    """
    kept = None if value is None else value[:max_value_bytes]
    return {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": key_text(None if key is None else key[:max_key_bytes]),
        "key_bytes": None if key is None else len(key),
        "key_truncated": key is not None and len(key) > max_key_bytes,
        "error": _clip(error, _ERROR_CHARS),
        "value": None if kept is None else base64.b64encode(kept).decode("ascii"),
        "value_bytes": None if value is None else len(value),
        "value_truncated": value is not None and len(value) > max_value_bytes,
        "value_sha256": None if value is None else hashlib.sha256(value).hexdigest(),
    }


_ERROR_CHARS = 1_024

OUTPUT_RECORD_BYTES = 1_000_000
"""The most an output record (key, value and Kafka's framing) may take: confluent-kafka's default
``message.max.bytes``, below kafka-python's ``max_request_size`` (1,048,576) and the broker's
default ``max.message.bytes`` (1,048,588)."""

FRAMING_BYTES = 1_024
"""Room left for Kafka's record and batch framing around key and value (under 100 bytes)."""

_TOPIC = "t" * 249  # Kafka's longest topic name
_LONGEST_FLOAT = -2.2250738585072014e-308  # the longest float, as JSON: 24 characters


def largest_prediction_bytes(limits: Limits) -> int:
    """The most key + value bytes a prediction record takes within ``limits``.

    Every field at its longest: a key of ``max_key_bytes`` control bytes (6 bytes each as JSON
    text, the costliest), and as its Kafka key; an id of ``max_id_chars`` such characters or the
    longest number; the longest topic name and numbers.

    >>> largest_prediction_bytes(Limits(max_key_bytes=0, max_id_chars=0))
    492
    """
    key = b"\x01" * limits.max_key_bytes
    value = max(
        len(encode_prediction(prediction_record(
            topic=_TOPIC, partition=2**31 - 1, offset=2**63 - 1, key=key, id=rid, prediction=-1,
            score=_LONGEST_FLOAT, label=-1, mistake=False, margin=_LONGEST_FLOAT, updates=2**63 - 1,
        )))
        for rid in ("\x01" * limits.max_id_chars, _LONGEST_FLOAT)
    )
    return len(key) + value


def largest_dead_letter_bytes(limits: Limits) -> int:
    """The most key + value bytes a dead-letter record takes within ``limits`` (see
    :func:`dead_letter_record`): a kept key and value at their longest, the longest reason, and
    the sizes of the whole key and value at their longest.

    >>> largest_dead_letter_bytes(Limits(max_key_bytes=0, dead_letter_value_bytes=0)) < 7_000
    True
    """
    key = b"\x01" * limits.max_key_bytes
    record = dead_letter_record(
        topic=_TOPIC, partition=2**31 - 1, offset=2**63 - 1, key=key + b"\x01",
        error="\x01" * (_ERROR_CHARS + 1), value=b"\x00" * (limits.dead_letter_value_bytes + 1),
        max_value_bytes=limits.dead_letter_value_bytes, max_key_bytes=limits.max_key_bytes,
    )
    record["key_bytes"] = record["value_bytes"] = 2**63 - 1  # the sizes of the whole, any length
    record["key_truncated"] = record["value_truncated"] = False  # the longer spelling
    return len(key) + len(encode(record))


def check_output_bounds(limits: Limits) -> None:
    """Raise ValueError if an output record within ``limits`` could be too large to send
    (:data:`OUTPUT_RECORD_BYTES` less :data:`FRAMING_BYTES`)."""
    room = OUTPUT_RECORD_BYTES - FRAMING_BYTES
    key = f"limits.max_key_bytes ({limits.max_key_bytes:,})"
    for kind, size, other in (
        ("prediction", largest_prediction_bytes(limits), f"limits.max_id_chars ({limits.max_id_chars:,})"),
        ("dead letter", largest_dead_letter_bytes(limits),
         f"limits.dead_letter_value_bytes ({limits.dead_letter_value_bytes:,})"),
    ):
        if size > room:
            raise ValueError(
                f"{key} and {other} allow a {kind} of {size:,} bytes, over the {room:,} an output"
                " record may take; lower them"
            )


def encode(record: Mapping[str, Any]) -> bytes:
    """A record as compact UTF-8 JSON (NaN and ±Inf become null)."""
    return orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY)


def decode(value: bytes) -> Any:
    """Parse an output record (for consumers such as ``watch`` and the tests)."""
    return orjson.loads(value)


def input_record(x: Any, y: int | None, id: Scalar = None) -> bytes:
    """Encode an input record (used by ``produce``); ``y`` None makes it unlabeled."""
    rec: dict[str, Any] = {"x": x, "y": y}
    if id is not None:
        rec["id"] = id
    return encode(rec)
