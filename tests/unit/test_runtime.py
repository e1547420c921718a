"""Process tuning: the allocator's arenas are capped where glibc is there; the collector is set up."""

from __future__ import annotations

import gc
import platform

from stream_perceptron.runtime import GC_GEN0_THRESHOLD, limit_malloc_arenas, tune_gc


def test_malloc_arenas_are_capped_on_glibc_and_left_alone_elsewhere():
    assert limit_malloc_arenas() is (platform.libc_ver()[0] == "glibc")


def test_tune_gc_freezes_what_is_alive_and_raises_the_young_threshold():
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == (GC_GEN0_THRESHOLD, before[1], before[2])
        assert gc.get_freeze_count() > 1000  # the imported modules, at least
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
