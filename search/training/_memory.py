"""Keep freed tensor memory inside the training process.

A training epoch allocates and frees the same large activations again and again (for
a pack of 32 Cora GCNs, tensors of 22 MB). glibc serves blocks above its mmap threshold
with fresh ``mmap`` pages and returns freed heap to the kernel above its trim threshold,
so every epoch paid for page faults and zeroed pages. Measured on a 20-epoch run of a
pack of 32: 1.46 million minor faults (0.51 million with raised thresholds) and epochs
12-18% slower. Raising both thresholds lets the heap keep the memory and reuse it; the
process's resident size stays near its peak instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

# mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: glibc's largest mmap threshold on 64-bit systems (larger values are refused).
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Free heap kept before any is returned to the kernel.
TRIM_THRESHOLD = 1024 * 1024 * 1024


@lru_cache(maxsize=1)
def retain_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; False where there is no
    glibc (macOS, musl), which keeps its own allocator's behaviour."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
