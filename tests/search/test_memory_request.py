"""Host memory per trial: the estimate of what a trial holds, the request a trial too large
for a node full of its like makes (capped at the largest node's memory), and on a real Ray
and Tune that such trials run one at a time while small ones still run side by side."""

import time

import pytest

from orthotune.core import TrainConfig, memory_estimate
from orthotune.search import LaunchOptions, launch, pack_memory_bytes
from orthotune.search._local_ray import local_ray_options, loopback_ray
from orthotune.search._memory_request import (
    REQUEST_GRAIN,
    NodeMemory,
    TrialResources,
    cluster_node,
    largest_node,
    trial_memory_bytes,
)
from orthotune.spaces import parse_space
from orthotune.store import Store
from orthotune.training import TrainOptions, runs_per_cpu_pack

GIB = 2**30
OPTIONS = TrainOptions()
SMALL = TrainConfig(dataset="cora", setting="semi", backbone="gcn", depth=2, hidden=64, seeds=[0, 1, 2])
# the paper-sota-semi cell that drove a 24 GiB machine into swap: IncepGCN, 64 layers, 10 seeds
LARGE = TrainConfig(dataset="cora", setting="semi", backbone="incepgcn", depth=64, hidden=128, seeds=list(range(10)))
CPU_TRIAL = {"cpu": 1.0, "gpu": 0.0}


def test_small_runs_share_one_pack_and_count_whole():
    assert runs_per_cpu_pack(SMALL, 3, OPTIONS) == 3
    assert pack_memory_bytes(SMALL, 3, OPTIONS) == 3 * memory_estimate(SMALL).total


def test_runs_in_later_packs_count_by_their_parameters():
    estimate = memory_estimate(LARGE)
    together = runs_per_cpu_pack(LARGE, 10, OPTIONS)
    assert together < 10  # its hidden states are too large for one CPU pack of ten
    expected = together * estimate.total + (10 - together) * estimate.parameters
    assert pack_memory_bytes(LARGE, 10, OPTIONS) == expected < 10 * estimate.total
    assert pack_memory_bytes(LARGE, 10, OPTIONS, on_gpu=True) == 10 * estimate.total  # a GPU pack holds all


def test_a_trial_counts_every_repeat_of_every_member_at_its_largest_member():
    wider = TrainConfig.from_dict({**SMALL.to_dict(), "hidden": 128})
    assert trial_memory_bytes([SMALL, wider], OPTIONS) == pack_memory_bytes(wider, 6, OPTIONS)


def test_graph_classification_trains_its_repeats_one_at_a_time():
    config = TrainConfig(dataset="proteins", setting="cv10", backbone="gunet", depth=2, hidden=64, splits=[0, 1, 2])
    estimate = memory_estimate(config)
    assert pack_memory_bytes(config, 3, OPTIONS) == estimate.total + 2 * estimate.parameters


def _resources(node_gib=16.0, trials=2, concurrency=2, base=None):
    return TrialResources(base or CPU_TRIAL, NodeMemory(node_gib * GIB, trials), OPTIONS, concurrency)


def test_a_trial_that_a_full_node_holds_asks_for_nothing():
    assert _resources()(SMALL.to_dict()) == CPU_TRIAL


def test_a_trial_too_large_for_a_full_node_asks_for_its_estimate_in_whole_grains():
    config = TrainConfig.from_dict({**LARGE.to_dict(), "seeds": [0], "depth": 32})  # about 4-5 GiB
    estimate = trial_memory_bytes([config], OPTIONS)
    assert 4 * GIB < 2 * estimate < 16 * GIB < 4 * estimate  # two fit a 16 GiB node, four do not
    assert _resources(trials=2)(config.to_dict()) == CPU_TRIAL
    asked = _resources(node_gib=16.0, trials=4, concurrency=4)(config.to_dict())
    assert asked["memory"] % REQUEST_GRAIN == 0 and 0 <= asked["memory"] - estimate < REQUEST_GRAIN
    assert asked == {**CPU_TRIAL, "memory": asked["memory"]}
    assert _resources(trials=4, concurrency=1)(config.to_dict()) == CPU_TRIAL  # one at a time: it fits


def test_a_request_never_exceeds_the_largest_node():
    assert trial_memory_bytes([LARGE], OPTIONS) > 16 * GIB
    assert _resources(node_gib=16.0)(LARGE.to_dict()) == {**CPU_TRIAL, "memory": 16.0 * GIB}


def test_a_group_asks_for_all_its_members():
    single = TrainConfig.from_dict({**LARGE.to_dict(), "seeds": [0], "depth": 32})
    alone = _resources(node_gib=10.0)(single.to_dict())
    grouped = _resources(node_gib=10.0)({"group": [single.to_dict(), single.to_dict(), single.to_dict()]})
    assert "memory" not in alone and grouped["memory"] >= trial_memory_bytes([single] * 3, OPTIONS)


