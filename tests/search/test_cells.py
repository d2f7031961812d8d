"""Per-cell searches without Ray running: each cell its own searcher, budget and ASHA, and
repeated proposals answered from known results."""

import json
import random
from collections import Counter

import pytest
from ray.tune.schedulers import ASHAScheduler, TrialScheduler
from ray.tune.search import Searcher

from orthotune.core import OBJECTIVE, OrthotuneError, Status, TrainConfig
from orthotune.search import LaunchOptions, cell_key
from orthotune.search._cells import CellScheduler, CellSearcher
from orthotune.search._identity import config_identity
from orthotune.search._live import optuna_storage
from orthotune.search._objective import RUNG_SCORE, TIME_ATTR
from orthotune.search._replay import StoredTrial, replay_rungs
from orthotune.search._strategy import strategy
from orthotune.spaces import parse_space
from orthotune.store import config_columns, config_from_columns

CORA_TEXAS = {
    "name": "ct", "datasets": ["cora", "texas"], "backbones": ["gcn"], "depths": [2], "original": True,
    "ortho": {"T": {"low": 1, "high": 6}, "beta": 0.5, "lam": 5.0e-4},
    "train": {"lr": {"low": 0.001, "high": 0.1, "log": True}, "epochs": 20},
    "samples": 6,
}


def options(space: dict, **kwargs) -> LaunchOptions:
    return LaunchOptions(store="unused", name="s", space=parse_space(space), **kwargs)


def drain(searcher: Searcher, objective=lambda config: random.random(), complete_each: bool = True):
    """Suggest until FINISHED, completing each trial at once; returns the configs trained."""
    trained, waiting = [], []
    for index in range(10_000):
        config = searcher.suggest(f"t{index:04d}")
        if config == Searcher.FINISHED:
            break
        if config is None:  # nothing new until running trials end
            assert waiting, "the searcher stalled with nothing running"
            trial_id, done = waiting.pop(0)
            searcher.on_trial_complete(trial_id, {OBJECTIVE: objective(done)})
            continue
        trained.append(config)
        if complete_each:
            searcher.on_trial_complete(f"t{index:04d}", {OBJECTIVE: objective(config)})
        else:
            waiting.append((f"t{index:04d}", config))
    for trial_id, done in waiting:
        searcher.on_trial_complete(trial_id, {OBJECTIVE: objective(done)})
    return trained


@pytest.mark.parametrize(("config", "key"), [
    ({"dataset": "cora", "backbone": "gcn", "depth": 2, "ortho": True}, "cora/gcn/2/ortho"),
    ({"dataset": "cora", "setting": "semi", "backbone": "gcn", "depth": 2, "ortho": False}, "cora/gcn/2/original"),
    ({"dataset": "texas", "backbone": "jknet", "depth": 16, "ortho": True, "variant": "default"},
     "texas/jknet/16/ortho"),
    ({"dataset": "cora", "backbone": "gcnii", "depth": 64, "ortho": True, "variant": "official"},
     "cora/gcnii/64/official/ortho"),
    ({"dataset": "pyg:Planetoid/Cora", "backbone": "tests.models.factories_for_tests:mlp", "depth": 4,
      "variant": None}, "pyg:Planetoid/Cora/tests.models.factories_for_tests:mlp/4/original"),
])
def test_a_cell_key_is_what_older_searches_named_their_studies_by(config, key):
    """Optuna studies and stored searchers are named by the key: ``--resume`` of a search
    written by an earlier version finds them only if it never changes."""
    assert cell_key(config) == key


def test_cora_texas_samples_6_gives_each_cell_6_trials():
    chosen = strategy(options(CORA_TEXAS))
    trained = drain(chosen.search_alg)
    per_cell = Counter(cell_key(config) for config in trained)
    assert per_cell == {"cora/gcn/2/original": 6, "cora/gcn/2/ortho": 6,
                        "texas/gcn/2/original": 6, "texas/gcn/2/ortho": 6}
    assert chosen.num_samples == chosen.configs == 24
    # each cell's own searcher proposed only its own cell's configs
    assert all(("T" in config) == config["ortho"] for config in trained)


