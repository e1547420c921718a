"""Durable checkpoints: the model, its statistics and the input offsets they reflect.

A checkpoint is one file ``ckpt-<seq>.json`` (``seq`` a zero-padded, ever-increasing number)
made of two UTF-8 lines, so that any language can read it (format in ``docs/state-format.md``)::

    {"format": "stream-perceptron-checkpoint", "version": 1, "sha256": "<hex>", "length": <n>}
    <body: n bytes of JSON>

The body holds ``model`` (weights, intercept, mistakes, feature names), ``config`` (what the
fingerprint covers), ``fingerprint``, ``stats``, ``offsets`` (``{topic: {partition: next
offset}}``), ``created`` and ``model_id`` (the model's identity, kept from the checkpoint
that began it). Writes are atomic: temp file, fsync, rename, fsync the directory.
Loading takes the newest file whose length and checksum hold and skips others with a warning.
This module knows no Kafka.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from stream_perceptron.errors import CheckpointError, CheckpointMismatchError, CheckpointUnreadableError

log = logging.getLogger(__name__)

FORMAT = "stream-perceptron-checkpoint"
VERSION = 1
_NAME = re.compile(r"^ckpt-(\d{12})\.json$")
_MODEL_ID = re.compile(r"^[0-9a-f]{32}$")

Offsets = dict[str, dict[int, int]]


def new_model_id() -> str:
    """A fresh model identity: 32 random hex digits (a UUID4 without dashes)."""
    return uuid.uuid4().hex


def fingerprint(config: Mapping[str, Any]) -> str:
    """A short, stable hash of a model configuration (sorted-key JSON, sha256, 16 hex digits)."""
    return hashlib.sha256(orjson.dumps(dict(config), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


@dataclass
class StoredState:
    """One checkpoint's content."""

    model: dict[str, Any]
    config: dict[str, Any]
    stats: dict[str, Any]
    offsets: Offsets
    created: float = field(default_factory=time.time)
    seq: int = 0
    path: Path | None = None
    model_id: str | None = None
    """Names the model from the first checkpoint that held it on. :func:`read` gives a file
    written before the field existed the first 32 hex digits of its SHA-256."""

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "config": self.config,
            "fingerprint": fingerprint(self.config),
            "model": self.model,
            "stats": self.stats,
            "offsets": {t: {str(p): o for p, o in parts.items()} for t, parts in self.offsets.items()},
            "created": self.created,
        }
        if self.model_id is not None:
            body["model_id"] = self.model_id
        return body

    def check_config(self, config: Mapping[str, Any], classes: Sequence[Any] | None = None) -> None:
        """Fail with a clear message unless this checkpoint fits a model configured as ``config``.

        ``n_features`` None on either side adopts the other's (the worker takes the checkpoint's
        when its own setting is unset); ``fit_intercept``, ``average``, ``hash_bits``,
        ``hash_sign`` and ``features`` (the feature spec's fingerprint) must be equal (an absent
        one is its default). ``multiclass``: a K-class state fits only a K-class model; a binary
        state fits one too (converted to two classes, rows negative then positive), unless its
        classes are booleans, which a K-class worker does not take. ``classes`` (the configured
        ``SP_MODEL__CLASSES``) and the state's classes must begin alike: one list the start of
        the other.
        """
        saved = self.config
        problems = []
        k_there, k_here = bool(saved.get("multiclass", False)), bool(config.get("multiclass", False))
        held = self.model.get("classes")
        if k_there and not k_here:
            problems.append(f"{len(held or [])} classes there (a K-class model), a binary model here"
                            " (SP_MODEL__CLASSES, SP_MODEL__MULTICLASS)")
        elif k_here and not k_there and any(isinstance(c, bool) for c in held or []):
            problems.append(f"the binary classes {held!r} there, booleans a K-class worker does not take"
                            " as classes (SP_MODEL__MULTICLASS)")
        if k_here and classes is not None and held:
            given, stored = list(classes), list(held)
            n = min(len(given), len(stored))
            if [(type(c), c) for c in given[:n]] != [(type(c), c) for c in stored[:n]]:
                problems.append(f"the classes {stored!r} there, {given!r} here (SP_MODEL__CLASSES must"
                                " begin as the state's classes do)")
        if saved.get("fit_intercept") != config.get("fit_intercept"):
            problems.append(
                f"fit_intercept={saved.get('fit_intercept')} there,"
                f" {config.get('fit_intercept')} here (SP_MODEL__FIT_INTERCEPT)"
            )
        # absent from a checkpoint of a default model (and from every one written before them)
        for key, default, setting in (("average", False, "SP_MODEL__AVERAGE"),
                                      ("hash_bits", None, "SP_MODEL__HASH_BITS"),
                                      ("hash_sign", False, "SP_MODEL__HASH_SIGN"),
                                      ("features", None, "the feature spec, SP_FEATURES__*")):
            there, here = saved.get(key, default), config.get(key, default)
            if there != here:
                problems.append(f"{key}={there} there, {here} here ({setting})")
        mine, theirs = config.get("n_features"), saved.get("n_features")
        weights = self.model.get("weights") or []
        dim = len(weights[0]) if weights and isinstance(weights[0], list) else len(weights)
        if mine is not None and ((theirs is not None and theirs != mine) or dim not in (0, mine)):
            problems.append(
                f"n_features={theirs if theirs is not None else dim} there, {mine} here"
                " (SP_MODEL__N_FEATURES)"
            )
        if problems:
            where = self.path or "the checkpoint"
            raise CheckpointMismatchError(
                f"checkpoint {where} was written for another model configuration ("
                + "; ".join(problems)
                + "): point SP_CHECKPOINT__DIR elsewhere or match the model settings"
            )


