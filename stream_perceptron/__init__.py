"""stream_perceptron: Rosenblatt's perceptron learning from a Kafka stream, one example at a time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stream_perceptron.interop import from_river, from_sklearn, to_river, to_sklearn
    from stream_perceptron.model.perceptron import Perceptron
    from stream_perceptron.model.stats import RunningStats

__version__ = "0.1.0"

__all__ = ["Perceptron", "RunningStats", "__version__", "from_river", "from_sklearn", "to_river",
           "to_sklearn"]

_INTEROP = ("from_river", "from_sklearn", "to_river", "to_sklearn")


def __getattr__(name: str) -> Any:
    """``Perceptron``, ``RunningStats`` and the way out to river and scikit-learn
    (:mod:`~stream_perceptron.interop`) on first use: a process that needs only the Kafka edge
    (the producer process) does not import numpy and river."""
    if name == "Perceptron":
        from stream_perceptron.model.perceptron import Perceptron

        return Perceptron
    if name == "RunningStats":
        from stream_perceptron.model.stats import RunningStats

        return RunningStats
    if name in _INTEROP:
        from stream_perceptron import interop

        return getattr(interop, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
