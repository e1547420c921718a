"""The model topic's records (``SP_MIX__TOPIC``, one partition, compacted): each input partition's
mixing record, its published state and its adoption log (docs/records.md, "Model"), in chunks
with a manifest, fenced by the partition's claim.

A mixing record is written as the Kafka store writes a state (:func:`~.kafka_store.chunked`):
chunks ``<topic>:<p>:chunk:<save>:<i>`` of at most ``SP_CHECKPOINT__CHUNK_BYTES``, then the
manifest ``<topic>:<p>:manifest:<writer>``, where ``<writer>`` names the writing worker and its
claim of the partition. So a record of any size can be written, and compaction keeps each
writer's newest.

**Which record is a partition's newest**: of its complete records (a manifest whose chunks are
all there, each with its length and sha256), the one of the **highest epoch** (the claim under
which it was written), the latest in the topic among those. A worker that lost the partition and
writes on (a zombie) writes under an older epoch than the partition's owner, which writes a
record as soon as it claims the partition, under an epoch above every one the topic has shown
for the partition (:meth:`Mixer.opened <stream_perceptron.worker.mixer.Mixer.opened>`): from then
on every reader ignores the zombie's records, whenever they land. A record of the earlier
format (one record keyed ``<topic>:<p>``) counts as epoch -1.

This module knows records, not a Kafka client; the worker's reader hands it each record in order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from stream_perceptron.state.kafka_store import (
    CHUNK,
    MANIFEST,
    Manifest,
    StateRecord,
    chunked,
    parse_key,
)

LEGACY_EPOCH = -1
"""The epoch of a record of the earlier format."""


def encode(record: dict[str, Any], *, epoch: int, writer: str, chunk_bytes: int) -> list[StateRecord]:
    """The records that write ``record`` (a mixing record of ``record["topic"]`` and
    ``record["partition"]``; its ``"offset"`` the input offset it was made at) under the claim
    ``epoch``: chunks, then the manifest, last."""
    blob = orjson.dumps(record)
    return chunked(str(record["topic"]), int(record["partition"]), blob, next_offset=int(record["offset"]),
                   epoch=epoch, writer=writer, created=float(record.get("ts", 0.0)),
                   chunk_bytes=chunk_bytes, log_partition=0, what="mixing record")


@dataclass
class _Complete:
    """A complete mixing record of one partition, the claim it was written under, and where it
    came in the topic."""

    epoch: int
    position: int
    record: dict[str, Any]


class ModelTopicIndex:
    """The model topic as read so far, record by record in order (:meth:`add`): each input
    partition's newest complete mixing record (see the module's docstring), and the chunks and
    manifests still waiting for the rest of theirs.

    >>> index = ModelTopicIndex()
    >>> for r in encode({"topic": "in", "partition": 0, "offset": 5, "state": {}, "log": []},
    ...                 epoch=2, writer="w-2", chunk_bytes=1024):
    ...     index.add(r.key, r.value)
    >>> for r in encode({"topic": "in", "partition": 0, "offset": 9, "state": {}, "log": []},
    ...                 epoch=1, writer="zombie-1", chunk_bytes=1 << 20):
    ...     index.add(r.key, r.value)
    >>> index.newest("in")[0]["offset"]  # the zombie's later record is under an older claim
    5
    """

    def __init__(self, *, recent: int = 0) -> None:
        self._position = 0  # of the record being read, for a manifest's place
        # each partition's states of its last ``recent`` (claim, version)s read, tombstoned since
        # or not, the latest record of each (:meth:`at_most`; its "state" and "offset" only)
        self._recent_count = recent
        self._recent: dict[tuple[str, int], dict[tuple[int, int], _Complete]] = {}
        self._chunks: dict[str, bytes] = {}
        self._waiting: dict[str, Manifest] = {}  # manifests whose chunks are not all there yet
        # each partition's complete records, by manifest key (a legacy record by its own key): a
        # tombstone of the key removes it, as compaction would
        self._complete: dict[tuple[str, int], dict[str, _Complete]] = {}
        self._keys: dict[tuple[str, int], set[str]] = {}  # every key seen live, for tombstones
        self._writers: dict[str, tuple[int, str]] = {}  # key -> (epoch, writer), where known
        self._highest: dict[tuple[str, int], int] = {}  # each partition's highest epoch read

    def add(self, key: str | None, value: bytes | None) -> None:
        """The next record of the topic (a tombstone: ``value`` None); ValueError for a record
        that is none of the model topic's (it is skipped)."""
        self._position += 1
        parsed = parse_key(key)
        if key is None:
            raise ValueError("a record without a key")
        if parsed is None:
            self._legacy(key, value)
            return
        topic, partition, kind = parsed
        live = self._keys.setdefault((topic, partition), set())
        if value is None:
            live.discard(key)
            self._chunks.pop(key, None)
            self._waiting.pop(key, None)
            self._writers.pop(key, None)
            self._complete.get((topic, partition), {}).pop(key, None)
            return
        live.add(key)
        if kind == CHUNK:
            self._chunks[key] = value
        elif kind == MANIFEST:
            m = Manifest.read(key, self._position, value)  # ValueError: not a manifest
            self._waiting[key] = m
            self._highest[(topic, partition)] = max(m.epoch, self.epoch(topic, partition))
            for k in (key, *(c.key for c in m.chunks)):
                self._writers[k] = (m.epoch, m.writer)
        self._assemble()

    def _assemble(self) -> None:
        """Take every waiting manifest whose chunks are all there, with their lengths and sums."""
        for key, m in list(self._waiting.items()):
            pieces = [self._chunks.get(c.key) for c in m.chunks]
            if any(p is None for p in pieces):
                continue
            del self._waiting[key]
            blob = b"".join(p for p in pieces if p is not None)
            if len(blob) != m.length or hashlib.sha256(blob).hexdigest() != m.sha256:
                continue  # damaged: never one of the partition's records
            for c in m.chunks:
                self._chunks.pop(c.key, None)
            try:
                record = orjson.loads(blob)
            except orjson.JSONDecodeError:
                continue
            complete = _Complete(m.epoch, self._position, record)
            self._complete.setdefault((m.topic, m.partition), {})[key] = complete
            if self._recent_count:
                recent = self._recent.setdefault((m.topic, m.partition), {})
                recent[(m.epoch, _version(record))] = _Complete(m.epoch, self._position, {
                    "state": record.get("state"), "offset": record.get("offset")})
                for old in sorted(recent)[:-self._recent_count]:
                    del recent[old]

    def _legacy(self, key: str, value: bytes | None) -> None:
        """A record of the earlier format: one JSON record keyed ``<topic>:<p>``."""
        if value is None:
            for records in self._complete.values():
                records.pop(key, None)
            return
        try:
            record = orjson.loads(value)
            topic, partition = str(record["topic"]), int(record["partition"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a mixing record: {type(exc).__name__}: {exc}") from None
        self._keys.setdefault((topic, partition), set()).add(key)
        self._writers[key] = (LEGACY_EPOCH, "")
        self._highest.setdefault((topic, partition), LEGACY_EPOCH)
        self._complete.setdefault((topic, partition), {})[key] = _Complete(
            LEGACY_EPOCH, self._position, record)

    def _newest(self, records: dict[str, _Complete]) -> dict[str, Any] | None:
        """Of a partition's complete records, the newest: the highest epoch, then the latest."""
        if not records:
            return None
        return max(records.values(), key=lambda c: (c.epoch, c.position)).record

    def newest(self, topic: str) -> dict[int, dict[str, Any]]:
        """The newest mixing record of each partition of input ``topic`` read so far."""
        found = {p: self._newest(records) for (t, p), records in self._complete.items() if t == topic}
        return {p: r for p, r in found.items() if r is not None}

    def at_most(self, topic: str, version: int) -> dict[int, dict[str, Any]]:
        """Of each partition of input ``topic``, the newest mixing record (the highest claim, then
        the latest) whose state is of mix ``version`` or earlier, among its live records and the
        states of its last ``recent`` versions read (tombstoned since or not: those give only
        ``"state"`` and ``"offset"``); where there is none, its newest record. A mix at mixing
        point n of records ``at_most(topic, n)`` takes no state of a later point, so when every
        partition's state of version n was read, it is synchronous IPM's mix.

        >>> index = ModelTopicIndex(recent=2)
        >>> for version, offset in ((1, 5), (2, 9)):
        ...     for r in encode({"topic": "in", "partition": 0, "offset": offset,
        ...                      "state": {"epoch": version}, "log": []},
        ...                     epoch=1, writer="w-1", chunk_bytes=1024):
        ...         index.add(r.key, r.value)
        >>> index.at_most("in", 1)[0]["offset"], index.at_most("in", 2)[0]["offset"]
        (5, 9)
        >>> index.at_most("in", 0)[0]["offset"]  # none that early: the newest
        9
        """
        out: dict[int, dict[str, Any]] = {}
        for (t, p), records in self._complete.items():
            if t != topic:
                continue
            pool = [*records.values(), *self._recent.get((t, p), {}).values()]
            early = [c for c in pool if _version(c.record) <= version]
            found = max(early, key=lambda c: (c.epoch, c.position)).record if early else self._newest(records)
            if found is not None:
                out[p] = found
        return out

    def records(self) -> dict[tuple[str, int], dict[str, Any]]:
        """The newest mixing record of every input partition read so far."""
        found = {key: self._newest(records) for key, records in self._complete.items()}
        return {key: r for key, r in found.items() if r is not None}

    def epoch(self, topic: str, partition: int) -> int:
        """The highest claim epoch of the partition's records read so far, whether complete,
        superseded or tombstoned since; -1 (the earlier format's) when there are none."""
        return self._highest.get((topic, partition), LEGACY_EPOCH)

    def stale(self, topic: str, partition: int, epoch: int, writer: str, keep: Iterable[str] = ()
              ) -> set[str]:
        """What the partition's writer ``writer`` under the claim ``epoch`` tombstones once its
        record ``keep`` is acknowledged: its own earlier records, and those of earlier claims.
        Never a record of a later claim (a writer that lost the partition keeps its hands off the
        owner's), nor one whose claim is not known yet (it may be the owner's, half read)."""
        kept = set(keep)
        return {k for k in self._keys.get((topic, partition), set()) - kept
                if (known := self._writers.get(k)) is not None
                and (known[0] < epoch or known == (epoch, writer))}


def _version(record: dict[str, Any]) -> int:
    """The mix version of a mixing record's state (0 for a record that names none)."""
    try:
        return int(record["state"]["epoch"])
    except (KeyError, TypeError, ValueError):
        return 0


def written(records: Iterable[tuple[str | None, bytes | None]]) -> list[dict[str, Any]]:
    """Every mixing record the model topic's ``records`` (key, value; in order) hold, superseded
    or tombstoned since or not, oldest first: what an audit of the adoptions logged reads (a
    compacted topic keeps only the newest of each key, so this sees what compaction left)."""
    return [record for _, record in written_under_claims(records)]


def written_under_claims(records: Iterable[tuple[str | None, bytes | None]]
                         ) -> list[tuple[int, dict[str, Any]]]:
    """:func:`written` with the epoch of the claim each record was written under, from its
    manifest: what tells an owner's records from those of a worker that had lost the partition.

    >>> topic = [(r.key, r.value) for offset, epoch in ((4, 2), (7, 1)) for r in encode(
    ...     {"topic": "in", "partition": 0, "offset": offset, "state": {}, "log": []},
    ...     epoch=epoch, writer=f"w-{epoch}", chunk_bytes=1024)]
    >>> [(epoch, r["offset"]) for epoch, r in written_under_claims(topic)]
    [(2, 4), (1, 7)]
    """
    chunks: dict[str, bytes] = {}
    out = []
    for key, value in records:
        parsed = parse_key(key)
        if parsed is None or value is None:
            continue
        if parsed[2] == CHUNK:
            chunks[str(key)] = value
            continue
        try:
            m = Manifest.read(str(key), -1, value)
            blob = b"".join(chunks[c.key] for c in m.chunks)
            out.append((m.epoch, orjson.loads(blob)))
        except (ValueError, KeyError):  # not a manifest, or chunks gone: no record to read
            continue
    return out
