"""Predictions waiting for labels that arrive late: one bounded store per input partition (pure).

An *event* (an input record with ``id`` and ``x`` and no ``y``) is predicted like any unlabeled
record, and its features are kept here under its id, with the prediction and score it was given,
its offset and its Kafka timestamp (:class:`PendingEvent`). A later *label record* ``{"id", "y"}``
takes the entry back (:meth:`PendingLabels.take`), and the worker learns the kept features then,
with the perceptron's update, at that point of the stream.

The features are kept as the record gave them (a list of floats, or names → floats in the
record's order), not as column indices. Feature names are indexed for good and hashing is a fixed
function, so they make the same row at the label as at the prediction; and a kept event still
means the same features should the names be indexed anew.

Bounds, all measured on the stream, never on the wall clock, so a replay from a stored state
drops the same entries at the same records:

* **count**: at most ``max_entries``; one more drops the oldest (the lowest offset).
* **age**: with ``ttl_ms``, an entry whose timestamp is more than ``ttl_ms`` behind the stream
  time expires. The stream time is the largest record timestamp seen in the partition so far
  (as Kafka Streams' is): a record with an older timestamp, or none (−1), does not move it back.
* **distance**: with ``max_offsets``, an entry more than ``max_offsets`` offsets behind the
  current record expires.

Stream time and offsets only grow, so an entry past a bound stays past it: what the store holds
at a record is a function of the partition's records up to it, however they were batched.
Entries are dropped from the oldest on while the oldest is past a bound; when timestamps are out
of offset order an expired entry may wait behind a younger one, but a label for it is refused as
expired all the same. An id that comes again while pending replaces the older event, which
counts as expired. The ids recently finished (labeled or expired), at most
``max_entries`` of them and their ids only, are remembered so that a label for one is refused
saying why, rather than as unknown. Ids equal as JSON numbers (``7`` and ``7.0``) are one id;
a string is never equal to a number.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Id = str | int | float
Features = list[float] | dict[str, float]

#: why an id is no longer pending (the values of :meth:`PendingLabels.gone`)
JOINED, EXPIRED = "joined", "expired"


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """One event waiting for its label: its features as the record gave them (floats), the served
    prediction (−1/+1; a K-class worker's: the class name) and score it was given, its offset and
    Kafka timestamp (ms; −1: none)."""

    features: Features
    prediction: int | str | None
    score: float
    offset: int
    timestamp_ms: int

    def as_list(self) -> list[Any]:
        return [self.features, self.prediction, self.score, self.offset, self.timestamp_ms]

    @classmethod
    def of(cls, row: Sequence[Any]) -> PendingEvent:
        features, prediction, score, offset, ts = row
        if isinstance(features, dict):
            kept: Features = {str(k): float(v) for k, v in features.items()}
        else:
            kept = [float(v) for v in features]
        # a binary sign, or a K-class name kept as its JSON type (None: no class known yet)
        named = prediction is None or isinstance(prediction, str)
        return cls(kept, prediction if named else int(prediction),
                   math.nan if score is None else float(score), int(offset), int(ts))


def kept_features(x: Any) -> Features:
    """A record's features as the store keeps them: floats (the float64 the model sees), names
    in the record's order; ``x`` a list, a dict or a numpy row.

    >>> kept_features({"b": 2, "a": 1}), kept_features([1, 2.5])
    ({'b': 2.0, 'a': 1.0}, [1.0, 2.5])
    """
    if isinstance(x, Mapping):
        return {k: float(v) for k, v in x.items()}
    if hasattr(x, "tolist"):
        return [float(v) for v in x.tolist()]
    return [float(v) for v in x]


class PendingLabels:
    """The events of one partition waiting for their labels, and what became of the others.

    Parameters
    ----------
    max_entries
        The most events kept (``SP_LABELS__PENDING_MAX``); 0 keeps none.
    ttl_ms
        The most an event's timestamp may trail the stream time (``SP_LABELS__PENDING_TTL_S``);
        None: no bound by age.
    max_offsets
        The most offsets an event may trail the current record (``SP_LABELS__PENDING_MAX_OFFSETS``);
        None: no bound by distance.
    delay_window
        How many of the last joins' delays :attr:`delay_mean` averages over.

    Examples
    --------
    >>> p = PendingLabels(max_entries=2, ttl_ms=1000)
    >>> p.advance(0, 0), p.add("a", PendingEvent([1.0], 1, 0.5, 0, 0))
    (0, 0)
    >>> p.advance(1, 500), p.add("b", PendingEvent([2.0], -1, -0.5, 1, 500))
    (0, 0)
    >>> p.advance(2, 1200)   # stream time 1200: "a" (at 0) is 1200 ms behind, past 1000
    1
    >>> p.take("a", 2, 1200), p.take("b", 3, 1300)[0].offset, len(p)
    ((None, 'expired'), 1, 0)
    >>> p.joins, p.expiries, p.delay_mean
    (1, 1, 0.8)
    """

    def __init__(self, max_entries: int, ttl_ms: int | None = None, max_offsets: int | None = None,
                 delay_window: int = 1000) -> None:
        if max_entries < 0 or (ttl_ms is not None and ttl_ms < 0) or (
                max_offsets is not None and max_offsets < 0) or delay_window < 1:
            raise ValueError("negative bounds, or a delay window under 1")
        self.max_entries = max_entries
        self.ttl_ms = ttl_ms
        self.max_offsets = max_offsets
        self._entries: OrderedDict[Id, PendingEvent] = OrderedDict()
        self._gone: OrderedDict[Id, tuple[str, int]] = OrderedDict()
        self._delays: deque[float] = deque(maxlen=delay_window)
        self.stream_ms: int | None = None
        """The largest record timestamp seen (None before one)."""
        self.offset: int | None = None
        """The offset of the record the store was last advanced to."""
        self.joins = 0
        self.expiries = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, id: object) -> bool:
        return id in self._entries

    @property
    def delay_mean(self) -> float | None:
        """Mean label delay in seconds (label timestamp − event timestamp) over the last
        ``delay_window`` joins whose two records both had timestamps; None without one."""
        return sum(self._delays) / len(self._delays) if self._delays else None

    def gone(self, id: Id) -> tuple[str, int] | None:
        """``(why, offset)`` for an id recently finished and not pending again: :data:`JOINED` at
        the label's offset, :data:`EXPIRED` at the record whose arrival dropped it."""
        return self._gone.get(id)

    def advance(self, offset: int, timestamp_ms: int) -> int:
        """Move the store to the record at ``offset`` with ``timestamp_ms`` (the stream time is
        raised to it; a negative one is no timestamp) and drop the oldest entries while they are
        past the age or distance bound; returns how many expired."""
        if timestamp_ms >= 0 and (self.stream_ms is None or timestamp_ms > self.stream_ms):
            self.stream_ms = timestamp_ms
        if self.offset is None or offset > self.offset:
            self.offset = offset
        n = 0
        entries = self._entries
        while entries:
            id, oldest = next(iter(entries.items()))
            if not self._expired(oldest):
                break
            self._drop(id, EXPIRED)
            n += 1
        return n

    def _expired(self, event: PendingEvent) -> bool:
        if self.max_offsets is not None and self.offset is not None and (
                self.offset - event.offset > self.max_offsets):
            return True
        return (self.ttl_ms is not None and self.stream_ms is not None and event.timestamp_ms >= 0
                and self.stream_ms - event.timestamp_ms > self.ttl_ms)

    def _drop(self, id: Id, why: str) -> None:
        self._entries.pop(id)
        self.expiries += 1
        self._finish(id, why)

    def _finish(self, id: Id, why: str) -> None:
        gone = self._gone
        gone.pop(id, None)
        gone[id] = (why, self.offset if self.offset is not None else -1)
        while len(gone) > self.max_entries:
            gone.popitem(last=False)

    def add(self, id: Id, event: PendingEvent) -> int:
        """Keep ``event`` under ``id`` (call :meth:`advance` to its record first). An event
        already pending under ``id`` is replaced; past ``max_entries`` the oldest is dropped.
        Both count as expiries; returns how many."""
        if self.max_entries == 0:
            return 0
        n = 0
        if id in self._entries:  # the newer event takes its place: the older one expires
            del self._entries[id]
            self.expiries += 1
            n += 1
        self._gone.pop(id, None)
        self._entries[id] = event
        while len(self._entries) > self.max_entries:
            self._drop(next(iter(self._entries)), EXPIRED)
            n += 1
        return n

    def take(self, id: Id, offset: int, timestamp_ms: int) -> tuple[PendingEvent | None, str | None]:
        """The label record at ``offset`` (``timestamp_ms``) for ``id``: advances the store to it,
        then removes and returns the event pending under ``id`` with None; or (None, why) when
        there is none: :data:`EXPIRED` (also for an entry past a bound not yet dropped),
        :data:`JOINED`, or None for an id never seen (or forgotten)."""
        self.advance(offset, timestamp_ms)
        event = self._entries.get(id)
        if event is None:
            gone = self._gone.get(id)
            return None, None if gone is None else gone[0]
        if self._expired(event):
            self._drop(id, EXPIRED)
            return None, EXPIRED
        del self._entries[id]
        self.joins += 1
        self._finish(id, JOINED)
        if timestamp_ms >= 0 and event.timestamp_ms >= 0:
            self._delays.append((timestamp_ms - event.timestamp_ms) / 1000)
        return event, None

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """The store as JSON-able data (exact: floats round-trip through JSON bit for bit; ids
        keep their JSON type; entries oldest first)."""
        return {
            "entries": [[id, *event.as_list()] for id, event in self._entries.items()],
            "gone": [[id, why, at] for id, (why, at) in self._gone.items()],
            "delays": list(self._delays),
            "stream_ms": self.stream_ms,
            "offset": self.offset,
            "joins": self.joins,
            "expiries": self.expiries,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Put back what :meth:`get_state` returned. Entries past this store's ``max_entries``
        (a smaller bound than the one they were kept under) are dropped oldest first, as
        expiries; the bounds by age and distance apply from the next record."""
        self._entries.clear()
        self._gone.clear()
        self._delays.clear()
        for row in state["entries"]:
            self._entries[_id(row[0])] = PendingEvent.of(row[1:])
        for id, why, at in state["gone"]:
            self._gone[_id(id)] = (str(why), int(at))
        self._delays.extend(float(d) for d in state["delays"])
        self.stream_ms = None if state["stream_ms"] is None else int(state["stream_ms"])
        self.offset = None if state["offset"] is None else int(state["offset"])
        self.joins = int(state["joins"])
        self.expiries = int(state["expiries"])
        while len(self._entries) > self.max_entries:
            self._drop(next(iter(self._entries)), EXPIRED)
        while len(self._gone) > self.max_entries:
            self._gone.popitem(last=False)


def _id(value: Any) -> Id:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TypeError(f"a pending id must be a string or a number, got {type(value).__name__}")
    return value
