"""The C allocator of a long-running sidecar: large freed blocks are kept for reuse.

A full BuildContext answer of a long session is one large ``bytes`` object (about 10 MB at 50k
events), made anew for every answer whose contents changed, and gRPC copies it once more into
its own buffer. glibc's ``malloc`` serves blocks that large by mapping fresh pages from the
kernel (``mmap``), or trims them off its heap when they are freed, so every such answer faulted
in and zeroed its pages again: some 5,200 page faults and 10 ms of system CPU per 10 MB answer
here, two thirds of the call (``python -m bench context-floor``, full grown at 50k events).

``tune_malloc`` sets glibc's thresholds so that blocks of up to ``MMAP_THRESHOLD_BYTES`` come
from the heap, and up to ``TRIM_THRESHOLD_BYTES`` of freed memory at the heap's top is kept
instead of handed back: the next answer reuses pages already mapped. (It also turns off glibc's
own adjustment of those thresholds, which is what failed here: it follows the largest block
freed, but two answers' buffers freed together exceed the trim threshold it derives.) The price
is the memory kept, at most ``TRIM_THRESHOLD_BYTES`` beyond what is in use, per arena.

``mallopt`` is glibc's: elsewhere (musl, macOS) nothing is changed and ``tune_malloc`` says so.
The settings are process-wide, so only ``contextengine serve`` applies them (``malloc_tuning``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

__all__ = ["MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES", "tune_malloc"]

#: blocks up to this size come from the heap (glibc's largest allowed value on 64-bit systems)
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
#: freed memory at the top of a heap kept for reuse, up to this much
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024

# mallopt's parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    # gnu_get_libc_version tells glibc from other C libraries that may export a mallopt
    # with other parameter numbers.
    if getattr(libc, "gnu_get_libc_version", None) is None:
        return None
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    function: Callable[[int, int], int] = mallopt
    return function


def tune_malloc(mallopt: Callable[[int, int], int] | None = None) -> bool:
    """Applies the thresholds (see the module docstring); True when the C library took both.
    ``mallopt`` replaces glibc's (tests)."""
    if mallopt is None:
        mallopt = _glibc_mallopt()
        if mallopt is None:
            return False
    # The trim threshold first: once the mmap threshold is set, glibc stops adjusting both.
    trim = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    mmap = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    return trim == 1 and mmap == 1
