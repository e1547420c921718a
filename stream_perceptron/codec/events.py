"""Event records (``SP_INPUT__FORMAT=json``, or ``avro`` once decoded) through a feature spec,
a batch at a time, into the :class:`~stream_perceptron.codec.inputs.Decoded` the worker
processes: examples as named features, late labels, and every refusal with its reason naming
the path.

>>> from stream_perceptron.features.spec import FeatureSpec
>>> spec = FeatureSpec.parse({"label": "ok", "id": "id", "numeric": ["n"], "echo": ["id"]})
>>> d = EventDecoder(spec, Limits()).decode_many(
...     [b'{"id": 1, "n": 2}', b'{"id": 1, "ok": true}', b'{"n": "x"}'], [None] * 3, Standardizer())
>>> d.xs, d.ys, d.ids, d.rows, d.echo
([{'n': 2.0}], [0], [1], [0], [{'id': 1}])
>>> d.labels, d.rejected
({1: LabelRecord(id=1, y=1)}, {2: 'n: expected a number or a boolean, got string "x"'})
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stream_perceptron.codec.inputs import ClassRule, Decoded, LabelRecord
from stream_perceptron.codec.limits import Limits
from stream_perceptron.contract import json_object
from stream_perceptron.errors import DecodeError
from stream_perceptron.features.compiled import compile_spec
from stream_perceptron.features.extract import Bounds, Event
from stream_perceptron.features.spec import FeatureSpec
from stream_perceptron.features.standardize import Standardizer

Parse = Callable[[bytes], Any]
"""Bytes of a record's value to the event they hold (raises :class:`DecodeError`)."""


class EventDecoder:
    """Decodes a batch of event records through ``spec`` within ``limits``."""

    def __init__(self, spec: FeatureSpec, limits: Limits, classes: ClassRule | None = None) -> None:
        self.spec = spec
        self._limits = limits
        self._classes = classes
        self._event = compile_spec(spec, Bounds(
            max_features=limits.max_features, max_name_chars=limits.max_name_chars,
            max_abs_value=limits.max_abs_value, max_id_chars=limits.max_id_chars,
            max_echo_chars=limits.max_id_chars,
            max_class_chars=None if classes is None else classes.max_chars,
            known_classes=None if classes is None else classes.known,
        ))

    def decode_many(self, values: Sequence[bytes | None], keys: Sequence[bytes | None],
                    standardizer: Standardizer, parse: Parse = json_object) -> Decoded:
        """Each record in turn (offset order: ``standardizer``, the partition's, moves with each
        event accepted); ``parse`` reads a value (JSON by default)."""
        out = Decoded(xs=[], ys=[], ids=[], rows=[], rejected={}, labels={},
                      echo=[] if self.spec.echo else None)
        limits, extract = self._limits, self._event
        # a sign as it is; a class name as the batch's code of it (ys holds codes, 0 unlabeled)
        coded: Any = _same
        if self._classes is not None:
            codes = self._classes.codes()
            coded, out.class_names = codes.__getitem__, codes.names
        for i, (value, key) in enumerate(zip(values, keys, strict=True)):
            try:
                if key is not None and len(key) > limits.max_key_bytes:
                    raise DecodeError(f"key is {len(key)} bytes, over the limit of {limits.max_key_bytes}"
                                      " (SP_LIMITS__MAX_KEY_BYTES)")
                if value is None:
                    raise DecodeError("record has no value")
                if len(value) > limits.max_record_bytes:
                    raise DecodeError(f"record is {len(value)} bytes, over the limit of"
                                      f" {limits.max_record_bytes} (SP_LIMITS__MAX_RECORD_BYTES)")
                event = extract(parse(value), standardizer)
            except DecodeError as exc:
                out.rejected[i] = exc.reason
                continue
            if isinstance(event, Event):
                assert isinstance(out.xs, list)
                out.xs.append(event.x)
                out.ys.append(coded(event.y))
                out.ids.append(event.id)
                out.rows.append(i)
                if out.echo is not None:
                    out.echo.append(event.echo)
            else:
                out.labels[i] = LabelRecord(event.id, coded(event.y))
        return out


def _same(y: Any) -> Any:
    return y
