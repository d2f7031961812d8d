"""ASHA on a plateau: trials that tie on validation accuracy are ranked by validation loss,
and a grid reaches ASHA in a seeded random order."""

import math

import pytest

from orthotune.search import LaunchOptions, launch, rung_score
from orthotune.search._algorithms import shuffled_grid
from orthotune.search._replay import objective_curves, stored_trials
from orthotune.search._strategy import strategy
from orthotune.spaces import parse_space
from orthotune.store import Store


def test_rung_score_breaks_a_tie_by_the_lower_loss():
    assert rung_score(0.30, [1.2, 1.4]) > rung_score(0.30, [1.3, 1.4])
    assert rung_score(0.30, [0.5]) < 0.30  # a tie-break, never a bonus


def test_rung_score_never_reorders_distinct_objectives():
    """The smallest step between two objectives orthotune produces is 1e-6; the best loss
    cannot lift the lower one over the worst loss of the higher."""
    assert rung_score(0.300001, [math.inf]) > rung_score(0.300000, [0.0])
    assert rung_score(0.300001, [1e9]) > rung_score(0.300000, [1e-9])


def test_a_repeat_without_a_finite_loss_counts_as_the_worst():
    assert rung_score(0.5, [0.7, math.inf]) == rung_score(0.5, [math.nan]) < rung_score(0.5, [50.0])


def test_the_grid_reaches_asha_in_a_seeded_random_order():
    points = [{"T": t, "beta": b} for t in range(4) for b in (0.2, 0.4, 0.6)]
    first, again, other = shuffled_grid(points, 0), shuffled_grid(points, 0), shuffled_grid(points, 1)
    assert first == again and first != other and first != points
    assert sorted(map(str, first)) == sorted(map(str, points))  # the same points, each once


def test_a_launched_grid_proposes_every_point_once_in_the_seeded_order():
    space = parse_space({"name": "g", "datasets": ["cora"], "backbones": ["gcn"], "depths": [2], "original": False,
                         "ortho": {"T": [1, 2, 3, 4], "beta": [0.2, 0.6], "lam": 5e-4}, "samples": 8})

    def proposed(seed: int) -> list[tuple]:
        options = LaunchOptions(store="unused", name="g", space=space, searcher="grid", scheduler="asha", seed=seed)
        searcher = strategy(options).search_alg
        return [(p["T"], p["beta"]) for p in (searcher.suggest(f"t{k}") for k in range(8))]

    nested = [(p["T"], p["beta"]) for p in space.grid()]
    assert proposed(3) == [(p["T"], p["beta"]) for p in shuffled_grid(space.grid(), 3)] != nested
    assert proposed(3) == proposed(3) != proposed(4)
    assert sorted(proposed(3)) == sorted(nested)


#: The original GCN-8 at weight decay 5e-4: every trial predicts the majority class for its
#: first 16 epochs at each of these learning rates (measured: validation accuracy 0.299 at
#: every epoch, the loss falling at different speeds), so all tie at the first rung.
PLATEAU = {
    "name": "plateau", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [8],
    "original": True,
    "train": {"lr": [0.002, 0.005, 0.01, 0.02, 0.05, 0.1], "weight_decay": 5e-4, "dropout": 0.0, "hidden": 16,
              "epochs": 12, "patience": 12},
    "asha": {"grace_period": 4, "reduction_factor": 2},
    "samples": 6,
}


@pytest.fixture(scope="module")
def plateau_store(tmp_path_factory):
    import ray

    store = str(tmp_path_factory.mktemp("store") / "s")
    try:
        launch(LaunchOptions(store=store, name="plateau", space=parse_space(PLATEAU), searcher="grid",
                             scheduler="asha", concurrency=2, report_every=4, seed=0), progress=False)
        yield store
    finally:
        ray.shutdown()  # launch() leaves the local Ray it started to its process; later tests start their own


@pytest.mark.slow  # a real local Ray, six depth-8 trials on Cora
def test_asha_stops_trials_that_tie_on_accuracy_at_the_first_rung(plateau_store):
    store = Store.open(plateau_store)
    trials = store.read("trials").to_pylist()
    assert len(trials) == 6
    epochs = store.read("epochs").to_pandas()
    assert epochs[epochs["epoch"] <= 4].groupby("trial_id")["val_acc"].max().nunique() == 1  # all tie
    first_rung = [epochs for t in trials for epochs in t["repeat_epochs"]]
    # Before the tie-break every trial tied at epoch 4 and none stopped there.
    assert first_rung.count(4) >= 1, first_rung
    assert any(t["status"] == "stopped" for t in trials)


@pytest.mark.slow
def test_a_resume_ranks_stored_trials_by_the_same_tie_break(plateau_store):
    store = Store.open(plateau_store)
    stored = stored_trials(store, "plateau")
    curves = objective_curves(store, "plateau", stored, 4)
    epochs = store.read("epochs", search="plateau").to_pandas()
    at_rung = epochs[epochs["epoch"] <= 4].groupby("trial_id")
    accuracy = at_rung["val_acc"].max()
    assert accuracy.nunique() == 1  # the plateau: one accuracy for every trial at the first rung
    lowest = at_rung["val_loss"].min()
    score = {trial_id: dict(curve)[4] for trial_id, curve in curves.items()}
    assert len(set(score.values())) == len(score)  # the loss told them apart
    by_score = sorted(score, key=score.get)
    assert by_score == sorted(score, key=lambda t: -lowest[t])
    assert all(rung_score(accuracy.iloc[0], [lowest[t]]) == score[t] for t in score)
