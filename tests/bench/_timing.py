"""Timing for the benchmark scripts beside this file (imported as ``from _timing import best_of``)."""

from __future__ import annotations

import time


def best_of(fn, repeats: int) -> float:
    """The fastest of ``repeats`` calls, in seconds, after one warm-up call (allocator, compile)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best
