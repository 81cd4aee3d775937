"""Keep freed memory inside the process, so that a training loop's tensors do not page-fault on every update.

glibc's malloc serves a large block (128 KiB at first, adaptively more) from a fresh ``mmap`` and, when it
is freed, hands it back to the kernel; it also trims the heap's free top once that passes a threshold. A
training loop allocates and frees the same few megabyte-sized activations on every update (MOBILE's
next-state proposals through the critics: 3,400 rows x 256 per layer), so each update pays the kernel for
pages it just returned, zeroed again on first touch. In the profiler this shows as ``clamp_min`` (the
ReLU, the first to write its fresh output) and ``copy_`` running at a fraction of memory speed.

``retain_freed_memory()`` raises the mmap threshold to glibc's 64-bit maximum (32 MiB) and the trim
threshold to its largest value, through ``mallopt`` (the settings ``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_`` would make, but applied from inside, so no launcher has to set them). The
cost: the process keeps its peak heap instead of returning it, which for these loops is what the next
update needs anyway. Measured in ``tests/bench/bench_allocator.py``. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3       # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20                         # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit glibc
TRIM_THRESHOLD = 2**31 - 1                        # mallopt takes an int

_applied: bool | None = None


def retain_freed_memory() -> bool:
    """Apply the settings once per process; True where glibc took them, False where there is no glibc."""
    global _applied
    if _applied is None:
        _applied = False
        if sys.platform.startswith("linux"):
            try:
                mallopt = ctypes.CDLL(None).mallopt
            except (OSError, AttributeError):      # a libc without mallopt (e.g. musl)
                return False
            mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
            _applied = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD,
                                                                                         TRIM_THRESHOLD))
    return _applied
