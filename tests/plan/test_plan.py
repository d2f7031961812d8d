"""The plan of a search: ASHA's expected epochs by hand, the per-cell table measured on real
Cora, the cache (a second plan measures nothing), and what does not fit."""

import json

import pytest
from no_probe import NoProbe

from orthotune.plan import PlanEstimate, Resources, asha_expected_epochs, plan_search
from orthotune.plan._asha import asha_rungs, continue_probability, survivors
from orthotune.plan._estimate import CellEstimate, list_schedule
from orthotune.search import LaunchOptions
from orthotune.spaces import parse_space

SPACE = {"name": "tiny", "datasets": ["cora"], "repeats": [0, 1], "backbones": ["gcn"], "depths": [2],
         "original": True, "ortho": {"T": 2, "beta": 1.0, "lam": 5.0e-4},
         "train": {"lr": [0.01, 0.05], "hidden": 24, "epochs": 40, "patience": 40},
         "asha": {"grace_period": 10, "reduction_factor": 2}, "samples": 2}


def options(space=SPACE, **kwargs):
    return LaunchOptions(store="unused", name="plan-test", space=parse_space(space), **kwargs)


# -- the arithmetic, by hand -------------------------------------------------------------------

def test_asha_rungs_are_rays():
    assert asha_rungs(10, 100, 3) == [10, 30, 90]  # Ray: int(log(100/10)/log(3) + 1) = 3 rungs
    assert asha_rungs(50, 1500, 3) == [50, 150, 450, 1350]
    assert asha_rungs(4, 24, 2) == [4, 8, 16]


def test_continue_probability_by_hand():
    """The q = 2/3 percentile of j uniform scores has the expectation (q (j - 1) + 1) / (j + 1)."""
    assert continue_probability(0, 3) == 1.0  # the first trial at a rung always continues
    assert continue_probability(1, 3) == pytest.approx(0.5)
    assert continue_probability(2, 3) == pytest.approx(4 / 9)
    assert continue_probability(4, 3) == pytest.approx(0.4)
    assert continue_probability(10**6, 3) == pytest.approx(1 / 3, abs=1e-5)  # many trials: 1/rf
    assert survivors(6, 3) == pytest.approx(3.15)  # 1 + 1/2 + 4/9 + 5/12 + 2/5 + 7/18


def test_asha_expected_epochs_by_hand():
    """6 trials, cap 100, grace 10, rf 3 (rungs 10, 30, 90): 6 train to 10, 3.15 on to 30,
    2.00694 on to 90 and 1.50309 to 100: 258.4475 epochs, 43.07 per trial."""
    assert asha_expected_epochs(6, 100, 10, 3, 10) == pytest.approx(258.4475 / 6, rel=1e-5)
    # many trials: a share 1/rf continues at each rung: 10 + 20/3 + 60/9 + 10/27
    assert asha_expected_epochs(100_000, 100, 10, 3, 10) == pytest.approx(10 + 20 / 3 + 60 / 9 + 10 / 27, rel=1e-3)
    assert asha_expected_epochs(1, 100, 10, 3, 10) == 100.0  # a lone trial is never stopped
    # reports every 20 epochs: a trial stopped at rung 10 has trained 20, at rung 30 40
    assert asha_expected_epochs(6, 100, 10, 3, 20) > asha_expected_epochs(6, 100, 10, 3, 10)


def test_wall_time_is_the_list_schedule_of_the_trials():
    assert list_schedule([3.0, 1.0, 1.0, 1.0], 2) == 3.0
    assert list_schedule([1.0] * 5, 2) == 3.0
    assert list_schedule([2.0, 2.0], 1) == 4.0


def estimate(cell, trials, seconds, peak=None, **kwargs):
    values = {"arm": cell.rsplit("/", 1)[-1], "repeats": 5, "epochs": 100, "patience": 30, "expected_epochs": 40.0,
              "seconds_per_epoch": seconds, "setup_s": 0.5, "peak_bytes": peak, "device": "cpu", "shape": "s"}
    return CellEstimate(cell=cell, trials=trials, **{**values, **kwargs})


