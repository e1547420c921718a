"""The worker's output records: every one is sent through :class:`Outputs`, dead letters through
:class:`DeadLetters`.

:class:`Outputs` is the one owner of two facts a checkpoint needs: whether records were sent
since the outputs were last confirmed (a flush that every record sent before it survived), and,
in the exactly-once mode, that the checkpoint interval's transaction is open before the first
record it holds is sent (the edge owns whether one is open). While a checkpoint's flush runs on
another thread, the records sent are held, in order, and go to the edge when it is done
(:meth:`Outputs.hold`, :meth:`Outputs.release`): a flush then waits for no record sent after it
began.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from stream_perceptron.codec.limits import Limits
from stream_perceptron.codec.outputs import dead_letter_record, encode
from stream_perceptron.kafka.edge import Batch, Edge
from stream_perceptron.worker.partition import PartitionState
from stream_perceptron.worker.policy import Counters

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


class Outputs:
    """Sends output records through ``edge``; in a transaction when the edge is transactional."""

    def __init__(self, edge: Edge) -> None:
        self._edge = edge
        self._unconfirmed = False
        self._sent = 0  # records sent or held, ever: a flush confirms those counted when it began
        self._held: list[tuple[str, Sequence[bytes | None], Sequence[bytes]]] | None = None

    @property
    def unconfirmed(self) -> bool:
        """Records were sent since the last :meth:`flush` or :meth:`confirmed`."""
        return self._unconfirmed

    def _begin(self) -> None:
        if self._edge.transactional and not self._edge.in_transaction:
            self._edge.begin_transaction()

    def send(self, topic: str, key: bytes | None, value: bytes) -> None:
        self._sent += 1
        self._unconfirmed = True
        if self._held is not None:
            self._held.append((topic, [key], [value]))
            return
        self._begin()
        self._edge.send(topic, key, value)

    def send_many(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None:
        if not values:
            return
        self._sent += len(values)
        self._unconfirmed = True
        if self._held is not None:
            self._held.append((topic, keys, values))
            return
        self._begin()
        self._edge.send_many(topic, keys, values)

    def flush(self) -> None:
        """Wait until every record sent is acknowledged (raises as :meth:`Edge.flush` does)."""
        self._edge.flush()
        self._unconfirmed = False

    @property
    def holding(self) -> bool:
        """Records sent now are held until :meth:`release`."""
        return self._held is not None

    def hold(self) -> tuple[Callable[[], None], int]:
        """Hold the records sent from now on; returns the flush for another thread to run (it
        waits for the records sent so far) and the mark to give :meth:`confirmed_up_to` once it
        returned."""
        self._held = []
        return self._edge.flush, self._sent

    def confirmed_up_to(self, mark: int) -> None:
        """The records sent before ``mark`` (:meth:`hold`'s) are acknowledged: the outputs are
        confirmed unless more were sent since."""
        if self._sent == mark:
            self._unconfirmed = False

    def release(self) -> None:
        """Send the records held, in the order they were sent, and stop holding."""
        held, self._held = self._held or [], None
        for topic, keys, values in held:
            self._edge.send_many(topic, keys, values)

    def confirmed(self) -> None:
        """The records sent are confirmed otherwise: their transaction committed."""
        self._unconfirmed = False


class DeadLetters:
    """Sends the records refused as bad input to the dead-letter topic, each with its reason."""

    def __init__(self, outputs: Outputs, topic: str, limits: Limits, counters: Counters) -> None:
        self._outputs = outputs
        self._topic = topic
        self._limits = limits
        self._counters = counters

    def send(self, st: PartitionState, batch: Batch, i: int, reason: str) -> None:
        """The ``i``-th record of ``batch`` (of ``st``'s partition), refused for ``reason``."""
        offset, key, limits = batch.offsets[i], batch.keys[i], self._limits
        body = dead_letter_record(
            topic=batch.topic, partition=batch.partition, offset=offset, key=key, error=reason,
            value=batch.values[i], max_value_bytes=limits.dead_letter_value_bytes,
            max_key_bytes=limits.max_key_bytes,
        )
        if body["key_truncated"]:
            key = None  # the record's key is too long to send; the dead letter keeps its start
        self._outputs.send(self._topic, key, encode(body))
        self._counters.dead_letters += 1
        st.dead_letters += 1
        log.debug("dead letter %s[%d]@%d: %s", batch.topic, batch.partition, offset, reason)
