"""A cell's measured cost on the CPU (the CUDA path is not exercised here: no GPU)."""

import pytest
import torch

from orthotune.core import ConfigError, TrainConfig
from orthotune.training import CellCost, device_profile, measure_cell_cost

CPU = torch.device("cpu")


@pytest.mark.slow
def test_measure_cell_cost_of_a_cora_pack_on_the_cpu(data_root):
    config = TrainConfig(dataset="cora", depth=2, splits=(0, 1))
    cost = measure_cell_cost(config, CPU, str(data_root.path), pack=3, epochs=3)
    assert (cost.device, cost.pack, cost.runs, cost.epochs) == ("cpu", 3, 6, 3)  # 3 copies x 2 splits
    assert 0 < cost.seconds_per_epoch < 5
    # no device measurements on a CPU: the GPU share rule has nothing to decide from
    assert cost.busy_share is cost.peak_bytes_per_run is cost.process_bytes is cost.device_bytes is None
    assert cost.trial_bytes is None
    assert CellCost.from_dict(cost.to_dict()) == cost


def test_measure_cell_cost_rejects_an_empty_pack_in_one_line(data_root):
    with pytest.raises(ConfigError, match=r"^pack=0 must be an integer >= 1$"):
        measure_cell_cost(TrainConfig(dataset="cora"), CPU, str(data_root.path), pack=0)


def test_device_profile_on_the_cpu_counts_aten_ops_and_no_busy_time():
    a = torch.ones(64, 64)
    profile = device_profile(lambda: (a @ a).relu().sum(), CPU)
    assert profile.ops >= 3 and profile.busy_s == 0.0 and profile.wall_s > 0
    assert profile.launches == 0  # no CUDA launch calls on a CPU
    ops, busy, wall, launches = profile  # bench/gpu.py unpacks it
    assert (ops, busy, wall, launches) == tuple(profile)


def test_trial_bytes_adds_the_pack_and_the_process():
    cost = CellCost("gpu", pack=2, runs=10, epochs=5, seconds_per_epoch=0.01, busy_share=0.2,
                    peak_bytes_per_run=2**20, process_bytes=500 * 2**20, device_bytes=80 * 2**30)
    assert cost.trial_bytes == 510 * 2**20
