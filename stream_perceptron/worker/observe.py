"""Prometheus metrics and health endpoints for the worker, served by one small HTTP server.

An :class:`Observer` owns its own :class:`prometheus_client.CollectorRegistry` (no global state, so
several workers and tests share a process without colliding) and one
:class:`~stream_perceptron.http_server.HTTPServer` (bounded against hostile clients: see there) in a
daemon thread answering ``GET`` and ``HEAD`` on

* ``/metrics``: the registry in the Prometheus text format;
* ``/healthz``: liveness, 200 ``{"ok": true, "reason": ...}`` or 503 ``{"ok": false, "reason": ...}``;
* ``/readyz``: readiness, the same shape.

With a token (``SP_OBSERVE__TOKEN``), ``/metrics`` asks for it (``Authorization: Bearer <token>``,
or basic auth with the token as the password); ``/healthz`` and ``/readyz`` stay open, for the
probes of a kubelet or a container engine, which send no secret.

The worker calls it once per poll batch (never per record); every method is cheap and thread-safe.

**A series per input partition.** Each input partition has its own model and statistics, so the
series that describe them carry the labels ``topic`` and ``partition`` (the input partition): the
counters below, the statistics gauges, ``model_info`` (whose ``model_id`` label is the partition's
model), ``feature_names``, ``feature_names_limit`` and ``consumer_lag``. A K-class partition's
statistics also set ``classes`` and a series per class, labelled ``{topic, partition, class}``
(see below). A statistics record without
``topic`` and ``partition`` (an older worker's) sets the series labelled ``topic=""``,
``partition=""``, which PromQL reads as unlabelled. :meth:`Observer.forget` removes a revoked
partition's series, so a worker exports only the partitions it holds, and the group's figures are
sums over the workers' series (``sum(mistakes_total) / sum(labeled_examples_total)`` is the
group's ``E_n``). What describes the worker itself is unlabelled: ``rebalances_total``,
``checkpoints_total{result}``, the checkpoint age and duration, ``assigned_partitions``, ``ready``.

**Counters follow the statistics.** A partition's statistics survive restarts and moves (they are
restored with its state) while a Prometheus counter starts at 0 in each process. So the counters
that mirror a statistics field (``examples_total`` ← ``seen``, ``labeled_examples_total`` ←
``labeled``, ``mistakes_total`` ← ``mistakes``, ``updates_total`` ← ``updates`` (else
``mistakes``), ``dead_letters_total`` ← ``dead_letters``, ``label_joins_total`` ←
``label_joins``, ``label_expiries_total`` ← ``label_expiries``, ``drifts_total`` ← ``drifts``) are
*raised* to the record's value by
:meth:`Observer.stats` (incremented by the difference, never lowered), and advanced by
:meth:`Observer.batch` in between, each for its partition. After a ``stats()`` call a partition's
counters equal its record's totals; at the first ``stats()`` after its state is restored they jump
from this process's count to the restored total (``rate()`` sees one large increase, which is the
truth: those examples were learned, by an earlier process or owner). They never go down while the
partition stays; once forgotten, a partition that comes back starts again from 0 (a counter reset
to ``rate()``). ``rebalances_total`` and ``checkpoints_total`` count this process only.

**A series per class.** A K-class worker's statistics record (one with ``classes``) counts per
class in ``per_class`` (row order): the counters ``class_labeled_examples_total`` ← ``labeled``,
``class_mistakes_total`` ← ``mistakes`` and ``class_predicted_total`` ← ``predicted`` follow them
as the counters above follow theirs, labelled ``{topic, partition, class}``, and are removed with
the partition's other series. A class name comes from the input topic, so the label is the name
cleaned (:func:`~stream_perceptron.clean.class_text`: no control character or escape sequence)
and cut to :data:`MAX_CLASS_LABEL` characters; an integer name is its digits. Names that clean to
the same label are counted together. The series of a partition are as many as its classes, which
``SP_LIMITS__MAX_CLASSES`` bounds; there is no series per cell of the confusion matrix.

**Readiness** (``/readyz``, and the ``ready`` gauge): ready iff :meth:`Observer.start` was called,
the loop is live (see below), at least one partition is assigned, the last checkpoint attempt
succeeded (or none was attempted yet), and the consumer is not stalled: a positive total lag with
no record processed for ``stall_timeout_s`` (measured from the later of the last progress, the last
assignment and the moment the lag became positive). **Liveness** (``/healthz``): the last
:meth:`Observer.polled` was at most ``liveness_timeout_s`` ago; before the first poll, alive for
``liveness_timeout_s`` after ``start()``.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from stream_perceptron.clean import MAX_CLASS_TEXT, class_text
from stream_perceptron.http_server import HTTPServer, Limits, Request, Response
from stream_perceptron.kafka.edge import Partition
from stream_perceptron.settings import ObserveSettings

log = logging.getLogger(__name__)

PREFIX = "stream_perceptron_"

# counter (prefix and "_total" added) → help, and the statistics-record keys it follows (first present)
_FOLLOWING: dict[str, tuple[str, tuple[str, ...]]] = {
    "examples": ("Valid examples scored (records minus dead letters); follows statistics 'seen'.",
                 ("seen",)),
    "labeled_examples": ("Labeled examples learned; follows statistics 'labeled'.", ("labeled",)),
    "mistakes": ("Mistakes, y(theta.x + theta0) <= 0 (with K classes: the true class's score not above"
                 " every other's); follows statistics 'mistakes'.", ("mistakes",)),
    "updates": ("Perceptron updates (= mistakes); follows statistics 'updates'.", ("updates", "mistakes")),
    "dead_letters": ("Records sent to the dead-letter topic; follows statistics 'dead_letters'.",
                     ("dead_letters",)),
    "drifts": ("Drift alarms: significant rises of the mistake rate; follows statistics 'drifts'.",
               ("drifts",)),
    "label_joins": ("Late labels joined to their kept predictions; follows statistics 'label_joins'.",
                    ("label_joins",)),
    "label_expiries": ("Kept predictions dropped without their label; follows statistics"
                       " 'label_expiries'.", ("label_expiries",)),
}

# statistics-record key → gauge (prefix added) and help; None or a missing key sets NaN
_STAT_GAUGES: dict[str, tuple[str, str]] = {
    "mistake_rate": ("mistake_rate", "Cumulative training error E_n = mistakes / labeled (0-1)."),
    "served_mistake_rate": ("served_mistake_rate", "The served model's online error rate (0-1): the"
                            " averaged weights' with SP_MODEL__AVERAGE, else E_n."),
    "window_mistake_rate": ("window_mistake_rate", "Mistake rate over the last W labeled examples (0-1)."),
    "ewma_mistake_rate": ("ewma_mistake_rate", "Exponentially weighted mistake rate (0-1)."),
    "margin_min": ("margin_min", "Minimum geometric margin over the window."),
    "margin_mean": ("margin_mean", "Mean geometric margin over the window."),
    "R": ("radius", "R = max ||x|| over the window (||[x, 1]|| with an intercept)."),
    "theta_norm": ("theta_norm", "||theta|| of the current model (||W||, Frobenius, with K classes)."),
    "gamma": ("gamma", "The window's minimum augmented margin when positive (with K classes, the"
              " multiclass margin), else NaN."),
    "bound": ("mistake_bound", "The mistake bound (R/gamma)^2 (2(R/gamma)^2 with K classes); NaN when"
              " undefined."),
    "examples_per_s": ("examples_per_second", "Examples per second between the last two statistics records."),
    "pending_labels": ("pending_labels", "Predictions kept waiting for a late label."),
}

# from the statistics record's "mix" (SP_MIX__EVERY_EXAMPLES > 0), set once a partition has mixed
_MIX_GAUGES: dict[str, tuple[str, str]] = {
    "version": ("mix_version", "Mixing points of the partition so far: the version of the mix it serves."),
    "staleness": ("mix_staleness_epochs", "Epochs the oldest state in the partition's latest mix was"
                  " behind its own."),
    "sum_mu_k": ("mix_sum_mu_k", "The running sum of mu*k over the partition's adoptions (the IPM bound's"
                 " left side, against mistake_bound)."),
}

# the buckets of mix_staleness_versions: versions the oldest state of an adopted mix was behind
_STALENESS_BUCKETS = (0, 1, 2, 3, 5, 10, 20, 50, 100)


# per-class counter (prefix and "_total" added) → help, and the key of a 'per_class' entry it follows
_CLASS_FOLLOWING: dict[str, tuple[str, str]] = {
    "class_labeled_examples": ("Labeled examples of the class (their true class); follows statistics"
                               " 'per_class' 'labeled'.", "labeled"),
    "class_mistakes": ("Mistakes on labeled examples of the class; follows statistics 'per_class'"
                       " 'mistakes'.", "mistakes"),
    "class_predicted": ("Predictions of the class served; follows statistics 'per_class' 'predicted'.",
                        "predicted"),
}

MAX_CLASS_LABEL = MAX_CLASS_TEXT
"""The characters kept of a class name in a ``class`` label, as the views keep."""

# the labels of a series that describes one input partition
_PARTITION_LABELS = ("topic", "partition")
Labels = tuple[str, str]
"""The label values of one input partition's series: (topic, partition as text)."""

