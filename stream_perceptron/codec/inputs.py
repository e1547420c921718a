"""Input records: their schema, and decoding them with the reason for every rejection.

Input (UTF-8 JSON object, at most ``limits.max_record_bytes``)::

    {"x": [0.5, 1.0, -2.0], "y": 1, "id": "evt-17"}
    {"x": {"clicks": 3, "age": 41}, "y": "spam"}

* ``x``: a non-empty list of numbers (dense, fixed length) or an object of feature name → number;
  at most ``limits.max_features`` entries, each finite with ``|v| <= limits.max_abs_value``.
  Booleans and strings are not numbers.
* ``y``: −1/1, 0/1 (0 is the negative class), true/false, or a string equal to
  ``limits.positive_class`` / ``limits.negative_class``. Absent or null: unlabeled (predicted,
  never learned).
  A K-class worker (:class:`ClassRule`) reads ``y`` as a class name instead: a string of at most
  ``limits.max_class_chars`` characters or an integer within int64, its JSON type kept
  (:func:`~stream_perceptron.contract.class_name`); with the classes fixed
  (``SP_MODEL__UNKNOWN_CLASS=dead-letter``), one of them.
* ``id`` (optional): a string of at most ``limits.max_id_chars`` characters, or a number; copied
  to the outputs.
* A record without ``x`` but with ``id`` and a ``y`` (not null) is a *label record*, a label that
  arrives late for the earlier event of that id (:class:`LabelRecord`; joined by the worker,
  ``model/pending.py``). Its ``id``, ``y``, size and key are checked as an example's are.
* The record's Kafka key: at most ``limits.max_key_bytes`` bytes. With the id it is copied to the
  prediction, so the two bounds keep every output record within a producer request
  (:func:`~stream_perceptron.codec.outputs.largest_prediction_bytes`,
  :func:`~stream_perceptron.codec.outputs.largest_dead_letter_bytes`).

Anything else raises :class:`DecodeError` with the reason the dead-letter record carries.
:func:`decode_record` is the reference decoder, one record at a time (:func:`decode_example`
the same for examples only); :class:`BatchDecoder` is the worker's fast path to the same result
(a typed msgspec decoder validates in C and falls back to :func:`decode_record` for anything it
does not take). :func:`input_record` encodes an input record (for ``produce``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
import numpy as np

from stream_perceptron.codec import dense_json, native
from stream_perceptron.codec.limits import Limits, Scalar
from stream_perceptron.codec.outputs import clip, encode
from stream_perceptron.contract import (
    UNLABELED,
    ClassCodes,
    NotAClass,
    class_name,
    float64,
    json_kind,
    json_object,
    label_sign,
    label_table,
)
from stream_perceptron.errors import DecodeError


@dataclass(frozen=True, slots=True)
class Example:
    """A decoded input: features, label (−1/+1, or 0 when unlabeled; with a :class:`ClassRule`,
    a class name or None) and optional id."""

    x: list[float] | dict[str, float]
    y: int | str | None
    id: Scalar = None


@dataclass(frozen=True, slots=True)
class LabelRecord:
    """A label that arrives late: ``{"id": ..., "y": ...}`` without ``x``; ``y`` is −1/+1 (a class
    name from :func:`decode_record` with a :class:`ClassRule`; a batch's code of it in
    :class:`Decoded`)."""

    id: str | int | float
    y: int | str


@dataclass(frozen=True, slots=True)
class ClassRule:
    """How a K-class worker reads a label: a class name
    (:func:`~stream_perceptron.contract.class_name`) of at most ``max_chars`` characters; with
    ``known``, one of those classes alone (``SP_MODEL__UNKNOWN_CLASS=dead-letter``).

    >>> rule = ClassRule(5, frozenset({"cat", "dog", 3}))
    >>> rule.label("cat"), rule.label(3), rule.label(None)
    ('cat', 3, None)
    >>> rule.label("3")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.DecodeError: label '3' is not one of the classes (SP_MODEL__CLASSES; ...)
    """

    max_chars: int = 100
    known: frozenset[str | int] | None = None

    def codes(self) -> ClassCodes:
        """A batch's lookup of class names to codes (:class:`~stream_perceptron.contract.ClassCodes`)."""
        return ClassCodes(self.max_chars, self.known)

    def label(self, y: Any) -> str | int | None:
        """The class ``y`` names, None when absent (unlabeled), else :class:`DecodeError`."""
        if y is None:
            return None
        try:
            return class_name(y, self.max_chars, self.known)
        except NotAClass as exc:
            shown = (clip(y) if isinstance(y, str)
                     else y if isinstance(y, bool | int | float) else json_kind(y))
            raise DecodeError(f"label {shown!r} {exc}") from None


