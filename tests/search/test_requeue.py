"""A trial Ray Tune gives up on before it ran (its worker died while starting or being reset)
is suggested again as a new trial, told to the inner searcher under its first id, and stored
once: the Requeue searcher, its ledger and the recorder and progress display that read it."""

from __future__ import annotations

import pytest
from ray.tune.search import Searcher

from orthotune.search._grouping import PointSearcher
from orthotune.search._progress import SearchProgress
from orthotune.search._recorder import StoreRecorder
from orthotune.search._requeue import Requeue, RetryLedger
from orthotune.store import Store

CONFIG = {"dataset": "cora", "backbone": "gcn", "depth": 2, "setting": "full", "splits": [0], "ortho": False,
          "epochs": 4}


class Trial:
    def __init__(self, trial_id, config=CONFIG, status="ERROR"):
        self.trial_id, self.config, self.status = trial_id, config, status
        self.last_result, self.error_file = {}, None


class Told(PointSearcher):
    """Grid points, remembering what it is told."""

    def __init__(self, points):
        super().__init__(points, metric="val_acc", mode="max")
        self.told: list[tuple[str, float | None, bool]] = []

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.told.append((trial_id, (result or {}).get("val_acc"), error))


def requeue(points, retries):
    ledger = RetryLedger(retries)
    return Requeue(Told(points), ledger, metric="val_acc", mode="max"), ledger


def test_an_errored_config_comes_back_under_its_first_id_and_is_told_once():
    searcher, ledger = requeue([{"x": 1}, {"x": 2}], retries=2)
    assert searcher.suggest("t1") == {"x": 1}
    searcher.on_trial_complete("t1", error=True)  # its worker died before it ran
    assert ledger.requeued == {"t1"} and searcher.inner.told == []
    assert searcher.suggest("t2") == {"x": 1}  # the same config, next
    assert searcher.suggest("t3") == {"x": 2}
    searcher.on_trial_complete("t2", {"val_acc": 0.8})
    searcher.on_trial_complete("t3", {"val_acc": 0.7})
    assert searcher.inner.told == [("t1", 0.8, False), ("t3", 0.7, False)]
    assert searcher.suggest("t4") == Searcher.FINISHED


def test_the_retries_are_a_budget_per_config_that_counts_tunes_own():
    searcher, ledger = requeue([{"x": 1}], retries=2)
    searcher.suggest("t1")
    ledger.on_trial_recover(0, [], Trial("t1"))  # Tune retried it once while it trained
    searcher.on_trial_complete("t1", error=True)  # 2 attempts of 3
    assert searcher.suggest("t2") == {"x": 1}
    searcher.on_trial_complete("t2", error=True)  # the third: the budget is spent
    assert searcher.inner.told == [("t1", None, True)] and ledger.requeued == {"t1"}
    assert searcher.suggest("t3") == Searcher.FINISHED


def test_no_retries_no_requeue():
    searcher, ledger = requeue([{"x": 1}], retries=0)
    searcher.suggest("t1")
    searcher.on_trial_complete("t1", error=True)
    assert searcher.inner.told == [("t1", None, True)] and not ledger.requeued


def test_finished_waits_for_the_trials_still_running():
    """Once the inner searcher is spent, a running trial may still hand its config back."""
    searcher, _ = requeue([{"x": 1}], retries=1)
    searcher.suggest("t1")
    assert searcher.suggest("t2") is None  # not FINISHED: t1 runs
    searcher.on_trial_complete("t1", error=True)
    assert searcher.suggest("t3") == {"x": 1}
    searcher.on_trial_complete("t3", {"val_acc": 0.5})
    assert searcher.suggest("t4") == Searcher.FINISHED


def test_an_optuna_trial_stays_one_trial():
    optuna = pytest.importorskip("optuna")
    from ray import tune
    from ray.tune.search.optuna import OptunaSearch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    inner = OptunaSearch(space={"x": tune.choice([1, 2, 3])}, metric="val_acc", mode="max", seed=0)
    searcher = Requeue(inner, RetryLedger(1), metric="val_acc", mode="max")
    first = searcher.suggest("t1")
    searcher.on_trial_complete("t1", error=True)
    assert searcher.suggest("t2") == first
    searcher.on_trial_result("t2", {"val_acc": 0.4, "training_iteration": 1})
    searcher.on_trial_complete("t2", {"val_acc": 0.6})
    trials = inner._ot_study.trials
    assert [(t.state.name, t.value) for t in trials] == [("COMPLETE", 0.6)]


def test_the_recorder_and_the_progress_leave_a_requeued_trial_out(tmp_path):
    store = Store.open(str(tmp_path / "store"), create=True)
    ledger = RetryLedger(1)
    ledger.requeued.add("t1")
    recorder = StoreRecorder(store.uri, "s", ledger)
    recorder.on_trial_error(0, [], Trial("t1"))
    recorder.on_trial_error(0, [], Trial("t2"))  # given up on for good: stored failed
    rows = store.read("trials", search="s").to_pylist()
    assert [(r["trial_id"], r["status"]) for r in rows] == [("t2", "failed")]
    progress = SearchProgress(total=2, mode="plain", ledger=ledger)
    assert [t.trial_id for t in progress._counted([Trial("t1"), Trial("t2")])] == ["t2"]