class StateFiles:
    """Checkpoints under one directory: atomic writes, keep the last ``keep``, load newest valid."""

    def __init__(self, directory: str | Path, keep: int = 3) -> None:
        self.directory = Path(directory)
        self.keep = keep
        self._seq = 0  # the highest sequence number this store has written or seen

    def _files(self) -> list[tuple[int, Path]]:
        if not self.directory.is_dir():
            return []
        found = []
        for p in self.directory.iterdir():
            m = _NAME.match(p.name)
            if m:
                found.append((int(m.group(1)), p))
        return sorted(found)

    def files(self) -> list[Path]:
        """The checkpoint files present, valid or not, oldest first."""
        return [path for _, path in self._files()]

    def set_aside(self) -> Path | None:
        """Move every checkpoint file into a new subdirectory ``replaced-<UTC time>`` (which
        :meth:`load` does not look into), so the next :meth:`save` begins a new model; returns
        that subdirectory, or None when there was no file to move.

        The files are moved, not deleted: they may be a worker's months of learning, and the
        rename within the directory is as cheap as a delete. Raises :class:`CheckpointError`
        when they cannot be moved (those already moved stay moved).
        """
        files = self.files()
        if not files:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        try:
            for n in itertools.count(1):
                aside = self.directory / (f"replaced-{stamp}" if n == 1 else f"replaced-{stamp}-{n}")
                try:
                    aside.mkdir(mode=DIR_MODE)
                    break
                except FileExistsError:
                    continue
            for path in files:
                os.replace(path, aside / path.name)
            _fsync_dir(aside)
            _fsync_dir(self.directory)
        except OSError as exc:
            raise CheckpointError(
                f"cannot move the checkpoints in {self.directory} aside: {exc.strerror or exc}"
            ) from None
        return aside

    def save(self, ckpt: StoredState) -> Path:
        """Write ``ckpt`` durably and prune old files; returns its path.

        Raises :class:`CheckpointError` when the directory cannot be written; the previous
        checkpoints are then untouched.

        The new file's sequence number is above every number on disk *and* every number this
        store has written or loaded, so a listing that comes back empty while the storage is away
        (a directory that is briefly missing, or replaced) can never number the newest checkpoint
        below older ones.
        """
        data = serialize(ckpt)
        tmp: Path | None = None
        try:
            make_dir(self.directory)
            files = self._files()
            seq = max(self._seq, files[-1][0] if files else 0) + 1
            path = self.directory / f"ckpt-{seq:012d}.json"
            tmp = self.directory / f".ckpt-{seq:012d}.json.tmp"
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE), "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            _fsync_dir(self.directory)
        except OSError as exc:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
            raise CheckpointError(f"cannot write checkpoint in {self.directory}: {exc}") from exc
        self._seq = seq
        ckpt.seq, ckpt.path = seq, path
        for _, old in files[: max(0, len(files) + 1 - self.keep)]:
            try:
                old.unlink(missing_ok=True)
            except OSError as exc:  # the new checkpoint is durable; the next save prunes again
                log.warning("cannot remove old checkpoint %s: %s", old, exc)
        return path

    def load(self, *, refuse_damaged: bool = False) -> StoredState | None:
        """The newest valid checkpoint, or None when there is none; damaged ones are skipped.

        With ``refuse_damaged``, files that are all damaged raise :class:`CheckpointError` instead
        of giving None: the decision is made on the listing the files were read from, so a
        reader beside a worker that writes its first file meanwhile never mistakes that file for
        a damaged one.

        Raises :class:`CheckpointError` when the directory's path exists but is not a directory
        (or is a symlink to nothing), and :class:`CheckpointUnreadableError` when a file cannot
        be read now (an I/O error is not damage: falling back to an older checkpoint would
        resume from older offsets than the newest durable one).
        """
        d = self.directory
        try:
            if (d.exists() or d.is_symlink()) and not d.is_dir():
                dangling = "" if d.exists() else " (a symlink to nothing)"
                raise CheckpointError(
                    f"checkpoint directory {d} is not a directory{dangling} (SP_CHECKPOINT__DIR)"
                )
            files = self._files()
        except OSError as exc:  # EACCES or EIO on the directory itself: not damage, not a traceback
            raise CheckpointUnreadableError(
                f"cannot list checkpoint directory {d}: {exc.strerror or exc}"
            ) from None
        for _ in range(_RELISTS):
            if files:
                self._seq = max(self._seq, files[-1][0])
            pruned = False
            damaged = 0
            for seq, path in reversed(files):
                try:
                    return read(path, seq)
                except CheckpointUnreadableError:
                    raise
                except CheckpointError as exc:
                    if not path.exists():  # pruned since it was listed: a writer saved newer ones
                        pruned = True
                        continue
                    log.warning("skipping checkpoint %s: %s", path, exc)
                    damaged += 1
            if not pruned:
                if damaged and refuse_damaged:
                    raise CheckpointError(
                        f"none of the {damaged} checkpoint files in {d} is valid (see the warnings"
                        " above); refusing to start the partition from zero weights: move them"
                        " away to start it afresh"
                    )
                return None
            # every file listed that was not damaged was pruned before it was read (a reader
            # beside a running worker, descheduled for a few of its saves): list them again
            try:
                files = self._files()
            except OSError as exc:
                raise CheckpointUnreadableError(
                    f"cannot list checkpoint directory {d}: {exc.strerror or exc}"
                ) from None
        return None


