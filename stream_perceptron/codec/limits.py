"""What a record may hold: the decoder's bounds (mirroring the ``SP_LIMITS__*`` settings), and the
check that every output record within them fits one producer request.

This module loads no numpy and no JSON library until :func:`check_output_bounds` runs, so the
settings, and through them the Kafka edge, stay light.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    max_classes: int = 100
    max_class_chars: int = 100


OUTPUT_RECORD_BYTES = 1_000_000
"""The most an output record (key, value and Kafka's framing) may take: confluent-kafka's default
``message.max.bytes``, below kafka-python's ``max_request_size`` (1,048,576) and the broker's
default ``max.message.bytes`` (1,048,588)."""

FRAMING_BYTES = 1_024
"""Room left for Kafka's record and batch framing around key and value (under 100 bytes)."""


def check_output_bounds(limits: Limits) -> None:
    """Raise ValueError if an output record within ``limits`` could be too large to send
    (:data:`OUTPUT_RECORD_BYTES` less :data:`FRAMING_BYTES`)."""
    from stream_perceptron.codec.outputs import largest_dead_letter_bytes, largest_prediction_bytes

    room = OUTPUT_RECORD_BYTES - FRAMING_BYTES
    key = f"SP_LIMITS__MAX_KEY_BYTES ({limits.max_key_bytes:,})"
    for kind, size, other in (
        ("prediction", largest_prediction_bytes(limits),
         f"SP_LIMITS__MAX_ID_CHARS ({limits.max_id_chars:,})"),
        ("dead letter", largest_dead_letter_bytes(limits),
         f"SP_LIMITS__DEAD_LETTER_VALUE_BYTES ({limits.dead_letter_value_bytes:,})"),
    ):
        if size > room:
            raise ValueError(
                f"{key} and {other} allow a {kind} of {size:,} bytes, over the {room:,} an output"
                " record may take; lower them"
            )


def check_class_output_bounds(limits: Limits, *, scores: bool) -> None:
    """Raise ValueError if a K-class prediction (with every class's score when ``scores``) or
    statistics record within ``limits`` could be too large to send."""
    from stream_perceptron.codec.outputs import largest_class_prediction_bytes, largest_class_statistics_bytes

    room = OUTPUT_RECORD_BYTES - FRAMING_BYTES
    classes = (f"SP_LIMITS__MAX_CLASSES ({limits.max_classes:,}) and SP_LIMITS__MAX_CLASS_CHARS"
               f" ({limits.max_class_chars:,})")
    for kind, size, also in (
        ("prediction", largest_class_prediction_bytes(limits, scores=scores),
         " with SP_OUTPUT__SCORES=all" if scores else ""),
        ("statistics record", largest_class_statistics_bytes(limits), ""),
    ):
        if size > room:
            raise ValueError(
                f"{classes} allow a {kind} of {size:,} bytes{also}, over the {room:,} an output"
                " record may take; lower them"
            )
