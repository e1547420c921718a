"""The Kafka store's state layer against a state log in memory (its own port, not a Kafka client):
chunking, the manifest last, which state load answers, tombstones, claims."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import orjson
import pytest

from stream_perceptron.errors import CheckpointError, KafkaEdgeError
from stream_perceptron.state.kafka_store import (
    KafkaStore,
    Manifest,
    StateRecord,
    encode,
    parse_key,
)
from stream_perceptron.state.stored import serialize
from tests.partition_states import partition_state


@dataclass(frozen=True)
class Logged:
    offset: int
    key: str | None
    value: bytes | None


class MemoryLog:
    """A state topic in memory: ``partitions`` logs of records, offsets from 0. ``fail_after``
    appends that many records, then refuses; :meth:`compact` does what the log cleaner does."""

    name = "state"

    def __init__(self, partitions: int = 2) -> None:
        self.logs: list[list[Logged]] = [[] for _ in range(partitions)]
        self.next: list[int] = [0] * partitions
        self.fail_after: int | None = None
        self.appended = 0
        self.before_scan: Callable[[int, int, int | None], None] | None = None
        self.closed = False

    def partitions(self) -> int:
        return len(self.logs)

    def append(self, records: Sequence[StateRecord]) -> None:
        for r in records:
            if self.fail_after is not None and self.appended >= self.fail_after:
                raise KafkaEdgeError("cannot write to the state topic: the broker went away")
            self.logs[r.partition].append(Logged(self.next[r.partition], r.key, r.value))
            self.next[r.partition] += 1
            self.appended += 1

    def scan(self, partition: int, start: int = 0, stop: int | None = None) -> Iterator[Logged]:
        if self.before_scan is not None:
            self.before_scan(partition, start, stop)
        end = self.next[partition] if stop is None else stop
        for r in list(self.logs[partition]):
            if start <= r.offset < end:
                yield r

    def compact(self) -> None:
        """Keep the newest record of each key, tombstones dropped (past delete.retention.ms)."""
        for p, records in enumerate(self.logs):
            newest = {r.key: r.offset for r in records}
            self.logs[p] = [r for r in records if newest[r.key] == r.offset and r.value is not None]

    def close(self) -> None:
        self.closed = True

    def keys(self, partition: int) -> list[str | None]:
        return [r.key for r in self.logs[partition]]


CHUNK = 4096


def _store(log: MemoryLog, chunk_bytes: int = CHUNK, instance: str | None = None) -> KafkaStore:
    return KafkaStore(log, chunk_bytes=chunk_bytes, instance=instance)


def _stored(log: MemoryLog, topic: str, partition: int, chunk_bytes: int = CHUNK):
    """What a store that just started answers for the partition."""
    store = _store(log, chunk_bytes)
    store.claim(topic, partition)
    return store.load(topic, partition)


def _only_the_newest_state_left(log: MemoryLog, partition: int) -> bool:
    """Whether the partition holds the newest manifest's records and nothing else."""
    last = log.logs[partition][-1]
    chunks = {c.key for c in Manifest.read(last.key, last.offset, last.value).chunks}
    return set(log.keys(partition)) == chunks | {last.key} and len(log.logs[partition]) == len(chunks) + 1


def _next(state) -> int:
    return next(o for ps in state.offsets.values() for o in ps.values())


# ------------------------------------------------------------------------------ chunks, manifest


def test_a_state_of_many_chunks_round_trips_byte_for_byte():
    log = MemoryLog(partitions=2)
    state = partition_state("t", 3, 500, names=1000)
    store = _store(log)
    epoch = store.claim("t", 3)
    assert store.load("t", 3) is None
    where = store.save(state, epoch)
    records = log.logs[1]  # 3 % 2
    assert len(records) > 10 and not log.logs[0]
    assert all(len(r.value) <= CHUNK for r in records)
    assert [parse_key(r.key)[2] for r in records] == ["chunk"] * (len(records) - 1) + ["manifest"]
    assert where.startswith(f"state[1] ({len(records) - 1} chunks")
    loaded = _stored(log, "t", 3)
    assert serialize(loaded) == serialize(state)
    assert loaded.seq == records[-1].offset and loaded.path is None


def test_encode_gives_the_chunks_then_the_manifest_that_lists_them_by_key():
    state = partition_state("t", 5, 42, names=300)
    blob = serialize(state)
    records = encode(state, 7, writer="w-7", chunk_bytes=CHUNK, partitions=4, save="s1")
    *chunks, last = records
    assert {r.partition for r in records} == {1}
    assert [r.key for r in chunks] == [f"t:5:chunk:s1:{i}" for i in range(len(chunks))]
    assert b"".join(r.value for r in chunks) == blob
    manifest = Manifest.read(last.key, 0, last.value)
    assert last.key == "t:5:manifest:w-7"
    assert (manifest.topic, manifest.partition, manifest.next_offset, manifest.epoch, manifest.writer) == (
        "t", 5, 42, 7, "w-7")
    assert manifest.length == len(blob) and manifest.sha256 == hashlib.sha256(blob).hexdigest()
    assert [(c.key, c.length, c.sha256) for c in manifest.chunks] == [
        (r.key, len(r.value), hashlib.sha256(r.value).hexdigest()) for r in chunks]
    again = encode(state, 7, writer="w-7", chunk_bytes=CHUNK, partitions=4)
    assert not {r.key for r in again[:-1]} & {r.key for r in chunks}  # chunk keys: one save's own
    assert again[-1].key == last.key


