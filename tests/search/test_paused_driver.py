"""A driver paused past its lease's staleness (SIGSTOP: a suspended VM, a stopped job), taken
over by ``launch --start-or-resume``, then continued (SIGCONT): it must write nothing more and
stop with one line saying it lost the search (issue 51). Real local Ray, real Cora."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from checker import anomalies
from resumed import stored

from orthotune.store import Store, lease_info

pytestmark = pytest.mark.slow  # two drivers, each with a local Ray, train on Cora

DATA = Path(os.environ.get("ORTHOTUNE_DATA_ROOT", "../shared/data")).resolve()
SPACE = {"name": "paused", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2],
         "original": True, "ortho": {"T": [2, 6], "beta": 1.0, "lam": 5.0e-4},
         "train": {"lr": [0.1, 0.03, 0.01, 0.003], "dropout": 0.0, "epochs": 200, "patience": 200, "hidden": 16},
         "samples": 3}
BUDGET = 2 * SPACE["samples"]
STALE_S = 5


def driver(tmp_path: Path, *extra: str) -> subprocess.Popen:
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ORTHOTUNE_DATA_ROOT": str(DATA),
           "ORTHOTUNE_LEASE_STALE_S": str(STALE_S)}
    return subprocess.Popen([sys.executable, "-m", "orthotune.cli", "launch", "--space", str(space), "--name", "p",
                             "--store", str(tmp_path / "store"), "--concurrency", "1", "--scheduler", "fifo",
                             "--report-every", "5", "--progress", "plain", *extra],
                            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def wait_until(condition, proc: subprocess.Popen, what: str, deadline_s: float = 300) -> None:
    start = time.monotonic()
    while not condition():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - start < deadline_s, f"timed out waiting for {what}"
        time.sleep(0.3)


def holder(store: Path) -> int | None:
    """The pid of the driver holding search ``p``'s lease (None for an instant during a takeover)."""
    lease = lease_info(Store.open(str(store)), "p", STALE_S)
    return None if lease is None else lease.pid


def test_a_paused_driver_taken_over_writes_nothing_more_and_says_it_lost_the_search(tmp_path):
    store = tmp_path / "store"
    first = driver(tmp_path)
    second = None
    try:
        wait_until(lambda: len(stored(store, "p")) >= 1, first, "the first driver's first trial")
        os.kill(first.pid, signal.SIGSTOP)  # the driver alone: its trial's worker trains on
        second = driver(tmp_path, "--start-or-resume")
        # the second driver waits for the paused one's lease to go stale, takes it over, trains
        wait_until(lambda: holder(store) == second.pid, second, "the second driver's lease")
        wait_until(lambda: len(stored(store, "p")) >= 2, second, "a trial of the second driver")
    finally:
        os.kill(first.pid, signal.SIGCONT)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 1, (out, err)
    last = err.strip().splitlines()[-1]
    assert last.startswith("orthotune launch: error: search 'p' in store ") and "was lost by this driver" in last, err
    assert "lease epoch 1) to " in last and "writes nothing more" in last, last
    assert "Traceback" not in err and "KeyError" not in err, err
    finished = second.communicate(timeout=600)
    assert second.returncode == 0, finished
    assert anomalies(store, "p", BUDGET) == []
