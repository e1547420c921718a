"""One input partition's state in the worker: its own model and statistics, its next offset, its
fencing epoch, and what the worker has said about it.

A partition's predictions and final model are a function of its own records in offset order:
scoring and learning a record use only its partition's :class:`PartitionState`, so they do not
depend on how partitions interleave in a poll, or on which worker holds the partition.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from stream_perceptron.errors import CheckpointError
from stream_perceptron.features.standardize import Standardizer
from stream_perceptron.model.class_learner import MulticlassLearner
from stream_perceptron.model.class_stats import MulticlassStats
from stream_perceptron.model.drift import DriftWatch
from stream_perceptron.model.learner import Learner
from stream_perceptron.model.mixing import MixLog
from stream_perceptron.model.multiclass import MulticlassPerceptron
from stream_perceptron.model.pending import PendingLabels
from stream_perceptron.model.perceptron import Perceptron
from stream_perceptron.model.stats import RunningStats
from stream_perceptron.settings import Settings
from stream_perceptron.state.stored import StoredState, new_model_id
from stream_perceptron.worker.pacing import MixWait


def new_learner(settings: Settings) -> Learner:
    """A learner at zero weights, configured by ``settings``: the K-class perceptron's when they
    ask for one (``SP_MODEL__CLASSES`` of three or more, ``SP_MODEL__MULTICLASS``), chosen here
    once for the partition."""
    m, s = settings.model, settings.stats
    if m.k_class():
        model = MulticlassPerceptron(n_features=m.n_features, fit_intercept=m.fit_intercept,
                                     max_names=settings.limits.max_names, average=m.average,
                                     hash_bits=m.hash_bits, hash_sign=m.hash_sign, classes=m.classes,
                                     learn_classes=m.unknown_class == "learn",
                                     max_classes=settings.limits.max_classes)
        # a poll's dense rows decide in the compiled loop: a mistake of the K-class rule costs
        # numpy's blocks several µs, the loop's first call loads numba once in the process
        model.compiled_min_rows = 1
        return MulticlassLearner(
            model,
            MulticlassStats(window=s.window, ewma_alpha=s.ewma_alpha),
            *drift_watch(settings), scores=settings.output.scores == "all",
        )
    return Learner(
        Perceptron(n_features=m.n_features, fit_intercept=m.fit_intercept,
                   max_names=settings.limits.max_names, average=m.average,
                   hash_bits=m.hash_bits, hash_sign=m.hash_sign),
        RunningStats(window=s.window, ewma_alpha=s.ewma_alpha),
        *drift_watch(settings),
    )


def drift_watch(settings: Settings) -> tuple[DriftWatch | None, str]:
    """The drift detectors ``SP_DRIFT__*`` ask for (on the served model's errors too with
    averaging) and what an alarm does: a :class:`Learner`'s last two arguments."""
    d = settings.drift
    if d.detector == "none":
        return None, "none"
    return DriftWatch(d.detector, served=settings.model.average), d.on_drift


