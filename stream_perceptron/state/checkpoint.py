"""Durable checkpoints: the model, its statistics and the input offsets they reflect.

A checkpoint is one file ``ckpt-<seq>.json`` (``seq`` a zero-padded, ever-increasing number)
made of two UTF-8 lines, so that any language can read it (format in ``docs/checkpoint-format.md``)::

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
import fcntl
import hashlib
import itertools
import logging
import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from stream_perceptron.errors import CheckpointError, CheckpointMismatchError, CheckpointUnreadableError

log = logging.getLogger(__name__)

FORMAT = "stream-perceptron-checkpoint"
VERSION = 1
LOCK_NAME = ".lock"
"""The file under a checkpoint directory whose `flock` marks the directory taken."""
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
class Checkpoint:
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

    def check_config(self, config: Mapping[str, Any]) -> None:
        """Fail with a clear message unless this checkpoint fits a model configured as ``config``.

        ``n_features`` None on either side adopts the other's (the worker takes the checkpoint's
        when its own setting is unset); ``fit_intercept``, ``average``, ``hash_bits`` and
        ``hash_sign`` must be equal (an absent one is its default).
        """
        saved = self.config
        problems = []
        if saved.get("fit_intercept") != config.get("fit_intercept"):
            problems.append(
                f"fit_intercept={saved.get('fit_intercept')} there,"
                f" {config.get('fit_intercept')} here (SP_MODEL__FIT_INTERCEPT)"
            )
        # absent from a checkpoint of a default model (and from every one written before them)
        for key, default, setting in (("average", False, "SP_MODEL__AVERAGE"),
                                      ("hash_bits", None, "SP_MODEL__HASH_BITS"),
                                      ("hash_sign", False, "SP_MODEL__HASH_SIGN")):
            there, here = saved.get(key, default), config.get(key, default)
            if there != here:
                problems.append(f"{key}={there} there, {here} here ({setting})")
        mine, theirs = config.get("n_features"), saved.get("n_features")
        dim = len(self.model.get("weights") or [])
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


class CheckpointStore:
    """Checkpoints under one directory: atomic writes, keep the last ``keep``, load newest valid."""

    def __init__(self, directory: str | Path, keep: int = 3) -> None:
        self.directory = Path(directory)
        self.keep = keep
        self._seq = 0  # the highest sequence number this store has written or seen
        # the partitions each kept checkpoint holds, by sequence number (valid files only: a
        # damaged one is never restored); None for one that could not be read
        self._held: dict[int, frozenset[tuple[str, int]] | None] = {}
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Take the directory for this process: an exclusive ``flock`` on ``<dir>/.lock``, held
        until :meth:`unlock` or the process ends (``kill -9`` included: the kernel releases it).

        Two workers writing one directory would prune each other's files, and a restart would
        restore the other's model and offsets. Raises :class:`CheckpointError` when another
        process holds it, or when the directory cannot be created or written (a worker would
        otherwise run without ever checkpointing); a path that exists and is not a directory is
        left for :meth:`load` to name.
        """
        if self._lock_fd is not None:
            return
        d = self.directory
        try:
            _make_dir(d)
            try:
                fd = os.open(d / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            except PermissionError:  # a lock file of another user (fit run as someone else): flock
                fd = os.open(d / LOCK_NAME, os.O_RDONLY)  # works on a read-only descriptor too
        except OSError as exc:
            if (d.exists() or d.is_symlink()) and not d.is_dir():
                return  # load() names it
            raise CheckpointError(
                f"checkpoint directory {d} cannot be used: {exc.strerror or exc}"
                + (f" ({exc.filename})" if exc.filename and str(exc.filename) != str(d) else "")
                + " (SP_CHECKPOINT__DIR)"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise CheckpointError(
                f"checkpoint directory {self.directory} is in use by another process"
                " (SP_CHECKPOINT__DIR): give each worker a directory of its own"
            ) from None
        self._lock_fd = fd

    def unlock(self) -> None:
        """Release :meth:`lock`'s hold, if any."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)

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
                    aside.mkdir()
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
        self._held.clear()
        return aside

    def save(self, ckpt: Checkpoint) -> Path:
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
            _make_dir(self.directory)
            files = self._files()
            seq = max(self._seq, files[-1][0] if files else 0) + 1
            path = self.directory / f"ckpt-{seq:012d}.json"
            tmp = self.directory / f".ckpt-{seq:012d}.json.tmp"
            with open(tmp, "wb") as fh:
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
        self._held[seq] = _partitions(ckpt)
        for old_seq, old in files[: max(0, len(files) + 1 - self.keep)]:
            try:
                old.unlink(missing_ok=True)
            except OSError as exc:  # the new checkpoint is durable; the next save prunes again
                log.warning("cannot remove old checkpoint %s: %s", old, exc)
            else:
                self._held.pop(old_seq, None)
        return path

    def held_by_all(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs that every kept checkpoint holds an offset for.

        A restart that falls back past a damaged newest file restores an older kept one, and
        starts a partition that one never saw at the group's committed offset. Committing a
        partition's offset is therefore safe only once every checkpoint a restart could fall
        back to holds the partition (then the checkpoint's own offset wins); until then the
        group's commit must stay at or before where this worker's learning of it began. A kept
        file this store could not read counts as holding nothing.
        """
        held = [h for h in self._held.values() if h is not None]
        if not held or len(held) < len(self._held):  # none known, or one that could not be read
            return frozenset()
        return frozenset.intersection(*held)

    def load(self) -> Checkpoint | None:
        """The newest valid checkpoint, or None when there is none; damaged ones are skipped.

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
        if files:
            self._seq = max(self._seq, files[-1][0])
        newest: Checkpoint | None = None
        for seq, path in reversed(files):
            try:
                ckpt = read(path, seq)
            except CheckpointUnreadableError:
                if newest is None:
                    raise
                self._held[seq] = None  # may be restored later: assume it holds nothing
                continue
            except CheckpointError as exc:
                if newest is None:
                    log.warning("skipping checkpoint %s: %s", path, exc)
                continue
            self._held[seq] = _partitions(ckpt)
            if newest is None:
                newest = ckpt
        return newest


def read(path: Path, seq: int = 0) -> Checkpoint:
    """Read and verify one checkpoint file (:func:`parse`)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:  # pruned since it was listed
        raise CheckpointError(f"cannot read: {exc}") from exc
    except OSError as exc:
        raise CheckpointUnreadableError(f"cannot read checkpoint {path}: {exc}") from exc
    return parse(raw, seq, path)


def serialize(ckpt: Checkpoint) -> bytes:
    """A checkpoint file's bytes: the header line, then the body line (``docs/checkpoint-format.md``)."""
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


def parse(raw: bytes, seq: int = 0, path: Path | None = None) -> Checkpoint:
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
        return Checkpoint(
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


def _partitions(ckpt: Checkpoint) -> frozenset[tuple[str, int]]:
    return frozenset((t, p) for t, ps in ckpt.offsets.items() for p in ps)


def _make_dir(directory: Path) -> None:
    """Create ``directory`` and its missing ancestors durably: a directory made here survives a
    power loss once its parent's entry is fsynced (POSIX; ext4 and XFS mostly do it anyway)."""
    missing = []
    for d in (directory, *directory.absolute().parents):
        if d.exists():
            break
        missing.append(d)
    directory.mkdir(parents=True, exist_ok=True)
    for d in reversed(missing):
        _fsync_dir(d.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
