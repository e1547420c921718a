"""A filesystem helper the checkpoint-storage tests share (unit and fault-injection)."""

from __future__ import annotations

import os
from pathlib import Path


def point(link: Path, target: Path) -> None:
    """Atomically make ``link`` a symlink to ``target`` (a new symlink, then ``os.replace``)."""
    tmp = link.with_name(link.name + ".new")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)
