"""Reading a topic without a consumer group (kafka-python): raw records, from an offset up to the
topic's end as it stands, or followed as they come.

The one reader of whole topics: ``plot``, ``demo`` and the tests read an output topic to its end
(:mod:`stream_perceptron.commands.read`), ``watch`` and ``dashboard`` follow the statistics topic
(:mod:`stream_perceptron.commands.follow`), the Kafka store scans its state topic
(:mod:`.state_log`), and ``mixed`` reads the model topic. It knows no model and no codec: keys and
values are bytes (:class:`Record`).

* :class:`TopicReader` assigns partitions by hand (no group, nothing committed, no topic created)
  from their beginning, from given offsets, or from their end (the first high-water mark a fetch
  gives); :meth:`~TopicReader.poll` returns what one fetch brought (following: ``[]`` while the
  topic does not exist, which is waited for), :meth:`~TopicReader.read_to_end` the records from
  where the reader is up to the end as the call finds it. Each call goes on from where the last
  one stopped.
* **Where a partition ends.** At its high-water mark as fetch responses give it, never at
  ``end_offsets``/``seek_to_end`` alone: some brokers (tansu) answer those with the base offset of
  the last batch + 1, short of the end. A read of committed records only (``committed``) cannot
  reach a high-water mark that an open transaction holds back; it asks the end of committed
  records (the last stable offset, on Apache Kafka) when it starts, reads at least to it, then on
  to the high-water mark while polls bring more, and stops at the first one (of
  :data:`SETTLE_S`) that brings nothing. ``stop`` gives exact ends instead.
* **Bounded waits.** A read to the end waits at most ``timeout_s`` in all; at most ``stall_s``
  with nothing coming while a partition is known to hold more; and at most ``idle_s`` with
  nothing coming for partitions whose end no fetch has told yet. It ends short of the end with
  :class:`ReadShort` (which says why, where and how many records came), and never counts a wait
  before the first fetch answered.

Clients get the security settings as every other client does
(:func:`~stream_perceptron.kafka.admin.consumer_config`); nothing logged here holds a secret.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal, NamedTuple

from kafka import KafkaConsumer, TopicPartition

from stream_perceptron.errors import KafkaEdgeError
from stream_perceptron.kafka.admin import consumer_config, reaching
from stream_perceptron.settings import KafkaSettings

log = logging.getLogger(__name__)

Start = Literal["beginning", "end"] | Mapping[int, int]
"""Where an assigned partition is read from: its first record, its end (the first high-water mark
a fetch gives: only what is appended after), or an offset per partition (0: its first record)."""

POLL_S = 0.2
"""How long one poll of a read to the end waits for records."""
SETTLE_S = 1.0
"""How long a committed read past the asked end waits for records that end did not count."""
MAX_RECORDS = 5_000
"""Records one poll of a read to the end returns at most."""


class Record(NamedTuple):
    """A record as read: its partition, offset, key and value (bytes; None when absent) and its
    timestamp (ms since the epoch as the record carries it, -1 when it carries none)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int = -1

    def key_text(self) -> str | None:
        """The key as text (bytes that are not UTF-8 replaced); None without one.

        >>> Record(0, 5, b"in:3", None).key_text(), Record(0, 6, None, b"{}").key_text()
        ('in:3', None)
        """
        return None if self.key is None else self.key.decode("utf-8", errors="replace")


class ReadShort(KafkaEdgeError):
    """A read to the end stopped before the end: ``why`` (``"timeout"``: its whole bound passed;
    ``"stalled"``: nothing came for ``stall_s`` though a partition holds more; ``"unknown"``:
    nothing came for ``idle_s`` from partitions whose end no fetch has told), the ``records``
    read, and ``short``: each partition short of its end, with its position and end (None where
    not known)."""

    def __init__(self, message: str, *, why: str, records: int,
                 short: Mapping[int, tuple[int | None, int | None]]) -> None:
        super().__init__(message)
        self.why = why
        self.records = records
        self.short = dict(short)


