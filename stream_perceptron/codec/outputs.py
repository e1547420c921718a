"""Output records: predictions, dead letters and the statistics records, encoded to bytes.

Prediction records are encoded a batch at a time by msgspec (one struct per record,
:func:`encode_predictions`); every other output record by orjson (:func:`encode`). The formats
are in :func:`prediction_record`, :func:`outcome_record`, :func:`dead_letter_record` and the
README.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
import orjson

from stream_perceptron.codec.limits import Limits, Scalar


def clip(s: str, n: int = 64) -> str:
    """``s`` cut to ``n`` characters, an ellipsis marking the cut."""
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
    classes: Classes | None = None,
) -> dict[str, Any]:
    """The prediction published for one input record.

    ``score`` is θ·x+θ0 before any update; ``label`` −1/+1 or None; ``mistake`` and ``margin``
    (geometric, y·score/‖θ‖) are None when unlabeled, ``margin`` also while θ = 0; ``updates`` is
    the model version, the total number of updates after this record. With ``classes`` (the
    configured names of the negative and the positive class), ``class`` is the predicted class's
    name (None when that class has none). No wall-clock field: a record re-emitted after a
    restart is identical to the first.
    """
    labeled = label != 0
    record = {
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
    if classes is not None:
        record["class"] = classes[prediction > 0]
    return record


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


class _NamedPrediction(_Prediction, gc=False):
    """:class:`_Prediction` and the name of the predicted class, last (``classes`` given)."""

    class_: str | None = msgspec.field(default=None, name="class")


class _EchoedPrediction(_Prediction, gc=False):
    """:class:`_Prediction` and the event's echo fields, last (a feature spec's ``echo``)."""

    echo: dict[str, Any] | None = None


class _NamedEchoedPrediction(_NamedPrediction, gc=False):
    """:class:`_NamedPrediction` and the event's echo fields, last."""

    echo: dict[str, Any] | None = None


Classes = tuple[str | None, str | None]
"""The configured names of the negative and the positive class
(``SP_LIMITS__NEGATIVE_CLASS``, ``SP_LIMITS__POSITIVE_CLASS``)."""


_PREDICTION_ENCODER = msgspec.json.Encoder()


def encode_prediction(record: Any) -> bytes:
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
    classes: Classes | None = None,
    echo: Sequence[dict[str, Any] | None] | None = None,
) -> list[bytes]:
    """The encoded :func:`prediction_record` of each row of a batch from one partition, byte for
    byte what ``encode_prediction(prediction_record(...))`` gives, without the per-record calls
    or dicts. ``echo``: each row's echo fields (a feature spec's), written last.

    >>> encode_predictions(topic="in", partition=0, offsets=[4], keys=[b"k"], ids=[None],
    ...                    predictions=[1], scores=[0.5], labels=[0], mistakes=[False],
    ...                    margins=[float("nan")], updates=[3])
    [b'{"topic":"in","partition":0,"offset":4,"key":"k","id":null,"prediction":1,"score":0.5,\
"label":null,"mistake":null,"margin":null,"updates":3}']
    >>> encode_predictions(topic="in", partition=0, offsets=[5], keys=[None], ids=[None],
    ...                    predictions=[-1], scores=[-0.5], labels=[-1], mistakes=[False],
    ...                    margins=[-0.1], updates=[3], classes=("ham", "spam"))[0][-40:]
    b'"margin":-0.1,"updates":3,"class":"ham"}'
    """
    encode_one = _PREDICTION_ENCODER.encode
    row: Callable[..., _Prediction] = _Prediction
    if classes is not None:
        names = classes

        def row(*fields: Any) -> _Prediction:
            # fields[5] is the prediction; mypy reads no positional fields into a Struct subclass
            return _NamedPrediction(*fields, names[fields[5] > 0])  # type: ignore[call-arg]

    if echo is not None:
        echoes = iter(echo)
        if classes is None:
            def row(*fields: Any) -> _Prediction:
                return _EchoedPrediction(*fields, next(echoes))  # type: ignore[call-arg]
        else:
            def row(*fields: Any) -> _Prediction:
                return _NamedEchoedPrediction(*fields, names[fields[5] > 0], next(echoes))  # type: ignore[call-arg]

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


