"""``SP_CHECKPOINT__STORE=kafka``: each partition's states as records of a compacted Kafka topic.

The store writes and reads through a :class:`StateLog` (``stream_perceptron.kafka.state_log``
is the Kafka one; the tests use one in memory), so this module knows records and offsets, not a
client. Record formats in ``docs/state-format.md`` ("Kafka store").

Where: input partition ``p`` of ``topic`` goes to state-topic partition ``p % N`` (N the state
topic's partition count), chosen here, never by the key partitioner. Every key is UTF-8 text
``<topic>:<p>:<kind>:<name>`` (a topic name holds no ``:``):

* ``<topic>:<p>:chunk:<save>:<i>``: the ``i``-th piece (at most ``chunk_bytes``) of a state
  serialized exactly as a checkpoint file (:func:`~stream_perceptron.state.stored.serialize`:
  header line with the body's sha256, then the body). ``<save>`` is random per save, so a
  chunk key is written once and a save never overwrites another's chunks.
* ``<topic>:<p>:manifest:<writer>``: the manifest, written after every chunk it lists is
  acknowledged. ``<writer>`` is ``<store instance>-<epoch>``: one per store and claim, so
  compaction keeps each writer's newest manifest. It lists the chunks **by key** (with their
  length and sha256, and the whole state's), never by offset, so that the same records can be
  sent inside a Kafka transaction whose offsets are known only at its commit (:meth:`KafkaStore.encode`).

Which state :meth:`KafkaStore.load` answers: reading the partition's state-topic partition from
its beginning (a record replaces an earlier one of its key; a tombstone, value None, removes it:
what compaction keeps, so the answer is the same before and after compaction), the **complete**
manifests of ``(topic, p)`` are those whose chunks are all there with their length and sha256;
the answer is the complete one with the greatest ``next_offset``, ties going to the one latest
in the log. Every stored state is a valid place to resume from (its outputs were acknowledged
before it was stored, and a partition's learning is a function of its records in offset order),
so the state furthest on is as good as any and better than the ones before it; a worker that
lost the partition while stalled (a zombie) and writes later writes a state from before the new
owner's, which is therefore never preferred to the new owner's further on.
The first pass keeps only each chunk's length and digest; the second reads the chosen state's
chunk values alone (from its first chunk's offset to its last's), so memory holds one state.

A crash between the chunks and the manifest leaves the previous manifest and its chunks as they
were: :meth:`~KafkaStore.load` answers the previous state, and the orphaned chunks are
tombstoned by the next owner's first save. After a manifest is acknowledged
(:meth:`KafkaStore.durable`), the store writes tombstones for every key of the partition it
read at :meth:`~KafkaStore.load` (the states of the previous owners, orphaned chunks) and for
the chunks of its own previous save, so the compacted topic keeps about one state per partition.

Fencing: Kafka cannot refuse a write by a worker that lost the partition, so the store relies on
the rule above. :meth:`~KafkaStore.claim` returns 1 + the highest epoch in the partition's
manifests, recorded in each manifest (and in the writer's name) for the record, not used to choose.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from stream_perceptron.errors import CheckpointError, StreamPerceptronError
from stream_perceptron.state.store import partition_of
from stream_perceptron.state.stored import StoredState, parse, serialize

log = logging.getLogger(__name__)

MANIFEST_FORMAT = "stream-perceptron-state-manifest"
MANIFEST_VERSION = 1
CHUNK = "chunk"
MANIFEST = "manifest"
LOAD_ATTEMPTS = 3
"""How often :meth:`KafkaStore.load` reads the log again when the chosen state's chunks went
(tombstoned by another writer and compacted) between its two passes."""


@dataclass(frozen=True)
class StateRecord:
    """A record to append: ``partition`` of the state topic, ``key`` and ``value`` (None: a
    tombstone)."""

    partition: int
    key: str
    value: bytes | None


class LoggedRecord(Protocol):
    """A record read back from the state topic at ``offset`` (``key`` None when it had none)."""

    @property
    def offset(self) -> int: ...

    @property
    def key(self) -> str | None: ...

    @property
    def value(self) -> bytes | None: ...


class StateLog(Protocol):
    """The state topic as the store sees it: partitions, durable appends, ordered scans."""

    name: str
    """The topic's name, for messages."""

    def partitions(self) -> int:
        """The number of partitions of the state topic."""
        ...

    def append(self, records: Sequence[StateRecord]) -> None:
        """Write ``records`` to their partitions and return once every one is acknowledged by
        all in-sync replicas; raise otherwise (none is then known to be written or not)."""
        ...

    def scan(self, partition: int, start: int = 0, stop: int | None = None) -> Iterator[LoggedRecord]:
        """The records of ``partition`` in offset order from ``start`` (or the first still
        there) up to ``stop`` (excluded), or, with ``stop`` None, at least up to its end when
        called. Only committed records (``read_committed``)."""
        ...

    def close(self) -> None:
        """Release the clients."""
        ...


