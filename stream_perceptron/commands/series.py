"""Statistics records sorted into series, one per input partition, and the group's figures.

A worker publishes one statistics record per assigned input partition per interval (README,
"Statistics"): its ``topic`` and ``partition`` name the partition, its ``model_id`` the partition's
model. Such records form one series per partition and model (:class:`Series`): the model tells
apart a partition whose state began again. A record of an older worker has no ``topic`` and
``partition``; each such worker's records (:func:`worker_key`) form one series, as they did.

:class:`Group` holds the newest record of each input partition and sums them into the group's
figures (:class:`GroupFigures`): the examples seen, labeled and mistaken, ``E_n`` over all the
labeled examples = Σ mistakes / Σ labeled, the windows pooled, throughput and lag. An older
worker's series stands for partitions it does not name, so it is never summed into the group.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Partition = tuple[str, int]
"""An input partition: (topic, partition)."""


DRIFT_EVENT = "drift"
"""The ``event`` of a drift alarm on the statistics topic (README, "Record formats": drift event)."""


def is_stats_record(value: Any) -> bool:
    """Whether a decoded value looks like a statistics record (a dict with the counters and no
    ``event``: an event on the statistics topic is not a statistics record).

    >>> is_stats_record({"seen": 3, "mistakes": 1}), is_stats_record({"x": [1.0], "y": 1})
    (True, False)
    >>> is_stats_record({"event": "drift", "seen": 3, "mistakes": 1})
    False
    """
    return isinstance(value, dict) and "seen" in value and "mistakes" in value and "event" not in value


def is_drift_event(value: Any) -> bool:
    """Whether a decoded value is a drift alarm: ``"event": "drift"`` and the partition it was
    raised on (``topic``, ``partition``) and where (``offset``).

    >>> is_drift_event({"event": "drift", "topic": "in", "partition": 0, "offset": 17})
    True
    >>> is_drift_event({"event": "drift"}), is_drift_event({"seen": 3, "mistakes": 1})
    (False, False)
    """
    return (isinstance(value, dict) and value.get("event") == DRIFT_EVENT
            and partition_of(value) is not None and number(value.get("offset")) is not None)


def is_stats_or_drift(value: Any) -> bool:
    """Whether a reader of the statistics topic takes ``value``: a statistics record or a drift
    event (:func:`is_stats_record`, :func:`is_drift_event`)."""
    return is_stats_record(value) or is_drift_event(value)


def worker_key(rec: Mapping[str, Any]) -> str:
    """The worker a statistics record belongs to: ``client_id · <first 8 digits of model_id>``.

    Workers left at the same ``client_id`` (the default) stay apart by their model. A record
    without ``model_id`` (an older worker's) is keyed by its client id.

    >>> worker_key({"client_id": "w1", "model_id": "3f2a9c1d" + "0" * 24})
    'w1 · 3f2a9c1d'
    >>> worker_key({"client_id": "w1"}), worker_key({})
    ('w1', '(no client_id)')
    """
    cid = str(rec.get("client_id") or "(no client_id)")
    return f"{cid} · {model}" if (model := _model(rec)) else cid


def partition_of(rec: Mapping[str, Any]) -> Partition | None:
    """The input partition a statistics record describes; None for an older worker's record.

    >>> partition_of({"topic": "in", "partition": 2}), partition_of({"seen": 1})
    (('in', 2), None)
    >>> partition_of({"topic": "in", "partition": True})  # not a partition number
    """
    topic, part = rec.get("topic"), rec.get("partition")
    if isinstance(topic, str) and isinstance(part, int) and not isinstance(part, bool):
        return topic, part
    return None


def _model(rec: Mapping[str, Any]) -> str:
    model = rec.get("model_id")
    return model[:8] if isinstance(model, str) else ""


@dataclass(frozen=True, order=True)
class Series:
    """The series a statistics record belongs to.

    An input partition's series (``worker`` empty) is its ``topic``, ``partition`` and ``model``
    (the first 8 digits of its ``model_id``). An older worker's series has ``worker`` =
    :func:`worker_key` and sorts after every partition's.
    """

    worker: str
    topic: str
    partition: int
    model: str

    @classmethod
    def of(cls, rec: Mapping[str, Any]) -> Series:
        """The series of ``rec``.

        >>> Series.of({"topic": "in", "partition": 1, "model_id": "3f2a9c1d" + "0" * 24})
        Series(worker='', topic='in', partition=1, model='3f2a9c1d')
        >>> Series.of({"client_id": "w1"})
        Series(worker='w1', topic='', partition=-1, model='')
        """
        where = partition_of(rec)
        if where is None:
            return cls(worker_key(rec), "", -1, "")
        return cls("", where[0], where[1], _model(rec))

    @property
    def input_partition(self) -> Partition | None:
        """The input partition of this series; None for an older worker's."""
        return None if self.worker else (self.topic, self.partition)


def labels(series: Iterable[Series]) -> dict[Series, str]:
    """A short label for each series, the same for the same set.

    An input partition is its number when every partition series is of one topic, else
    ``topic[partition]``; ``· <model>`` follows when the partition has several models. An older
    worker's series is its :func:`worker_key`.

    >>> a, b = Series("", "in", 0, "aaaaaaaa"), Series("", "in", 1, "bbbbbbbb")
    >>> list(labels([a, b]).values())
    ['0', '1']
    >>> list(labels([a, Series("", "in", 0, "cccccccc"), Series("", "x", 3, "")]).values())
    ['in[0] · aaaaaaaa', 'in[0] · cccccccc', 'x[3]']
    >>> list(labels([Series("w1 · 3f2a9c1d", "", -1, "")]).values())
    ['w1 · 3f2a9c1d']
    """
    every = sorted(set(series))
    parts = [s for s in every if not s.worker]
    one_topic = len({s.topic for s in parts}) <= 1
    models: dict[Partition, int] = {}
    for s in parts:
        models[(s.topic, s.partition)] = models.get((s.topic, s.partition), 0) + 1
    out: dict[Series, str] = {}
    for s in every:
        if s.worker:
            out[s] = s.worker
            continue
        label = str(s.partition) if one_topic else f"{s.topic}[{s.partition}]"
        out[s] = f"{label} · {s.model or '(no model_id)'}" if models[(s.topic, s.partition)] > 1 else label
    return out


def newer(rec: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    """Whether ``rec`` replaces ``than`` as the newest (by ``ts``; True when either has none).

    >>> newer({"ts": 2.0}, {"ts": 1.0}), newer({"ts": 1.0}, {"ts": 2.0}), newer({}, {"ts": 2.0})
    (True, False, True)
    """
    a, b = number(rec.get("ts")), number(than.get("ts"))
    return a is None or b is None or a >= b


def number(value: Any) -> float | None:
    """A finite JSON number as a float, else None (booleans are not numbers).

    >>> number(3), number(True), number(None), number(float("nan"))
    (3.0, None, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def total_lag(lag: Any) -> int | float | None:
    """The sum of the numbers in a ``lag`` field (a number, or nested per topic/partition).

    >>> total_lag({"in:0": 3, "in:1": 4}), total_lag(5), total_lag(None), total_lag({})
    (7, 5, None, None)
    """
    if isinstance(lag, bool):
        return None
    if isinstance(lag, int | float):
        return lag
    if isinstance(lag, dict):
        parts = [v for v in (total_lag(x) for x in lag.values()) if v is not None]
        return sum(parts) if parts else None
    return None


@dataclass(frozen=True)
class GroupFigures:
    """The group's figures: sums over the newest record of each input partition.

    ``mistake_rate`` is ``E_n`` over every labeled example of the group, Σ mistakes / Σ labeled
    (None before the first); ``window_mistake_rate`` pools the partitions' windows, Σ window
    mistakes / Σ window labeled. ``examples_per_s`` and ``lag`` sum the partitions whose record
    gives them (None when none does).
    """

    partitions: int
    seen: int
    labeled: int
    mistakes: int
    window_labeled: int
    window_mistakes: int
    dead_letters: int
    examples_per_s: float | None
    lag: int | float | None
    pending_labels: int = 0

    @property
    def mistake_rate(self) -> float | None:
        return self.mistakes / self.labeled if self.labeled else None

    @property
    def window_mistake_rate(self) -> float | None:
        return self.window_mistakes / self.window_labeled if self.window_labeled else None


class Group:
    """The newest statistics record of each input partition, and the group's figures from them.

    :meth:`add` takes records in any order: a partition's record replaces the one held when it is
    :func:`newer` (whatever its model). An older worker's record (no ``topic``/``partition``) is
    not held.
    """

    def __init__(self) -> None:
        self._newest: dict[Partition, dict[str, Any]] = {}

    def add(self, rec: Mapping[str, Any]) -> bool:
        """Take a statistics record; True when it is now its partition's newest."""
        where = partition_of(rec)
        if where is None:
            return False
        held = self._newest.get(where)
        if held is not None and not newer(rec, held):
            return False
        self._newest[where] = dict(rec)
        return True

    def newest(self) -> dict[Partition, dict[str, Any]]:
        """The newest record held of each input partition, by partition."""
        return dict(sorted(self._newest.items()))

    def figures(self) -> GroupFigures | None:
        """The group's figures now; None before the first partition's record."""
        return group_figures(self._newest.values())


def group_figures(newest: Iterable[Mapping[str, Any]]) -> GroupFigures | None:
    """The figures of a group whose partitions' newest records are ``newest`` (one per partition);
    None for none. A counter a record lacks counts 0.

    >>> g = group_figures([{"seen": 10, "labeled": 8, "mistakes": 2, "lag": {"in:0": 3}},
    ...                    {"seen": 30, "labeled": 20, "mistakes": 1, "examples_per_s": 5.0}])
    >>> g.seen, g.labeled, g.mistakes, g.mistake_rate, g.examples_per_s, g.lag
    (40, 28, 3, 0.10714285714285714, 5.0, 3)
    """
    records = list(newest)
    if not records:
        return None
    def total(key: str) -> int:
        return sum(int(number(r.get(key)) or 0) for r in records)

    rates = [v for r in records if (v := number(r.get("examples_per_s"))) is not None]
    lags = [v for r in records if (v := total_lag(r.get("lag"))) is not None]
    return GroupFigures(
        partitions=len(records), seen=total("seen"), labeled=total("labeled"),
        mistakes=total("mistakes"), window_labeled=total("window_labeled"),
        window_mistakes=total("window_mistakes"), dead_letters=total("dead_letters"),
        examples_per_s=math.fsum(rates) if rates else None, lag=sum(lags) if lags else None,
        pending_labels=total("pending_labels"),
    )


class Drifts:
    """The drift alarms seen on a statistics topic: per series, how many and the last one's offset,
    and the ``latest`` events of all series, newest last.

    A series' count is the greater of the alarms seen here and the count its newest statistics
    record or event states (``drifts``: the alarms in the partition's state, so alarms published
    before the topic's retention are counted); its last offset likewise the greatest of the
    events' ``offset`` and the record's ``last_drift_offset``.

    >>> d = Drifts(latest=2)
    >>> s = d.add({"event": "drift", "topic": "in", "partition": 0, "offset": 900, "drifts": 3})
    >>> d.count(s), d.last_offset(s), d.count(s, {"drifts": 4, "last_drift_offset": 950})
    (3, 900, 4)
    >>> d.last_offset(Series("", "in", 1, ""), {"last_drift_offset": None}) is None
    True
    """

    def __init__(self, latest: int = 20) -> None:
        self._count: dict[Series, int] = {}
        self._offset: dict[Series, int] = {}
        self._latest: deque[dict[str, Any]] = deque(maxlen=latest)

    def add(self, event: Mapping[str, Any]) -> Series:
        """Take a drift event (:func:`is_drift_event`); returns its series."""
        series = Series.of(event)
        stated = int(number(event.get("drifts")) or 0)
        self._count[series] = max(self._count.get(series, 0) + 1, stated)
        offset = int(number(event.get("offset")) or 0)
        self._offset[series] = max(self._offset.get(series, offset), offset)
        self._latest.append(dict(event))
        return series

    def count(self, series: Series, rec: Mapping[str, Any] | None = None) -> int | None:
        """The alarms of ``series`` (None when neither an event nor ``rec`` tells of any)."""
        stated = number(rec.get("drifts")) if rec is not None else None
        seen = self._count.get(series)
        if stated is None:
            return seen
        return max(int(stated), seen or 0)

    def last_offset(self, series: Series, rec: Mapping[str, Any] | None = None) -> int | None:
        """The input offset of the last alarm of ``series``; None before one."""
        stated = number(rec.get("last_drift_offset")) if rec is not None else None
        offsets = [int(v) for v in (stated, self._offset.get(series)) if v is not None]
        return max(offsets) if offsets else None

    def total(self, newest: Iterable[Mapping[str, Any]]) -> int:
        """The alarms of a group whose partitions' newest records are ``newest``."""
        return sum(self.count(Series.of(rec), rec) or 0 for rec in newest)

    def latest(self) -> list[dict[str, Any]]:
        """The latest drift events of any series, oldest first."""
        return list(self._latest)

    def __bool__(self) -> bool:
        return bool(self._count)


__all__ = [
    "DRIFT_EVENT",
    "Drifts",
    "Group",
    "GroupFigures",
    "Partition",
    "Series",
    "group_figures",
    "is_drift_event",
    "is_stats_or_drift",
    "is_stats_record",
    "labels",
    "newer",
    "number",
    "partition_of",
    "total_lag",
    "worker_key",
]
