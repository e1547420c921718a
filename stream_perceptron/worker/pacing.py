"""Which partitions hold a partition back at its mixing point (pure: no I/O, no clock).

Partition p at its n-th mixing point (it is about to adopt mix version n) adopts a mix only once

* **every partition of the same worker that has records to read** has published a state of
  version n: the partitions of one worker advance together, one mixing point at a time, and
  the mix each adopts at its n-th point is the mix of every one's n-th state, synchronous
  iterative parameter mixing (McDonald, Hall and Mann 2010) whatever order the polls bring the
  records in. Without a bound, a partition of the worker with nothing to read holds no one
  back: it cannot move.
* with ``SP_MIX__MAX_STALENESS`` = s, **every other partition of the input** (this worker's with
  nothing to read included) has published a state of version n − s or later (bounded staleness,
  as in stale synchronous parallel: the states a mix takes are at most s versions behind). A
  partition that has published nothing counts as version 0.

The worker's :class:`~stream_perceptron.worker.mixer.Mixer` waits (the partition paused) while
:func:`holding` names anyone it has not excused; a partition that held it back for the whole
``SP_MIX__MAX_WAIT_S`` is excused until it publishes a newer state (:class:`MixWait`,
``PartitionState.mix_excused``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


def holding(version: int, own: int, versions: Mapping[int, int], local: Mapping[int, bool], *,
            partitions: int, bound: int | None) -> dict[int, int]:
    """The partitions that hold partition ``own`` back at its mixing point of mix ``version``,
    each with the version it must publish first.

    ``versions``: each partition's newest published version (absent: 0); ``local``: the
    partitions of this worker, True for those with records to read; ``partitions``: the input's
    partition count; ``bound``: s (None: no bound across workers).

    >>> versions = {1: 2, 2: 3, 3: 1}
    >>> holding(3, 0, versions, {0: True, 1: True, 2: True}, partitions=4, bound=None)
    {1: 3}
    >>> holding(3, 0, versions, {0: True, 1: False}, partitions=4, bound=1)  # 1 has nothing to read
    {3: 2}
    >>> holding(2, 0, {}, {0: True}, partitions=3, bound=2)  # version 0 is 2 behind: within s
    {}
    """
    out = {}
    for q in sorted({*range(partitions), *local} - {own}):
        if local.get(q):
            need = version  # this worker's, with records to read
        elif bound is not None:
            need = version - bound
        else:
            continue
        if versions.get(q, 0) < need:
            out[q] = need
    return out


@dataclass
class MixWait:
    """A partition waiting at its mixing point: since when (monotonic seconds), at which input
    offset (the next record's), whether its records are paused through the edge, and whether a
    partition of another worker holds it back (``remote``: then only the model topic tells when
    that partition has moved); ``fresh_since``: since when the partitions it waits for are all
    within s (the fresh wait counts from then); ``fresh_s``: how long the fresh wait lasts, the
    partition's lap (the seconds from its last point, or its opening, to this one) plus
    ``SP_MIX__FRESH_WAIT_S``; the whole wait ends ``SP_MIX__MAX_WAIT_S`` after ``since`` at
    the latest."""

    since: float
    offset: int
    held: bool = False
    remote: bool = False
    fresh_since: float | None = None
    fresh_s: float = 0.0


__all__ = ["MixWait", "holding"]