ClassName = str | int
"""A class name (:func:`~stream_perceptron.contract.class_name`): its JSON type is kept."""


def class_prediction_record(
    *,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    id: Scalar,
    prediction: ClassName | None,
    score: float,
    runner_up: ClassName | None,
    runner_up_score: float,
    label: ClassName | None,
    mistake: bool,
    margin: float,
    updates: int,
    scores: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The prediction a K-class worker publishes for one input record.

    ``prediction`` is the served model's class (the highest served score, the first class in row
    order among ties; None while no class is known) and ``score`` its score; ``runner_up`` the
    best other class and ``runner_up_score`` its score (None with fewer than two classes);
    ``label`` the record's class or None; ``mistake`` (the learning W's: the true class's score
    not strictly above every other) and ``margin`` (geometric, (s_y − max_{r≠y} s_r)/‖W‖) are
    None when unlabeled, ``margin`` also while W = 0 or with one class; ``updates`` the updates
    after this record; ``scores`` (``SP_OUTPUT__SCORES=all``) every class's served score by the
    class's name as text. Score fields that are NaN are written as null.
    """
    labeled = label is not None
    record = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": key_text(key),
        "id": id,
        "prediction": prediction,
        "score": None if math.isnan(score) else score,
        "runner_up": runner_up,
        "runner_up_score": None if runner_up is None or math.isnan(runner_up_score) else runner_up_score,
        "label": label,
        "mistake": mistake if labeled else None,
        "margin": margin if labeled and not math.isnan(margin) else None,
        "updates": updates,
    }
    if scores is not None:
        record["scores"] = dict(scores)
    return record


class _ClassPrediction(msgspec.Struct, gc=False):
    """The fields of :func:`class_prediction_record`, in its order, for the batch encoder."""

    topic: str
    partition: int
    offset: int
    key: str | None
    id: Scalar
    prediction: ClassName | None
    score: float | None
    runner_up: ClassName | None
    runner_up_score: float | None
    label: ClassName | None
    mistake: bool | None
    margin: float | None
    updates: int


class _ScoredClassPrediction(_ClassPrediction, gc=False):
    """:class:`_ClassPrediction` and every class's score (``SP_OUTPUT__SCORES=all``)."""

    scores: dict[str, float | None] | None = None


class _EchoedClassPrediction(_ClassPrediction, gc=False):
    """:class:`_ClassPrediction` and the event's echo fields, last."""

    echo: dict[str, Any] | None = None


class _ScoredEchoedClassPrediction(_ScoredClassPrediction, gc=False):
    """:class:`_ScoredClassPrediction` and the event's echo fields, last."""

    echo: dict[str, Any] | None = None


