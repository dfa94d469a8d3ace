"""Large payloads go back to the kernel after a burst (glibc's malloc, Linux).

Each consumed value becomes a Python `bytes` of its size, allocated with `malloc`.
glibc serves a 1 MB value from its heap once its (adaptive) mmap threshold has
risen past that size, so a burst of large messages leaves the heap grown and
fragmented, and RSS stays at its peak long after the burst (62 -> 382 MB, then
373 MB after the drain, measured here). `trim()` calls `malloc_trim(0)`, which
hands every free page of every arena back to the kernel; the consumer calls it
once when a burst of large values ends (`service.loop.batch_loop`), never per batch.

Fixing the mmap threshold instead (`mallopt(M_MMAP_THRESHOLD)`, so that each
large value is mapped and unmapped on its own) also brings RSS down, but it maps
and unmaps librdkafka's fetch buffers too: +0.1 s of its broker thread's CPU per
300k medium messages, and the worker's drain fell from 0.89-0.92x to 0.80-0.85x
of the bare loop's (`make bench`, measured here), a cost the bare loop does not pay.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable


def _malloc_trim() -> Callable[[], object]:
    """glibc's `malloc_trim(0)`, or a no-op where there is none (not glibc)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            malloc_trim = libc.malloc_trim
        except (OSError, AttributeError):  # musl and others
            pass
        else:
            malloc_trim.argtypes = [ctypes.c_size_t]
            malloc_trim.restype = ctypes.c_int
            return lambda: malloc_trim(0)
    return lambda: None


trim: Callable[[], object] = _malloc_trim()
"""Returns the heap's free pages to the kernel (a few ms at most; once a burst)."""
