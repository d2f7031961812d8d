"""The throughput benchmark runs end to end (figures are the benchmark's job, not the test's)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # starts a real Ray: 16 s
def test_throughput_bench_floor_and_orthotune_parts_run():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "throughput.py"), "--configs", "4", "--epochs", "3",
         "--parts", "a", "c", "--json"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["floor_s"] > 0 and summary["orthotune_s"] > 0 and summary["plain_s"] is None
    assert summary["configs"] == 4
    for key in ("unpacked_test_acc", "packed_test_acc"):
        assert 0.0 <= summary[key]["mean"] <= 1.0
