"""A worker node lost mid-search, on a real multi-node Ray on one machine (Ray's
``cluster_utils.Cluster`` on loopback: a head with no CPUs, where the driver attaches, and
worker nodes of one CPU each, so every trial runs on a worker node).

One worker node's raylet is SIGKILLed while the node trains a trial: the trial is retried on the
other node and stored once. Then the last worker node goes: the search ends ``crashed`` with
the command that resumes it instead of waiting forever, and that command, run once a new
node has joined, finishes the search: every trial once, none failed, none trained twice. The
dead raylet's ``[state-dump]`` lines stay in its log, out of the driver's output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from resumed import assert_whole, stored

from orthotune.search._local_ray import LOOPBACK, loopback_ray
from orthotune.store import Store

pytestmark = pytest.mark.slow  # a four-node Ray and real training

DATA = Path(os.environ.get("ORTHOTUNE_DATA_ROOT", "../shared/data")).resolve()
SPACE = {"name": "nodes", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2],
         "original": True, "ortho": {"T": [2, 6], "beta": 1.0, "lam": 5.0e-4},
         "train": {"lr": [0.1, 0.03, 0.01], "dropout": 0.0, "epochs": 300, "patience": 300, "hidden": 16},
         "samples": 3}
TOTAL = 2 * SPACE["samples"]
NODE_WAIT_S = 10


@pytest.fixture
def cluster():
    from ray.cluster_utils import Cluster

    with loopback_ray():  # every node on 127.0.0.1
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": LOOPBACK,
                                                                "include_dashboard": False})
    yield cluster
    cluster.shutdown()


def add_worker(cluster):
    with loopback_ray():
        return cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK)


def training_on(node) -> bool:
    """Whether a worker of ``node`` (a child of its raylet) is training a trial right now."""
    raylet = psutil.Process(node.all_processes["raylet"][0].process.pid)
    for child in raylet.children(recursive=True):
        try:
            if "ray::ImplicitFunc.train" in " ".join(child.cmdline()):
                return True
        except psutil.Error:
            continue
    return False


def wait_until(condition, driver, deadline_s: float, what: str) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert driver.poll() is None, (what, driver.communicate())
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_a_lost_node_is_retried_and_no_node_left_ends_the_search_with_its_resume_command(cluster, tmp_path):
    # --retries 5: until Ray marks a killed raylet's node dead (seconds, more on a loaded
    # machine) Tune may place a retry there, and each such attempt counts as a failure
    first, second = add_worker(cluster), add_worker(cluster)
    space, store, name = tmp_path / "space.yaml", tmp_path / "store", "nodes"
    space.write_text(yaml.safe_dump(SPACE))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ORTHOTUNE_DATA_ROOT": str(DATA),
           "ORTHOTUNE_NODE_WAIT_S": str(NODE_WAIT_S),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    driver = subprocess.Popen(
        [sys.executable, "-m", "orthotune.cli", "launch", "--space", str(space), "--store", str(store), "--name", name,
         "--address", cluster.address, "--concurrency", "2", "--scheduler", "fifo", "--report-every", "5",
         "--progress", "plain", "--retries", "5"], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True)
    try:
        wait_until(lambda: training_on(first), driver, 240, "a trial training on the first worker node")
        first.all_processes["raylet"][0].process.kill()  # SIGKILL: the node's raylet, its workers die with it
        wait_until(lambda: len(stored(store, name)) >= 3, driver, 240, "three trials on the surviving node")
        before = {t["trial_id"]: t["finished_at"] for t in stored(store, name)}
        cluster.remove_node(second, allow_graceful=False)  # no worker node left
        out, err = driver.communicate(timeout=180)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.communicate()
    last = err.strip().splitlines()[-1]
    kept = stored(store, name)
    print(f"node loss: exit {driver.returncode}; {len(kept)}/{TOTAL} trials stored; {last}")
    assert driver.returncode == 1, (out, err)
    assert "no node of the Ray cluster can run a trial" in last and f"{NODE_WAIT_S} s" in last, last
    assert f"continue it with: orthotune launch --resume {name} --store {store}" in last
    assert "[state-dump]" not in out + err
    assert json.loads((store / "searches" / f"{name}.json").read_text())["state"] == "crashed"
    assert len(kept) < TOTAL and all(t["status"] == "completed" for t in kept)  # the lost trial was retried

    add_worker(cluster)  # a new node joins
    resumed = subprocess.run(["bash", "-c", last.split("continue it with: ", 1)[1]], env=env, capture_output=True,
                             text=True, timeout=420)  # the printed command; the record knows the address
    assert resumed.returncode == 0, resumed.stderr
    trials = stored(store, name)
    ids = [t["trial_id"] for t in trials]
    print(f"after --resume on a new node: {len(trials)}/{TOTAL} trials, {len(ids) - len(set(ids))} duplicated, "
          f"{sum(t['status'] == 'failed' for t in trials)} failed")
    assert all(t["status"] == "completed" for t in trials)
    assert_whole(trials, TOTAL, before)
    epochs = Store.open(str(store)).read("epochs", search=name).to_pylist()
    assert len({(e["trial_id"], e["repeat"], e["epoch"]) for e in epochs}) == len(epochs)
    assert json.loads((store / "searches" / f"{name}.json").read_text())["state"] == "finished"
