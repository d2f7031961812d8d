"""The adaptive budget's replay benchmark prints one row per pair and the totals, from a
stored fixed-budget search (hand-made here: both arms settled from their first trial)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "reports"))

from report_stores import CURVE_BASE, curve_row, hand_store, shifted  # noqa: E402


def _bench():
    spec = importlib.util.spec_from_file_location("adaptive_replay_bench", ROOT / "bench" / "adaptive_replay.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_replay_prints_each_pairs_verdicts_stop_and_the_totals(tmp_path, capsys):
    rows = []
    for i in range(40):
        val = shifted([0.80 if i == 0 else 0.70] * 5, 0.0, jitter=True)
        rows.append(curve_row(f"o{i}", val, shifted(CURVE_BASE, -0.01 * i), i, lr=0.001 * (i + 1)))
        rows.append(curve_row(f"x{i}", val, shifted(CURVE_BASE, 0.05, jitter=True), i, ortho=True, lr=0.001 * (i + 1)))
    hand_store(tmp_path / "s", rows)
    assert _bench().main(["--store", str(tmp_path / "s"), "--search", "hand"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "rule flat, looks 20, 25, 30, 35, 40 trials per arm"
    (row,) = [line for line in out if line.startswith("cora full gcn depth 2")]
    assert row.split()[-2:] == ["20", "50%"] and row.count("gain, significant") == 2
    assert out[-1].startswith("kept the fixed budget's verdict: 1 of 1 pairs (100%); trials: 50.0% of the fixed "
                              "budget's")


@pytest.mark.slow
@pytest.mark.parametrize("script", ["adaptive_replay.py", "stopping_candidates.py"])
def test_a_missing_store_is_one_line_and_exit_2_and_the_store_comes_from_the_environment(tmp_path, script):
    """Like the CLI: $ORTHOTUNE_STORE names the store when --store does not."""
    missing = tmp_path / "no-store"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--search", "x"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env={**os.environ, "ORTHOTUNE_STORE": str(missing)})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"error: no orthotune store at {str(missing)!r}"]