@dataclass(frozen=True)
class ChunkRef:
    """One chunk as a manifest lists it."""

    key: str
    length: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """A stored state's manifest (the record that makes its chunks a state)."""

    key: str
    topic: str
    partition: int
    next_offset: int
    epoch: int
    writer: str
    created: float
    length: int
    sha256: str
    chunks: tuple[ChunkRef, ...]
    offset: int = -1
    """Where it is in the state topic (-1: not read from it)."""

    def value(self) -> bytes:
        """The record's value: one JSON object (``docs/state-format.md``)."""
        return orjson.dumps({
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "topic": self.topic,
            "partition": self.partition,
            "next_offset": self.next_offset,
            "epoch": self.epoch,
            "writer": self.writer,
            "created": self.created,
            "length": self.length,
            "sha256": self.sha256,
            "chunks": [{"key": c.key, "length": c.length, "sha256": c.sha256} for c in self.chunks],
        })

    @classmethod
    def read(cls, key: str, offset: int, value: bytes) -> Manifest:
        """The manifest in a record; ValueError saying why when it is not one for ``key``."""
        try:
            data = orjson.loads(value)
            if data.get("format") != MANIFEST_FORMAT or data.get("version") != MANIFEST_VERSION:
                raise ValueError(f"not a version-{MANIFEST_VERSION} manifest")
            m = cls(
                key=key, topic=str(data["topic"]), partition=_integer(data["partition"]),
                next_offset=_integer(data["next_offset"]), epoch=_integer(data["epoch"]),
                writer=str(data["writer"]), created=float(data["created"]),
                length=_integer(data["length"]), sha256=str(data["sha256"]),
                chunks=tuple(ChunkRef(str(c["key"]), _integer(c["length"]), str(c["sha256"]))
                             for c in data["chunks"]),
                offset=offset,
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a manifest: {type(exc).__name__}: {exc}") from None
        if key != manifest_key(m.topic, m.partition, m.writer):
            raise ValueError(f"its content names {m.topic}[{m.partition}] by writer {m.writer}")
        if sum(c.length for c in m.chunks) != m.length:
            raise ValueError(f"its chunks add up to {sum(c.length for c in m.chunks)} bytes, not {m.length}")
        return m


def _integer(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"{value!r} is not an integer")
    return value


def prefix(topic: str, partition: int) -> str:
    """What every key of ``topic[partition]``'s records begins with.

    >>> prefix("examples", 3)
    'examples:3:'
    """
    return f"{topic}:{partition}:"


def chunk_key(topic: str, partition: int, save: str, index: int) -> str:
    """The key of a save's ``index``-th chunk.

    >>> chunk_key("examples", 3, "5f0c", 0)
    'examples:3:chunk:5f0c:0'
    """
    return f"{prefix(topic, partition)}{CHUNK}:{save}:{index}"


def manifest_key(topic: str, partition: int, writer: str) -> str:
    """The key of a writer's manifests.

    >>> manifest_key("examples", 3, "9a1b-2")
    'examples:3:manifest:9a1b-2'
    """
    return f"{prefix(topic, partition)}{MANIFEST}:{writer}"


def parse_key(key: str | None) -> tuple[str, int, str] | None:
    """(topic, partition, kind) of a state record's key; None for any other key.

    >>> parse_key("examples:3:chunk:5f0c:0"), parse_key("stray"), parse_key(None)
    (('examples', 3, 'chunk'), None, None)
    """
    parts = (key or "").split(":", 3)
    if len(parts) != 4 or not parts[1].isdigit() or parts[2] not in (CHUNK, MANIFEST):
        return None
    return parts[0], int(parts[1]), parts[2]


def state_partition(partition: int, partitions: int) -> int:
    """The state-topic partition of input partition ``partition``: ``partition % partitions``.

    >>> state_partition(5, 4), state_partition(2, 4)
    (1, 2)
    """
    return partition % partitions


def encode(state: StoredState, epoch: int, *, writer: str, chunk_bytes: int, partitions: int,
           save: str | None = None) -> list[StateRecord]:
    """The records that store ``state`` (one partition's): its chunks, then its manifest, last.

    They are written in that order, the manifest only once the chunks are acknowledged, or all
    together in one Kafka transaction. ``writer`` names the manifest's key (one per store and
    claim), ``save`` the chunks' (random when not given). Raises :class:`CheckpointError` when the
    manifest itself would be larger than ``chunk_bytes`` (too many chunks: raise
    ``SP_CHECKPOINT__CHUNK_BYTES``).
    """
    topic, partition, next_offset = partition_of(state)
    return chunked(topic, partition, serialize(state), next_offset=next_offset, epoch=epoch, writer=writer,
                   created=state.created, chunk_bytes=chunk_bytes,
                   log_partition=state_partition(partition, partitions), save=save, what="state")


def chunked(topic: str, partition: int, blob: bytes, *, next_offset: int, epoch: int, writer: str,
            created: float, chunk_bytes: int, log_partition: int, save: str | None = None,
            what: str = "state") -> list[StateRecord]:
    """``blob``, one partition's ``what`` at input ``next_offset``, as records of partition
    ``log_partition`` of a compacted topic: its chunks of at most ``chunk_bytes``, then their
    manifest (see the module's docstring; the model topic's records are written the same way)."""
    save = save or uuid.uuid4().hex
    records, refs = [], []
    for i, start in enumerate(range(0, len(blob), chunk_bytes)):
        piece = blob[start:start + chunk_bytes]
        key = chunk_key(topic, partition, save, i)
        records.append(StateRecord(log_partition, key, piece))
        refs.append(ChunkRef(key, len(piece), hashlib.sha256(piece).hexdigest()))
    manifest = Manifest(
        key=manifest_key(topic, partition, writer), topic=topic, partition=partition,
        next_offset=next_offset, epoch=epoch, writer=writer, created=created,
        length=len(blob), sha256=hashlib.sha256(blob).hexdigest(), chunks=tuple(refs),
    )
    value = manifest.value()
    if len(value) > chunk_bytes:
        raise CheckpointError(
            f"the {what} of {topic}[{partition}] ({len(blob)} bytes) needs {len(refs)} chunks of"
            f" SP_CHECKPOINT__CHUNK_BYTES={chunk_bytes}, and their manifest ({len(value)} bytes)"
            " would not fit in one: raise SP_CHECKPOINT__CHUNK_BYTES"
        )
    records.append(StateRecord(log_partition, manifest.key, value))
    return records


@dataclass
class PartitionIndex:
    """One input partition's records in the state topic, as compaction would leave them: the
    newest manifest of each key and the newest chunk of each key (tombstoned ones gone)."""

    manifests: dict[str, Manifest] = field(default_factory=dict)
    chunks: dict[str, tuple[int, int, str]] = field(default_factory=dict)
    """key -> (offset, length, sha256)"""

    def add(self, record: LoggedRecord, kind: str) -> None:
        key = record.key or ""
        if kind == CHUNK:
            if record.value is None:
                self.chunks.pop(key, None)
            else:
                digest = hashlib.sha256(record.value).hexdigest()
                self.chunks[key] = (record.offset, len(record.value), digest)
            return
        self.manifests.pop(key, None)  # replaced, whatever replaces it
        if record.value is not None:
            try:
                self.manifests[key] = Manifest.read(key, record.offset, record.value)
            except ValueError as exc:
                log.warning("skipping state record %s at offset %d: %s", key, record.offset, exc)

    def complete(self, manifest: Manifest) -> bool:
        """Whether every chunk ``manifest`` lists is there with its length and sha256."""
        return all(self.chunks.get(c.key, (0, -1, ""))[1:] == (c.length, c.sha256) for c in manifest.chunks)

    def candidates(self) -> list[Manifest]:
        """The complete manifests, best first: greatest ``next_offset``, then latest in the log."""
        found = [m for m in self.manifests.values() if self.complete(m)]
        return sorted(found, key=lambda m: (m.next_offset, m.offset), reverse=True)

    def epoch(self) -> int:
        """The highest epoch in the manifests (0 without any)."""
        return max((m.epoch for m in self.manifests.values()), default=0)

    def keys(self) -> set[str]:
        """Every key still holding a value."""
        return set(self.manifests) | set(self.chunks)


def index(state_log: StateLog, partition: int, only: tuple[str, int] | None = None
          ) -> dict[tuple[str, int], PartitionIndex]:
    """Each input partition's :class:`PartitionIndex` in the state topic's ``partition`` (only
    ``only``'s when given), read from its beginning to its end."""
    found: dict[tuple[str, int], PartitionIndex] = {}
    for record in state_log.scan(partition):
        parsed = parse_key(record.key)
        if parsed is None:
            continue
        topic, p, kind = parsed
        if only is not None and (topic, p) != only:
            continue
        found.setdefault((topic, p), PartitionIndex()).add(record, kind)
    return found


class KafkaStore:
    """Partition states in a compacted topic, through ``state_log`` (see the module's docstring).

    ``instance`` names this store in its writers' names (random when not given).
    """

    def __init__(self, state_log: StateLog, *, chunk_bytes: int, instance: str | None = None) -> None:
        self.log = state_log
        self.chunk_bytes = chunk_bytes
        self.instance = instance or uuid.uuid4().hex[:16]
        self._indexes: dict[tuple[str, int], PartitionIndex] = {}  # read by claim, for load
        self._loaded: dict[tuple[str, int], Manifest] = {}
        self._live: dict[tuple[str, int], set[str]] = {}  # keys of the last state made durable
        self._garbage: dict[tuple[str, int], set[str]] = {}  # to tombstone at the next durable()
        self._partitions: int | None = None

    def partitions(self) -> int:
        """The state topic's partition count (asked once)."""
        if self._partitions is None:
            self._partitions = self.log.partitions()
        return self._partitions

    def _index(self, topic: str, partition: int) -> PartitionIndex:
        sp = state_partition(partition, self.partitions())
        return index(self.log, sp, (topic, partition)).get((topic, partition), PartitionIndex())

    def open(self) -> None:
        """Nothing more to do: the state topic was made or found with the log."""

    def preflight(self, config: dict[str, Any]) -> None:
        """Nothing: each partition's state is read, and checked, at its assignment."""

    def claim(self, topic: str, partition: int) -> int:
        """1 + the highest epoch in ``topic[partition]``'s manifests; the log read here serves
        the :meth:`load` that follows."""
        found = self._indexes[(topic, partition)] = self._index(topic, partition)
        return found.epoch() + 1

    def stored(self) -> list[tuple[str, int]]:
        """The input partitions with at least one manifest in the state topic, sorted (each
        state-topic partition read once; the :meth:`load` of each uses what was read)."""
        for sp in range(self.partitions()):
            for key, found in index(self.log, sp).items():
                if found.manifests:
                    self._indexes[key] = found
        return sorted(k for k, found in self._indexes.items() if found.manifests)

    def load(self, topic: str, partition: int) -> StoredState | None:
        """The partition's state furthest on (module docstring), or None when it has none.

        Raises :class:`CheckpointError` when it has manifests and none can be restored, rather
        than start the partition from zero weights.
        """
        key = (topic, partition)
        for _ in range(LOAD_ATTEMPTS):
            found = self._indexes.pop(key, None) or self._index(topic, partition)
            self._garbage[key] = found.keys()  # the previous owners': replaced by the next save
            self._live.pop(key, None)
            if not found.manifests:
                return None
            state, gone = self._restore(found)
            if state is not None:
                return state
            if not gone:
                break
        raise CheckpointError(
            f"none of the {len(found.manifests)} states of {topic}[{partition}] in topic {self.log.name}"
            " can be restored (see the warnings above); refusing to start the partition from zero"
            " weights: delete its records to start it afresh"
        )

    def _restore(self, found: PartitionIndex) -> tuple[StoredState | None, bool]:
        """The best candidate that reads back whole, and whether one's chunks went meanwhile."""
        for m in found.candidates():
            blob = self._read(m, found)
            if blob is None:
                return None, True
            try:
                state = parse(blob, seq=m.offset)
                if partition_of(state) != (m.topic, m.partition, m.next_offset):
                    raise CheckpointError(f"it holds {state.offsets}, its manifest names"
                                          f" {m.topic}[{m.partition}] at {m.next_offset}")
            except (CheckpointError, ValueError) as exc:
                log.warning("skipping the state of %s[%d] at offset %d of %s: %s",
                            m.topic, m.partition, m.offset, self.log.name, exc)
                continue
            self._loaded[(m.topic, m.partition)] = m
            return state, False
        return None, False

    def _read(self, m: Manifest, found: PartitionIndex) -> bytes | None:
        """The state ``m`` lists, its chunks read back and verified; None when one is gone."""
        offsets = [found.chunks[c.key][0] for c in m.chunks]
        wanted = {c.key for c in m.chunks}
        values: dict[str, bytes] = {}
        sp = state_partition(m.partition, self.partitions())
        for record in self.log.scan(sp, min(offsets, default=0), max(offsets, default=-1) + 1):
            if record.key in wanted:
                if record.value is None:
                    values.pop(record.key, None)
                else:
                    values[record.key] = record.value
        pieces = [values.get(c.key) for c in m.chunks]
        if any(p is None or hashlib.sha256(p).hexdigest() != c.sha256 for p, c in zip(pieces, m.chunks,
                                                                                     strict=True)):
            log.info("the chunks of the state of %s[%d] at offset %d went while it was read: reading again",
                     m.topic, m.partition, m.offset)
            return None
        return b"".join(p for p in pieces if p is not None)

    def loaded(self, topic: str, partition: int) -> Manifest | None:
        """The manifest of the state :meth:`load` answered last for the partition."""
        return self._loaded.get((topic, partition))

    def writer(self, epoch: int) -> str:
        """This store's writer name for a claim of ``epoch``."""
        return f"{self.instance}-{epoch}"

    def encode(self, state: StoredState, epoch: int) -> list[StateRecord]:
        """The records that store ``state`` (chunks, then the manifest: :func:`encode`). Once
        they are durable, call :meth:`durable` with them."""
        return encode(state, epoch, writer=self.writer(epoch), chunk_bytes=self.chunk_bytes,
                      partitions=self.partitions())

    def durable(self, records: Sequence[StateRecord]) -> None:
        """Tell the store that ``records`` (one :meth:`encode`'s) are durable: tombstones go to
        the keys of the states they replace (what :meth:`load` read, the previous save's chunks).
        A failure to write them is logged and they are written with the next save's."""
        manifest = parse_key(records[-1].key)
        if manifest is None:
            raise ValueError("the last record is not a manifest")
        key = manifest[:2]
        written = {r.key for r in records}
        doomed = (self._garbage.pop(key, set()) | self._live.get(key, set())) - written
        self._live[key] = written
        if not doomed:
            return
        sp = records[-1].partition
        try:
            self.log.append([StateRecord(sp, k, None) for k in sorted(doomed)])
        except StreamPerceptronError as exc:  # housekeeping: the state itself is durable
            log.warning("cannot write %d tombstones for %s[%d] to %s (the next save retries): %s",
                        len(doomed), key[0], key[1], self.log.name, exc)
            self._garbage[key] = doomed

    def save(self, state: StoredState, epoch: int) -> str:
        """Append the chunks, then (once they are acknowledged) the manifest, then tombstones.

        Raises what the log raises when a record is not acknowledged (the previous state stays
        the one :meth:`load` answers), and :class:`CheckpointError` from :meth:`encode`.
        """
        records = self.encode(state, epoch)
        topic, partition, _ = partition_of(state)
        try:
            self.log.append(records[:-1])
            self.log.append(records[-1:])
        except BaseException:
            # whichever chunks landed are orphans: tombstoned after the next durable save
            self._garbage.setdefault((topic, partition), set()).update(r.key for r in records[:-1])
            raise
        self.durable(records)
        size = sum(len(r.value or b"") for r in records[:-1])
        return (f"{self.log.name}[{records[-1].partition}] ({len(records) - 1} chunks,"
                f" {size} bytes, next offset {partition_of(state)[2]})")

    def close(self) -> None:
        self.log.close()
