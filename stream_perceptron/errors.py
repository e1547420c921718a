"""One root exception and its families.

Bad input records are data, not exceptions that escape the worker loop: the decoder raises
:class:`DecodeError` and the worker turns it into a dead-letter record with ``reason``.
"""

from __future__ import annotations


class StreamPerceptronError(Exception):
    """Root of every error this package raises on purpose."""


class SettingsError(StreamPerceptronError):
    """A setting is invalid; the message names it (one line per setting)."""


class DecodeError(StreamPerceptronError, ValueError):
    """An input record cannot be used; ``reason`` says why (it goes to the dead-letter topic)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DimensionError(DecodeError):
    """An example's dimension does not match the model's."""


class FeatureValueError(DecodeError):
    """A feature value given to the model in Python is not a finite number (None, NaN, ±inf, a
    string): the message names the feature. Nothing of the row is learned."""


class CheckpointError(StreamPerceptronError):
    """A checkpoint cannot be written or read."""


class CheckpointUnreadableError(CheckpointError):
    """A checkpoint file exists but cannot be read now (an I/O error, not damage): loading stops
    rather than fall back to an older checkpoint."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint was written for a model of another configuration."""


class CheckpointExistsError(CheckpointError):
    """A directory that was to receive a new model already holds checkpoints of another."""


class NoStatsError(StreamPerceptronError):
    """A statistics topic holds nothing to show (empty, missing, or not a statistics topic)."""


class ModelTopicError(StreamPerceptronError):
    """The model topic cannot give what was asked: it is missing, holds no mix yet, or a row to
    score has another width than the mix."""


class SourceError(StreamPerceptronError):
    """A dataset source (file, river dataset, generator spec) cannot be read."""


class ProduceInterrupted(StreamPerceptronError):
    """Ctrl+C (or SIGINT) during ``produce``: its message says which examples were sent."""


class OutputError(StreamPerceptronError):
    """A file a command was asked to write (a plot, a demo's run directory) cannot be written."""


class BrokerError(StreamPerceptronError):
    """The embedded broker cannot be started, or a cluster cannot be reached."""


class KafkaEdgeError(StreamPerceptronError):
    """A Kafka operation failed after its retries (broker unreachable, topic missing, auth)."""


class UndeliveredError(KafkaEdgeError):
    """Records were given up: the broker refused them for good, or a failed producer dropped them.
    The outputs since the last checkpoint are then incomplete."""


class KafkaAuthError(KafkaEdgeError):
    """Kafka refused the login (SASL) or the TLS handshake: a setting to fix, not a fault to retry."""


class FencedError(CheckpointError):
    """A partition's state was not stored: another worker has claimed the partition since this
    one did (it lost the partition, for example while stalled). Its state is the new owner's."""


class TransactionAbortedError(KafkaEdgeError):
    """An exactly-once transaction was aborted: none of its records and none of its input offsets
    are visible to a ``read_committed`` reader or the group. The edge is usable again (the next
    ``begin_transaction`` starts a new one); what the worker learned since its last committed
    transaction must be dropped, so each partition restarts from its stored state."""


class TransactionFencedError(TransactionAbortedError):
    """An exactly-once transaction was refused because this worker no longer owns what it wrote
    for: the consumer lost its partitions (the group moved on to a newer generation, e.g. while
    this worker was stalled), or another producer took this worker's transactional id. Nothing of
    the transaction is visible; the worker drops its partitions and polls again."""


class RegistryError(StreamPerceptronError):
    """The schema registry could not give what was asked (``kafka/registry.py``)."""


class RegistryUnavailable(RegistryError):
    """The schema registry did not answer within its timeout (refused, unreachable, timed out) or
    failed (HTTP 5xx, 408, 429): a fault to retry later, not a property of a record."""


class RegistryRefused(RegistryError):
    """The schema registry refused a request for good: the credentials (HTTP 401, 403), a schema
    it does not take (409 incompatible, 422 invalid), a certificate not trusted, or an address
    that is no registry's API (another 404, a redirect, an answer that is not its JSON). A setting
    or a schema to fix, not a fault to retry."""


class SchemaNotFound(RegistryError, DecodeError):
    """The schema registry holds no schema of this id (HTTP 404, error code 40403): a record
    naming it is bad input, a dead letter with this reason."""