class TopicReader:
    """The partitions of ``topic``, read without a consumer group (see the module's docstring).

    ``start`` is where the partitions are read from when the reader first assigns them (every
    partition, once the topic exists); :meth:`assign` assigns others. ``committed``: read only
    committed records (``isolation_level=read_committed``). ``connect_timeout_s`` bounds the
    client's first connection (by default the request timeout, which a port that accepts and does
    not answer as Kafka takes in full). ``max_record_bytes``: the largest record to take in one
    fetch, when larger than ``kafka.fetch_max_bytes``. ``fetch_max_wait_ms``: how long the broker
    may hold a fetch that has no records (the client's default when None).

    Raises :class:`~stream_perceptron.errors.KafkaEdgeError` (naming the cluster) when the client
    cannot be built. One thread at a time; :meth:`close` (or ``with``) closes the client.
    """

    def __init__(
        self, kafka: KafkaSettings, topic: str, *, start: Start = "beginning", committed: bool = False,
        connect_timeout_s: float | None = None, max_record_bytes: int | None = None,
        fetch_max_wait_ms: int | None = None,
    ) -> None:
        self.topic = topic
        self.committed = committed
        self._start: Start = start
        extra: dict[str, Any] = {}
        if connect_timeout_s is not None:
            extra["bootstrap_timeout_ms"] = int(connect_timeout_s * 1000)
        if max_record_bytes is not None:
            extra["max_partition_fetch_bytes"] = max(kafka.fetch_max_bytes, max_record_bytes)
        if fetch_max_wait_ms is not None:
            extra["fetch_max_wait_ms"] = fetch_max_wait_ms
        with reaching(kafka):
            self._consumer: Any = KafkaConsumer(
                **consumer_config(kafka),
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                allow_auto_create_topics=False,
                isolation_level="read_committed" if committed else "read_uncommitted",
                **extra,
            )
        self._tps: list[TopicPartition] = []
        # Partitions read from their end whose first high-water mark is not known yet, and the
        # offset below which each partition's records are not returned.
        self._from_end: set[int] = set()
        self._floor: dict[int, int] = {}

    # ------------------------------------------------------------------ assignment

    def partitions(self) -> list[int]:
        """The topic's partitions, from the cluster's metadata; [] while it does not exist."""
        return sorted(self._consumer.partitions_for_topic(self.topic) or ())

    @property
    def assigned(self) -> list[int]:
        """The partitions assigned, in order."""
        return [tp.partition for tp in self._tps]

    def assign(self, start: Start | None = None, partitions: Iterable[int] | None = None) -> list[int]:
        """Read ``partitions`` (by default every one the topic has) from ``start`` (by default the
        reader's), instead of what was assigned; returns them, [] while the topic does not exist."""
        start = self._start if start is None else start
        parts = sorted(partitions) if partitions is not None else self.partitions()
        tps = [TopicPartition(self.topic, p) for p in parts]
        self._tps, self._from_end, self._floor = tps, set(), {}
        if not tps:
            return []
        self._consumer.assign(tps)
        if start == "beginning" or start == "end":
            self._consumer.seek_to_beginning(*tps)  # an end is only known from a fetch: fetch first
            if start == "end":
                self._from_end = set(parts)
        else:
            for tp in tps:
                offset = start.get(tp.partition, 0)
                if offset > 0:
                    self._consumer.seek(tp, offset)
                else:
                    self._consumer.seek_to_beginning(tp)
        log.debug("reading %s, partitions %s, from %s", self.topic, parts,
                  start if isinstance(start, str) else dict(start))
        return parts

    def unassign(self) -> None:
        """Assign nothing: nothing is fetched until the next :meth:`assign` (or the next read,
        which assigns every partition from the reader's start)."""
        self._consumer.unsubscribe()
        self._tps, self._from_end, self._floor = [], set(), {}

    def _ready(self) -> bool:
        """Whether partitions are assigned, assigning every partition from the reader's start
        when none is and the topic exists."""
        return bool(self._tps) or bool(self.assign())

    # ------------------------------------------------------------------ reading

    def poll(self, timeout_s: float, max_records: int = MAX_RECORDS) -> list[Record]:
        """The records one fetch brought, partition by partition in offset order; [] when none
        came within ``timeout_s``. While the topic does not exist this waits ``timeout_s`` (0.1 s
        at least) and returns []: the partitions are assigned once it appears."""
        if not self._ready():
            time.sleep(max(timeout_s, 0.1))
            return []
        return self._poll(timeout_s, max_records)

    def _poll(self, timeout_s: float, max_records: int) -> list[Record]:
        got = self._consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
        if self._from_end:
            self._past_start()
        out = []
        for tp in sorted(got):
            floor = self._floor.get(tp.partition, 0)
            out += [Record(tp.partition, r.offset, r.key, r.value, r.timestamp)
                    for r in got[tp] if r.offset >= floor]
        return out

    def _past_start(self) -> None:
        """Partitions read from their end: once a fetch tells the high-water mark, read from it."""
        for tp in self._tps:
            if tp.partition not in self._from_end:
                continue
            hw = self._consumer.highwater(tp)
            if hw is None:
                continue
            self._from_end.discard(tp.partition)
            self._floor[tp.partition] = hw
            if self._consumer.position(tp) < hw:
                self._consumer.seek(tp, hw)

    def read_to_end(
        self, *, timeout_s: float | None = None, stall_s: float | None = None, idle_s: float | None = None,
        stop: Mapping[int, int] | None = None, max_records: int = MAX_RECORDS,
    ) -> Iterator[Record]:
        """The records from where each assigned partition is up to its end as this call finds it
        (the module's docstring), as fetched: in offset order per partition, the partitions
        interleaved. Nothing is held, so a long topic is read in bounded memory. ``stop`` maps
        partitions to exact ends (their records from there on are not returned). Nothing is read
        while the topic does not exist.

        Ends with :class:`ReadShort` after ``timeout_s`` in all, after ``stall_s`` with nothing
        coming while a partition is known to hold more, or after ``idle_s`` with nothing coming
        for partitions whose end is not known. A None bound is no bound of that kind: give
        ``timeout_s``, or both of the others.
        """
        if not self._ready():
            return
        exact = dict(stop or {})
        asked = self._asked_ends(exact) if self.committed else {}
        clock = time.monotonic
        started = last = clock()
        settled: set[int] = set()
        count = 0
        # the end of records read: a high-water mark the client kept from before this call may
        # be old, so the first poll comes before any end is trusted (unless one is asked)
        polled = bool(exact or asked)
        while True:
            if polled:
                more, unknown, settling = self._short(exact, asked, settled)
                if not (more or unknown or settling):
                    return
                now = clock()
                if not self._any_end_known(exact, asked):
                    last = now  # waits count from the first fetch answered
                self._check_bounds(more, unknown, settling, count, now - started, now - last,
                                   timeout_s, stall_s, idle_s)
            else:
                settling = []
            batch = self._poll(SETTLE_S if settling else POLL_S, max_records)
            polled = True
            if batch:
                last = clock()
            settled.update(p for p in settling if not any(r.partition == p for r in batch))
            for record in batch:
                if record.offset >= exact.get(record.partition, record.offset + 1):
                    continue
                count += 1
                yield record

    def _check_bounds(
        self, more: Mapping[int, tuple[int, int]], unknown: list[int], settling: list[int], count: int,
        elapsed: float, waited: float, timeout_s: float | None, stall_s: float | None, idle_s: float | None,
    ) -> None:
        """Raise :class:`ReadShort` when a bound of :meth:`read_to_end` has passed."""
        short: dict[int, tuple[int | None, int | None]] = {**more, **{p: (None, None) for p in unknown}}
        if timeout_s is not None and elapsed >= timeout_s:
            raise ReadShort(f"read {count} records of {self.topic} in {timeout_s:g} s and stopped short"
                            " of its end", why="timeout", records=count, short=short)
        if more and stall_s is not None and waited > stall_s:
            where = "; ".join(f"partition {p} at offset {pos} (of {end})" for p, (pos, end) in more.items())
            raise ReadShort(f"reading {self.topic} made no progress for {stall_s:g} s: {where}",
                            why="stalled", records=count, short=short)
        if unknown and not (more or settling) and idle_s is not None and waited > idle_s:
            raise ReadShort(f"read {count} records of {self.topic}; partitions {unknown} sent nothing"
                            f" in {idle_s:g} s, their end unknown", why="unknown", records=count,
                            short=short)

    def _asked_ends(self, exact: Mapping[int, int]) -> dict[int, int]:
        """The end of committed records of each assigned partition not in ``exact``, as the
        broker answers when asked (the last stable offset; on some brokers short of it, see the
        module's docstring)."""
        tps = [tp for tp in self._tps if tp.partition not in exact]
        if not tps:
            return {}
        ends = self._consumer.end_offsets(tps)
        return {tp.partition: int(ends.get(tp) or 0) for tp in tps}

    def _any_end_known(self, exact: Mapping[int, int], asked: Mapping[int, int]) -> bool:
        return bool(exact or asked) or any(self._consumer.highwater(tp) is not None for tp in self._tps)

    def _short(self, exact: Mapping[int, int], asked: Mapping[int, int], settled: set[int],
               ) -> tuple[dict[int, tuple[int, int]], list[int], list[int]]:
        """The partitions short of their end: those known to hold more (with their position and
        end), those whose end no fetch has told, and those of a committed read past the asked
        end and short of the high-water mark (records an open transaction may hold back: a poll
        that brings none of theirs settles them). A position is asked only where an end is
        known: before a fetch has answered, asking it can block."""
        more: dict[int, tuple[int, int]] = {}
        unknown: list[int] = []
        settling: list[int] = []
        for tp in self._tps:
            p = tp.partition
            hw = self._consumer.highwater(tp)
            end = exact.get(p, asked.get(p))
            if end is None and hw is None:
                unknown.append(p)
                continue
            position = self._consumer.position(tp)
            if end is not None and position < end:
                more[p] = (position, end)
            elif p in exact or hw is None or position >= hw:
                continue  # at its exact end, or at its end
            elif p in asked:
                if p not in settled:
                    settling.append(p)
            else:
                more[p] = (position, hw)
        return more, unknown, settling

    def close(self) -> None:
        """Close the client (nothing is committed: there is no group)."""
        self._consumer.close()

    def __enter__(self) -> TopicReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["MAX_RECORDS", "POLL_S", "SETTLE_S", "ReadShort", "Record", "Start", "TopicReader"]
