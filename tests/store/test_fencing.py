"""Fencing: a driver whose lease was taken over (it was paused past the lease's staleness)
writes nothing more: every write of its store is refused with ``LeaseLost``."""

from __future__ import annotations

import os
import time

import pytest

from orthotune.core import ConfigResult, OrthotuneError, RunResult, TrainConfig
from orthotune.store import Lease, LeaseLost, Store, lease_info, lease_stale_s, trial_row

STALE_S = 0.3


@pytest.fixture
def store(tmp_path):
    return Store.open(str(tmp_path / "store"), create=True)


def row(search: str, trial_id: str) -> dict:
    config = TrainConfig(dataset="cora", depth=2, ortho=False, splits=(0,))
    result = ConfigResult(config, [RunResult(split, seed, val_acc=0.5) for split, seed in config.runs()])
    return trial_row(search, trial_id, result, "completed")


def taken_over(store: Store) -> tuple[Lease, Lease]:
    """The first driver's lease, and the second driver's, taken over once the first went stale."""
    first = Lease.acquire(store, "s", stale_after=STALE_S)
    time.sleep(STALE_S + 0.1)  # the first driver is paused: no heartbeat
    return first, Lease.acquire(store, "s", stale_after=STALE_S)


def test_a_write_with_a_stale_epoch_is_refused_and_the_new_holders_is_not(store):
    first, second = taken_over(store)
    assert (first.epoch, second.epoch) == (1, 2)
    stale, fresh = store.fenced(first.check), store.fenced(second.check)
    fresh.write_summary("s", {"completed": 1})
    for write in (lambda: stale.write_trial(row("s", "old"), []),
                  lambda: stale.write_summary("s", {"completed": 2}),
                  lambda: stale.save_search_meta("s", {"state": "finished"})):
        with pytest.raises(LeaseLost) as refused:
            write()
        assert f"lost by this driver (pid {os.getpid()}, lease epoch 1)" in str(refused.value)
        assert "lease epoch 2" in str(refused.value) and "writes nothing more" in str(refused.value)
    assert first.lost and not first.heartbeat()  # its heartbeat does not take the file back either
    assert store.read("trials", search="s").num_rows == 0 and not store.exists("searches/s.json")
    assert store.summary("s") == {"completed": 1}
    fresh.write_trial(row("s", "new"), [])
    assert store.read("trials", search="s")["trial_id"].to_pylist() == ["new"]
    first.release()  # the lost driver leaves the new holder's lease in place
    assert lease_info(store, "s", STALE_S).epoch == 2
    second.release()


def test_a_write_after_the_new_holder_released_is_refused_too(store):
    first, second = taken_over(store)
    second.release()
    with pytest.raises(LeaseLost, match="its lease since released"):
        store.fenced(first.check).write_summary("s", {"completed": 1})


def test_the_staleness_is_set_by_the_environment_and_checked(monkeypatch):
    monkeypatch.delenv("ORTHOTUNE_LEASE_STALE_S", raising=False)
    assert lease_stale_s() == 60.0
    monkeypatch.setenv("ORTHOTUNE_LEASE_STALE_S", "4.5")
    assert lease_stale_s() == 4.5
    for bad in ("0", "-1", "soon", "inf"):
        monkeypatch.setenv("ORTHOTUNE_LEASE_STALE_S", bad)
        with pytest.raises(OrthotuneError, match=f"ORTHOTUNE_LEASE_STALE_S='{bad}' must be a positive"):
            lease_stale_s()


@pytest.mark.slow
def test_the_checker_catches_a_stale_drivers_write(tmp_path, store):
    """Were the fence gone, the stale driver's row (a config the new driver also trained, under
    another trial id) would be caught: one config twice, one trial over the budget."""
    from checker import anomalies

    first, second = taken_over(store)
    fresh = store.fenced(second.check)
    fresh.save_search_meta("s", {"state": "finished"})
    fresh.write_trial(row("s", "new"), [])
    fresh.write_summary("s", {"completed": 1})
    second.release()
    assert anomalies(tmp_path / "store", "s", budget=1) == []
    store.write_trial(row("s", "old"), [])  # unfenced: what the stale driver wrote before the fence
    found = anomalies(tmp_path / "store", "s", budget=1)
    assert "1 config(s) trained twice in one cell, trial ids ['new', 'old']" in found, found
    assert "2 trials stored, over the budget of 1" in found and any(f.startswith("summary ") for f in found), found