_NUMBER = (int, float)


def decode_example(value: bytes | None, limits: Limits, key: bytes | None = None,
                   classes: ClassRule | None = None) -> Example:
    """Decode and validate one input record that must be an example (``x`` present): a label
    record is refused with the reason "record has no 'x'" (see :func:`decode_record`).

    >>> decode_example(b'{"x": [1, 2.5], "y": 0, "id": 7}', Limits())
    Example(x=[1, 2.5], y=-1, id=7)
    >>> decode_example(b'{"x": [1, true]}', Limits())
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.DecodeError: x[1] is not a number (got bool)
    """
    record = decode_record(value, limits, key, classes)
    if isinstance(record, LabelRecord):
        raise DecodeError("record has no 'x'")
    return record


def decode_record(value: bytes | None, limits: Limits, key: bytes | None = None,
                  classes: ClassRule | None = None) -> Example | LabelRecord:
    """Decode and validate one input record, an example or a label record: its value, and its
    key's size; with ``classes``, its label as a class name.

    >>> decode_record(b'{"id": "evt-17", "y": 0}', Limits())
    LabelRecord(id='evt-17', y=-1)
    >>> decode_record(b'{"id": "evt-17", "y": null}', Limits())
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.DecodeError: record has no 'x' (a label record has 'id' and 'y')
    """
    if key is not None and len(key) > limits.max_key_bytes:
        raise DecodeError(
            f"key is {len(key)} bytes, over the limit of {limits.max_key_bytes} (SP_LIMITS__MAX_KEY_BYTES)"
        )
    if value is None:
        raise DecodeError("record has no value")
    if len(value) > limits.max_record_bytes:
        raise DecodeError(
            f"record is {len(value)} bytes, over the limit of {limits.max_record_bytes}"
            " (SP_LIMITS__MAX_RECORD_BYTES)"
        )
    obj = json_object(value)
    rid = obj.get("id")
    if "x" not in obj:
        if rid is None or obj.get("y") is None:
            raise DecodeError("record has no 'x' (a label record has 'id' and 'y')")
        _check_id(rid, limits)
        label = decode_label(obj["y"], limits) if classes is None else classes.label(obj["y"])
        assert label is not None
        return LabelRecord(rid, label)
    x = check_features(obj["x"], limits)
    y = decode_label(obj.get("y"), limits) if classes is None else classes.label(obj.get("y"))
    _check_id(rid, limits)
    return Example(x, y, rid)


def _check_id(rid: Any, limits: Limits) -> None:
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, str | int | float)):
        raise DecodeError(f"id must be a string or a number, got {json_kind(rid)}")
    if isinstance(rid, str) and len(rid) > limits.max_id_chars:
        raise DecodeError(
            f"id is {len(rid)} characters, over the limit of {limits.max_id_chars} (SP_LIMITS__MAX_ID_CHARS)"
        )


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
        raise DecodeError(f"x must be a list of numbers or an object of numbers, got {json_kind(x)}")
    if not values:
        raise DecodeError("x is empty")
    if len(values) > limits.max_features:
        raise DecodeError(
            f"x has {len(values)} features, over the limit of {limits.max_features}"
            " (SP_LIMITS__MAX_FEATURES)"
        )
    if isinstance(x, dict):
        longest = max(map(len, x))
        if longest > limits.max_name_chars:
            raise DecodeError(
                f"x has a feature name of {longest} characters, over the limit of"
                f" {limits.max_name_chars} (SP_LIMITS__MAX_NAME_CHARS)"
            )
    if not set(map(type, values)) <= {int, float}:
        names = list(x) if isinstance(x, dict) else range(len(values))
        for name, v in zip(names, values, strict=True):
            if type(v) not in _NUMBER:
                where = f"x[{name!r}]" if isinstance(x, dict) else f"x[{name}]"
                raise DecodeError(f"{where} is not a number (got {json_kind(v)})")
    # The bound holds for the float64 the model sees, as the compiled decoders check it: a JSON
    # integer past 2**53 is compared once rounded (and one past the float range is infinite).
    lo, hi = float64(min(values)), float64(max(values))
    bound = limits.max_abs_value
    if not (-bound <= lo and hi <= bound):
        bad = lo if not -bound <= lo else hi
        magnitude, limit = _apart(abs(bad), bound)
        raise DecodeError(
            f"x has a value of magnitude {magnitude}, over the limit of {limit} (SP_LIMITS__MAX_ABS_VALUE)"
        )
    return x  # type: ignore[no-any-return]


