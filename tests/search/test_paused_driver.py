"""A driver paused past its lease's staleness (SIGSTOP: a suspended VM, a stopped job), taken
over by ``launch --start-or-resume``, then continued (SIGCONT): it must write nothing more and
stop with one line saying it lost the search (issue 51). Real local Ray, real Cora."""

from __future__ import annotations

import os
import signal

import pytest
from checker import anomalies
from drivers import BUDGET, NAME, driver, holder, wait_until
from resumed import stored

pytestmark = pytest.mark.slow  # two drivers, each with a local Ray, train on Cora


def test_a_paused_driver_taken_over_writes_nothing_more_and_says_it_lost_the_search(tmp_path):
    store = tmp_path / "store"
    first = driver(tmp_path)
    second = None
    try:
        assert wait_until(lambda: len(stored(store, NAME)) >= 1, first, "the first driver's first trial"), \
            first.communicate()
        os.kill(first.pid, signal.SIGSTOP)  # the driver alone: its trial's worker trains on
        second = driver(tmp_path, "--start-or-resume")
        # the second driver waits for the paused one's lease to go stale, takes it over, trains
        assert wait_until(lambda: holder(store) == second.pid, second, "the second driver's lease"), \
            second.communicate()
        wait_until(lambda: len(stored(store, NAME)) >= 2, second, "a trial of the second driver")
    finally:
        os.kill(first.pid, signal.SIGCONT)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 1, (out, err)
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"orthotune launch: error: search '{NAME}' in store "), err
    assert "was lost by this driver" in last and "lease epoch 1) to " in last and "writes nothing more" in last, last
    assert "Traceback" not in err and "KeyError" not in err, err
    finished = second.communicate(timeout=600)
    assert second.returncode == 0, finished
    assert anomalies(store, NAME, BUDGET) == []


def test_without_the_fence_the_checker_catches_what_the_paused_driver_writes(tmp_path):
    """The fence taken away (as before issue 51): the continued driver writes on, beside its
    successor, and the checker names what the issue saw (trials over the budget, configs
    trained twice), so a nemesis that passes is one the fence made pass."""
    store = tmp_path / "store"
    first = driver(tmp_path, fenced=False)
    second = None
    try:
        assert wait_until(lambda: len(stored(store, NAME)) >= 1, first, "the first driver's first trial"), \
            first.communicate()
        os.kill(first.pid, signal.SIGSTOP)
        second = driver(tmp_path, "--start-or-resume")
        assert wait_until(lambda: holder(store) == second.pid, second, "the second driver's lease"), \
            second.communicate()
    finally:
        os.kill(first.pid, signal.SIGCONT)
    try:
        first.communicate(timeout=600)
        second.communicate(timeout=600)
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    found = anomalies(store, NAME, BUDGET)
    assert any("over the budget" in f or "trained twice" in f for f in found), found
