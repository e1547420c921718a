"""``stream-perceptron fit``: the offline perceptron over a dataset, with its report."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from stream_perceptron.codec.inputs import check_features
from stream_perceptron.codec.limits import Limits
from stream_perceptron.errors import CheckpointExistsError, DecodeError, SourceError
from stream_perceptron.model.learner import Learner
from stream_perceptron.model.perceptron import Features, FloatArray, Perceptron
from stream_perceptron.model.stats import RunningStats, row_norms
from stream_perceptron.settings import Settings
from stream_perceptron.sources import Source, no_positive_class, open_source
from stream_perceptron.state.stored import StateFiles, StoredState, new_model_id


@dataclass(frozen=True)
class FitReport:
    """What a fit found: per-pass mistakes and the perceptron's quantities for the final model.

    ``gamma`` is the margin of the dataset under the final augmented model [θ, θ0] (the margin of a dataset),
    ``R`` the largest ‖[x, 1]‖ (‖x‖ without intercept). When ``gamma`` > 0 the final model is a
    separator with that margin, so the convergence theorem bounds the total mistakes by (R/γ)².
    """

    source: str
    examples: int
    per_pass: list[int]
    training_error: float
    R: float
    gamma: float | None
    bound: float | None
    weights: list[float]
    intercept: float
    checkpoint: Path
    replaced: Path | None = None
    """Where the checkpoints the directory held before went (``--replace``), if it held any."""

    def lines(self) -> list[str]:
        out = [f"{self.source}: {self.examples} examples"]
        for i, k in enumerate(self.per_pass, 1):
            out.append(f"pass {i}: {k} mistakes ({k / self.examples:.4f} of the examples)")
        total = sum(self.per_pass)
        out.append(f"training error E_n of the final model: {self.training_error:.4f}")
        out.append(f"R = {self.R:.6g}")
        if self.gamma is None:
            out.append("gamma: the final model does not separate the data (margin <= 0); no bound")
        else:
            out.append(
                f"gamma = {self.gamma:.6g}; bound (R/gamma)^2 = {self.bound:.6g};"
                f" mistakes in all = {total}"
            )
        if self.replaced is not None:
            out.append(f"the checkpoints the directory held before: moved to {self.replaced}")
        out.append(f"checkpoint: {self.checkpoint}")
        return out


# Dense rows packed into one float64 block at a time while a source is read.
_BLOCK_ROWS = 65_536


def _read(spec: str, source: Iterable[tuple[Features, int]], limits: Limits) -> tuple[
        FloatArray | list[Features], array[int]]:
    """A source's examples, each held to the worker's bounds, and their labels (``int8``).

    While every row is a list of one width, rows are packed into float64 blocks as they are read
    (the values ``np.array`` makes of the whole list), so a long dense stream is held once, as the
    matrix the model learns from, and not first as Python floats (about 35 bytes each against
    8). Any other stream (named features, or widths that differ) is kept as read, and the model
    vectorizes it whole as before.
    """
    blocks: list[FloatArray] = []
    rows: list[Features] = []
    ys: array[int] = array("b")
    width: int | None = None
    packing = True
    for x, y_i in source:
        try:  # the worker's bounds: its model (and the checkpoint) must hold what fit learns
            check_features(x, limits)
        except DecodeError as exc:
            raise SourceError(f"{spec}: example {len(ys) + 1}: {exc}") from None
        if packing:
            if width is None and isinstance(x, list):
                width = len(x)
            if not (isinstance(x, list) and len(x) == width):
                packing = False  # back to the rows as read: tolist() gives the same floats again
                rows = [row for block in blocks for row in block.tolist()] + rows
                blocks = []
        rows.append(x)
        ys.append(y_i)
        if packing and len(rows) == _BLOCK_ROWS:
            blocks.append(np.array(rows, dtype=np.float64))
            rows = []
    if not ys:
        raise SourceError(f"{spec} has no examples")
    if not packing:
        return rows, ys
    if rows:
        blocks.append(np.array(rows, dtype=np.float64))
    return (blocks[0] if len(blocks) == 1 else np.concatenate(blocks)), ys


def _refuse_a_model_there(store: StateFiles) -> None:
    """Raise :class:`CheckpointExistsError` when ``store`` holds checkpoint files: a new model
    saved beside them would make one directory hold two models (a worker restores the newest,
    and falls back to the other's files when that one is damaged)."""
    files = store.files()
    if files:
        raise CheckpointExistsError(
            f"{store.directory} already holds a model ({len(files)} checkpoint files, the newest"
            f" {files[-1].name}): name another --checkpoint-dir, or pass --replace to move them"
            " aside first"
        )


def _name_as_the_source(model: Perceptron, source: Source) -> None:
    """Give the model the names its source knows: the columns of a dense source (a CSV's header,
    a river dataset's keys), so that the checkpoint scores dict rows by name, and the labels of
    its two classes as the dataset wrote them (the model learned their signs)."""
    names = source.feature_names
    if names and not model.feature_names and model.hash_bits is None and model.dim == len(names):
        model.name_features(names)
    if source.classes is not None:
        model.name_classes(*source.classes.names())


def fit_source(
    settings: Settings, spec: str, *, passes: int, limit: int | None = None, label: str = "y",
    replace: bool = False,
) -> FitReport:
    """Fit a fresh model on ``spec`` for up to ``passes`` passes and checkpoint it.

    A checkpoint directory that already holds checkpoints is refused
    (:class:`CheckpointExistsError`, before the source is read) unless ``replace``: its files
    are then moved aside (:meth:`StateFiles.set_aside`) just before the new one is written.
    """
    store = StateFiles(settings.checkpoint.dir, settings.checkpoint.keep)
    if not replace:
        _refuse_a_model_there(store)
    limits = settings.codec_limits()
    source = open_source(spec, limit=limit, label=label, positive_class=limits.positive_class,
                         negative_class=limits.negative_class)
    xs, ys = _read(spec, source, limits)
    no_positive_class(spec, limits.positive_class, len(ys), sum(y_i > 0 for y_i in ys))
    m = settings.model
    model = Perceptron(
        n_features=m.n_features, fit_intercept=m.fit_intercept, max_names=settings.limits.max_names,
        average=m.average, hash_bits=m.hash_bits, hash_sign=m.hash_sign,
    )
    X, rejected = model.vectorize_many(xs)
    del xs
    if rejected:
        row, reason = next(iter(rejected.items()))
        raise SourceError(f"{spec}: example {row + 1}: {reason}")
    y = np.frombuffer(ys, dtype=np.int8)
    learner = Learner(model, RunningStats(settings.stats.window, settings.stats.ewma_alpha))
    per_pass: list[int] = []
    for _ in range(passes):
        result = learner.step(X, y).result
        per_pass.append(int(result.mistakes.sum()))
        if per_pass[-1] == 0:
            break
    functional = y * model.score_many(X, served=False)  # the learning θ's, as γ and E_n are defined
    norm_aug = model.norms()[1]
    gamma_all = float(functional.min() / norm_aug) if norm_aug > 0 else 0.0
    r = float(row_norms(X, model.fit_intercept).max())
    gamma = gamma_all if gamma_all > 0 else None
    _name_as_the_source(model, source)
    model_state, stats_state = learner.state()
    # A worker reads the initial model only when it starts: a `fit` beside a running one changes nothing
    # until its next start, and each partition with a state of its own keeps it.
    if replace:
        replaced = store.set_aside()
    else:
        replaced = None
        _refuse_a_model_there(store)  # again: one may have come while the source was read
    path = store.save(StoredState(model=model_state, config=model.config(), stats=stats_state,
                                 offsets={}, model_id=new_model_id()))
    return FitReport(
        source=spec,
        examples=len(X),
        per_pass=per_pass,
        training_error=float((functional <= 0).mean()),
        R=r,
        gamma=gamma,
        bound=(r / gamma) ** 2 if gamma else None,
        weights=model.weights.tolist(),
        intercept=model.intercept,
        checkpoint=path,
        replaced=replaced,
    )