def _apart(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with the fewest significant digits, at least 6, that print them apart.

    >>> _apart(1.0000001e12, 1e12), _apart(2e12, 1e12)
    (('1.0000001e+12', '1e+12'), ('2e+12', '1e+12'))
    """
    for digits in range(6, 17):
        texts = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if texts[0] != texts[1]:
            return texts
    return f"{a:.17g}", f"{b:.17g}"  # 17 digits tell any two doubles apart


@dataclass(slots=True)
class Decoded:
    """A batch of decoded inputs, column-wise: ``rows[k]`` is the position in the batch of the
    k-th accepted record; ``rejected`` maps the others' positions to their reasons. ``xs`` is a
    float64 matrix, one row per record, when every record of the batch was dense, of one width,
    and read by :mod:`~stream_perceptron.codec.dense_json`; otherwise a list of lists and dicts.
    ``labels`` maps the positions of the label records (neither in ``rows`` nor ``rejected``) to
    them."""

    xs: list[list[float] | dict[str, float]] | np.ndarray = field(default_factory=list)
    ys: list[int] = field(default_factory=list)
    ids: list[Scalar] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    rejected: dict[int, str] = field(default_factory=dict)
    labels: dict[int, LabelRecord] = field(default_factory=dict)
    echo: list[dict[str, Any] | None] | None = None
    """Each accepted record's echo fields (a feature spec's ``echo``), aligned with ``rows``."""
    class_names: list[str | int] | None = None
    """With a :class:`ClassRule`: the batch's class names, ``ys`` (and the label records' ``y``)
    holding codes: ``class_names[code - 1]``, 0 unlabeled."""


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
    :class:`~stream_perceptron.codec.dense_json.DenseBatchReader`, which takes only what the typed
    decoder would take, with the same result; where the compiled part is installed, its reader
    (:mod:`~stream_perceptron.codec.native`) tries first, with the same result again.

    >>> d = BatchDecoder(Limits(max_key_bytes=2)).decode_many(
    ...     [b'{"x": [1, 2.5], "y": 0, "id": 7}', b'{"x": []}', None, b'{"x": [1]}'],
    ...     keys=[b"k", None, None, b"key"])
    >>> d.xs, d.ys, d.ids, d.rows
    ([[1.0, 2.5]], [-1], [7], [0])
    >>> d.rejected[3]
    'key is 3 bytes, over the limit of 2 (SP_LIMITS__MAX_KEY_BYTES)'
    >>> d.rejected[1], d.rejected[2]
    ('x is empty', 'record has no value')
    """

    def __init__(self, limits: Limits, *, read_dense: bool = True, classes: ClassRule | None = None) -> None:
        self.limits = limits
        self.classes = classes
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
        label_schema = msgspec.defstruct(  # a label record: id and a label, no x (nor anything else)
            "LabelRecord",
            [("id", _ID_INT | float | text_id), ("y", bool | int | float | str)],
            forbid_unknown_fields=True,
        )
        self._decode_label = msgspec.json.Decoder(label_schema).decode
        labels = label_table(limits.positive_class, limits.negative_class)
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
        # the compiled reader decodes the two classes' labels; K classes take the Python readers
        self._compiled = native.reader(limits) if read_dense and classes is None else None

    def decode_many(
        self, values: Sequence[bytes | None], keys: Sequence[bytes | None] | None = None
    ) -> Decoded:
        """Decode ``values`` (one poll batch) and check their ``keys``; see :class:`Decoded`."""
        rule = self.classes
        labels: Any = self._labels if rule is None else rule.codes()  # K classes: the batch's own
        whole = self._decode_all(values, keys, labels)
        if whole is not None:
            return whole
        decode, limits = self._decode, self.limits
        xs: list[list[float] | dict[str, float]] = []
        out = Decoded(xs)
        # the reference decoder's label as ys holds it: a sign, or the batch's code of a class
        coded: Any = _same if rule is None else labels.__getitem__
        if rule is not None:
            out.class_names = labels.names
        for i, value in enumerate(values):
            key = None if keys is None else keys[i]
            try:
                if value is None or len(value) > limits.max_record_bytes:
                    raise ValueError
                if key is not None and len(key) > limits.max_key_bytes:
                    raise ValueError
                rec: Any = decode(value)
                y = labels[rec.y]
            except Exception:  # not a plain example
                try:  # a plain label record (the size and key were checked above)
                    if value is None or len(value) > limits.max_record_bytes or (
                            key is not None and len(key) > limits.max_key_bytes):
                        raise ValueError
                    lab: Any = self._decode_label(value)
                    out.labels[i] = LabelRecord(lab.id, labels[lab.y])
                    continue
                except Exception:  # noqa: S110 - anything at all: the reference decoder decides and explains
                    pass
                try:
                    example = decode_record(value, limits, key, rule)
                except DecodeError as exc:
                    out.rejected[i] = exc.reason
                    continue
                if isinstance(example, LabelRecord):
                    out.labels[i] = LabelRecord(example.id, coded(example.y))
                    continue
                xs.append(example.x)
                out.ys.append(coded(example.y))
                out.ids.append(example.id)
                out.rows.append(i)
                continue
            xs.append(rec.x)
            out.ys.append(y)
            out.ids.append(rec.id)
            out.rows.append(i)
        return out

    def _decode_all(
        self, values: Sequence[bytes | None], keys: Sequence[bytes | None] | None, labels: Any
    ) -> Decoded | None:
        """The common case, every record valid, one comprehension per column; None if any is not."""
        if keys is not None and max(map(len, filter(None, keys)), default=0) > self.limits.max_key_bytes:
            return None
        if self._compiled is not None:  # it declines a null value and one past the size bound
            dense = self._compiled.read(values)
            if dense is not None:
                X, ys, ids = dense
                return Decoded(X, ys, ids, list(range(len(ids))))
        if None in values:
            return None
        present: Sequence[bytes] = values  # type: ignore[assignment]
        if max(map(len, present), default=0) > self.limits.max_record_bytes:
            return None
        names = None if self.classes is None else labels.names
        if self._dense is not None:
            dense = self._dense.read(present, labels)
            if dense is not None:
                X, ys, ids = dense
                return Decoded(X, ys, ids, list(range(len(ids))), class_names=names)
        decode = self._decode
        try:
            recs: list[Any] = [decode(value) for value in present]
            ys = [labels[r.y] for r in recs]
        except Exception:  # some record is invalid: decode_many goes one at a time
            return None
        return Decoded([r.x for r in recs], ys, [r.id for r in recs], list(range(len(recs))),
                       class_names=names)


