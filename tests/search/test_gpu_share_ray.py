"""``--gpus-per-trial auto`` on a real local Ray: refused in one line without a GPU; with a
GPU the Ray declares (this CPU machine has none), each cell is measured in a Ray task and
the trials run with their cell's share. The CUDA measurement is not exercised: the task
trains on the CPU, so every cell keeps a whole GPU (no busy share to decide from)."""

import os
import subprocess
import sys

import pytest
import yaml

from orthotune.search import LaunchOptions, launch
from orthotune.search._gpu_share import gpu_share_record
from orthotune.search._local_ray import local_ray_options, loopback_ray
from orthotune.spaces import parse_space
from orthotune.store import Store

pytestmark = pytest.mark.slow  # each starts a real Ray

SPACE = {"name": "gpu-share", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2],
         "original": True, "train": {"lr": [0.01, 0.02], "epochs": 3, "patience": 3, "hidden": 16},
         "samples": 1}


def test_auto_without_a_gpu_is_refused_in_one_line_before_any_trial(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    store = tmp_path / "store"
    proc = subprocess.run([sys.executable, "-m", "orthotune.cli", "launch", "--space", str(space), "--store",
                           str(store), "--name", "nogpu", "--gpus-per-trial", "auto", "--progress", "off",
                           "--scheduler", "fifo"],
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("orthotune launch:")]
    assert errors == ["orthotune launch: error: gpus_per_trial='auto' needs GPUs, but the Ray cluster has none; give a "
                      "number (0 for CPU trials)"], proc.stderr
    assert not (store / "trials").exists() and not (store / "searches" / "nogpu.json").exists()


@pytest.fixture
def ray_with_a_declared_gpu():
    import ray

    with loopback_ray():
        ray.init(**local_ray_options(), num_cpus=2, num_gpus=1, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def test_auto_measures_each_cell_and_its_trials_ask_for_its_share(tmp_path, ray_with_a_declared_gpu, data_root):
    options = LaunchOptions(store=str(tmp_path / "store"), name="auto", space=parse_space(SPACE),
                            scheduler="fifo", gpu_share="auto", data_root=str(data_root.path),
                            optuna_storage="off", tensorboard=False)
    outcome = launch(options, progress=False)
    assert outcome.counts == {"completed": 1}
    record = gpu_share_record(options)["gpu_shares"]
    assert list(record) == ["cora/gcn/2/original"]
    cell = record["cora/gcn/2/original"]
    # measured in its Ray task (on the CPU: no busy share), so the cell keeps a whole GPU
    assert cell["share"] == 1.0 and cell["device"] == "cpu" and cell["busy_share"] is None
    assert cell["runs"] == 1 and cell["seconds_per_epoch"] > 0
    stored = Store.open(options.store).search_meta("auto")["gpu_shares"]  # the search's record keeps them
    assert stored == record
