"""Process-level tuning for the long-running loop: the C allocator and the cycle collector.

Both are measured by ``bench/bench_worker.py`` (see ``docs/performance.md``):

* **The allocator (glibc).** glibc gives each thread that contends for the heap an arena of its
  own (up to 8 per core). The Kafka clients' I/O threads allocate network buffers that the main
  thread frees, and memory freed in one arena is not reused by the others. glibc also raises
  its mmap threshold each time a large mmapped block is freed (up to 32 MiB), after which such
  blocks come from the heap and stay resident. With kafka-python the worker's resident memory
  rose by 7–21% from 100k to 1M records and stepped by ±15 MB. Two arenas, a fixed 1 MiB
  mmap threshold and a 4 MiB trim threshold keep it within 90–98 MB (+6.8% from 100k to 1M).
* **The cycle collector.** A poll batch allocates thousands of short-lived, acyclic objects that
  reference counting frees; with Python's default young-generation threshold (700) they set
  off a collection every few hundred records, each scanning everything alive: about 5 µs per
  record with the defaults.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging

log = logging.getLogger(__name__)

# mallopt(3) parameter numbers in glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

MALLOC_ARENAS = 2
"""Heap arenas glibc may use (its default: 8 per core)."""

MALLOC_MMAP_THRESHOLD = 1 << 20
"""Blocks of this size or more are mmapped, and returned to the system when freed (glibc's
default starts at 128 KiB and rises with every large block freed)."""

MALLOC_TRIM_THRESHOLD = 4 << 20
"""Free memory at the top of the heap beyond this is returned to the system."""

GC_GEN0_THRESHOLD = 50_000
"""Young-generation threshold of the cycle collector while the loop runs (Python's default: 700)."""


def tune_allocator() -> bool:
    """Set glibc's allocator up for a long run (``mallopt``): :data:`MALLOC_ARENAS` arenas, the
    fixed :data:`MALLOC_MMAP_THRESHOLD` and :data:`MALLOC_TRIM_THRESHOLD`. False where there is
    no glibc (musl, macOS) or it refuses. Call it before the process starts threads: arenas that
    exist already stay. (The environment variables ``MALLOC_ARENA_MAX``,
    ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` do the same at start-up.)
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
    ok = all(
        mallopt(param, value) == 1  # mallopt returns 1 on success
        for param, value in (
            (_M_ARENA_MAX, MALLOC_ARENAS),
            (_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD),
            (_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD),
        )
    )
    log.debug("malloc tuned (arenas, mmap and trim thresholds): %s", ok)
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
