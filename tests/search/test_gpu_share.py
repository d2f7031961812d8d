"""GPU shares per cell (``--gpus-per-trial auto``): the decision on synthetic costs, the
trial resources, the options; the measurement's plumbing on a real local Ray that
declares a GPU it does not have (the CUDA measurement itself is not exercised: no GPU)."""

import pytest

from orthotune.core import ConfigError, OrthotuneError, TrainConfig
from orthotune.search import LaunchOptions, cell_key
from orthotune.search._gpu_share import (
    MAX_TRIALS_PER_GPU,
    GpuShares,
    decide_shares,
    gpu_share,
    gpu_share_record,
    trial_resources,
)
from orthotune.spaces import default_config, resolve_space
from orthotune.training import CellCost

GIB = 2**30
H100 = 80 * GIB


def _cost(busy, per_run=2**20, runs=8, process=GIB // 2):
    return CellCost("NVIDIA H100", pack=8, runs=runs, epochs=10, seconds_per_epoch=0.01, busy_share=busy,
                    peak_bytes_per_run=per_run, process_bytes=process, device_bytes=H100)


def test_a_pack_that_keeps_the_gpu_busy_takes_a_whole_gpu():
    assert gpu_share(_cost(0.9), H100, cpus_per_gpu=16) == 1.0
    assert gpu_share(_cost(0.51), H100, cpus_per_gpu=16) == 1.0  # two would ask for more than the GPU


def test_a_pack_busy_a_fifth_of_the_time_shares_with_four_others():
    assert gpu_share(_cost(0.2), H100, cpus_per_gpu=16) == 0.2
    assert gpu_share(_cost(0.3), H100, cpus_per_gpu=16) == 0.3333  # 1/3, rounded down to Ray's resolution
    assert gpu_share(_cost(0.5), H100, cpus_per_gpu=16) == 0.5


def test_memory_caps_the_packs_per_gpu():
    # each trial: 8 runs x 2 GiB + 4 GiB of its own = 20 GiB; 80% of 80 GiB holds 3 of them
    big = _cost(0.05, per_run=2 * GIB, process=4 * GIB)
    assert gpu_share(big, H100, cpus_per_gpu=16) == 0.3333
    assert gpu_share(big, H100, cpus_per_gpu=16, memory_fraction=1.0) == 0.25
    assert gpu_share(_cost(0.05, per_run=20 * GIB), H100, cpus_per_gpu=16) == 1.0  # not even one fits


def test_cpus_per_gpu_cap_the_packs_per_gpu():
    assert gpu_share(_cost(0.1), H100, cpus_per_gpu=4) == 0.25
    assert gpu_share(_cost(0.1), H100, cpus_per_gpu=4, cpus_per_trial=2) == 0.5
    assert gpu_share(_cost(0.1), H100, cpus_per_gpu=1, cpus_per_trial=2) == 1.0


def test_never_below_a_sixteenth():
    assert MAX_TRIALS_PER_GPU == 16
    assert gpu_share(_cost(0.001), H100, cpus_per_gpu=64) == 1 / 16
    assert gpu_share(_cost(0.0), H100, cpus_per_gpu=64) == 1 / 16


def test_a_cost_without_a_busy_share_keeps_a_whole_gpu():
    cpu = CellCost("cpu", pack=1, runs=5, epochs=3, seconds_per_epoch=0.02)
    assert gpu_share(cpu, H100, cpus_per_gpu=16) == 1.0


def test_bad_decision_inputs_are_one_line():
    with pytest.raises(ConfigError, match=r"^cpus_per_gpu=0 must be > 0$"):
        gpu_share(_cost(0.2), H100, cpus_per_gpu=0)


def test_trial_resources_follow_the_cell_of_the_config_or_of_a_groups_first_member():
    shares = decide_shares({"cora/gcn/2/original": _cost(0.2), "cora/gcn/2/ortho": _cost(0.6),
                            "texas/gcn/2/ortho": {"error": "RayTaskError: out of memory"}},
                           H100, cpus_per_gpu=16, cpus_per_trial=2.0)
    original = {"dataset": "cora", "backbone": "gcn", "depth": 2, "ortho": False, "lr": 0.01}
    ortho = {**original, "ortho": True, "T": 3}
    assert shares(original) == {"cpu": 2.0, "gpu": 0.2}
    assert shares(ortho) == {"cpu": 2.0, "gpu": 1.0}
    assert shares({"group": [original, {**original, "lr": 0.02}]}) == {"cpu": 2.0, "gpu": 0.2}
    assert shares({"group": [ortho, ortho]})["gpu"] == 1.0
    assert shares({**ortho, "dataset": "texas"})["gpu"] == 1.0  # its measurement failed
    assert shares({**original, "depth": 8})["gpu"] == 1.0  # a cell that was not measured
    assert shares.fits(2) == 10  # two GPUs hold ten trials of the cell with the smallest share
    record = shares.record()
    assert record["cora/gcn/2/original"]["share"] == 0.2 and record["cora/gcn/2/original"]["busy_share"] == 0.2
    assert record["texas/gcn/2/ortho"] == {"share": 1.0, "error": "RayTaskError: out of memory"}
    assert any("0.2 GPU per trial" in line for line in shares.describe())


def test_tune_takes_the_shares_as_per_trial_resources():
    from ray import tune

    shares = GpuShares(1.0, {"cora/gcn/2/original": 0.25})
    trainable = tune.with_resources(lambda config: None, shares)  # a callable of the trial's config
    # Tune asks the function trainable for its resources with the trial's config
    resources = trainable._resources({"dataset": "cora", "backbone": "gcn", "depth": 2, "ortho": False})
    assert resources == {"cpu": 1.0, "gpu": 0.25}


def test_each_cell_of_a_space_has_a_default_config_of_that_cell():
    for space in (resolve_space("quick"), resolve_space("ablation")):  # ablation: variants
        for cell in space.cells():
            config = default_config(cell)
            assert cell_key(config) == cell.key
            TrainConfig.from_dict(config)  # a config the trainer takes


def _options(tmp_path, **values):
    return LaunchOptions(store=str(tmp_path / "store"), name="gpu", space=resolve_space("quick"), **values)


def test_launch_options_take_auto_and_reject_bad_values_in_one_line(tmp_path):
    auto = _options(tmp_path, gpu_share="auto")
    assert auto.to_meta()["gpu_share"] == "auto"
    assert LaunchOptions.from_meta(auto.to_meta()).gpu_share == "auto"
    with pytest.raises(ConfigError, match=r"^gpu_share='most' must be one of fixed, auto$"):
        _options(tmp_path, gpu_share="most")
    with pytest.raises(ConfigError, match=r"^gpus_per_trial=0.5 must be 0 with gpu_share='auto'"):
        _options(tmp_path, gpu_share="auto", gpus_per_trial=0.5)


def test_fixed_gpus_per_trial_stay_a_plain_dict_and_auto_needs_a_measurement(tmp_path):
    assert trial_resources(_options(tmp_path, gpus_per_trial=0.5)) == {"cpu": 1.0, "gpu": 0.5}
    assert gpu_share_record(_options(tmp_path)) == {}
    with pytest.raises(OrthotuneError, match="no GPU shares were measured"):
        trial_resources(_options(tmp_path, gpu_share="auto"))