@dataclass
class PartitionState:
    """What the worker holds for one assigned input partition."""

    topic: str
    partition: int
    learner: Learner
    epoch: int
    """The store's fencing epoch of this worker's claim."""
    model_id: str = field(default_factory=new_model_id)
    next_offset: int | None = None
    """The next offset to process (past the last processed, or the restored state's); None
    while nothing was processed and no state or initial model named one."""
    start: int | None = None
    """Where the partition started on assignment (the state's offset, else the group's commit)."""
    committed: int | None = None
    """The group's committed offset, as read at assignment and raised by each commit: commits
    never go below it."""
    restored_ahead: int | None = None
    """The restored state's offset where the group's commit was below it at assignment (a worker
    stopped between storing a state and committing its offset): the next checkpoint offers it
    for commit once."""
    dead_letters: int = 0
    pending: PendingLabels = field(default_factory=lambda: PendingLabels(0))
    """Predictions waiting for late labels (none kept until the worker sets the bounds)."""
    dirty: bool = False
    """Learned or advanced since the last stored state."""
    fenced: bool = False
    """Another worker claimed the partition since this one did: nothing more of it is processed,
    stored or committed here."""
    saved_at: str | None = None
    """Where the last stored state went (the restored one's, at first)."""
    origin: str = "zero weights"
    """What the partition's model started from on assignment: "its stored state", "the initial model" or
    "zero weights"."""
    width_from: str | None = None
    refusals_told: set[str] = field(default_factory=set)
    mix: MixLog | None = None
    """Its mixing counters and latest adoption (``SP_MIX__EVERY_EXAMPLES`` set; worker/mixer.py)."""
    mix_log: list[dict[str, Any]] = field(default_factory=list)
    """Its adoptions past the group's committed offset, as its model-topic record logs them."""
    mix_wait: MixWait | None = None
    """Set while it waits at a mixing point for partitions behind (worker/pacing.py)."""
    mix_left: float | None = None
    """When it left its last mixing point, or was opened (the mixer's monotonic clock): the time
    from then to its next point is its lap, which sets how long its fresh wait there lasts
    (worker/mixer.py)."""
    mix_excused: dict[int, int] = field(default_factory=dict)
    """Partitions it waited for in vain, each with the version it had then: not waited for again
    until they publish another."""
    stats_seen: int = 0
    """Examples seen at its last statistics record (for the record's ``examples_per_s``)."""
    stats_time: float = field(default_factory=time.monotonic)
    """When its last statistics record was made (monotonic)."""
    spec: str | None = None
    """The fingerprint of the feature spec its events go through (None: envelope records)."""
    standardizer: Standardizer = field(default_factory=Standardizer)
    """The running means and variances of its standardized features (a feature spec's)."""

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def name(self) -> str:
        return f"{self.topic}[{self.partition}]"

    def config(self) -> dict[str, Any]:
        """The configuration its stored state must match: the model's, and the feature spec's
        fingerprint when its events go through one."""
        config = self.learner.model.config()
        if self.spec is not None:
            config["features"] = self.spec
        return config

    def adopt(self, ckpt: StoredState, settings: Settings, *, own: bool) -> None:
        """Take ``ckpt``'s model and statistics: the partition's own stored state (``own``), or
        the initial model (a `fit` state, or a version-1 worker's), whose offset for this partition,
        if it holds one, is where the partition resumes. Raises :class:`CheckpointError` for a
        checkpoint of another configuration, or one this worker cannot restore."""
        model = self.learner.model
        ckpt.check_config(self.config(), settings.model.classes)
        try:
            if model.n_features is None and isinstance(ckpt.config.get("n_features"), int):
                model.n_features = ckpt.config["n_features"]  # unset here: the checkpoint's holds
            self.learner.restore(ckpt.model, ckpt.stats)
            self.dead_letters = int(ckpt.stats.get("dead_letters", 0)) if own else 0
            if own and "labels" in ckpt.stats:
                self.pending.set_state(ckpt.stats["labels"])
            if own and isinstance(ckpt.stats.get("mix"), dict):
                self.mix = MixLog.from_state(ckpt.stats["mix"])
            if own and isinstance(ckpt.stats.get("features"), dict):
                self.standardizer = Standardizer.from_state(ckpt.stats["features"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # the checksum holds, so the file is intact: written by something else, not damaged
            raise CheckpointError(
                f"checkpoint {ckpt.path or 'record'} is intact but not one this worker can restore"
                f" ({type(exc).__name__}: {exc}): move it away, or fix what wrote it"
            ) from None
        offset = ckpt.offsets.get(self.topic, {}).get(self.partition)
        if offset is not None:
            self.next_offset = offset
        if ckpt.model_id is not None and (own or offset is not None):
            self.model_id = ckpt.model_id  # the same model goes on; a `fit` initial model begins a new one
        if own:  # a file of the directory store, or a record of the state topic
            self.saved_at = str(ckpt.path) if ckpt.path is not None else "its stored state"
        self.origin = "its stored state" if own else "the initial model"
        if settings.model.n_features is None and model.dim:
            where = ckpt.path or "the stored state"
            self.width_from = (
                f"checkpoint {where}'s, adopted with SP_MODEL__N_FEATURES unset; to learn"
                " records of another width, point SP_CHECKPOINT__DIR at a directory of their own"
            )
        self.stats_seen, self.stats_time = self.learner.stats.seen, time.monotonic()

    def statistics(self, *, client_id: str, started: float, lag: int | None) -> dict[str, Any]:
        """The partition's statistics record: its running statistics plus throughput since the
        last record, dead letters, offset and ``lag`` (README, "Record formats"); ``started``:
        when the worker started (monotonic), for ``uptime_s``."""
        now = time.monotonic()
        learner = self.learner
        if isinstance(learner, MulticlassLearner):  # K classes: per class, the confusion, b per class
            classes = learner.model.classes
            snap = learner.stats.snapshot(classes)
            snap["intercepts"] = learner.model.intercept.tolist()
            intercept = None
        else:
            snap, intercept = learner.stats.snapshot(), learner.model.intercept
        seen = snap["seen"]
        elapsed = now - self.stats_time
        rate = (seen - self.stats_seen) / elapsed if elapsed > 0 else None
        self.stats_seen, self.stats_time = seen, now
        return {
            **snap,
            "updates": learner.model.updates,
            "intercept": intercept,
            "examples_per_s": rate,
            "dead_letters": self.dead_letters,
            "offsets": {} if self.next_offset is None
            else {self.topic: {str(self.partition): self.next_offset}},
            "lag": {} if lag is None else {f"{self.topic}:{self.partition}": lag},
            "ts": time.time(),
            "uptime_s": now - started,
            "client_id": client_id,
            "model_id": self.model_id,
            "drifts": learner.drifts,
            "last_drift_offset": learner.last_drift_offset,
            "topic": self.topic,
            "partition": self.partition,
            "pending_labels": len(self.pending),
            "label_joins": self.pending.joins,
            "label_expiries": self.pending.expiries,
            "label_delay_s": self.pending.delay_mean,
            "mix": self.mix_statistics(),
        }

    def mix_statistics(self) -> dict[str, Any] | None:
        """The statistics record's ``"mix"``: the mix version (mixing points so far), this
        partition's k and μ in the latest mix, the running Σμk, the staleness (how many versions
        the oldest state mixed was behind this partition's), the partitions the latest adoption
        went on without although they were behind (``stale``: versions behind, by partition), the
        seconds spent waiting at mixing points (``paused_s``) and the waits that ran out
        (``overdue``). None when the partition never mixed."""
        ml = self.mix
        if ml is None or ml.last is None:
            return None
        m = ml.last["mix"]
        i = m["partitions"].index(self.partition)
        return {"version": ml.version, "offset": ml.last["offset"], "k": m["mistakes"][i], "mu": m["mu"][i],
                "sum_mu_k": ml.sum_mu_k, "partitions": m["partitions"],
                "staleness": ml.last["epoch"] - min(m["epochs"]), "stale": ml.last.get("stale", {}),
                "paused_s": ml.paused_s, "overdue": ml.overdue}

    def state(self) -> StoredState:
        """The partition's state to store (its offset must be known)."""
        if self.next_offset is None:
            raise ValueError(f"{self.name} has no offset to store")
        model_state, stats_state = self.learner.state()
        stats_state["dead_letters"] = self.dead_letters
        if self.pending.max_entries or len(self.pending):
            stats_state["labels"] = self.pending.get_state()
        if self.mix is not None:
            stats_state["mix"] = self.mix.get_state()
        if len(self.standardizer):
            stats_state["features"] = self.standardizer.get_state()
        return StoredState(model_state, self.config(), stats_state,
                          {self.topic: {self.partition: self.next_offset}}, model_id=self.model_id)
