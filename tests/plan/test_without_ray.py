"""The planner and the trainer where Ray, Optuna and OGB are not installed, as on the GPU
machine `bench/gpu-lease.sh` runs on: its `plan` and `train` steps must not import them.

Each command runs in a fresh interpreter that cannot import those packages (the ``without_ray``
fixture), with an empty orthotune cache, so the plan measures its shapes instead of reading a
kept plan.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def orthotune(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orthotune.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_hiding_hides(without_ray):
    probe = "import importlib.util as u; print([u.find_spec(n) is None for n in ('ray', 'optuna', 'ogb', 'torch')])"
    proc = subprocess.run([sys.executable, "-c", probe], env=without_ray, capture_output=True, text=True)
    assert proc.stdout.strip() == "[True, True, True, False]", proc.stderr


@pytest.mark.slow
def test_plan_measures_and_prints_without_ray(without_ray):
    proc = orthotune(without_ray, "plan", "--space", "quick", "--gpus", "1", "--gpus-per-trial", "auto", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    planned = json.loads(proc.stdout)
    assert planned["totals"]["trials"] == 30 and planned["totals"]["core_s"] > 0
    assert all(cell["measured"] and not cell["cached"] for cell in planned["cells"] if not cell["fitted"])
    assert planned["service_overhead"]["note"].startswith("no Ray here to measure it")


@pytest.mark.slow
def test_train_runs_without_ray(without_ray):
    proc = orthotune(without_ray, "train", "--dataset", "cornell", "--epochs", "2", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["epochs"] == 2
