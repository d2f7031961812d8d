"""The floor bench runs end to end and prints every op group (figures are its job, not the test's)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two subprocesses, a few Cora epochs each under the profiler
def test_the_floor_bench_prints_every_group_with_its_bytes_and_time():
    sys.path.insert(0, str(ROOT / "bench"))
    from epoch_groups import GROUPS

    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "epoch_bytes.py"), "--cases", "cora-gcn2-4",
                           "--epochs", "1", "--json"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.splitlines()[0])
    (result,) = figures["this tree"][0]["results"]
    assert result["wall"] > 0 and result["finish"] > 0 and figures["this tree"][0]["bandwidth"] > 0
    assert set(GROUPS) <= set(result["groups"]) | {"keep-best"}
    for group in GROUPS:
        assert any(line.strip().startswith(group) for line in proc.stdout.splitlines()), group
