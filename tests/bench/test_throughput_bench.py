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


@pytest.mark.slow  # starts a real Ray
def test_the_breakdown_accounts_for_the_launch_paths_wall_from_driver_and_worker_timers():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "throughput.py"), "--configs", "4", "--epochs", "3", "--cores", "2",
         "--pack", "2", "--report-every", "1", "--breakdown", "--json"],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    parts, driver = summary["core_seconds"], summary["driver_s"]
    assert summary["trials"] == 2  # every trial's worker sent its timings with its final report
    # every trial's actor had the job's runtime env, without Ray Tune's variable, so Ray could
    # run it on a worker it started with the job (_startup; with the variable: 0 and 0)
    assert summary["trials_on_the_jobs_runtime_env"] == 2
    # how many did ("trials_on_ray_init_workers") is Ray's race, not asserted: Tune reserves
    # the trials' CPUs before it places their actors, and Ray ends a worker idle for a second
    # once fewer CPUs are free than it has idle workers, so on a busy machine (CI's 2 cores) a
    # trial may start a new worker (Breakdown.prestarted)
    for part in ("Ray start (ray.init)", "worker start and imports, to each worker's first trial",
                 "data loading (once per worker)", "training (run_configs)",
                 "per-epoch bookkeeping and reports to Tune (trainable)"):
        assert parts[part] > 0, part
    # workers Ray prestarted before the run are not charged for the time they waited
    assert parts["cores without a trial during Tune's run"] >= 0
    assert driver["store writes (recorder)"] > 0 and driver["TensorBoard event files"] > 0
    assert driver["Optuna journal"] == 0  # the grid has no study