def test_a_manifest_too_large_for_a_chunk_is_refused_naming_the_setting():
    state = partition_state("t", 0, 1, names=20_000)  # ~800 kB in 4 kB chunks: a ~30 kB manifest
    with pytest.raises(CheckpointError, match="raise SP_CHECKPOINT__CHUNK_BYTES"):
        encode(state, 1, writer="w", chunk_bytes=CHUNK, partitions=1)


# ------------------------------------------------------------------------- crashes and selection


def test_a_crash_between_the_chunks_and_the_manifest_leaves_the_previous_state():
    log = MemoryLog()
    store = _store(log)
    epoch = store.claim("t", 0)
    store.load("t", 0)
    first = partition_state("t", 0, 100, names=300)
    store.save(first, epoch)
    log.fail_after = log.appended + 3  # three chunks of the next state land, then the crash
    with pytest.raises(KafkaEdgeError):
        store.save(partition_state("t", 0, 200, names=300, seed=1), epoch)
    assert parse_key(log.logs[0][-1].key)[2] == "chunk"
    assert serialize(_stored(log, "t", 0)) == serialize(first)
    # the worker retries: the state lands, and the crashed save's chunks are tombstoned
    log.fail_after = None
    orphans = {r.key for r in log.logs[0][-3:]}
    third = partition_state("t", 0, 300, names=300, seed=2)
    store.save(third, epoch)
    log.compact()
    assert not orphans & set(log.keys(0))
    assert serialize(_stored(log, "t", 0)) == serialize(third)


def test_the_state_furthest_on_wins_whoever_wrote_it_last():
    log = MemoryLog()
    owner, zombie = _store(log, instance="owner"), _store(log, instance="zombie")
    old_epoch = zombie.claim("t", 0)
    zombie.load("t", 0)
    zombie.save(partition_state("t", 0, 100), old_epoch)
    epoch = owner.claim("t", 0)
    assert epoch == old_epoch + 1
    assert _next(owner.load("t", 0)) == 100
    owned = partition_state("t", 0, 300, seed=1)
    owner.save(owned, epoch)
    zombie.save(partition_state("t", 0, 150, seed=2), old_epoch)  # stalled, then resumed: later
    assert serialize(_stored(log, "t", 0)) == serialize(owned)
    log.compact()
    assert serialize(_stored(log, "t", 0)) == serialize(owned)


def test_equal_next_offsets_go_to_the_one_latest_in_the_log():
    log = MemoryLog()
    a, b = _store(log, instance="a"), _store(log, instance="b")
    a.save(partition_state("t", 0, 100, seed=1), 1)
    later = partition_state("t", 0, 100, seed=2)
    b.save(later, 1)
    assert serialize(_stored(log, "t", 0)) == serialize(later)


def test_a_state_whose_chunk_is_damaged_or_gone_is_passed_over():
    log = MemoryLog(partitions=1)
    store = _store(log, instance="w")
    first = partition_state("t", 0, 100, names=300)
    store.save(first, 1)
    records = encode(partition_state("t", 0, 200, names=300, seed=1), 1, writer="x", chunk_bytes=CHUNK,
                     partitions=1)
    damaged = [StateRecord(r.partition, r.key, r.value[:-1] + b"!") if i == 1 else r
               for i, r in enumerate(records)]
    log.append(damaged)
    log.append(encode(partition_state("t", 0, 300, names=300, seed=2), 1, writer="y", chunk_bytes=CHUNK,
                      partitions=1)[-1:])  # a manifest whose chunks never came
    assert serialize(_stored(log, "t", 0)) == serialize(first)


def test_a_partition_whose_states_are_all_unreadable_refuses_to_start_from_zero(caplog):
    log = MemoryLog(partitions=1)
    records = encode(partition_state("t", 0, 100), 1, writer="w", chunk_bytes=CHUNK, partitions=1)
    # a complete manifest over chunks that are not a checkpoint (a writer of something else)
    junk = b"not a checkpoint"
    meta = orjson.loads(records[-1].value)
    digest = hashlib.sha256(junk).hexdigest()
    meta.update(length=len(junk), sha256=digest,
                chunks=[{"key": records[0].key, "length": len(junk), "sha256": digest}])
    log.append([StateRecord(0, records[0].key, junk), StateRecord(0, records[-1].key, orjson.dumps(meta))])
    with (caplog.at_level(logging.WARNING),
          pytest.raises(CheckpointError, match=r"none of the 1 states of t\[0\]")):
        _stored(log, "t", 0)
    assert "skipping the state of t[0] at offset 1 of state: header is not JSON" in caplog.text


