"""The plan and memory: a large model's pack measured on one run, its peak as its packs hold
it, a shape within its stream's share of the free memory, and IncepGCN's depths fitted in
its branches' convolutions."""

import pytest
from no_probe import NoProbe
from test_plan import SPACE, estimate, options

from orthotune.plan import plan_search


@pytest.mark.slow
def test_an_inception_block_is_fitted_in_its_hidden_convolutions_not_its_depth(counted):
    """IncepGCN at depths 4, 6 and 8 runs 3, 10 and 21 hidden convolutions (branches of 1 .. 2,
    4 and 6): depth 6 sits 7/18 of the way from 4 to 8, not half way."""
    three = {**SPACE, "backbones": ["incepgcn"], "original": False, "depths": [4, 6, 8]}
    plan = plan_search(options(three), measure_epochs=2)
    assert [c.depth for c in counted] == [4, 8]
    low, middle, high = plan.cells
    assert middle.fitted and middle.seconds_per_epoch == pytest.approx(
        low.seconds_per_epoch + 7 / 18 * (high.seconds_per_epoch - low.seconds_per_epoch))


def test_a_pack_large_in_memory_is_measured_on_one_run_on_a_small_graph_too(counted, monkeypatch):
    """Cora is under the node rule, but a pack whose runs' memory estimates reach
    ``SCALE_FROM_BYTES`` (here: any) is measured on one run, as 10 seeds of a 64-layer
    IncepGCN must be (about 156 GiB trained whole)."""
    import orthotune.plan._measuring as measuring
    from orthotune.core import TrainConfig

    deep = TrainConfig(dataset="cora", setting="semi", backbone="incepgcn", depth=64, hidden=128, ortho=False,
                       seeds=list(range(10)))
    assert measuring.pack_bytes(deep, measuring.Method()) > 150 * 2**30 >= measuring.SCALE_FROM_BYTES
    monkeypatch.setattr(measuring, "SCALE_FROM_BYTES", 1)
    plan = plan_search(options(), measure_epochs=2)
    assert all(c.scaled for c in plan.cells) and "2 scaled from one run of the pack" in plan.table()


def test_runs_scaled_on_a_cpu_add_what_their_packs_hold_at_once():
    """A run trained in the same pack adds its whole estimate to the peak; on a CPU a run in
    another pack (trained after it, within each epoch) only its parameters and their state."""
    import orthotune.plan._measuring as measuring
    from orthotune.core import TrainConfig, memory_estimate
    from orthotune.training import TrainOptions, runs_per_cpu_pack

    deep = TrainConfig(dataset="cora", setting="semi", backbone="incepgcn", depth=64, hidden=128, ortho=False)
    one = memory_estimate(deep)
    assert runs_per_cpu_pack(deep, 10) == 1  # its 63-state head alone is 87 MB, over the 16 MiB budget
    cpu, cuda = measuring.Method(), measuring.Method(device="cuda")
    assert measuring.added_bytes(deep, 10, cpu, TrainOptions()) == 9 * one.parameters
    assert measuring.added_bytes(deep, 10, cuda, TrainOptions()) == 9 * one.total
    small = TrainConfig(dataset="cora", backbone="gcn", depth=2, hidden=64)
    assert runs_per_cpu_pack(small, 5) == 5
    assert measuring.added_bytes(small, 5, cpu, TrainOptions()) == 4 * memory_estimate(small).total
    for backbone in ("gat", "appnp", "sgc", "dagnn", "mlp"):  # one model per run, on PubMed too
        alone = TrainConfig(dataset="pubmed", backbone=backbone, depth=2, ortho=False)
        assert runs_per_cpu_pack(alone, 5) == 1
        assert measuring.added_bytes(alone, 5, cpu, TrainOptions()) == 4 * memory_estimate(alone).parameters


def test_a_shape_over_its_share_of_memory_is_measured_alone_after_the_others(monkeypatch):
    """Measured beside another stream (the search's two trials at once), a shape needs its
    share of the memory: one over it is measured after the others, alone, as the search runs
    such a trial (it asks Ray for its memory); one over the whole machine is not measured."""
    from types import SimpleNamespace

    import orthotune.plan._meter as meter

    calls = []
    monkeypatch.setattr(meter, "available_memory", lambda: 12 * 2**30)
    monkeypatch.setattr(meter, "cached_cost", lambda shape: None)
    monkeypatch.setattr(meter.Meter, "_measured", lambda self, pending, probe, side_by_side=True:
                        calls.append((sorted(pending), side_by_side)) or {shape: "measured" for shape in pending})
    small, large = (SimpleNamespace(shape=s, config=None, estimate_bytes=b * 2**30) for s, b in (("s", 2), ("l", 8)))
    costs = meter.Meter(meter.Method(), False, None, 2).costs([small, large], NoProbe(False))
    assert costs == {"s": "measured", "l": "measured"} and calls == [(["s"], True), (["l"], False)]
    monkeypatch.setattr(meter, "available_memory", lambda: 4 * 2**30)
    (reason,) = meter.Meter(meter.Method(), True, None, 1).costs([large], NoProbe(False)).values()
    assert reason == "not measured: one repeat needs about 8.0 GiB (estimated), more than the 4.0 GiB available here"


def test_trials_that_ask_for_a_nodes_memory_run_one_after_another():
    """Cells whose trials ask Ray for memory (``alone``) take at least their seconds one after
    another on each node; the plan marks them as the search decides (``search.asks_memory``)."""
    from orthotune.plan._costing import _alone
    from orthotune.plan._estimate import PlanEstimate, Resources

    big, small = (estimate(f"cora/incepgcn/64/{arm}", 4, 1.0, trial_bytes=b * 2**30)
                  for arm, b in (("original", 15), ("ortho", 1)))
    plan = PlanEstimate("s", "asha", "optuna", (big, small), Resources(cpus=2, memory_bytes=24 * 2**30), 1.0, 0.0, None)
    assert plan.alone_s() == 0.0 and plan.wall_s() == pytest.approx(4 * 40.5)  # 8 trials of 40.5 s on 2 slots
    marked = _alone(plan, options())
    assert [c.alone for c in marked.cells] == [True, False]  # 2 x 15 GiB do not fit Ray's 70% of 24; 2 x 1 do
    assert marked.alone_s() == pytest.approx(4 * 40.5) == marked.wall_s()
    assert "runs alone: cora/incepgcn/64/original: one trial needs about 15.0 GiB" in marked.table()
    assert not any(c.alone for c in _alone(plan, options(concurrency=1)).cells)  # one at a time: it fits
    two_nodes = PlanEstimate("s", "asha", "optuna", marked.cells, Resources(cpus=2, nodes=2), 1.0, 0.0, None)
    assert two_nodes.alone_s() == pytest.approx(2 * 40.5)
    # 2 x 9 GiB fit the node's 24 GiB, not the 16.8 GiB Ray offers trials of it
    nine = PlanEstimate("s", "asha", "optuna", (estimate("c/incepgcn/48/original", 2, 1.0, trial_bytes=9 * 2**30),),
                        Resources(cpus=2, memory_bytes=24 * 2**30), 1.0, 0.0, None)
    assert _alone(nine, options()).cells[0].alone


def test_the_plan_reads_rays_memory_resource_as_ray_sets_it():
    from ray._private import ray_constants

    from orthotune.plan._costing import RAY_MEMORY_SHARE

    assert RAY_MEMORY_SHARE == pytest.approx(1 - ray_constants.DEFAULT_OBJECT_STORE_MEMORY_PROPORTION)
