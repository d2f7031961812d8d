"""The fidelity benchmark's ASHA part and the ASHA replay run end to end at shape-check size
(the figures are the benchmarks' job, not the test's)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def bench(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.slow  # two real searches on a local Ray
def test_asha_against_the_grid_then_replayed_over_its_stored_curves(tmp_path):
    store = str(tmp_path / "store")
    out = bench("fidelity.py", "--quick", "--only-asha", "--store", store)
    assert re.search(r"grid best val [\d.]+; ASHA winner val [\d.]+ \(gap [\d.-]+ pts", out), out
    assert re.search(r"spent \d+ of the grid's \d+ repeat-epochs", out), out
    replayed = bench("asha_replay.py", "--store", store, "--max-epochs", "20", "--grace-period", "5",
                     "--orders", "3", "--compare")
    lines = replayed.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("objective only") and lines[1].startswith("rung score")
    assert all(re.search(r"3 random orders: share mean [\d.]+%.*nested order: share [\d.]+%", line) for line in lines)