def test_samples_option_overrides_the_space_per_cell():
    trained = drain(strategy(options(CORA_TEXAS, samples=2)).search_alg)
    assert Counter(cell_key(c) for c in trained) == dict.fromkeys(
        ["cora/gcn/2/original", "cora/gcn/2/ortho", "texas/gcn/2/original", "texas/gcn/2/ortho"], 2)


def test_finite_space_never_trains_a_config_twice():
    space = {**CORA_TEXAS, "datasets": ["cora"], "ortho": {"T": [2, 4], "beta": 0.5, "lam": 5.0e-4},
             "train": {"lr": [0.01, 0.1], "epochs": 20}, "samples": 6}
    searcher = strategy(options(space)).search_alg
    trained = drain(searcher, objective=lambda config: config["lr"])
    keys = [config_identity(c) for c in trained]
    assert len(keys) == len(set(keys))  # no repeat trained
    per_cell = Counter(cell_key(c) for c in trained)
    assert per_cell == {"cora/gcn/2/ortho": 4, "cora/gcn/2/original": 2}  # every distinct config, once
    assert strategy(options(space)).configs == 6  # the progress display's total: what can train


class Scripted(Searcher):
    """Suggests given configs in order and records what it is told, under which id."""

    def __init__(self, configs):
        super().__init__(metric=OBJECTIVE, mode="max")
        self.configs, self.told, self.results = list(configs), {}, {}

    def suggest(self, trial_id):
        return dict(self.configs.pop(0)) if self.configs else Searcher.FINISHED

    def on_trial_result(self, trial_id, result):
        self.results.setdefault(trial_id, []).append(result)

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.told[trial_id] = (result, error)


A, B, C = ({"dataset": "cora", "backbone": "gcn", "depth": 2, "ortho": False, "lr": lr} for lr in (0.1, 0.2, 0.3))
TEXAS = {"dataset": "texas", "backbone": "gcn", "depth": 2, "ortho": False, "lr": 0.1}


def test_routing_goes_to_the_proposing_cells_searcher():
    cora, texas = Scripted([A, B]), Scripted([TEXAS])
    searcher = CellSearcher({"cora": cora, "texas": texas}, samples=2, metric=OBJECTIVE, mode="max")
    first, second, third = (searcher.suggest(t) for t in ("t1", "t2", "t3"))
    assert [first, second, third] == [A, TEXAS, B]  # round-robin over the cells
    searcher.on_trial_result("t2", {OBJECTIVE: 0.4, "training_iteration": 1})
    searcher.on_trial_complete("t2", {OBJECTIVE: 0.5})
    searcher.on_trial_complete("t1", {OBJECTIVE: 0.7})
    assert texas.results == {"t2": [{OBJECTIVE: 0.4, "training_iteration": 1}]}
    assert texas.told == {"t2": ({OBJECTIVE: 0.5}, False)} and set(cora.told) == {"t1"}
    assert searcher.suggest("t4") == Searcher.FINISHED  # both budgets spent; t3 still runs
    searcher.on_trial_complete("t3", {OBJECTIVE: 0.6})
    assert cora.told["t3"] == ({OBJECTIVE: 0.6}, False)


def test_a_repeat_of_a_finished_config_is_answered_with_its_result():
    inner = Scripted([A, A, B])
    searcher = CellSearcher({"cora": inner}, samples=5, metric=OBJECTIVE, mode="max")
    assert searcher.suggest("t1") == A
    searcher.on_trial_complete("t1", {OBJECTIVE: 0.8})
    assert searcher.suggest("t2") == B  # the second A was answered, not trained
    assert inner.told["t2"] == ({OBJECTIVE: 0.8}, False)  # the repeat, under its own id
    searcher.on_trial_complete("t2", {OBJECTIVE: 0.6})
    assert inner.told["t2~repeat1"] == ({OBJECTIVE: 0.6}, False)  # B, under the id it was asked with
    assert searcher.answered == 1


