"""Parts of kafka-python's internals replaced for speed, each guarded by shape checks and a live
equivalence probe, falling back to kafka-python's own path: see ``README.md`` beside this file.

Each module's ``refusal(client)`` says why it leaves a client to kafka-python's own path (None
where it takes it); :func:`described` puts what each decided into the edge's start line.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka import __version__ as KAFKA_PYTHON_VERSION


def described(refusals: Mapping[str, str | None]) -> str:
    """The fast paths, by name, each ``on`` or ``off`` with why kafka-python's own path is used
    (its ``refusal``), and the kafka-python version they were checked against.

    >>> described({"fetch": None, "append": "shape: the producer has a serialiser"}).split(": ", 1)[1]
    "fetch on, append off (kafka-python's own path; shape: the producer has a serialiser)"
    """
    each = [
        f"{name} on" if why is None else f"{name} off (kafka-python's own path; {why})"
        for name, why in refusals.items()
    ]
    return f"fast paths (kafka-python {KAFKA_PYTHON_VERSION}): {', '.join(each)}"


__all__ = ["KAFKA_PYTHON_VERSION", "described"]
