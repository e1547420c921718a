"""stream_perceptron: Rosenblatt's perceptron learning from a Kafka stream, one example at a time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stream_perceptron.model.perceptron import Perceptron
    from stream_perceptron.model.stats import RunningStats

__version__ = "0.1.0"

__all__ = ["Perceptron", "RunningStats", "__version__"]


def __getattr__(name: str) -> Any:
    """``Perceptron`` and ``RunningStats`` on first use: a process that needs only the Kafka
    edge (the producer process) does not import numpy and river."""
    if name == "Perceptron":
        from stream_perceptron.model.perceptron import Perceptron

        return Perceptron
    if name == "RunningStats":
        from stream_perceptron.model.stats import RunningStats

        return RunningStats
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