def encode_class_predictions(
    *,
    topic: str,
    partition: int,
    offsets: Sequence[int],
    keys: Sequence[bytes | None],
    ids: Sequence[Scalar],
    classes: Sequence[ClassName],
    predictions: Sequence[int],
    scores: Sequence[float],
    runner_up: Sequence[int],
    runner_up_scores: Sequence[float],
    labels: Sequence[int],
    mistakes: Sequence[bool],
    margins: Sequence[float],
    updates: Sequence[int],
    all_scores: Sequence[Sequence[float]] | None = None,
    echo: Sequence[dict[str, Any] | None] | None = None,
) -> list[bytes]:
    """The encoded :func:`class_prediction_record` of each row of a batch from one partition,
    byte for byte what ``encode_prediction(class_prediction_record(...))`` gives. ``classes``
    names the model's rows; ``predictions``, ``runner_up`` and ``labels`` are rows of it (−1:
    none, unlabeled); ``all_scores``: each row's served score of every class (NaN for a class
    not known yet at that row, left out); ``echo`` each row's echo fields, written last.

    >>> encode_class_predictions(topic="in", partition=0, offsets=[4], keys=[None], ids=[7],
    ...     classes=["cat", 3], predictions=[1], scores=[0.5], runner_up=[0], runner_up_scores=[-0.5],
    ...     labels=[0], mistakes=[True], margins=[-0.25], updates=[2], all_scores=[[-0.5, 0.5]])
    [b'{"topic":"in","partition":0,"offset":4,"key":null,"id":7,"prediction":3,"score":0.5,\
"runner_up":"cat","runner_up_score":-0.5,"label":"cat","mistake":true,"margin":-0.25,"updates":2,\
"scores":{"cat":-0.5,"3":0.5}}']
    """
    encode_one = _PREDICTION_ENCODER.encode
    names: list[ClassName | None] = [*classes, None]  # row -1: none
    texts = [str(c) for c in classes]
    row: Callable[..., _ClassPrediction] = _ClassPrediction
    if all_scores is not None:
        each = iter(all_scores)

        def scored() -> dict[str, float | None]:
            return {t: s for t, s in zip(texts, next(each), strict=False) if s == s}  # NaN: not known yet

        if echo is None:
            def row(*fields: Any) -> _ClassPrediction:
                return _ScoredClassPrediction(*fields, scored())  # type: ignore[call-arg]
        else:
            echoes = iter(echo)

            def row(*fields: Any) -> _ClassPrediction:
                return _ScoredEchoedClassPrediction(*fields, scored(), next(echoes))  # type: ignore[call-arg]
    elif echo is not None:
        echoes = iter(echo)

        def row(*fields: Any) -> _ClassPrediction:
            return _EchoedClassPrediction(*fields, next(echoes))  # type: ignore[call-arg]

    return [
        encode_one(
            row(
                topic,
                partition,
                offset,
                None if key is None else key.decode("utf-8", errors="backslashreplace"),
                rid,
                names[prediction],
                score if score == score else None,
                names[rival],
                rival_score if rival >= 0 and rival_score == rival_score else None,
                names[label],
                mistake if label >= 0 else None,
                margin if label >= 0 and margin == margin else None,  # NaN != NaN
                update,
            )
        )
        for offset, key, rid, prediction, score, rival, rival_score, label, mistake, margin, update in zip(
            offsets, keys, ids, predictions, scores, runner_up, runner_up_scores, labels, mistakes, margins,
            updates, strict=True,
        )
    ]


def outcome_record(
    *,
    id: Scalar,
    topic: str,
    partition: int,
    offset: int,
    event_offset: int,
    prediction: int | ClassName | None,
    score: float,
    label: int | ClassName,
    mistake: bool,
    delay_s: float | None,
) -> dict[str, Any]:
    """What a late label joined to its event publishes (topic ``SP_TOPICS__OUTCOMES``).

    ``offset`` is the label record's, ``event_offset`` the event's; ``prediction`` (−1/+1) and
    ``score`` are what the event was given when it was predicted; ``correct`` is whether that
    prediction equals ``label`` (−1/+1); ``mistake`` is the learning model's flag now, when the
    kept features are learned: ``label·(θ·x+θ0) ≤ 0``. A K-class worker gives class names for
    ``prediction`` and ``label`` (their JSON types kept), ``score`` the predicted class's, and
    ``mistake`` by the K-class rule. ``delay_s`` is the label record's Kafka
    timestamp minus the event's, in seconds (None when either has none). No wall-clock field: a
    record re-emitted after a restart is identical to the first.

    >>> r = outcome_record(id="a", topic="t", partition=0, offset=9, event_offset=4, prediction=1,
    ...                    score=0.5, label=-1, mistake=True, delay_s=2.5)
    >>> r["correct"], r["mistake"], r["delay_s"]
    (False, True, 2.5)
    """
    return {
        "id": id,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "event_offset": event_offset,
        "prediction": prediction,
        "score": score,
        "label": label,
        "correct": prediction == label,
        "mistake": mistake,
        "delay_s": delay_s,
    }


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
        "error": clip(error, _ERROR_CHARS),
        "value": None if kept is None else base64.b64encode(kept).decode("ascii"),
        "value_bytes": None if value is None else len(value),
        "value_truncated": value is not None and len(value) > max_value_bytes,
        "value_sha256": None if value is None else hashlib.sha256(value).hexdigest(),
    }


_ERROR_CHARS = 1_024

