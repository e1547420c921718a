"""The classes a K-class worker takes: the rule beyond the model's own (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stream_perceptron.codec.outputs import clip
from stream_perceptron.model.perceptron import Refusal


def class_refusals(model: Any, labels: Sequence[Any]) -> dict[int, Refusal]:
    """``{k: reason}`` for the labels of a K-class batch (in row order; None unlabeled) the
    model does not take: a name whose text is that of another class held or met before it (``3``
    and ``"3"``), or one class more than it may hold (``SP_LIMITS__MAX_CLASSES``). Each reason is
    a :class:`Refusal` of kind ``"classes"``."""
    texts = {str(c): c for c in model.classes}
    refused: dict[int, Refusal] = {}
    for k, name in enumerate(labels):
        if name is None:
            continue
        held = texts.setdefault(str(name), name)
        if type(held) is not type(name):
            kind = "integer" if isinstance(held, int) else "string"
            refused[k] = Refusal(f"label {clip(repr(name))} is no class: the class {clip(repr(held))}"
                                 f" (the {kind}) has that name", "classes")
    kept = [None if k in refused else name for k, name in enumerate(labels)]
    for k, why in model.refusals(kept, [name is not None for name in kept]).items():
        refused[k] = Refusal(f"{why} (SP_LIMITS__MAX_CLASSES; SP_MODEL__UNKNOWN_CLASS)", "classes")
    return dict(sorted(refused.items()))