def _same(y: Any) -> Any:
    return y


def decode_label(y: Any, limits: Limits) -> int:
    """The label as −1/+1, or 0 when absent (``None``).

    >>> [decode_label(v, Limits(positive_class="spam")) for v in (1, -1, 0, True, False, "spam")]
    [1, -1, -1, 1, -1, 1]
    >>> decode_label("ham", Limits(positive_class="spam"))
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.DecodeError: unknown label 'ham': expected 'spam' (SP_LIMITS__POSITIVE_CLASS)
    """
    if y is None:
        return UNLABELED
    sign = label_sign(y, limits.positive_class, limits.negative_class)
    if sign is not None:
        return sign
    if isinstance(y, int | float):  # not a bool: every bool is a label
        raise DecodeError(f"unknown label {y!r}: use -1/1, 0/1 or true/false")
    if isinstance(y, str):
        named = [f"{c!r} ({setting})" for c, setting in ((limits.positive_class, "SP_LIMITS__POSITIVE_CLASS"),
                 (limits.negative_class, "SP_LIMITS__NEGATIVE_CLASS")) if c is not None]
        expected = " or ".join(named) if named else (
            "a number or boolean (no class names are set: SP_LIMITS__POSITIVE_CLASS,"
            " SP_LIMITS__NEGATIVE_CLASS)"
        )
        raise DecodeError(f"unknown label {clip(y)!r}: expected {expected}")
    raise DecodeError(f"unknown label of type {json_kind(y)}")


def input_record(x: Any, y: int | None, id: Scalar = None) -> bytes:
    """Encode an input record (used by ``produce``); ``y`` None makes it unlabeled."""
    rec: dict[str, Any] = {"x": x, "y": y}
    if id is not None:
        rec["id"] = id
    return encode(rec)