_TOPIC = "t" * 249  # Kafka's longest topic name
_LONGEST_FLOAT = -2.2250738585072014e-308  # the longest float, as JSON: 24 characters


def configured_classes(limits: Limits) -> Classes | None:
    """The configured names (negative, positive) a prediction carries; None when no class is
    named, and then a prediction has no ``class`` field."""
    if limits.positive_class is None and limits.negative_class is None:
        return None
    return (limits.negative_class, limits.positive_class)


def _longest_classes(limits: Limits) -> Classes | None:
    names = configured_classes(limits)
    if names is None:
        return None
    longest = max((n or "" for n in names), key=lambda n: len(encode_prediction({"": n})))
    return (longest, longest)


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
            classes=_longest_classes(limits),
        )))
        for rid in ("\x01" * limits.max_id_chars, _LONGEST_FLOAT)
    )
    return len(key) + value


def _longest_class(limits: Limits) -> ClassName:
    """The class name that takes the most bytes as JSON within ``limits``."""
    text = "\x01" * limits.max_class_chars
    return text if len(encode_prediction(text)) >= 20 else -(2**63)


def largest_class_prediction_bytes(limits: Limits, *, scores: bool) -> int:
    """The most key + value bytes a K-class prediction record takes within ``limits`` (as
    :func:`largest_prediction_bytes`), with ``scores``: every class's score at the longest.

    >>> largest_class_prediction_bytes(Limits(max_key_bytes=0, max_id_chars=0, max_class_chars=1),
    ...                                scores=False)
    604
    """
    key = b"\x01" * limits.max_key_bytes
    name = _longest_class(limits)
    value = max(
        len(encode_prediction(class_prediction_record(
            topic=_TOPIC, partition=2**31 - 1, offset=2**63 - 1, key=key, id=rid, prediction=name,
            score=_LONGEST_FLOAT, runner_up=name, runner_up_score=_LONGEST_FLOAT, label=name,
            mistake=False, margin=_LONGEST_FLOAT, updates=2**63 - 1,
            scores={str(name): _LONGEST_FLOAT} if scores else None,
        )))
        for rid in ("\x01" * limits.max_id_chars, _LONGEST_FLOAT)
    )
    if scores:  # the other classes' entries, each after a comma
        entry = len(encode_prediction({str(name): _LONGEST_FLOAT})) - 2
        value += (limits.max_classes - 1) * (entry + 1)
    return len(key) + value


STATISTICS_BINARY_BYTES = 16_384
"""Room for the keys every statistics record has, besides its classes (its numbers, the topic
name, the mixing and drift figures): a binary record takes under 3,000 bytes."""


def largest_class_statistics_bytes(limits: Limits) -> int:
    """The most bytes a K-class statistics record takes within ``limits``: its binary keys
    (:data:`STATISTICS_BINARY_BYTES`), and ``classes``, ``per_class``, ``confusion`` and
    ``intercepts`` for ``max_classes`` classes of the longest names and counts.

    >>> largest_class_statistics_bytes(Limits(max_classes=2, max_class_chars=1)) - STATISTICS_BINARY_BYTES
    479
    """
    k, name, count = limits.max_classes, _longest_class(limits), 2**63 - 1
    part = {"class": name, "labeled": count, "mistakes": count, "predicted": count}
    each = {
        "classes": len(encode([name])) - 2,
        "per_class": len(encode([part])) - 2,
        "intercepts": len(encode([_LONGEST_FLOAT])) - 2,
    }
    size = sum(len(encode({key: []})) - 2 + k * n + (k - 1) for key, n in each.items()) + 3  # commas
    row = k * len(str(count)) + (k - 1) + 2  # [n,n,...]
    size += len(encode({"confusion": []})) - 2 + k * row + (k - 1) + 1
    return STATISTICS_BINARY_BYTES + size


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



def encode(record: Any) -> bytes:
    """A record as compact UTF-8 JSON (NaN and ±Inf become null)."""
    return orjson.dumps(record, option=orjson.OPT_SERIALIZE_NUMPY)


def decode(value: bytes) -> Any:
    """Parse an output record (for consumers such as ``watch`` and the tests)."""
    return orjson.loads(value)