def test_trials_sharing_a_gpu_take_at_least_its_kernels_work():
    # on one GPU, 16 CPU slots: 12 trials of 4.5 s could all run at once (4.5 s), but each keeps
    # the GPU busy half its time, so the GPU's own work is 12 x 4.5 x 0.5 = 27 s
    cells = (estimate("cora/gcn/2/original", 12, 0.1, device="cuda", busy_share=0.5),)
    plan = PlanEstimate("s", "asha", "optuna", cells, Resources(cpus=16, gpus=1), 1.0, 0.0, None)
    assert plan.gpu_work_s() == pytest.approx(27.0) and plan.wall_s() == pytest.approx(27.0)
    assert plan.totals()["gpu_work_s"] == pytest.approx(27.0)
    two = PlanEstimate("s", "asha", "optuna", cells, Resources(cpus=16, gpus=2), 1.0, 0.0, None)
    assert two.wall_s() == pytest.approx(13.5)
    # a cell without a measured busy share: the GPUs' work is unknown, the list schedule stands
    unknown = PlanEstimate("s", "asha", "optuna", cells + (estimate("cora/gcn/2/ortho", 1, 0.1, device="cuda"),),
                           Resources(cpus=16, gpus=1), 1.0, 0.0, None)
    assert unknown.gpu_work_s() is None and unknown.wall_s() == pytest.approx(4.5)
    # on a CPU the busy share is never read
    cpu = PlanEstimate("s", "asha", "optuna", (estimate("cora/gcn/2/original", 12, 0.1, busy_share=0.5),),
                       Resources(cpus=16), 1.0, 0.0, None)
    assert cpu.gpu_work_s() is None and cpu.wall_s() == pytest.approx(4.5)


def test_totals_core_hours_and_wall_on_the_resources_given():
    cells = (estimate("cora/gcn/2/original", 6, 0.1), estimate("cora/gcn/2/ortho", 6, 0.2))
    plan = PlanEstimate("s", "asha", "optuna", cells, Resources(cpus=2, memory_bytes=2**34), 1.0, 0.0, None,
                        start_s=10.0)
    totals = plan.totals()
    # a trial: 0.5 s + 40 epochs x (0.1 | 0.2) s = 4.5 | 8.5 s; six each
    assert totals["trials"] == 12 and totals["core_s"] == pytest.approx(6 * 4.5 + 6 * 8.5)
    assert totals["gpu_s"] is None and "GPU-hours not measured here" in plan.total_line()
    # handed out a, b, a, b, ... each to the first free of 2 slots: they end at 35 and 43 s
    assert totals["wall_s"] == pytest.approx(10.0 + 43.0)
    wider = PlanEstimate("s", "asha", "optuna", cells, Resources(cpus=4, nodes=3), 1.0, 0.0, 3, start_s=0.0)
    assert wider.slots == 3  # 12 slots, capped by concurrency 3


def test_an_adaptive_budget_ranges_from_every_pair_at_its_first_look_to_none_stopping():
    cells = (estimate("cora/gcn/2/original", 40, 0.1), estimate("cora/gcn/2/ortho", 40, 0.2))
    plan = PlanEstimate("s", "asha", "optuna", cells, Resources(cpus=2, memory_bytes=2**34), 1.0, 0.0, None)
    floor = plan.capped(20).totals()
    assert floor["trials"] == 40 and floor["core_s"] == pytest.approx(plan.totals()["core_s"] / 2)
    line = plan.range_line(20, "flat rule, looks at 20, 30, 40 trials per arm")
    core = f"{floor['core_s'] / 3600:.2f} to {plan.totals()['core_s'] / 3600:.2f} core-hours"
    assert line.startswith("adaptive budget (flat rule, looks at 20, 30, 40 trials per arm): 40 to 80 trials, ")
    assert core in line and line.endswith("from every pair stopping at its first look to none stopping")


