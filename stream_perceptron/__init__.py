"""stream_perceptron: Rosenblatt's perceptron learning from a Kafka stream, one example at a time."""

from stream_perceptron.perceptron import Perceptron
from stream_perceptron.stats import RunningStats

__version__ = "0.1.0"

__all__ = ["Perceptron", "RunningStats", "__version__"]
