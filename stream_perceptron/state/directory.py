"""``SP_CHECKPOINT__STORE=directory``: each partition's states as checkpoint files of its own.

Layout under ``SP_CHECKPOINT__DIR`` (format of each file in ``docs/state-format.md``)::

    ckpt-<seq>.json                           the initial model: a `fit` state, or a version-1 worker's
    partitions/<topic>/<partition>/
        ckpt-<seq>.json                       the partition's states, newest last (keep the last K)
        claim                                 the fencing epoch: one decimal integer
        .lock                                 flock'ed for the moment of a claim or a save

Several workers may share the directory (a shared volume): a partition is written only by the
worker that claimed it last. :meth:`DirectoryStore.claim` raises the partition's epoch by one
under the partition's lock; :meth:`DirectoryStore.save` checks, under the same lock, that the
epoch is still the caller's, and refuses with :class:`FencedError` otherwise. ``flock`` is
atomic on a local file system and on NFSv4.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stream_perceptron.errors import CheckpointError, FencedError
from stream_perceptron.state.store import partition_of
from stream_perceptron.state.stored import FILE_MODE, StateFiles, StoredState, make_dir

PARTITIONS = "partitions"
CLAIM = "claim"


class DirectoryStore:
    """Partition states under one directory (see the module's docstring)."""

    def __init__(self, directory: str | Path, keep: int = 3) -> None:
        self.directory = Path(directory)
        self.keep = keep
        self._stores: dict[tuple[str, int], StateFiles] = {}

    def open(self) -> None:
        """Create the directory if missing, durably; :class:`CheckpointError` naming
        ``SP_CHECKPOINT__DIR`` when it cannot be made or written (a worker would otherwise learn
        and predict without ever storing a state or committing)."""
        d = self.directory
        try:
            make_dir(d)
            probe = d / f".probe-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
            probe.unlink()
        except OSError as exc:
            raise CheckpointError(
                f"checkpoint directory {d} cannot be used: {exc.strerror or exc}"
                + (f" ({exc.filename})" if exc.filename and str(exc.filename) != str(d) else "")
                + " (SP_CHECKPOINT__DIR)"
            ) from None

    def partition_dir(self, topic: str, partition: int) -> Path:
        """Where ``topic[partition]``'s files are."""
        return self.directory / PARTITIONS / topic / str(partition)

    def files(self, topic: str, partition: int) -> StateFiles:
        """The partition's checkpoint files, as a :class:`StateFiles`."""
        key = (topic, partition)
        store = self._stores.get(key)
        if store is None:
            store = self._stores[key] = StateFiles(self.partition_dir(topic, partition), self.keep)
        return store

    def initial(self) -> StoredState | None:
        """The initial model: the newest valid state at the top of the directory (a `fit`
        state, or a version-1 worker's), which starts each partition that has no state yet;
        None if none."""
        return StateFiles(self.directory, self.keep).load()

    def preflight(self, config: dict[str, Any]) -> None:
        """Open the directory and check every partition's newest state against ``config``: a
        directory the worker cannot use, or a state of another configuration, stops the worker
        before it connects."""
        self.open()
        for topic, part in self.partitions():
            stored = self.load(topic, part)
            if stored is not None:
                stored.check_config(config)

    def partitions(self) -> list[tuple[str, int]]:
        """The partitions that have a directory here, sorted."""
        root = self.directory / PARTITIONS
        found = []
        if root.is_dir():
            for topic_dir in root.iterdir():
                if topic_dir.is_dir():
                    found += [(topic_dir.name, int(p.name)) for p in topic_dir.iterdir()
                              if p.is_dir() and p.name.isdigit()]
        return sorted(found)

    @contextlib.contextmanager
    def _locked(self, topic: str, partition: int) -> Iterator[Path]:
        d = self.partition_dir(topic, partition)
        try:
            make_dir(d)
            fd = os.open(d / ".lock", os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise CheckpointError(
                f"checkpoint directory {d} cannot be used: {exc.strerror or exc} (SP_CHECKPOINT__DIR)"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield d
        finally:
            os.close(fd)  # releases the flock

    def _epoch(self, d: Path) -> int:
        try:
            return int((d / CLAIM).read_text().strip() or 0)
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot read {d / CLAIM}: {exc}") from None

    def claim(self, topic: str, partition: int) -> int:
        with self._locked(topic, partition) as d:
            epoch = self._epoch(d) + 1
            tmp = d / f".{CLAIM}.tmp"
            try:
                with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE), "w") as fh:
                    fh.write(f"{epoch}\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, d / CLAIM)
            except OSError as exc:
                raise CheckpointError(f"cannot claim {d}: {exc.strerror or exc}") from None
            return epoch

    def load(self, topic: str, partition: int) -> StoredState | None:
        return self.files(topic, partition).load(refuse_damaged=True)

    def save(self, state: StoredState, epoch: int) -> str:
        topic, partition, _ = partition_of(state)
        with self._locked(topic, partition) as d:
            now = self._epoch(d)
            if now != epoch:
                raise FencedError(
                    f"{topic}[{partition}] was claimed by another worker since this one did"
                    f" (epoch {now}, this worker's {epoch}): its state was not stored"
                )
            return str(self.files(topic, partition).save(state))

    def close(self) -> None:
        self._stores.clear()