def test_gpu_trials_and_unknown_nodes_and_bad_configs_ask_for_nothing():
    gpu = {"cpu": 1.0, "gpu": 0.5}
    assert _resources(base=gpu)(LARGE.to_dict()) == gpu
    assert _resources(base=lambda config: gpu)(LARGE.to_dict()) == gpu
    assert TrialResources(CPU_TRIAL, None, OPTIONS, 2)(LARGE.to_dict()) == CPU_TRIAL
    assert _resources()({"dataset": "cora", "depth": -3}) == CPU_TRIAL  # it fails in its trial, with its reason


def test_the_largest_alive_node_with_memory_is_the_one_asked_of():
    nodes = [{"Alive": True, "Resources": {"CPU": 8.0, "memory": 8 * GIB}},
             {"Alive": False, "Resources": {"CPU": 2.0, "memory": 64 * GIB}},
             {"Alive": True, "Resources": {"CPU": 4.0, "memory": 32 * GIB}},
             {"Alive": True, "Resources": {"CPU": 16.0}}]
    assert largest_node(nodes, cpus_per_trial=1.0) == NodeMemory(32 * GIB, 4)
    assert largest_node(nodes, cpus_per_trial=3.0) == NodeMemory(32 * GIB, 1)
    assert largest_node([{"Alive": True, "Resources": {"CPU": 2.0}}], 1.0) is None


def test_without_ray_or_its_node_list_no_trial_asks(monkeypatch):
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    assert cluster_node(1.0) is None
    monkeypatch.setattr(ray, "is_initialized", lambda: True)

    def refuses():
        raise ConnectionError("the head is gone")

    monkeypatch.setattr(ray, "nodes", refuses)
    assert cluster_node(1.0) is None


@pytest.fixture
def small_memory_ray():
    """A local Ray of 2 CPUs whose nodes declare 64 MiB of memory: three Cora runs (about
    100 MB estimated) are then a trial too large for a node full of its like."""
    import ray

    with loopback_ray():
        ray.init(**local_ray_options(), num_cpus=2, _memory=64 * 2**20, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def _windows(ray, configs, resources) -> list[tuple[float, float]]:
    """Each config's (start, end) wall clock as a Tune trial that only sleeps."""
    from ray import tune

    def sleeper(config):
        start = time.time()
        time.sleep(4)
        tune.report({"start": start, "end": time.time()})

    tuner = tune.Tuner(tune.with_resources(sleeper, resources),
                       param_space={"config": tune.grid_search(configs)},
                       tune_config=tune.TuneConfig(max_concurrent_trials=2, reuse_actors=True),
                       run_config=tune.RunConfig(verbose=0))
    return sorted((r.metrics["start"], r.metrics["end"]) for r in tuner.fit())


@pytest.mark.slow
def test_on_ray_large_trials_run_one_at_a_time_and_small_ones_together(small_memory_ray):
    node = cluster_node(1.0)
    assert node == NodeMemory(64 * 2**20, 2)
    requests = TrialResources(CPU_TRIAL, node, OPTIONS, 2)

    def resources(spec):
        return requests(spec["config"])

    tiny = TrainConfig.from_dict({**SMALL.to_dict(), "hidden": 8, "seeds": [0]}).to_dict()
    assert "memory" not in requests(tiny) and requests(SMALL.to_dict())["memory"] == 64 * 2**20
    (first, second) = _windows(small_memory_ray, [SMALL.to_dict(), SMALL.to_dict()], resources)
    assert second[0] >= first[1] - 0.1  # the second waited for the first's memory
    (first, second) = _windows(small_memory_ray, [tiny, tiny], resources)
    assert second[0] < first[1]  # nothing asked: both at once


@pytest.mark.slow
def test_a_search_whose_trials_ask_for_all_of_a_node_runs_them_one_after_another(small_memory_ray, tmp_path,
                                                                                  data_root):
    """Each trial asks for the node's 64 MiB (its estimate, about 100 MB, capped): the search
    runs, and its two trials do not overlap (the first ended before the second trained)."""
    space = parse_space({"name": "memory", "datasets": ["cora"], "setting": "semi", "repeats": [0, 1, 2],
                         "backbones": ["gcn"], "depths": [2], "original": True,
                         "train": {"lr": [0.01, 0.02], "epochs": 60, "patience": 60, "hidden": 64}, "samples": 2})
    store = tmp_path / "store"
    options = LaunchOptions(store=str(store), name="memory", space=space, scheduler="fifo",
                            data_root=str(data_root.path), optuna_storage="off", tensorboard=False)
    outcome = launch(options, progress=False)
    assert outcome.counts == {"completed": 2}
    rows = sorted(Store.open(str(store)).read("trials", search="memory").to_pylist(), key=lambda r: r["finished_at"])
    first_end = rows[0]["finished_at"].timestamp()
    second_start = rows[1]["finished_at"].timestamp() - rows[1]["seconds"]  # it trained for its last seconds
    assert rows[1]["seconds"] > 0.2 and second_start >= first_end - 0.05