def test_a_cell_whose_trial_needs_more_than_a_node_is_named_with_its_figure():
    cells = (estimate("cora/gcn/2/original", 6, 0.1, peak=3 * 2**30), estimate("cora/gcn/8/ortho", 6, 0.1,
                                                                                  peak=2**30))
    plan = PlanEstimate("s", "asha", "optuna", cells, Resources(cpus=2, memory_bytes=2 * 2**30), 1.0, 0.0, None)
    assert plan.does_not_fit() == ["cora/gcn/2/original: one trial needs 3.0 GiB (measured peak), more than the "
                                   "2.0 GiB a node has"]
    assert "1 cell(s) do not fit" in plan.total_line()
    assert "does not fit: cora/gcn/2/original: one trial needs 3.0 GiB" in plan.table()


# -- measured on real Cora ---------------------------------------------------------------------

def test_plan_measures_each_cell_once_and_a_second_plan_reads_the_cache(counted):
    first = plan_search(options(), measure_epochs=2)
    assert len(counted) == 2  # two shapes: the original arm and the Ortho-GConv arm
    assert [c.cell for c in first.cells] == ["cora/gcn/2/original", "cora/gcn/2/ortho"]
    for cell in first.cells:
        assert (cell.trials, cell.repeats, cell.epochs, cell.patience) == (2, 2, 40, 40)
        assert cell.seconds_per_epoch > 0 and cell.setup_s >= 0 and not cell.cached
        assert cell.peak_bytes is None or cell.peak_bytes > 2**20  # a process holding torch and Cora
        assert cell.expected_epochs == pytest.approx(asha_expected_epochs(2, 40, 10, 2, 10))
    second = plan_search(options(), measure_epochs=2)
    assert len(counted) == 2 and all(c.cached for c in second.cells)  # nothing measured again
    assert [c.seconds_per_epoch for c in second.cells] == [c.seconds_per_epoch for c in first.cells]
    table = second.table()
    assert table.splitlines()[0].split()[:4] == ["cell", "trials", "repeats", "epochs"]
    assert "cora/gcn/2/ortho" in table and "plan: 4 trials over 2 cells and arms" in table
    # another sample budget is the same shapes: still nothing measured
    assert plan_search(options(samples=1), measure_epochs=2).totals()["trials"] == 2 and len(counted) == 2


def test_a_kept_plan_takes_the_start_measured_for_this_environment(counted, monkeypatch):
    import orthotune.plan._costing as costing

    assert plan_search(options(), measure_epochs=2).totals()["start_s"] == 0.0  # kept whole, NoProbe's start

    class MeasuredAgain(NoProbe):
        def seconds(self):
            return 42.0

    monkeypatch.setattr(costing, "StartProbe", MeasuredAgain)
    again = plan_search(options(), measure_epochs=2)
    assert all(c.cached for c in again.cells) and len(counted) == 2  # the kept plan, nothing measured
    assert again.totals()["start_s"] == 42.0


@pytest.mark.slow
def test_a_change_to_the_trainers_source_measures_every_shape_again(counted, monkeypatch):
    import orthotune.plan._costing as costing

    plan_search(options(), measure_epochs=2)
    assert len(counted) == 2
    monkeypatch.setattr(costing, "trainer_digest", lambda: "another trainer")
    again = plan_search(options(), measure_epochs=2)
    assert len(counted) == 4 and not any(c.cached for c in again.cells)  # neither kept plan nor shape read
    assert all(c.cached for c in plan_search(options(), measure_epochs=2).cells) and len(counted) == 4


def test_a_cell_too_large_for_this_machine_is_listed_not_trained(counted):
    huge = {**SPACE, "original": False, "depths": [64], "train": {**SPACE["train"], "hidden": 4096}}
    plan = plan_search(options(huge), measure_epochs=2)
    assert counted == []  # never trained: it would run out of memory
    (cell,) = plan.cells
    assert not cell.measured and cell.seconds_per_epoch is None
    (line,) = plan.does_not_fit()
    assert line.startswith("cora/gcn/64/ortho: one trial needs ") and "(estimated), more than the" in line
    assert plan.totals()["wall_s"] is None and "unknown" in plan.total_line()


