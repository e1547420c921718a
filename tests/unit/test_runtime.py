"""Process tuning: the allocator's arenas are capped where glibc is there; the collector is set up."""

from __future__ import annotations

import gc
import platform
import subprocess
import sys

import pytest

from stream_perceptron.runtime import GC_GEN0_THRESHOLD, limit_malloc_arenas, tune_gc


def test_malloc_arenas_are_capped_on_glibc_and_left_alone_elsewhere():
    assert limit_malloc_arenas() is (platform.libc_ver()[0] == "glibc")


_ARENAS = """
import ctypes, sys, threading
from stream_perceptron.runtime import limit_malloc_arenas
if sys.argv[1] == "capped":
    assert limit_malloc_arenas(2)
barrier = threading.Barrier(8)
def work():
    keep = [bytes(4096) for _ in range(200)]  # past pymalloc: glibc's malloc, in the thread's arena
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
ctypes.CDLL("libc.so.6").malloc_stats()  # one "Arena N:" block per arena, on stderr
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's arenas only")
def test_capped_arenas_hold_however_many_threads_allocate():
    def arenas(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", _ARENAS, mode], capture_output=True, text=True,
                              check=True, timeout=60)
        return sum(line.startswith("Arena ") for line in done.stderr.splitlines())

    # glibc gives each new thread an arena of its own, up to 8 per core, unless capped
    assert arenas("capped") <= 2 < arenas("free")


def test_tune_gc_freezes_what_is_alive_and_raises_the_young_threshold():
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == (GC_GEN0_THRESHOLD, before[1], before[2])
        assert gc.get_freeze_count() > 1000  # the imported modules, at least
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
