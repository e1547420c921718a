"""The input contract: what a label, a feature value and a record are, whichever way an example
comes in (a Kafka record through :mod:`~stream_perceptron.codec`, a file or dataset through
:mod:`~stream_perceptron.sources`, a Python call into :mod:`~stream_perceptron.model`).

**Labels.** The update works on signs, −1/+1. :func:`label_sign` is the one rule that maps a
label to its sign: ``True``, ``1`` (and ``1.0``, numpy's ``True`` and ``int64(1)``) and the
positive class are +1; ``False``, ``0``, ``-1`` and the negative class are −1: **0 is the
negative class everywhere**. A class name is a string equal to the positive or negative class
(``SP_LIMITS__POSITIVE_CLASS`` / ``SP_LIMITS__NEGATIVE_CLASS``). Anything else is not a label.
A model given ``classes=(negative, positive)`` takes those two labels alone
(:mod:`~stream_perceptron.model.labels`). :func:`label_table` and :func:`array_signs` are the same rule as a
lookup and over an array.

**Feature values.** A value is a number (an int or a float, Python's or numpy's; not a bool,
not a string) and is learned as a float64 (:func:`float64`). :func:`finite_number` holds a value
to being a finite float64, and :func:`finite_text` the text of one (a CSV cell).

**Records.** A record (a Kafka record's value, a line of a JSON-lines file) is a JSON object
in UTF-8: :func:`json_object` reads one, or says why it is not one, in the same words for the
worker's dead letters and for ``fit`` and ``produce``.

**Class names** (a K-class model, :mod:`~stream_perceptron.model.multiclass`). A class name is a
string (of at most a configured number of characters) or an integer within int64, taken as a
name: ``3`` and ``"3"`` are names, and a record keeps its JSON type. A bool is no class (``true``
would equal ``1``), nor is a float (not even ``3.0``), an array or an object; None is no label.
:func:`class_name` is the rule, :class:`ClassCodes` the same as a lookup that numbers a batch's
names.

Each caller decides what to do with a label or value that breaks the contract, and words the
refusal in its own terms (a dead letter, a file's line, a ValueError); a record's reasons are
:func:`json_object`'s alone.

Pure: imports only the standard library, numpy and :mod:`~stream_perceptron.errors`, and orjson
when a record is read (the model, which installs without orjson, never reads one)
(``tests/unit/test_layers.py`` holds it to that).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from stream_perceptron.errors import DecodeError

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "UNLABELED",
    "ClassCodes",
    "NotAClass",
    "NotANumber",
    "NotFinite",
    "Signs",
    "array_signs",
    "class_name",
    "finite_number",
    "finite_text",
    "float64",
    "json_kind",
    "json_object",
    "label_sign",
    "label_table",
]

Signs = npt.NDArray[np.int8]

UNLABELED = 0
"""The sign of a row without a label (predicted, never learned), where signs are kept."""


def label_sign(y: object, positive: object = None, negative: object = None) -> int | None:
    """The sign of the label ``y``, +1 or −1, with ``positive`` and ``negative`` the class names
    (None: not named); None when ``y`` is not a label (None, a missing label, is not one).

    >>> [label_sign(v) for v in (True, 1, 1.0, np.int64(1), False, 0, -1, -0.0, np.False_)]
    [1, 1, 1, 1, -1, -1, -1, -1, -1]
    >>> label_sign("spam", "spam"), label_sign("ham", "spam", "ham"), label_sign("ham", "spam")
    (1, -1, None)
    >>> label_sign(2), label_sign("1"), label_sign(None), label_sign(float("nan"))
    (None, None, None, None)
    """
    if isinstance(y, str):
        return 1 if y == positive else -1 if y == negative else None
    if isinstance(y, bool | np.bool_):
        return 1 if y else -1
    if isinstance(y, int | float | np.integer | np.floating):
        return 1 if y == 1 else -1 if y == 0 or y == -1 else None
    return None


def label_table(positive: str | None = None, negative: str | None = None) -> dict[Any, int]:
    """:func:`label_sign` as a lookup, for decoders that look a record's label up: the labels
    (``True`` and ``1.0`` find ``1``, ``False`` and ``-0.0`` find ``0``, as they are equal and
    hash alike) and the class names to their signs, and None (a null or absent label) to
    :data:`UNLABELED`. A key it lacks is not a label.

    >>> label_table("spam")
    {None: 0, 1: 1, 0: -1, -1: -1, 'spam': 1}
    >>> label_table()[True], label_table()[-0.0]
    (1, -1)
    """
    table: dict[Any, int] = {None: UNLABELED}
    for y in (1, 0, -1, negative, positive):
        sign = None if y is None else label_sign(y, positive, negative)
        if sign is not None:
            table[y] = sign
    return table


def array_signs(y: npt.NDArray[Any]) -> tuple[Signs, npt.NDArray[np.bool_]]:
    """:func:`label_sign` over an array of bools or numbers: the signs (−1 where a value is not a
    label) and where the values are labels (NaN is not).

    >>> signs, ok = array_signs(np.array([1.0, 0.0, -1.0, 2.0, np.nan]))
    >>> signs.tolist(), ok.tolist()
    ([1, -1, -1, -1, -1], [True, True, True, False, False])
    >>> array_signs(np.array([True, False]))[0].tolist()
    [1, -1]
    """
    signs: Signs = np.where(y == 1, 1, -1).astype(np.int8)
    return signs, (y == 1) | (y == 0) | (y == -1)


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class NotAClass(ValueError):
    """A label that is no class name; its text says why, after the value (``is a bool…``)."""


def class_name(y: object, max_chars: int, known: frozenset[str | int] | None = None) -> str | int:
    """``y`` as a class name (a string of at most ``max_chars`` characters, or an integer within
    int64; a numpy integer as its Python int), else :class:`NotAClass`; with ``known``, a name
    outside it is refused too.

    >>> class_name("cat", 10), class_name(3, 10), class_name(np.int64(-2), 10)
    ('cat', 3, -2)
    >>> for bad in (True, 3.0, [1], "x" * 11, 2**63):
    ...     try:
    ...         class_name(bad, 10)
    ...     except NotAClass as exc:
    ...         print(exc)
    is a bool, not a class (a class is a string or an integer)
    is a float, not a class (a class is a string or an integer)
    is an array, not a class (a class is a string or an integer)
    is 11 characters, over the limit of 10 (SP_LIMITS__MAX_CLASS_CHARS)
    is outside int64, not a class
    """
    if isinstance(y, np.integer) and not isinstance(y, np.bool_):
        y = y.item()
    if type(y) is str:
        if len(y) > max_chars:
            raise NotAClass(f"is {len(y)} characters, over the limit of {max_chars}"
                            " (SP_LIMITS__MAX_CLASS_CHARS)")
    elif type(y) is int:
        if not INT64_MIN <= y <= INT64_MAX:
            raise NotAClass("is outside int64, not a class")
    else:
        kind = json_kind(y)
        article = "an" if kind[0] in "aeiou" else "a"
        raise NotAClass(f"is {article} {kind}, not a class (a class is a string or an integer)")
    if known is not None and y not in known:
        raise NotAClass("is not one of the classes (SP_MODEL__CLASSES; SP_MODEL__UNKNOWN_CLASS=dead-letter)")
    return y


class ClassCodes:
    """:func:`class_name` as a lookup for decoders that look a record's label up, one made per
    batch: None (a null or absent label) finds :data:`UNLABELED`, a class name the code of its
    first appearance in the batch (1, 2, …; ``names[code - 1]`` is the name), and anything
    else raises KeyError (the caller's reference decoder then says why). Codes are a batch's
    own handles: the model's rows are found from the names.

    >>> codes = ClassCodes(10)
    >>> [codes[y] for y in ("cat", None, 3, "cat", "3")], codes.names
    ([1, 0, 2, 1, 3], ['cat', 3, '3'])
    >>> codes[True]
    Traceback (most recent call last):
    ...
    KeyError: True
    """

    __slots__ = ("_codes", "_known", "_max_chars", "names")

    def __init__(self, max_chars: int, known: frozenset[str | int] | None = None) -> None:
        self._max_chars = max_chars
        self._known = known
        self._codes: dict[tuple[type, str | int], int] = {}
        self.names: list[str | int] = []

    def __getitem__(self, y: Any) -> int:
        if y is None:
            return UNLABELED
        kind = type(y)
        if kind is str:
            if len(y) > self._max_chars:
                raise KeyError(y)
        elif kind is not int or not INT64_MIN <= y <= INT64_MAX:
            raise KeyError(y)
        if self._known is not None and y not in self._known:
            raise KeyError(y)
        key = (kind, y)
        code = self._codes.get(key)
        if code is None:
            self.names.append(y)
            code = self._codes[key] = len(self.names)
        return code

    def code(self, name: str | int) -> int:
        """The code of ``name``, already checked (a reference decoder's result)."""
        return self[name]


class NotANumber(ValueError):
    """A feature value that is no number at all; its text is ``is not a number``."""


class NotFinite(ValueError):
    """A number that is not a finite float64; its text says how: ``is not finite``, or ``is too
    large`` for an integer past the float range."""


def float64(v: int | float | np.integer[Any] | np.floating[Any]) -> float:
    """A number as the float64 a row holds; an integer past the float range is ±inf.

    >>> float64(10**16 + 1), float64(-(10**400)), float64(np.float32(0.5))
    (1e+16, -inf, 0.5)
    """
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def finite_number(value: object) -> float:
    """``value`` as a finite float64, else :class:`NotANumber` or :class:`NotFinite`.

    >>> finite_number(3), finite_number(np.int64(-2)), finite_number(2.5)
    (3.0, -2.0, 2.5)
    >>> finite_number(True)
    Traceback (most recent call last):
    ...
    stream_perceptron.contract.NotANumber: is not a number
    >>> finite_number(10**400)
    Traceback (most recent call last):
    ...
    stream_perceptron.contract.NotFinite: is too large
    """
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise NotANumber("is not a number")
    out = float64(value)
    if not math.isfinite(out):
        raise NotFinite("is too large" if isinstance(value, int | np.integer) else "is not finite")
    return out


def finite_text(text: str) -> float:
    """The number ``text`` spells (as :class:`float` reads it) as a finite float64, else
    :class:`NotANumber` or :class:`NotFinite`.

    >>> finite_text(" -2.5e3 ")
    -2500.0
    >>> finite_text("nan")
    Traceback (most recent call last):
    ...
    stream_perceptron.contract.NotFinite: is not finite
    """
    try:
        out = float(text)
    except ValueError:
        raise NotANumber("is not a number") from None
    if not math.isfinite(out):
        raise NotFinite("is not finite")
    return out


def json_object(value: bytes) -> dict[str, Any]:
    """``value`` read as a JSON object, else :class:`~stream_perceptron.errors.DecodeError` with
    the reason: not valid JSON (for bytes that are not UTF-8, the first bad byte), or not an
    object.

    >>> json_object(b'{"x": [1], "y": 0}')
    {'x': [1], 'y': 0}
    >>> json_object(b'[1, 2]')
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.DecodeError: record must be a JSON object, got array
    >>> json_object(b'{"y": "\\xff"}')
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.DecodeError: not valid JSON: invalid UTF-8 at byte 7 (0xff)
    """
    import orjson  # with the worker's extra: records are read only where it is installed

    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"not valid JSON: {_json_error(value, str(exc))}") from None
    if not isinstance(obj, dict):
        raise DecodeError(f"record must be a JSON object, got {json_kind(obj)}")
    return obj


def _json_error(value: bytes, msg: str) -> str:
    """What is wrong with ``value``, which orjson refused with ``msg``: for bytes that are not
    UTF-8, the first bad byte (orjson says "surrogates not allowed" at char 0 whatever the fault)."""
    if "UTF-8" in msg:
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError as bad:
            return f"invalid UTF-8 at byte {bad.start} (0x{value[bad.start]:02x})"
    return msg


def json_kind(v: object) -> str:
    """The JSON name of a decoded value's type (``object``, ``array``, ``string``…).

    >>> json_kind([1]), json_kind(None), json_kind(2.5)
    ('array', 'null', 'float')
    """
    return {dict: "object", list: "array", str: "string", bool: "bool", type(None): "null"}.get(
        type(v), type(v).__name__
    )