def test_a_cell_whose_data_does_not_load_is_listed_with_the_error_and_not_cached(counted, tmp_path):
    """Cora's raw feature file truncated (all files present, so the data check passes): its
    trials would raise and be stored failed; the plan names the error instead of stopping."""
    import os
    from pathlib import Path

    data = Path(os.environ.get("ORTHOTUNE_DATA_ROOT", "../shared/data")).resolve()
    cora, root = data / "Planetoid" / "Cora", tmp_path / "data"
    for source in cora.rglob("*"):
        if source.is_file():
            target = root / "Planetoid" / "Cora" / source.relative_to(cora)
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.name == "ind.cora.x":
                target.write_bytes(source.read_bytes()[:100])
            else:
                target.symlink_to(source)
    plan = plan_search(options(data_root=str(root)), measure_epochs=2)
    assert counted == []  # each shape's warm-up raised before its measurement
    for cell in plan.cells:
        assert not cell.measured and cell.seconds_per_epoch is None
        assert cell.reason.startswith("not measured: training it raised UnpicklingError: "), cell.reason
        assert "\n" not in cell.reason
    assert not list((tmp_path / "cache").rglob("*.json"))  # nothing cached: a repaired root is measured
    assert plan.totals()["wall_s"] is None and "unknown" in plan.total_line()


@pytest.mark.slow
def test_depths_between_are_fitted_on_the_line_through_the_shallowest_and_deepest(counted):
    """GCN at depths 2, 3 and 4 (the Ortho-GConv arm alone): 2 and 4 trained, 3 on their line;
    ``every_depth`` trains all three."""
    three = {**SPACE, "original": False, "depths": [2, 3, 4]}
    plan = plan_search(options(three), measure_epochs=2)
    assert [c.depth for c in counted] == [2, 4]
    low, middle, high = plan.cells
    assert (low.fitted, middle.fitted, high.fitted) == (False, True, False)
    assert middle.seconds_per_epoch == pytest.approx((low.seconds_per_epoch + high.seconds_per_epoch) / 2)
    assert middle.setup_s == pytest.approx((low.setup_s + high.setup_s) / 2)
    assert middle.sources == low.sources + high.sources and middle.measured
    assert "fit" in plan.table().splitlines()[2].split() and "1 fitted linearly in depth" in plan.table()
    every = plan_search(options(three), measure_epochs=2, every_depth=True)
    assert [c.depth for c in counted] == [2, 4, 3]  # the two ends from the cache, depth 3 trained
    assert not any(c.fitted for c in every.cells)


