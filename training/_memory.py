"""Memory: how many runs one pack may hold, and (opt-in) keeping freed memory in-process.

:func:`pack_capacity` sizes packs from measured memory per run. :func:`retain_freed_memory`
changes the whole process's allocator, so training never calls it: the entry points that
own the process (the Ray trainable, `orthotune train`, the plan's measuring, the benchmarks) opt in.

Why keep freed memory:

A training epoch allocates and frees the same large activations again and again (for
a pack of 32 Cora GCNs, tensors of 22 MB). glibc serves blocks above its mmap threshold
with fresh ``mmap`` pages and returns freed heap to the kernel above its trim threshold,
so every epoch paid for page faults and zeroed pages. Measured on a 20-epoch run of a
pack of 32: 1.46 million minor faults (0.51 million with raised thresholds) and epochs
12-18% slower. Raising both thresholds lets the heap keep the memory and reuse it; the
process's resident size stays near its peak instead.

glibc caps the mmap threshold at 32 MiB, so a larger tensor (PubMed JKNet-8's concatenated
head, ``[19717, 576]``: 45 MB; every ogbn-arxiv state) was still mapped afresh and faulted in
page by page on each use. Allowing no mmap'd blocks at all (``M_MMAP_MAX`` 0) serves those
from the heap too: PubMed JKNet-8 at 5 runs, 2.0-2.2 s -> 1.46-1.60 s per epoch, 2.1-2.4
million minor faults -> 0.2 million over 6 epochs, peak resident +120-170 MiB (2026-11-29,
2-core EPYC, one thread). Where the heap cannot grow, glibc still falls back to mmap.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import torch

# mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
#: glibc's largest mmap threshold on 64-bit systems (larger values are refused).
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Free heap kept before any is returned to the kernel.
TRIM_THRESHOLD = 1024 * 1024 * 1024


@lru_cache(maxsize=1)
def retain_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds and allow no mmap'd blocks, once per process;
    False where there is no glibc (macOS, musl), which keeps its own allocator's behaviour."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    settings = ((_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_MMAP_MAX, 0))
    return all([bool(mallopt(parameter, value)) for parameter, value in settings])  # a list: every one is set


def capacity(per_run_bytes: float, free_bytes: float, fraction: float, cap: int | None, runs: int) -> int:
    """Runs per pack: as many as ``fraction`` of the free memory holds, at most ``cap``
    and ``runs``, at least one."""
    fits = int(free_bytes * fraction // max(per_run_bytes, 1.0))
    return max(1, min(fits, cap or runs, runs))


def cpu_capacity(count: int, options: Any, state_bytes: int = 0) -> int:
    """Runs per pack of ``count`` runs on a CPU: their packed states within
    ``options.cpu_state_mib``, within the user's cap, at least one."""
    budget = options.cpu_state_mib * 2**20
    fits = int(budget // state_bytes) if state_bytes and math.isfinite(budget) else count
    return max(1, min(fits, options.max_pack or count, count))


def pack_capacity(make_pack: Callable[[Sequence[Any], list[int]], Any], runs: Sequence[Any],
                  device: torch.device, options: Any, state_bytes: int = 0) -> int:
    """Runs per pack for ``runs`` on ``device``; ``state_bytes``: one run's largest
    activation (one hidden state) in bytes.

    On a GPU a probe pack of up to ``PROBE_RUNS`` runs trains one epoch; its peak memory
    per run (fixed costs included, so an overestimate) against the free memory decides
    how many runs one pack may hold. On a CPU the packed states stay within
    ``options.cpu_state_mib`` (default :data:`~._options.CPU_STATE_BYTES`). The user's cap
    (``options.max_pack``) always applies.
    """
    cap, count = options.max_pack, len(runs)
    if device.type != "cuda":
        return cpu_capacity(count, options, state_bytes)
    if count <= 1 or (cap is not None and cap <= 1):
        return max(1, min(cap or count, count))
    per_run = _probe_bytes(make_pack, runs, device)
    free, _ = torch.cuda.mem_get_info(device)
    reusable = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return capacity(per_run, free + reusable, options.memory_fraction, cap, count)


#: Runs in the probe pack that measures memory per run.
PROBE_RUNS = 4


def _probe_bytes(make_pack, runs, device: torch.device) -> float:
    """Peak device bytes per run of one training epoch of a small probe pack (of one run
    if even the probe does not fit)."""
    try:
        return _peak_per_run(make_pack, runs, device, min(PROBE_RUNS, len(runs)))
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return _peak_per_run(make_pack, runs, device, 1)


def _peak_per_run(make_pack, runs, device: torch.device, count: int) -> float:
    slots = list(range(count))
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    pack = make_pack(runs, slots)
    active = torch.ones(len(slots), dtype=torch.bool, device=device)
    pack.keep_best(pack.epoch(1, active).fault == 0)
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - base
    del pack
    torch.cuda.empty_cache()
    return peak / len(slots)