# How many times :meth:`StateFiles.load` lists the directory again when the files it listed
# were pruned before it could read them.
_RELISTS = 5


def read(path: Path, seq: int = 0) -> StoredState:
    """Read and verify one checkpoint file (:func:`parse`)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:  # pruned since it was listed
        raise CheckpointError(f"cannot read: {exc}") from exc
    except OSError as exc:
        raise CheckpointUnreadableError(f"cannot read checkpoint {path}: {exc}") from exc
    return parse(raw, seq, path)


def serialize(ckpt: StoredState) -> bytes:
    """A checkpoint file's bytes: the header line, then the body line (``docs/state-format.md``)."""
    body = orjson.dumps(ckpt.body(), option=orjson.OPT_SERIALIZE_NUMPY)
    header = orjson.dumps(
        {
            "format": FORMAT,
            "version": VERSION,
            "sha256": hashlib.sha256(body).hexdigest(),
            "length": len(body),
        }
    )
    return header + b"\n" + body + b"\n"


def parse(raw: bytes, seq: int = 0, path: Path | None = None) -> StoredState:
    """Verify and decode a checkpoint file's bytes (as :func:`serialize` writes them);
    :class:`CheckpointError` saying what is wrong when they are not a valid checkpoint."""
    head, sep, rest = raw.partition(b"\n")
    try:
        header = orjson.loads(head)
    except orjson.JSONDecodeError:
        raise CheckpointError("header is not JSON") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError("not a stream-perceptron checkpoint")
    if header.get("version") != VERSION:
        raise CheckpointError(f"format version {header.get('version')}, this build reads {VERSION}")
    length = header.get("length")
    if type(length) is not int or length < 0 or not isinstance(header.get("sha256"), str):
        raise CheckpointError("damaged header: length or sha256 is not what a writer puts there")
    body = rest[:length]
    if not sep or len(body) != length:
        raise CheckpointError(f"truncated: {len(rest)} of {length} body bytes")
    if hashlib.sha256(body).hexdigest() != header["sha256"]:
        raise CheckpointError("checksum mismatch")
    try:  # the checksum holds, so only a file written by something else fails here
        data = orjson.loads(body)
        model_id = data.get("model_id")
        if model_id is None:  # written before model_id existed: named by its checksum, so every
            model_id = header["sha256"][:32]  # restart from this file agrees until the next save
        if not (isinstance(model_id, str) and _MODEL_ID.match(model_id)):
            raise ValueError(f"model_id {str(model_id)[:40]!r} is not 32 hex digits")
        return StoredState(
            model=data["model"],
            config=data["config"],
            stats=data["stats"],
            offsets={t: {int(p): int(o) for p, o in ps.items()} for t, ps in data["offsets"].items()},
            created=data["created"],
            seq=seq,
            path=path,
            model_id=model_id,
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"body is not a checkpoint: {type(exc).__name__}: {exc}") from None


FILE_MODE = 0o600
"""The mode of every file the worker writes (state files, claims, locks): its states hold feature
names taken from the input, for its own user alone. The process's umask can only narrow it."""

DIR_MODE = 0o700
"""The mode of every directory the worker makes; one that exists keeps its own."""


def make_dir(directory: Path) -> None:
    """Create ``directory`` and its missing ancestors (mode :data:`DIR_MODE`) durably: a directory
    made here survives a power loss once its parent's entry is fsynced (POSIX; ext4 and XFS
    mostly do it anyway)."""
    missing = []
    for d in (directory, *directory.absolute().parents):
        if d.exists():
            break
        missing.append(d)
    for d in reversed(missing):
        d.mkdir(mode=DIR_MODE, exist_ok=True)
        _fsync_dir(d.parent)
    directory.mkdir(mode=DIR_MODE, exist_ok=True)  # there already: refused unless a directory


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