@pytest.mark.slow
def test_a_second_plan_reads_one_file_without_torch(tmp_path):
    """A plan kept whole is read back in a fresh interpreter without importing torch, PyG or Ray;
    once one of its shapes is measured again it is not used."""
    import json
    import os
    import subprocess
    import sys

    script = (
        "import json, sys\n"
        "from orthotune.plan import plan_search\nfrom orthotune.search import LaunchOptions\n"
        "from orthotune.spaces import parse_space\n"
        "import orthotune.plan._costing as costing\n"
        "class NoProbe:\n"
        "    done = True\n"
        "    elsewhere = False\n"
        "    def __init__(self, remeasure, here=True): pass\n"
        "    def wait(self): pass\n"
        "    def seconds(self): return 0.0\n"
        "costing.StartProbe = NoProbe\n"
        f"space = parse_space(json.loads({json.dumps(json.dumps(SPACE))}))\n"
        "plan = plan_search(LaunchOptions(store='unused', name='plan-test', space=space, concurrency=1),\n"
        "                   measure_epochs=2,\n"
        "                   remeasure=sys.argv[1] == 'again')\n"
        "print(json.dumps([plan.totals()['trials'], [c.cached for c in plan.cells],\n"
        "                  sorted(m for m in ('torch', 'torch_geometric', 'ray') if m in sys.modules)]))\n")
    env = {**os.environ, "ORTHOTUNE_CACHE": str(tmp_path / "cache")}

    def plan(mode):
        done = subprocess.run([sys.executable, "-c", script, mode], env=env, capture_output=True, text=True,
                              check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    trials, cached, heavy = plan("first")
    assert (trials, cached) == (4, [False, False]) and "torch" in heavy  # measured: torch loads
    assert plan("second") == [4, [True, True], []]
    assert plan("again")[1] == [False, False]  # measured again: the kept plan's shapes changed
    assert plan("second") == [4, [True, True], []]  # kept anew


def test_the_plan_cache_is_orthotunes_cache_folder(monkeypatch, tmp_path):
    """The plan keeps its measurements where the datasets are processed: ``core.cache_dir``,
    the one rule for the folder (``ORTHOTUNE_CACHE``, else the XDG cache)."""
    from orthotune.plan._cache import plan_cache

    monkeypatch.delenv("ORTHOTUNE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert plan_cache() == tmp_path / "orthotune"
    monkeypatch.setenv("ORTHOTUNE_CACHE", str(tmp_path / "elsewhere"))
    assert plan_cache() == tmp_path / "elsewhere"


@pytest.mark.slow
def test_a_costly_pack_is_measured_on_one_run_and_scaled_by_its_runs(counted, monkeypatch):
    """On a graph large enough (here: any), each shape's one run stands for its pack (figures
    times its runs, marked '+x'); ``full_packs`` trains them whole."""
    import json

    import orthotune.plan._measuring as measuring
    from orthotune.plan._cache import cost_folder

    monkeypatch.setattr(measuring, "SCALE_FROM_NODES", 0)
    plan = plan_search(options(), measure_epochs=2)
    assert all(c.scaled and c.seconds_per_epoch > 0 and c.setup_s >= 0 for c in plan.cells)
    assert "measured+x" in plan.table() and "2 scaled from one run of the pack" in plan.table()
    kept = [json.loads(p.read_text())["cost"] for p in cost_folder().glob("*.json")]
    assert sorted((c["runs"], c["measured_runs"]) for c in kept) == [(2, 1), (2, 1)]  # 2 repeats, one trained
    whole = plan_search(options(), measure_epochs=2, full_packs=True)
    assert not any(c.scaled or c.cached for c in whole.cells)  # another method: measured again
    assert len(counted) == 4


@pytest.mark.slow
def test_shapes_are_measured_in_processes_side_by_side(counted, monkeypatch):
    """Four shapes in two streams (as the search runs two trials at once on two CPUs): this
    process and a measuring process, each dataset's shapes dealt out between them (two each),
    and cached here."""
    import orthotune.plan._costing as costing
    from orthotune.plan._cache import cost_folder

    monkeypatch.setattr(costing, "streams", lambda *args, **kwargs: 2)
    space = {**SPACE, "depths": [2, 3]}
    plan = plan_search(options(space), measure_epochs=1)
    assert len(counted) == 2  # the other two trained in the measuring process
    assert [c.cell for c in plan.cells] == ["cora/gcn/2/original", "cora/gcn/2/ortho", "cora/gcn/3/original",
                                            "cora/gcn/3/ortho"]
    assert all(c.measured and c.seconds_per_epoch > 0 and not c.cached for c in plan.cells)
    assert len(list(cost_folder().glob("*.json"))) == 4
    assert all(c.cached for c in plan_search(options(space), measure_epochs=1).cells)


def test_timed_epochs_are_fewer_where_an_epoch_is_slow():
    from orthotune.plan._measuring import ENOUGH_TIMED_S, Method, timed_epochs

    assert timed_epochs(0.01, Method(epochs=3)) == 3
    assert timed_epochs(ENOUGH_TIMED_S / 2, Method(epochs=3)) == 2
    assert timed_epochs(ENOUGH_TIMED_S * 5, Method(epochs=3)) == 1  # never none


def test_a_cached_start_is_read_without_starting_a_probe(monkeypatch, tmp_path):
    import subprocess

    import orthotune.plan._cache as kept

    monkeypatch.setattr(kept, "plan_cache", lambda: tmp_path)
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a) or None)
    probe = kept.StartProbe(remeasure=False)
    assert started  # nothing cached: the probe's interpreter starts at once
    kept.write_json(probe.path, {"start_s": 12.5})
    started.clear()
    assert kept.StartProbe(remeasure=False).seconds() == 12.5 and started == []


