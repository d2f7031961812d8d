"""`bench/gpu-lease.sh`, the one script a GPU lease runs, on this CPU machine: the steps that
need no GPU (the CUDA tests, which skip here, and the plan of a preset) run where Ray, Optuna
and OGB cannot be imported, as on the GPU machine, and leave their logs and JSON in ``$OUT``."""

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu-lease.sh"


def lease(env: dict, out: Path, *steps: str) -> subprocess.CompletedProcess:
    command = ["bash", str(SCRIPT), env["ORTHOTUNE_DATA_ROOT"], *steps]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**env, "OUT": str(out), "PYTHON": sys.executable})


@pytest.mark.slow
def test_the_steps_without_a_gpu_run_where_ray_is_absent(without_ray, tmp_path):
    out = tmp_path / "out"
    proc = lease(without_ray, out, "tests", "plan-semi")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "== tests: exit 0" in proc.stdout and "== plan-semi: exit 0" in proc.stdout, proc.stdout[-2000:]
    with tarfile.open(out / "logs.tgz") as logs:
        assert {"./tests.log", "./plan-semi.log"} <= set(logs.getnames())
    planned = json.loads((out / "plan-semi.json").read_text())
    assert planned["totals"]["trials"] > 0 and planned["totals"]["core_s"] > 0
    assert planned["service_overhead"]["note"].startswith("no Ray here to measure it")


def test_an_unknown_step_is_refused_with_the_steps_named(without_ray, tmp_path):
    proc = lease(without_ray, tmp_path / "out", "nonsense")
    assert proc.returncode == 2
    assert "unknown step nonsense (env tests smoke groups groups-old bench plan-full plan-semi compile)" in proc.stdout