_UNLABELLED: Labels = ("", "")
"""The labels of a statistics record without ``topic`` and ``partition`` (an older worker's)."""


def _labels(topic: str, partition: int) -> Labels:
    return (str(topic), str(int(partition)))


def _record_labels(snapshot: Mapping[str, Any]) -> Labels:
    """The input partition a statistics record describes, or :data:`_UNLABELLED` without one.

    >>> _record_labels({"topic": "in", "partition": 3}), _record_labels({"seen": 1})
    (('in', '3'), ('', ''))
    """
    topic, part = snapshot.get("topic"), snapshot.get("partition")
    if isinstance(topic, str) and isinstance(part, int) and not isinstance(part, bool):
        return _labels(topic, part)
    return _UNLABELLED


def class_label(name: Any) -> str | None:
    """A class name as a ``class`` label (:func:`~stream_perceptron.clean.class_text`, cut to
    :data:`MAX_CLASS_LABEL` characters); None for anything that is not a class name (no series).

    >>> class_label("cat\\x1b[2J\\n"), class_label(3), class_label("x" * 500) == "x" * 100, class_label(True)
    ('cat ', '3', True, None)
    """
    return class_text(name, MAX_CLASS_LABEL)


def _class_totals(per_class: Any) -> dict[str, dict[str, int]]:
    """The counts of a statistics record's ``per_class`` by ``class`` label (:func:`class_label`),
    summed where names share a label; entries without a class name, and counts that are not
    non-negative integers, are left out.

    >>> _class_totals([{"class": "a", "labeled": 3, "mistakes": 1, "predicted": 2},
    ...                {"class": "a\\x07", "labeled": 1, "mistakes": None, "predicted": 1}, {"class": 1.5}])
    {'a': {'class_labeled_examples': 4, 'class_mistakes': 1, 'class_predicted': 3}}
    """
    totals: dict[str, dict[str, int]] = {}
    for entry in per_class if isinstance(per_class, list) else ():
        label = class_label(entry.get("class")) if isinstance(entry, Mapping) else None
        if label is None:
            continue
        counts = totals.setdefault(label, dict.fromkeys(_CLASS_FOLLOWING, 0))
        for name, (_, key) in _CLASS_FOLLOWING.items():
            value = entry.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                counts[name] += value
    return totals


