"""The exactly-once checkpoint (``SP_OUTPUT__GUARANTEE=exactly-once``, on the Kafka store).

Each checkpoint interval is one Kafka transaction. It holds what the interval published (the
predictions, statistics records and dead letters), then the state records of every partition
that moved (chunks, manifest last), then the partitions' next input offsets, sent with the
consumer's group membership (KIP-447), and it commits them together:

* a ``read_committed`` reader of the output topics sees each input offset's records once, and
  only from a transaction whose states and offsets committed with them;
* a restore reads the state topic ``read_committed``, so a state is restored only with the
  outputs of the records it learned;
* a worker that lost its partitions (stalled past its session, then resumed) is refused by the
  group coordinator at the commit: nothing of its transaction becomes visible.

A transaction that aborts (refused, fenced, a record not delivered), or whose outcome the broker
never told, leaves the worker's in-memory states ahead of what is committed: every partition it
still holds is restored again from the store and the consumer sought back there, so what follows
is exactly what a new owner would do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from stream_perceptron.errors import (
    CheckpointError,
    KafkaEdgeError,
    TransactionAbortedError,
)
from stream_perceptron.kafka.edge import Edge, Partition
from stream_perceptron.throttle import Throttle
from stream_perceptron.worker.partition import PartitionState
from stream_perceptron.worker.stores import OnOpen

log = logging.getLogger("stream_perceptron.worker")  # one name, whichever module writes the line


class Transactions:
    """The transactional half of the checkpoint of :class:`~stream_perceptron.worker.loop.Worker`
    (a mixin: the attributes below are the worker's, set in its ``__init__``)."""

    edge: Edge
    store: Any
    parts: dict[Partition, PartitionState]
    checkpoint_ok: bool
    _exactly_once: bool
    _in_transaction: bool
    _routine_lines: Throttle
    _stats_unflushed: bool
    _take: Callable[[str, int], None]  # the worker's: restore a partition and seek to it

    def _begun(self) -> None:
        """Open a transaction if none is: before anything is sent (exactly-once only)."""
        if self._exactly_once and not self._in_transaction:
            self.edge.begin_transaction()
            self._in_transaction = True

    def _commit_interval(self, reason: str, started: float) -> bool:
        """Write the moved partitions' states into the open transaction and commit it with their
        offsets; on an abort, restore every partition held from the store (see the module's
        docstring). Returns whether the transaction committed."""
        moved = [st for st in self.parts.values() if st.dirty and not st.fenced]
        if not (moved or self._in_transaction):
            return True  # nothing sent, nothing learned: no transaction to commit
        self._begun()
        store: OnOpen = self.store
        written: list[tuple[PartitionState, int, list[Any]]] = []
        try:
            for st in moved:
                offset = st.next_offset
                if offset is None:  # a moved partition has processed a batch
                    continue
                records = store.encode(st.state(), st.epoch)
                for r in records:
                    self.edge.send(store.topic, r.key.encode(), r.value or b"", partition=r.partition)
                written.append((st, offset, records))
            self.edge.commit_transaction({st.key: offset for st, offset, _ in written})
        except CheckpointError:
            self._abort_quietly()
            raise  # a state too large for SP_CHECKPOINT__CHUNK_BYTES: a setting to change
        except KafkaEdgeError as exc:  # aborted (nothing of it visible), or never confirmed
            self._in_transaction = False
            aborted = isinstance(exc, TransactionAbortedError)
            log.log(logging.WARNING if aborted else logging.ERROR,
                    "transaction (%s) %s: %s; each partition held restarts from its stored state",
                    reason, "aborted, nothing of it visible" if aborted
                    else "not confirmed (the next transaction settles it)", exc)
            self._rewind()
            return False
        self._in_transaction = False
        self._stats_unflushed = False
        for st, offset, records in written:
            st.dirty, st.committed = False, offset
            st.saved_at = f"{store.topic} (transaction)"
            store.durable(records)  # tombstones for the states these replace
        held = self._routine_lines.allow("checkpoint") if reason == "interval" else 0
        log.log(
            logging.DEBUG if held is None else logging.INFO,
            "transaction (%s) committed in %.1f ms: %d partition states, offsets %s%s", reason,
            (time.monotonic() - started) * 1000, len(written),
            {f"{st.topic}[{st.partition}]": offset for st, offset, _ in written},
            f" ({held} more at DEBUG since the last)" if held else "",
        )
        return True

    def _abort_quietly(self) -> None:
        self._in_transaction = False
        try:
            self.edge.abort_transaction()
        except KafkaEdgeError as exc:
            log.warning("could not abort the transaction (the next one settles it): %s", exc)
        self._rewind()

    def _rewind(self) -> None:
        """Drop every partition's in-memory state and, for those still assigned, restore it
        from the store and seek back to it."""
        assigned = set(self.edge.assignment())
        for key in list(self.parts):
            del self.parts[key]
            if key in assigned:
                self._take(*key)