def test_a_repeat_of_a_running_config_waits_for_its_result():
    inner = Scripted([A, A, B])
    searcher = CellSearcher({"cora": inner}, samples=5, metric=OBJECTIVE, mode="max")
    assert searcher.suggest("t1") == A
    assert searcher.suggest("t2") == B
    assert "t2" not in inner.told  # the repeat of A: nothing known yet
    searcher.on_trial_complete("t1", None, error=True)
    assert inner.told["t2"] == (None, True)  # a failed config's repeat fails too
    assert inner.told["t1"] == (None, True)


def test_a_cell_whose_searcher_only_repeats_itself_finishes():
    inner = Scripted([A] * 20)
    searcher = CellSearcher({"cora": inner}, samples=10, metric=OBJECTIVE, mode="max", max_repeats=5)
    assert searcher.suggest("t1") == A
    searcher.on_trial_complete("t1", {OBJECTIVE: 0.5})
    assert searcher.suggest("t2") == Searcher.FINISHED
    assert searcher.answered == 6


def stored(configs, values=None) -> list[StoredTrial]:
    """Configs as a resumed search reads them back from the store's rows."""
    values = values or [0.5] * len(configs)
    full = [config_from_columns(config_columns(TrainConfig.from_dict(config))) for config in configs]
    return [StoredTrial(f"old{index}", cell_key(config), columns, Status.COMPLETED if value is not None
                        else Status.FAILED, value, None)
            for index, (config, columns, value) in enumerate(zip(configs, full, values, strict=True))]


def test_a_resumed_strategy_replays_the_stored_trials_and_trains_only_the_rest():
    first = strategy(options(CORA_TEXAS)).search_alg
    trained = drain_some(first, 5)
    resumed = strategy(options(CORA_TEXAS), stored=stored(trained))
    assert resumed.configs == resumed.num_samples == 4 * 6 - 5
    assert resumed.search_alg.given == first.given  # the stored trials count against each cell's budget
    rest = drain(resumed.search_alg)
    per_cell = Counter(cell_key(c) for c in trained + rest)
    assert set(per_cell.values()) == {6} and len(per_cell) == 4  # the budget continues, not restarts
    canon = [config_identity(c) for c in trained + rest]
    assert len(canon) == len(set(canon))  # a stored config is never proposed again


def test_replayed_results_reach_each_cells_optuna_study():
    first = strategy(options(CORA_TEXAS)).search_alg
    trained = drain_some(first, 4)
    values = [0.1, None, 0.3, 0.4]  # one failed
    resumed = strategy(options(CORA_TEXAS), stored=stored(trained, values)).search_alg
    told = {}
    for cell, inner in resumed.searchers.items():
        for trial in inner._ot_study.trials:
            told[(cell, trial.state.name)] = told.get((cell, trial.state.name), 0) + 1
    cells = Counter((cell_key(c), "COMPLETE" if v is not None else "FAIL")
                    for c, v in zip(trained, values, strict=True))
    assert told == dict(cells)


def test_a_resumed_grid_trains_only_the_points_no_row_holds():
    space = {**CORA_TEXAS, "ortho": {"T": [1, 2, 3], "beta": 0.5, "lam": 5.0e-4}, "train": {"lr": [0.01, 0.1]}}
    points = strategy(options(space, searcher="grid")).search_alg.points
    resumed = strategy(options(space, searcher="grid"), stored=stored(points[:3] + points[5:6]))
    assert resumed.search_alg.points == points[3:5] + points[6:]


def test_searcher_checkpoints_are_json_and_are_never_restored(tmp_path):
    searcher = strategy(options(CORA_TEXAS)).search_alg
    drain_some(searcher, 3)
    path = tmp_path / "searcher-state"
    searcher.save(str(path))
    assert json.loads(path.read_text())["given"] == searcher.given
    with pytest.raises(OrthotuneError, match="--resume"):
        searcher.restore(str(path))


