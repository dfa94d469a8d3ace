"""Allocation passes, apart from the timings: traced bytes per call and C heap held.

tracemalloc makes every allocation several times slower, so it never runs while a
sample is timed: `traced` is a pass of its own over the pool's first messages.
tracemalloc sees Python's allocators only; protobuf's upb keeps a parsed message
in arenas taken from C `malloc`, invisible to it. `malloc_held` therefore reads
glibc's in-use byte count (`mallinfo2`) around a batch of held decoded objects,
with tracemalloc off (its own tables would be counted).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any, Final

from codecbench.results import Alloc


class _MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (2.33+): every field a `size_t`."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _load_mallinfo2() -> Callable[[], Any] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        func = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):  # musl, or glibc before 2.33
        return None
    func.restype = _MallInfo2
    func.argtypes = []
    return func


_MALLINFO2: Final = _load_mallinfo2()


def _identity(item: Any) -> Any:
    return item


def _trace(op: Callable[[Any], object], items: Sequence[Any]) -> tuple[int, int]:
    """Summed (peak, retained) traced bytes of `op` over `items`, bookkeeping included.

    The order is deliberate: `before` is read, then the peak is reset, so the int
    that holds `before` (and nothing else of this loop) is inside every window;
    the identity pass measures exactly that and is subtracted.
    """
    get, reset = tracemalloc.get_traced_memory, tracemalloc.reset_peak
    peak_sum = retained_sum = 0
    for item in items:
        before = get()[0]
        reset()
        result = op(item)
        now, peak = get()
        del result
        peak_sum += peak - before
        retained_sum += now - before
    return peak_sum, retained_sum


def traced(op: Callable[[Any], object], items: Sequence[Any]) -> Alloc:
    """Mean traced peak and retained bytes of one call of `op`, over `items`.

    Args:
        op: the call to measure; its result is held until the figures are read.
        items: its arguments, one call each; warm `op` on them first so one-time
            caches (and a logic sink's new keys) are not counted.
    """
    was_tracing = tracemalloc.is_tracing()
    gc.collect()
    if not was_tracing:
        tracemalloc.start(1)  # one frame: the cheapest traceback, none is read
    try:
        base_peak, base_retained = _trace(_identity, items)
        peak, retained = _trace(op, items)
    finally:
        if not was_tracing:
            tracemalloc.stop()
    calls = len(items)
    return Alloc(
        peak_bytes=max(0, peak - base_peak) / calls,
        retained_bytes=max(0, retained - base_retained) / calls,
        calls=calls,
    )


def _malloc_in_use(mallinfo2: Callable[[], Any]) -> int:
    info = mallinfo2()
    # uordblks: bytes in chunks from the heap arenas; hblkhd: bytes in mmap'd chunks
    # (glibc serves requests of 128 KiB and up with mmap by default).
    return int(info.uordblks) + int(info.hblkhd)


def malloc_held(decode: Callable[[bytes], Any], wire: Sequence[bytes]) -> float | None:
    """C heap in use per decoded object while all of `wire` is held decoded.

    Returns:
        Bytes per object (may be slightly negative when the heap frees something
        of its own meanwhile), or None where glibc's `mallinfo2` is missing.
    """
    mallinfo2 = _MALLINFO2
    if mallinfo2 is None or tracemalloc.is_tracing():
        return None
    # Sized first, so the list's own growth is not counted against the objects.
    held: list[Any] = [None] * len(wire)
    gc.collect()
    before = _malloc_in_use(mallinfo2)
    for i, data in enumerate(wire):
        held[i] = decode(data)
    after = _malloc_in_use(mallinfo2)
    del held
    return (after - before) / len(wire)