def test_records_of_other_partitions_and_stray_keys_are_kept_apart():
    log = MemoryLog(partitions=2)
    states = {("t", 0): partition_state("t", 0, 10, seed=0), ("t", 2): partition_state("t", 2, 20, seed=1),
              ("t2", 0): partition_state("t2", 0, 30, seed=2)}
    for i, state in enumerate(states.values()):
        _store(log, instance=f"w{i}").save(state, 1)
    log.append([StateRecord(0, "stray", b"x"), StateRecord(0, "t:0:manifest:bad", b"{not json")])
    for (topic, p), state in states.items():
        assert serialize(_stored(log, topic, p)) == serialize(state)
    assert _store(log).stored() == [("t", 0), ("t", 2), ("t2", 0)]


def test_chunks_that_go_between_the_two_reads_send_load_back_to_read_again():
    log = MemoryLog(partitions=1)
    _store(log, instance="old").save(partition_state("t", 0, 100, names=300), 1)
    reader = _store(log, instance="reader")
    reader.claim("t", 0)
    newer = partition_state("t", 0, 200, names=300, seed=1)

    def meanwhile(partition, start, stop):  # a new owner saves and its tombstones are compacted
        if stop is not None and log.before_scan is not None:
            log.before_scan = None
            owner = _store(log, instance="owner")
            owner.claim("t", 0)
            owner.load("t", 0)
            owner.save(newer, 2)
            log.compact()

    log.before_scan = meanwhile
    assert serialize(reader.load("t", 0)) == serialize(newer)


# --------------------------------------------------------------------------- tombstones, claims


def test_the_new_owners_first_save_tombstones_what_it_replaced():
    log = MemoryLog(partitions=1)
    before = _store(log, instance="before")
    before.save(partition_state("t", 0, 100, names=300), 1)
    log.append(encode(partition_state("t", 0, 150, names=300, seed=3), 1, writer="crashed", chunk_bytes=CHUNK,
                      partitions=1)[:2])  # a crashed save's two chunks
    log.append(encode(partition_state("t1", 0, 5), 1, writer="other", chunk_bytes=CHUNK, partitions=1))
    other_keys = [k for k in log.keys(0) if k.startswith("t1:")]
    owner = _store(log, instance="owner")
    owner.load("t", 0)
    state = partition_state("t", 0, 200, names=300, seed=1)
    owner.save(state, 2)
    log.compact()
    mine = [k for k in log.keys(0) if k.startswith("t:0:")]
    assert mine == [r.key for r in encode(state, 2, writer="owner-2", chunk_bytes=CHUNK, partitions=1,
                                          save=mine[0].split(":")[3])]
    assert [k for k in log.keys(0) if k.startswith("t1:")] == other_keys  # another partition's: kept
    again = partition_state("t", 0, 300, names=300, seed=2)
    owner.save(again, 2)  # its own previous chunks go; its manifest key is reused
    log.compact()
    assert len([k for k in log.keys(0) if k.startswith("t:0:")]) == len(mine)
    assert serialize(_stored(log, "t", 0)) == serialize(again)


def test_tombstones_that_cannot_be_written_are_written_with_the_next_save(caplog):
    log = MemoryLog(partitions=1)
    _store(log, instance="before").save(partition_state("t", 0, 100), 1)
    owner = _store(log, instance="owner")
    owner.load("t", 0)
    state = partition_state("t", 0, 200, seed=1)
    log.fail_after = log.appended + len(owner.encode(state, 2))  # the state lands, its tombstones do not
    owner.save(state, 2)
    assert "cannot write 2 tombstones for t[0] to state (the next save retries)" in caplog.text
    log.compact()
    assert any(k.startswith("t:0:manifest:before") for k in log.keys(0))
    log.fail_after = None
    state = partition_state("t", 0, 300, seed=2)
    owner.save(state, 2)
    log.compact()
    assert _only_the_newest_state_left(log, 0)
    assert serialize(_stored(log, "t", 0)) == serialize(state)


def test_a_claim_is_one_above_the_highest_epoch_stored():
    log = MemoryLog()
    store = _store(log)
    assert store.claim("t", 0) == 1
    store.save(partition_state("t", 0, 10), 4)
    assert _store(log).claim("t", 0) == 5
    assert _store(log).claim("t", 1) == 1
    loaded = _store(log)
    loaded.claim("t", 0)
    loaded.load("t", 0)
    assert (loaded.loaded("t", 0).epoch, loaded.loaded("t", 0).writer) == (4, f"{store.instance}-4")


def test_encode_and_durable_store_a_state_as_save_does():
    log = MemoryLog(partitions=1)
    _store(log, instance="before").save(partition_state("t", 0, 100), 1)
    owner = _store(log, instance="owner")
    owner.load("t", 0)
    state = partition_state("t", 0, 200, seed=1)
    records = owner.encode(state, 2)
    log.append(records)  # as one transaction would: all of them at once
    owner.durable(records)
    log.compact()
    assert _only_the_newest_state_left(log, 0)
    assert serialize(_stored(log, "t", 0)) == serialize(state)


def test_close_closes_the_log():
    log = MemoryLog()
    _store(log).close()
    assert log.closed
