"""``retain_freed_memory``: a process that opts in reuses the memory of freed tensors, those
above glibc's largest mmap threshold (32 MiB) too, instead of faulting fresh pages in."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: A tensor of 48 MB, written and freed, over and over as an epoch's states are. Mapped afresh,
#: each use costs about 11,700 minor page faults. Reused from the heap, the first few uses may
#: still grow it (small objects allocated in between can split a freed block) before it settles:
#: the probe counts the faults of 10 uses after 8 of warm-up.
PROBE = """
import resource, sys, torch
from orthotune.training import retain_freed_memory
if sys.argv[1] == "retain" and not retain_freed_memory():
    print("no-glibc"); sys.exit()
def use():
    x = torch.empty(12_000_000)
    x.fill_(1.0)
    del x
for _ in range(8):
    use()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    use()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_tensor_above_the_mmap_threshold_reuses_freed_memory():
    retained = faults("retain")
    if retained == "no-glibc":
        pytest.skip("no glibc: the allocator keeps its own behaviour")
    assert int(faults("plain")) > 100_000  # mapped afresh every use (measured: about 117,000)
    assert int(retained) < 11_000  # settled: not one more tensor's worth (measured: 0)
