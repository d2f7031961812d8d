"""The GPU benchmark's shape, checked on the CPU at CI size (the figures are its job)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_bench_quick_prints_every_part(without_ray):
    # where the GPU machine runs it: no Ray, Optuna or OGB installed
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), "--quick", "--json"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT, env=without_ray)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert {"throughput", "projection"} <= set(summary), sorted(summary)
    assert summary["throughput"], summary
