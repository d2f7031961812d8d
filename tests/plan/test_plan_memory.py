"""The plan and memory: a large model's pack measured on one run, its peak as its packs hold
it, a shape within its stream's share of the free memory, and IncepGCN's depths fitted in
its branches' convolutions."""

import pytest
from no_probe import NoProbe
from test_plan import SPACE, options

from orthotune.plan import plan_search


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


def test_a_shape_too_large_for_its_share_of_memory_is_listed_with_the_way_out(monkeypatch):
    """Measured beside another stream (the search's two trials at once), a shape needs its
    share of the memory; the line says so, and how one trial gets all of it."""
    from types import SimpleNamespace

    import orthotune.plan._meter as meter

    monkeypatch.setattr(meter, "available_memory", lambda: 12 * 2**30)
    cell = SimpleNamespace(shape="s", config=None, estimate_bytes=8 * 2**30)
    (reason,) = meter.Meter(meter.Method(), False, None, 2).costs([cell], NoProbe(False)).values()
    assert reason == ("not measured: one repeat needs about 8.0 GiB (estimated), more than the 6.0 GiB each of 2 "
                      "trials at once has here (12.0 GiB available; --concurrency 1 gives one trial all of it)")
    alone = meter.Meter(meter.Method(), True, None, 1)
    monkeypatch.setattr(meter, "available_memory", lambda: 4 * 2**30)
    (reason,) = alone.costs([cell], NoProbe(False)).values()
    assert reason.endswith("more than the 4.0 GiB available here")