def test_a_start_measured_elsewhere_is_delivered_once_and_cached(monkeypatch, tmp_path):
    import subprocess

    import orthotune.plan._cache as kept

    monkeypatch.setattr(kept, "plan_cache", lambda: tmp_path)
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: pytest.fail("no interpreter of its own"))
    probe = kept.StartProbe(remeasure=False, here=False)
    assert probe.elsewhere and not probe.done
    parts = {"imports_s": 5.0, "ray_start_s": 7.0, "worker_start_s": 6.0, "ray_shutdown_s": 1.5}
    probe.deliver(parts)
    probe.deliver({name: 99.0 for name in parts})  # a second delivery changes nothing
    assert probe.seconds() == 19.5
    assert json.loads(probe.path.read_text()) == {"start_s": 19.5, **parts}
    assert kept.StartProbe(remeasure=False, here=False).seconds() == 19.5  # read back, not measured
    failed = kept.StartProbe(remeasure=True, here=False)
    failed.deliver(None)  # the measuring process's probe failed: 0.0, and the cached figure stays
    assert failed.seconds() == 0.0 and json.loads(probe.path.read_text())["start_s"] == 19.5


@pytest.mark.slow  # a real Ray started and stopped in a measuring process (about 20 s)
def test_the_first_measuring_process_measures_the_start_then_shapes(monkeypatch, tmp_path):
    """With two streams and nothing cached, the start is measured by the measuring process
    (no interpreter of its own), before it takes shapes; this process measures meanwhile."""
    import subprocess

    import orthotune.plan._cache as kept
    import orthotune.plan._costing as costing

    monkeypatch.setattr(kept, "plan_cache", lambda: tmp_path / "cache")
    monkeypatch.setattr(costing, "streams", lambda *args, **kwargs: 2)
    real = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda args, **k: pytest.fail("the probe ran in its own interpreter")
                        if "orthotune.plan._start_probe" in args else real(args, **k))
    plan = plan_search(options({**SPACE, "depths": [2, 3]}), measure_epochs=1)
    assert all(c.measured and not c.cached for c in plan.cells)
    (measured,) = (tmp_path / "cache" / "plan-start").glob("*.json")
    parts = json.loads(measured.read_text())
    names = ("imports_s", "ray_start_s", "worker_start_s", "ray_shutdown_s")
    assert all(parts[name] > 0 for name in names), parts
    assert plan.totals()["start_s"] == parts["start_s"] == pytest.approx(sum(parts[name] for name in names))


@pytest.mark.slow
def test_the_start_probe_times_the_imports_ray_a_trial_worker_and_the_shutdown(monkeypatch, tmp_path):
    import orthotune.plan._cache as kept

    monkeypatch.setattr(kept, "plan_cache", lambda: tmp_path)
    seconds = kept.StartProbe(remeasure=True).seconds()  # a real Ray, started and stopped in a fresh interpreter
    parts = json.loads(kept.StartProbe(remeasure=False).path.read_text())
    names = ("imports_s", "ray_start_s", "worker_start_s", "ray_shutdown_s")
    assert all(parts[name] > 0 for name in names), parts  # a failed probe writes nothing and says 0.0
    assert parts["start_s"] == seconds == pytest.approx(sum(parts[name] for name in names))
