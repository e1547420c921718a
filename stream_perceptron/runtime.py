"""Process-level tuning for the long-running loop: the C allocator's arenas and the cycle collector.

Both are measured by ``bench/bench_worker.py`` (see ``docs/performance.md``, "Decisions"):

* **Allocator arenas.** glibc gives each thread that contends for the heap an arena of its own
  (up to 8 per core). The Kafka clients' I/O threads allocate network buffers that the main
  thread frees, and memory freed in one arena is not reused by the others: with kafka-python
  the worker's resident memory crept up over a run (+7–14% from 100k to 1M records, a trend of
  ~1 MB per 100k) while its live Python objects did not. With two arenas the trend is +0.4 MB
  per 100k records.
  Fixing glibc's mmap and trim thresholds as well flattened it further but made wide inputs
  19–61% slower (every large numpy block mmapped afresh), so they keep their defaults.
* **The cycle collector.** A poll batch allocates thousands of short-lived, acyclic objects that
  reference counting frees; with Python's default young-generation threshold (700) they set
  off a collection every few hundred records, each scanning everything alive.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging

log = logging.getLogger(__name__)

# mallopt(3) parameter number of M_ARENA_MAX in glibc's <malloc.h>.
_M_ARENA_MAX = -8

MALLOC_ARENAS = 2
"""Heap arenas glibc may use (its default: 8 per core)."""

GC_GEN0_THRESHOLD = 50_000
"""Young-generation threshold of the cycle collector while the loop runs (Python's default: 700)."""


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's heap arenas at ``arenas`` (``mallopt(M_ARENA_MAX)``); False where there is no
    glibc (musl, macOS) or it refuses. Call it before the process starts threads: arenas that
    exist already stay. The environment variable ``MALLOC_ARENA_MAX`` does the same at start-up.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = bool(mallopt(_M_ARENA_MAX, arenas))
    log.debug("malloc arenas capped at %d: %s", arenas, ok)
    return ok


def tune_gc(gen0_threshold: int = GC_GEN0_THRESHOLD) -> None:
    """Set the cycle collector up for the loop; call it once start-up is done.

    Everything alive at that point (imported modules, the clients, the model) lives as long as
    the process: ``gc.freeze()`` keeps it out of every later scan. The young generation is then
    collected every ``gen0_threshold`` net allocations instead of every 700.
    """
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)