def _number(value: Any) -> float:
    """A statistics value as a gauge value: numbers as floats, None (or anything else) as NaN."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return math.nan


class Observer:
    """Metrics, liveness and readiness of one worker, served over HTTP on ``host:port``.

    Parameters
    ----------
    host, port
        Where to listen; port 0 binds an ephemeral port, published in :attr:`port` by :meth:`start`.
    liveness_timeout_s
        The loop is live while it polled at most this long ago.
    stall_timeout_s
        Not ready while there is lag and no record has been processed for this long.
    clock
        Monotonic seconds (injectable for tests).
    token
        ``/metrics`` asks for it when set (``/healthz`` and ``/readyz`` never do).
    limits
        What one client may take of the server (:class:`~stream_perceptron.http_server.Limits`).
    """

    def __init__(
        self,
        *,
        host: str = "0.0.0.0",  # noqa: S104 - a metrics endpoint is meant to be scraped from outside
        port: int = 9464,
        liveness_timeout_s: float = 60.0,
        stall_timeout_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        token: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        if liveness_timeout_s <= 0 or stall_timeout_s <= 0:
            raise ValueError("liveness_timeout_s and stall_timeout_s must be positive")
        self.host = host
        self.port = port
        self.liveness_timeout_s = liveness_timeout_s
        self.stall_timeout_s = stall_timeout_s
        self._clock = clock
        self._token = token
        self._limits = limits
        self._lock = threading.Lock()
        self._server: HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._started_at: float | None = None
        self._last_poll: float | None = None
        self._progress_since = 0.0
        self._lag_since = 0.0
        self._assigned: frozenset[Partition] = frozenset()
        self._lags: dict[Partition, int] = {}
        self._checkpoint_ok: bool | None = None
        self._last_good_checkpoint: float | None = None
        self._totals: dict[Labels, dict[str, int]] = {}  # per partition: what each counter holds
        self._model_ids: dict[Labels, str] = {}  # per partition: the model_id label exported
        self._class_totals: dict[Labels, dict[str, dict[str, int]]] = {}  # per partition, per class label

        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        self._counters = {
            name: Counter(PREFIX + name, doc, _PARTITION_LABELS, registry=reg)
            for name, (doc, _) in _FOLLOWING.items()
        }
        self._rebalances = Counter(PREFIX + "rebalances", "Partition assignments received.", registry=reg)
        self._checkpoints = Counter(
            PREFIX + "checkpoints", "Checkpoint attempts by result.", ["result"], registry=reg
        )
        for result in ("ok", "error"):
            self._checkpoints.labels(result)
        self._stat_gauges = {
            key: Gauge(PREFIX + name, doc, _PARTITION_LABELS, registry=reg)
            for key, (name, doc) in _STAT_GAUGES.items()
        }
        self._mix_gauges = {
            key: Gauge(PREFIX + name, doc, _PARTITION_LABELS, registry=reg)
            for key, (name, doc) in _MIX_GAUGES.items()
        }
        Gauge(
            PREFIX + "checkpoint_age_seconds",
            "Seconds since the last successful checkpoint of this process (NaN before one).",
            registry=reg,
        ).set_function(self._checkpoint_age)
        self._checkpoint_duration = Gauge(
            PREFIX + "checkpoint_duration_seconds", "Duration of the last checkpoint attempt.", registry=reg
        )
        self._checkpoint_duration.set(math.nan)
        self._lag_gauge = Gauge(
            PREFIX + "consumer_lag", "High-water mark minus position, per partition.",
            ["topic", "partition"], registry=reg,
        )
        self._assigned_gauge = Gauge(
            PREFIX + "assigned_partitions", "Input partitions assigned to this worker.", registry=reg
        )
        Gauge(PREFIX + "ready", "1 when /readyz answers 200, else 0.", registry=reg).set_function(
            lambda: 1.0 if self.readiness()[0] else 0.0
        )
        self._names = Gauge(
            PREFIX + "feature_names",
            "Feature names the partition's model indexes (0 while its input is dense).",
            _PARTITION_LABELS, registry=reg,
        )
        self._names_limit = Gauge(
            PREFIX + "feature_names_limit",
            "The most feature names the partition's model indexes: SP_LIMITS__MAX_NAMES"
            " (SP_MODEL__N_FEATURES when set); records bringing names past it are dead-lettered."
            " NaN when unbounded.",
            _PARTITION_LABELS, registry=reg,
        )
        self._model_info = Gauge(  # an info metric: 1, its labels the information; none until named
            PREFIX + "model_info", "The model learned from the partition: 1, labelled with its model_id.",
            [*_PARTITION_LABELS, "model_id"], registry=reg,
        )
        self._mix_staleness = Histogram(
            PREFIX + "mix_staleness_versions",
            "Versions the oldest state of each mix the partition adopted was behind its own: one"
            " observation per mixing point (SP_MIX__MAX_STALENESS bounds it across workers).",
            _PARTITION_LABELS, buckets=_STALENESS_BUCKETS, registry=reg,
        )
        self._mix_paused = Counter(
            PREFIX + "mix_paused_seconds",
            "Seconds the partition waited, paused, at its mixing points for partitions behind.",
            _PARTITION_LABELS, registry=reg,
        )
        self._mix_overdue = Counter(
            PREFIX + "mix_overdue",
            "Mixing points whose wait ran out (SP_MIX__MAX_WAIT_S) with partitions still behind:"
            " the partition mixed without them.",
            _PARTITION_LABELS, registry=reg,
        )
        self._classes = Gauge(
            PREFIX + "classes", "Classes the partition's K-class model knows (its statistics' 'classes');"
            " none for a binary model.", _PARTITION_LABELS, registry=reg,
        )
        self._class_counters = {
            name: Counter(PREFIX + name, doc, [*_PARTITION_LABELS, "class"], registry=reg)
            for name, (doc, _) in _CLASS_FOLLOWING.items()
        }
        # every series labelled by (topic, partition) alone, which forget() removes
        self._partition_metrics: list[Counter | Gauge | Histogram] = [
            *self._counters.values(), *self._stat_gauges.values(), *self._mix_gauges.values(),
            self._names, self._names_limit, self._lag_gauge, self._classes, self._mix_staleness,
            self._mix_paused, self._mix_overdue,
        ]

    # ------------------------------------------------------------------ the server
    def start(self) -> None:
        """Bind ``host:port`` and serve in a daemon thread (raises OSError when the port is taken)."""
        with self._lock:
            if self._server is not None:
                raise RuntimeError("observer already started")
            server = HTTPServer(
                (self.host, self.port),
                {"/metrics": self._metrics, "/healthz": self._healthz, "/readyz": self._readyz},
                token=self._token, open_paths=("/healthz", "/readyz"), limits=self._limits,
            )
            self.port = int(server.server_address[1])
            self._server = server
            self._started_at = self._progress_since = self._clock()
            self._last_poll = None
            self._thread = threading.Thread(target=server.serve_forever, name=f"observer-{self.port}",
                                            daemon=True)
            self._thread.start()
        log.info("metrics and health on http://%s:%d (/metrics, /healthz, /readyz); %s", self.host, self.port,
                 "/metrics asks for the token" if self._token is not None
                 else "/metrics open to whoever reaches the port (SP_OBSERVE__TOKEN sets a token)")

    def stop(self) -> None:
        """Stop serving and free the port (idempotent)."""
        with self._lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5.0)

    def __enter__(self) -> Observer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ what the worker reports
    def polled(self) -> None:
        """The loop is alive: called after every poll, even an empty one."""
        with self._lock:
            self._last_poll = self._clock()

    def batch(self, *, topic: str, partition: int, records: int, labeled: int, mistakes: int,
              dead_letters: int) -> None:
        """Account for one poll batch of input partition ``topic``/``partition``: ``records``
        consumed, of which ``dead_letters`` were rejected; its counters advance by these counts."""
        if min(records, labeled, mistakes, dead_letters) < 0 or dead_letters > records:
            raise ValueError(f"impossible batch counts: {records=} {labeled=} {mistakes=} {dead_letters=}")
        deltas = {"examples": records - dead_letters, "labeled_examples": labeled, "mistakes": mistakes,
                  "updates": mistakes, "dead_letters": dead_letters}
        where = _labels(topic, partition)
        with self._lock:
            totals = self._partition_totals(where)
            for name, delta in deltas.items():
                self._raise_to(where, name, totals[name] + delta)
            if records:
                self._progress_since = self._clock()

    def drift(self, topic: str, partition: int) -> None:
        """One drift alarm of input partition ``topic``/``partition``: ``drifts_total`` + 1."""
        where = _labels(topic, partition)
        with self._lock:
            self._raise_to(where, "drifts", self._partition_totals(where)["drifts"] + 1)

    def mix_adopted(self, topic: str, partition: int, *, staleness: int, overdue: bool) -> None:
        """``topic``/``partition`` adopted a mix whose oldest state was ``staleness`` versions
        behind its own; ``overdue``: its wait ran out with partitions still behind."""
        where = _labels(topic, partition)
        with self._lock:
            self._mix_staleness.labels(*where).observe(staleness)
            overdue_total = self._mix_overdue.labels(*where)
            if overdue:
                overdue_total.inc()

    def mix_paused(self, topic: str, partition: int, seconds: float) -> None:
        """``topic``/``partition`` waited ``seconds`` at a mixing point."""
        with self._lock:
            self._mix_paused.labels(*_labels(topic, partition)).inc(max(seconds, 0.0))

    def feature_names(self, in_use: int, limit: int | None, *, topic: str, partition: int) -> None:
        """The feature names the model of ``topic``/``partition`` indexes, and the most it may
        (None: no bound, exported as NaN)."""
        where = _labels(topic, partition)
        with self._lock:
            self._names.labels(*where).set(in_use)
            self._names_limit.labels(*where).set(math.nan if limit is None else limit)

    def stats(self, snapshot: Mapping[str, Any]) -> None:
        """Take one statistics record: set its partition's gauges (None or a missing field: NaN;
        the ``mix_*`` gauges only from a record with ``"mix"``),
        raise its partition's counters to the record's totals, and name its model
        (``model_info{topic, partition, model_id} 1``, replacing the partition's previous model).
        A K-class worker's record (with ``classes``) also sets ``classes`` and raises the
        partition's per-class counters to its ``per_class`` totals.

        The partition is the record's ``topic`` and ``partition``; a record without them (an older
        worker's) sets the series labelled ``topic="", partition=""``."""
        where = _record_labels(snapshot)
        model_id = snapshot.get("model_id")
        with self._lock:
            for key, gauge in self._stat_gauges.items():
                gauge.labels(*where).set(_number(snapshot.get(key)))
            mix = snapshot.get("mix")
            if isinstance(mix, Mapping):  # none until the partition has mixed
                for key, gauge in self._mix_gauges.items():
                    gauge.labels(*where).set(_number(mix.get(key)))
            self._partition_totals(where)  # its counters exist from its first record, 0 if need be
            for name, (_, keys) in _FOLLOWING.items():
                total = next((snapshot[k] for k in keys if snapshot.get(k) is not None), None)
                if isinstance(total, int | float) and not isinstance(total, bool):
                    self._raise_to(where, name, int(total))
            classes = snapshot.get("classes")
            if isinstance(classes, list):  # a K-class worker's record
                self._classes.labels(*where).set(len(classes))
                self._follow_classes(where, _class_totals(snapshot.get("per_class")))
            if isinstance(model_id, str) and model_id and self._model_ids.get(where) != model_id:
                previous = self._model_ids.get(where)
                if previous is not None:
                    self._model_info.remove(*where, previous)
                self._model_info.labels(*where, model_id).set(1)
                self._model_ids[where] = model_id

    def forget(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Remove every series of these input partitions (revoked): their counters, statistics
        gauges, ``model_info``, feature-name gauges, lag, and per-class series. A partition that
        comes back later starts its counters again from 0, raised to its totals by its next
        :meth:`stats`."""
        with self._lock:
            for topic, part in partitions:
                where = _labels(topic, part)
                for metric in self._partition_metrics:
                    metric.remove(*where)
                model_id = self._model_ids.pop(where, None)
                if model_id is not None:
                    self._model_info.remove(*where, model_id)
                for label in self._class_totals.pop(where, {}):
                    for counter in self._class_counters.values():
                        counter.remove(*where, label)
                self._totals.pop(where, None)
                self._lags.pop((str(topic), int(part)), None)

    def checkpoint(self, *, ok: bool, duration_s: float) -> None:
        """Account for a checkpoint attempt; a failed one makes the worker unready until one succeeds."""
        with self._lock:
            self._checkpoints.labels("ok" if ok else "error").inc()
            self._checkpoint_duration.set(duration_s)
            self._checkpoint_ok = ok
            if ok:
                self._last_good_checkpoint = self._clock()

    def outputs_confirmed(self) -> None:
        """Outputs flushed with nothing new to checkpoint: the last checkpoint still holds, so a
        failed attempt before (a flush that timed out) no longer makes the worker unready."""
        with self._lock:
            if self._checkpoint_ok is False:
                self._checkpoint_ok = True

    def lag(self, lags: Mapping[tuple[str, int], int]) -> None:
        """Per-partition lag (high-water − position); replaces the previous set (absent: unknown)."""
        new = {(topic, int(part)): int(value) for (topic, part), value in lags.items()}
        with self._lock:
            for topic, part in self._lags.keys() - new.keys():
                self._lag_gauge.remove(topic, str(part))
            for (topic, part), value in new.items():
                self._lag_gauge.labels(topic, str(part)).set(value)
            if self._total_lag() == 0 and sum(max(v, 0) for v in new.values()) > 0:
                self._lag_since = self._clock()
            self._lags = new

    def assigned(self, partitions: Sequence[tuple[str, int]]) -> None:
        """The partitions now assigned (the whole set); lag of the others is dropped."""
        with self._lock:
            self._assigned = frozenset((topic, int(part)) for topic, part in partitions)
            self._assigned_gauge.set(len(self._assigned))
            for topic, part in [p for p in self._lags if p not in self._assigned]:
                self._lag_gauge.remove(topic, str(part))
                del self._lags[(topic, part)]
            self._progress_since = self._clock()

    def rebalance(self) -> None:
        """Count a rebalance (an assignment received)."""
        self._rebalances.inc()

    # ------------------------------------------------------------------ what the endpoints answer
    def _metrics(self, request: Request) -> Response:
        return Response(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)

    def _healthz(self, request: Request) -> Response:
        return _health(*self.liveness())

    def _readyz(self, request: Request) -> Response:
        return _health(*self.readiness())

    def liveness(self) -> tuple[bool, str]:
        """(alive, reason): polled within ``liveness_timeout_s`` (or started that recently)."""
        with self._lock:
            return self._liveness(self._clock())

    def readiness(self) -> tuple[bool, str]:
        """(ready, reason): live, partitions assigned, checkpoints succeeding, not stalled."""
        with self._lock:
            now = self._clock()
            if self._started_at is None:
                return False, "not started"
            alive, why = self._liveness(now)
            problems = [] if alive else [why]
            if not self._assigned:
                problems.append("no partitions assigned")
            if self._checkpoint_ok is False:
                problems.append("the last checkpoint failed")
            lag = self._total_lag()
            quiet = now - max(self._progress_since, self._lag_since)
            if lag > 0 and quiet > self.stall_timeout_s:
                problems.append(f"stalled: lag {lag} and no progress for {quiet:.1f} s "
                                f"(limit {self.stall_timeout_s:g} s)")
            if problems:
                return False, "; ".join(problems)
            return True, f"partitions assigned: {len(self._assigned)}, lag {lag}; {why}"

    # ------------------------------------------------------------------ helpers (lock held)
    def _liveness(self, now: float) -> tuple[bool, str]:
        if self._started_at is None:
            return False, "not started"
        if self._last_poll is None:
            age = now - self._started_at
            what = f"no poll yet, {age:.1f} s after start"
        else:
            age = now - self._last_poll
            what = f"last poll {age:.1f} s ago"
        if age > self.liveness_timeout_s:
            return False, f"{what} (limit {self.liveness_timeout_s:g} s)"
        return True, what

    def _partition_totals(self, where: Labels) -> dict[str, int]:
        """What each counter of partition ``where`` holds; its series are made (at 0) the first time."""
        totals = self._totals.get(where)
        if totals is None:
            totals = self._totals[where] = dict.fromkeys(_FOLLOWING, 0)
            for counter in self._counters.values():
                counter.labels(*where)
        return totals

    def _raise_to(self, where: Labels, name: str, total: int) -> None:
        """Raise counter ``name`` of partition ``where`` to ``total``; never lowers it."""
        totals = self._partition_totals(where)
        delta = total - totals[name]
        if delta > 0:
            self._counters[name].labels(*where).inc(delta)
            totals[name] = total

    def _follow_classes(self, where: Labels, totals: Mapping[str, Mapping[str, int]]) -> None:
        """Raise the per-class counters of partition ``where`` to ``totals`` (class label → counter
        → total); a class's series are made (at 0) the first time; never lowered."""
        held = self._class_totals.setdefault(where, {})
        for label, counts in totals.items():
            known = held.get(label)
            if known is None:
                known = held[label] = dict.fromkeys(_CLASS_FOLLOWING, 0)
                for counter in self._class_counters.values():
                    counter.labels(*where, label)
            for name, total in counts.items():
                if total > known[name]:
                    self._class_counters[name].labels(*where, label).inc(total - known[name])
                    known[name] = total

    def _total_lag(self) -> int:
        return sum(max(v, 0) for v in self._lags.values())

    def _checkpoint_age(self) -> float:
        with self._lock:
            last = self._last_good_checkpoint
            return math.nan if last is None else self._clock() - last


class NullObserver:
    """Observes nothing (``SP_OBSERVE__ENABLED=false``): the worker reports to it as to an
    :class:`Observer`, and nothing is served or kept."""

    host = ""
    port = 0

    def start(self) -> None:
        """Nothing to serve."""

    def stop(self) -> None:
        """Nothing to stop."""

    def polled(self) -> None:
        """Nobody asks whether the loop is alive."""

    def batch(self, *, topic: str, partition: int, records: int, labeled: int, mistakes: int,
              dead_letters: int) -> None:
        """No counters."""

    def drift(self, topic: str, partition: int) -> None:
        """No counters."""

    def mix_adopted(self, topic: str, partition: int, *, staleness: int, overdue: bool) -> None:
        """No histogram."""

    def mix_paused(self, topic: str, partition: int, seconds: float) -> None:
        """No counters."""

    def feature_names(self, in_use: int, limit: int | None, *, topic: str, partition: int) -> None:
        """No gauges."""

    def stats(self, snapshot: Mapping[str, Any]) -> None:
        """No gauges."""

    def forget(self, partitions: Iterable[tuple[str, int]]) -> None:
        """No series to remove."""

    def checkpoint(self, *, ok: bool, duration_s: float) -> None:
        """No counters."""

    def outputs_confirmed(self) -> None:
        """No readiness."""

    def lag(self, lags: Mapping[tuple[str, int], int]) -> None:
        """No gauges."""

    def assigned(self, partitions: Sequence[tuple[str, int]]) -> None:
        """No gauges."""

    def rebalance(self) -> None:
        """No counters."""


def _health(ok: bool, reason: str) -> Response:
    """``/healthz`` and ``/readyz``: 200 or 503, ``{"ok", "reason"}``."""
    return Response(200 if ok else 503, json.dumps({"ok": ok, "reason": reason}).encode(), "application/json")


def observer_for(settings: ObserveSettings) -> Observer | NullObserver:
    """The observer ``SP_OBSERVE__*`` describe: an :class:`Observer`, or a :class:`NullObserver`
    when disabled."""
    if not settings.enabled:
        return NullObserver()
    token = settings.token.get_secret_value() if settings.token is not None else None
    return Observer(host=settings.host, port=settings.port, liveness_timeout_s=settings.liveness_timeout_s,
                    token=token)


def probe(url: str, timeout_s: float = 3.0) -> tuple[bool, str]:
    """GET ``url``: ``(status == 200, body)``, or ``(False, error)``; never raises.

    >>> probe("http://127.0.0.1:1/healthz", timeout_s=0.5)[0]
    False
    """
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False, f"not an http(s) URL: {url!r}"
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.hostname, parts.port, timeout=timeout_s)
        try:
            conn.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
            response = conn.getresponse()
            body = response.read().decode("utf-8", errors="replace").strip()
            return response.status == 200, body
        finally:
            conn.close()
    except Exception as exc:  # a probe answers, it does not fail
        return False, f"{type(exc).__name__}: {exc}"