def test_asha_rungs_are_rebuilt_from_stored_curves():
    """A stored trial's reports reach its cell's ASHA: a worse trial of the resumed session
    stops at the first rung, as it would have beside the stored one."""
    cora = {**CORA_TEXAS, "datasets": ["cora"], "original": False}
    scheduler = strategy(options(cora, scheduler="asha")).scheduler
    config = {"dataset": "cora", "backbone": "gcn", "depth": 2, "ortho": True, "T": 2, "beta": 0.5, "lam": 5e-4}
    trials = stored([config, config, config])
    curves = {t.trial_id: [(epoch, 0.8) for epoch in range(2, 21, 2)] for t in trials}
    assert replay_rungs(scheduler, trials, curves) == 3
    new = FakeTrial("new", {**config, "T": 3})
    scheduler.on_trial_add(None, new)
    decisions = [scheduler.on_trial_result(None, new, {TIME_ATTR: epoch, RUNG_SCORE: 0.2}) for epoch in range(1, 21)]
    assert TrialScheduler.STOP in decisions


def drain_some(searcher, count):
    trained = []
    for index in range(count):
        config = searcher.suggest(f"a{index}")
        searcher.on_trial_complete(f"a{index}", {OBJECTIVE: random.random()})
        trained.append(config)
    return trained


def test_each_cell_has_its_own_study_in_the_optuna_storage(tmp_path):
    import optuna

    storage = optuna_storage(str(tmp_path / "optuna" / "s.journal"))
    searcher = strategy(options(CORA_TEXAS, samples=3), storage).search_alg
    drain(searcher)
    names = sorted(optuna.get_all_study_names(storage))
    assert names == ["s/cora/gcn/2/original", "s/cora/gcn/2/ortho", "s/texas/gcn/2/original", "s/texas/gcn/2/ortho"]
    study = optuna.load_study(study_name="s/cora/gcn/2/ortho", storage=storage)
    assert len(study.trials) == 3 and all(t.state.name == "COMPLETE" for t in study.trials)
    assert all("T" in t.params for t in study.trials)


class FakeTrial:
    def __init__(self, trial_id, config):
        self.trial_id, self.config = trial_id, config


def report(scheduler, trial, epoch, value):
    return scheduler.on_trial_result(None, trial, {TIME_ATTR: epoch, OBJECTIVE: value})


def asha():
    return ASHAScheduler(time_attr=TIME_ATTR, metric=OBJECTIVE, mode="max", max_t=16, grace_period=4,
                         reduction_factor=2, stop_last_trials=False)


def test_a_texas_trial_never_stops_a_cora_trial():
    texas = [FakeTrial(f"x{i}", {**TEXAS}) for i in range(3)]
    cora = FakeTrial("c0", {**A})

    def run(scheduler):
        for trial in [*texas, cora]:
            scheduler.on_trial_add(None, trial)
        for trial, value in zip(texas, (0.9, 0.8, 0.85), strict=True):
            assert report(scheduler, trial, 4, value) == TrialScheduler.CONTINUE or trial is not texas[0]
        return report(scheduler, cora, 4, 0.3)

    assert run(asha()) == TrialScheduler.STOP  # one shared ASHA: Texas stops Cora
    per_cell = CellScheduler(lambda cell: asha())
    assert run(per_cell) == TrialScheduler.CONTINUE
    assert sorted(per_cell.schedulers) == ["cora/gcn/2/original", "texas/gcn/2/original"]


def test_trials_within_a_cell_are_still_compared():
    scheduler = CellScheduler(lambda cell: asha())
    good, bad = FakeTrial("g", {**A}), FakeTrial("b", {**B})
    for trial in (good, bad):
        scheduler.on_trial_add(None, trial)
    assert report(scheduler, good, 4, 0.9) == TrialScheduler.CONTINUE
    assert report(scheduler, bad, 4, 0.1) == TrialScheduler.STOP
    scheduler.on_trial_complete(None, good, {TIME_ATTR: 16, OBJECTIVE: 0.9})
    assert "g" not in scheduler.cells


def test_a_member_inside_a_pack_is_dispatched_by_its_cell_attribute():
    scheduler = CellScheduler(lambda cell: asha())
    member = FakeTrial("m", {})
    member.cell = "texas/gcn/2/ortho"
    scheduler.on_trial_add(None, member)
    assert list(scheduler.schedulers) == ["texas/gcn/2/ortho"]


