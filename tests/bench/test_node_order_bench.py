"""The node-order bench times both orders and both gradient forms, and prints each figure."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # PubMed's block products and a [5, 19717, 576] state: about 15 s
def test_the_bench_prints_both_orders_and_both_gradient_forms(data_root):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "node_order.py"), "--repeat", "1"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "ORTHOTUNE_DATA_ROOT": str(data_root.path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    spreads = re.findall(r"mean \|i - j\| (\d+) / (\d+)", proc.stdout)
    assert len(spreads) == 2 and all(int(new) < int(old) for old, new in spreads)
    assert len(re.findall(r"\d+: [\d.]+ / [\d.]+", proc.stdout)) == 12
