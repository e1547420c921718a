"""The worker: one loop that composes the model, the codec, the state and the Kafka edge
(decode → score → learn → publish → checkpoint → commit), with its shutdown bound, its metrics
and health endpoints."""

from stream_perceptron.worker.loop import Worker

__all__ = ["Worker"]