def test_the_launch_strategy_uses_one_asha_per_cell_with_the_cells_own_max_t():
    space = {**CORA_TEXAS, "train": {"lr": 0.01}}  # each dataset's default epochs
    scheduler = strategy(options(space)).scheduler
    assert isinstance(scheduler, CellScheduler)
    cora = scheduler.scheduler("cora/gcn/2/ortho")
    assert cora is not scheduler.scheduler("texas/gcn/2/ortho")
    assert cora._max_t == parse_space(space).cells()[0].max_epochs()


@pytest.mark.parametrize("samples", [1, 3])
def test_the_strategy_total_is_cells_times_samples(samples):
    chosen = strategy(options(CORA_TEXAS, samples=samples))
    assert chosen.configs == 4 * samples


@pytest.mark.slow
def test_an_rdb_url_holds_the_cells_studies_too(tmp_path):
    import optuna

    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    drain(strategy(options(CORA_TEXAS, samples=2), optuna_storage(url)).search_alg)
    assert len(optuna.get_all_study_names(url)) == 4


@pytest.mark.parametrize("field, value", [("optuna_storage", ""), ("optuna_storage", 3), ("tensorboard", "yes")])
def test_live_view_options_are_validated(field, value):
    from orthotune.core import ConfigError

    with pytest.raises(ConfigError, match=field):
        options(CORA_TEXAS, **{field: value})


def test_every_cell_tries_its_defaults_first():
    """Both arms start from orthotune's defaults (one trial of each cell's equal budget), so
    a small search never ends below the defaults in either arm."""
    space = {**CORA_TEXAS, "train": {"lr": [0.005, 0.01, 0.05], "epochs": 20}}
    trained = drain(strategy(options(space)).search_alg)
    first = {}
    for config in trained:
        first.setdefault(cell_key(config), config)
    assert len(first) == 4
    for config in first.values():
        assert config["lr"] == 0.01, config
        if config["ortho"]:
            assert config["T"] == 4, config  # beta is fixed at 0.5 in this space


def test_a_record_from_another_version_is_refused_in_one_line_and_a_current_one_round_trips():
    meta = options(CORA_TEXAS, samples=3).to_meta()
    stored = json.loads(json.dumps(meta))
    again = LaunchOptions.from_meta(stored)  # its space parsed back
    assert again.samples == 3 and again.space.to_dict() == meta["space"]
    with pytest.raises(OrthotuneError, match=r"unknown option\(s\) gpu_budget.*new name"):
        LaunchOptions.from_meta({**meta, "gpu_budget": 4})
    with pytest.raises(OrthotuneError, match="no space"):
        LaunchOptions.from_meta({k: v for k, v in meta.items() if k != "space"})


def test_repeated_proposals_are_marked_in_the_cells_optuna_study():
    """A finite cell (two configs) under a random sampler that repeats itself: the study holds
    one trial per proposal, and exactly those beyond the two trained are marked repeats, each
    with the result of the config it repeats."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    from orthotune.search._cells import REPEAT_ATTR

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # configs as a cell proposes them: whole (a config's identity is the store's canonical form)
    space = {"dataset": optuna.distributions.CategoricalDistribution(["cora"]),
             "lr": optuna.distributions.CategoricalDistribution([0.1, 0.2])}
    inner = OptunaSearch(space=space, metric=OBJECTIVE, mode="max", sampler=optuna.samplers.RandomSampler(seed=3))
    searcher = CellSearcher({"cora": inner}, samples=5, sizes={"cora": 2}, metric=OBJECTIVE, mode="max")
    values = {0.1: 0.6, 0.2: 0.7}
    trained = []
    for index in range(5):
        config = searcher.suggest(f"t{index}")
        if config == Searcher.FINISHED:
            break
        trained.append(config["lr"])
        searcher.on_trial_complete(f"t{index}", {OBJECTIVE: values[config["lr"]]})
    assert sorted(trained) == [0.1, 0.2]  # each config trained once
    trials = inner._ot_study.get_trials()
    repeats = [t for t in trials if REPEAT_ATTR in t.user_attrs]
    assert searcher.answered >= 1 and len(repeats) == searcher.answered
    assert len(trials) - len(repeats) == 2
    assert all(t.value == values[t.params["lr"]] for t in repeats)
