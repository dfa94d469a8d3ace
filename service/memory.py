"""Large payloads go back to the kernel once freed (glibc's malloc, Linux).

Each consumed value becomes a Python `bytes` of its size, allocated with `malloc`.
glibc serves allocations above its mmap threshold (128 KiB) with `mmap` and unmaps
them on free, but it raises that threshold to the size of every mapped block freed
(up to 32 MiB): after the first 1 MB message, 1 MB values come from the heap, and
a burst of them leaves the heap grown and fragmented, so RSS stays at its peak
long after the burst (62 -> 382 MB, then 373 MB after the drain, measured here
before this). Fixing the threshold with `mallopt(M_MMAP_THRESHOLD)` turns the
adjustment off: every value of 128 KiB or more is mapped and returned on free,
and RSS comes back down. Smaller values are unaffected, and so is the hot loop:
an mmap per large value costs microseconds against the milliseconds of decoding
a megabyte.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from typing import Final

_M_MMAP_THRESHOLD: Final = -3
MMAP_THRESHOLD: Final = 128 * 1024


def release_large_buffers() -> bool:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD`; False where that is not
    possible (not Linux, not glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
