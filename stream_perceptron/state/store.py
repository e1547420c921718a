"""The contract every partition-state store keeps (``SP_CHECKPOINT__STORE``).

Each input partition ``(topic, partition)`` has one state of its own: a :class:`StoredState`
whose ``offsets`` is ``{topic: {partition: next_offset}}`` and nothing else. A store keeps these
states; the worker uses it like this:

1. on assignment, ``epoch = store.claim(topic, partition)`` and then ``store.load(topic,
   partition)`` (None: the partition has no state yet; the initial model, if any, starts it);
2. at each checkpoint, ``store.save(state, epoch)`` for every partition whose state moved;
3. a save by a worker that lost the partition since its claim raises
   :class:`~stream_perceptron.errors.FencedError` or, where the store cannot refuse it, is never
   preferred by :meth:`load` to the state of the partition's new owner.

A state is stored whole or not at all: a crash in the middle of a save leaves :meth:`load`
answering the previous state. Every state a worker stores is a valid place to resume from (its
outputs were acknowledged first, and a partition's learning is a function of its own records in
offset order), so the newest state, or the one furthest on, is authoritative.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from stream_perceptron.state.stored import StoredState


class PartitionStore(Protocol):
    """Stores one state per input partition (see the module's docstring)."""

    def open(self) -> None:
        """Make the store ready (create the directory, or the topic), before any partition is
        assigned; raises :class:`~stream_perceptron.errors.CheckpointError` naming the setting to
        fix when it cannot be used."""
        ...

    def preflight(self, config: dict[str, Any]) -> None:
        """Before the worker connects: check that every state this store can read without Kafka
        was written for the model configuration ``config`` (raises
        :class:`~stream_perceptron.errors.CheckpointMismatchError` naming the mismatch). Found
        later, at an assignment, a mismatch would stop the worker in the middle of a rebalance."""
        ...

    def claim(self, topic: str, partition: int) -> int:
        """Take the partition for this worker; returns the fencing epoch to :meth:`save` with."""
        ...

    def load(self, topic: str, partition: int) -> StoredState | None:
        """The partition's authoritative state, or None when it has none."""
        ...

    def save(self, state: StoredState, epoch: int) -> str:
        """Store ``state`` (one partition's); returns where it went, for the log line.
        Raises :class:`~stream_perceptron.errors.CheckpointError` when it cannot be stored, and
        :class:`~stream_perceptron.errors.FencedError` when another worker has claimed the
        partition since ``epoch``."""
        ...

    def close(self) -> None:
        """Release what the store holds (files, clients)."""
        ...


class StateRecord(Protocol):
    """One record of a state in a state topic, as :meth:`TransactionalStore.encode` makes it."""

    key: str
    value: bytes | None
    partition: int


class TransactionalStore(PartitionStore, Protocol):
    """A store whose states are records of a state topic, written by the worker's own producer
    inside the exactly-once mode's transaction (``SP_OUTPUT__GUARANTEE=exactly-once``), so a state
    becomes visible with the outputs of the records it learned, or not at all."""

    @property
    def topic(self) -> str:
        """The state topic's name."""
        ...

    def encode(self, state: StoredState, epoch: int) -> Sequence[StateRecord]:
        """``state``'s records (chunks, manifest last), for the transaction to send."""
        ...

    def durable(self, records: Sequence[StateRecord]) -> None:
        """``records`` committed: the store may now forget the state they replace."""
        ...


def partition_of(state: StoredState) -> tuple[str, int, int]:
    """(topic, partition, next offset) of one partition's state; ValueError for any other."""
    items = [(t, p, o) for t, ps in state.offsets.items() for p, o in ps.items()]
    if len(items) != 1:
        raise ValueError(f"a partition's state holds one offset, this one {len(items)}")
    return items[0]
