"""Searches on a store on a real S3 API (moto's threaded server on 127.0.0.1, checking
signatures; credentials and endpoint from the environment, as a user sets them): two searches
at once, a second driver refused, a killed driver resumed with the command `status` prints,
`best`, `report` and `store check` answering, a corrupt object skipped and named, and no
credential in the store, the output or Ray's logs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow.fs as pafs
import pytest
import yaml

from orthotune.store import Store

pytestmark = pytest.mark.slow  # real searches on local Rays

DATA = Path(os.environ.get("ORTHOTUNE_DATA_ROOT", "../shared/data")).resolve()
SPACE = {"name": "s3", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2], "original": True,
         "ortho": {"T": [2, 6], "beta": 1.0, "lam": 5.0e-4},
         "train": {"lr": [0.1, 0.03, 0.01], "dropout": 0.0, "epochs": 60, "patience": 60, "hidden": 16},
         "samples": 3}


def orthotune(*args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "orthotune.cli", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def stored(uri: str, name: str) -> list[dict]:
    try:
        return Store.open(uri).read("trials", search=name).to_pylist()
    except Exception:  # noqa: BLE001  (not created yet)
        return []


def every_trial_once(uri: str, name: str, total: int) -> list[dict]:
    trials = stored(uri, name)
    ids = [t["trial_id"] for t in trials]
    assert len(ids) == len(set(ids)) == total, Counter(ids)
    configs = {(t["ortho"], t["T"], t["lr"]) for t in trials}
    assert len(configs) == total  # no config trained twice
    epochs = Store.open(uri).read("epochs", search=name).to_pylist()
    keys = [(e["trial_id"], e["repeat"], e["epoch"]) for e in epochs]
    assert len(keys) == len(set(keys))
    return trials


def test_searches_on_s3(s3, s3_server, tmp_path):
    space, longer = tmp_path / "space.yaml", tmp_path / "longer.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    longer.write_text(yaml.safe_dump({**SPACE, "train": {**SPACE["train"], "epochs": 400, "patience": 400}}))
    ray_logs = tempfile.mkdtemp(prefix="ot-ray-")  # short: Ray's socket paths must fit 107 bytes
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ORTHOTUNE_DATA_ROOT": str(DATA), "RAY_TMPDIR": ray_logs,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    common = ["--store", s3, "--concurrency", "1", "--report-every", "5", "--scheduler", "fifo",
              "--progress", "plain"]
    alpha = orthotune("launch", *common, "--space", str(longer), "--name", "alpha", env=env)  # killed mid-search
    beta = orthotune("launch", *common, "--space", str(space), "--name", "beta", "--samples", "2", env=env)
    outputs = []
    try:
        deadline = time.monotonic() + 300
        while len(stored(s3, "alpha")) < 1:
            assert alpha.poll() is None and time.monotonic() < deadline, alpha.communicate()
            time.sleep(0.5)
        second = orthotune("launch", "--resume", "alpha", "--store", s3, env=env)
        out, err = second.communicate(timeout=120)
        outputs += [out, err]
        assert second.returncode == 2 and len(err.strip().splitlines()) == 1, err
        assert "held by driver pid" in err and str(alpha.pid) in err
        os.killpg(alpha.pid, signal.SIGKILL)  # the driver and its local Ray, mid-search
        outputs += list(alpha.communicate())
        before = {t["trial_id"]: t["finished_at"] for t in stored(s3, "alpha")}
        assert 1 <= len(before) < 6

        status = subprocess.run([sys.executable, "-m", "orthotune.cli", "status", "--store", s3], env=env,
                                capture_output=True, text=True)
        outputs += [status.stdout, status.stderr]
        assert status.returncode == 0 and re.search(r"^alpha\s+dead", status.stdout, re.M), status.stdout
        note = next(line for line in status.stdout.splitlines() if line.startswith("alpha:"))
        resumed = subprocess.run(["bash", "-c", note.split("continue with: ", 1)[1]], env=env, capture_output=True,
                                 text=True, timeout=420)  # the printed command, pasted into a shell
        outputs += [resumed.stdout, resumed.stderr]
        assert resumed.returncode == 0, resumed.stderr
        out, err = beta.communicate(timeout=420)
        outputs += [out, err]
        assert beta.returncode == 0, err
    finally:
        for driver in (alpha, beta):
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.communicate()

    trials = every_trial_once(s3, "alpha", 6)
    assert all(t["finished_at"] == before[t["trial_id"]] for t in trials if t["trial_id"] in before)  # not rerun
    every_trial_once(s3, "beta", 4)
    store = Store.open(s3)
    assert store.search_meta("alpha")["state"] == store.search_meta("beta")["state"] == "finished"
    print(f"S3: alpha {len(before)} trials before the kill, {len(trials)}/6 after --resume; beta 4/4")

    cli = [sys.executable, "-m", "orthotune.cli"]
    for command in (["best", "--search", "alpha"], ["report", "--search", "alpha", "--format", "md", "-o",
                                                     str(tmp_path / "report.md")], ["store", "check"]):
        answer = subprocess.run([*cli, *command, "--store", s3], env=env, capture_output=True, text=True)
        outputs += [answer.stdout, answer.stderr]
        assert answer.returncode == 0 and answer.stderr == "", (command, answer.stderr)
    assert "gcn" in (tmp_path / "report.md").read_text()

    (victim,) = [i.path for i in store.fs.get_file_info(pafs.FileSelector(store.path("trials", "search=alpha")))]
    assert victim.rsplit("/", 1)[1].startswith("compacted-")  # the finished search's trials, in one object
    with store.fs.open_input_stream(victim) as source:
        torn = source.read()[:200]
    with store.fs.open_output_stream(victim) as sink:
        sink.write(torn)
    best = subprocess.run([*cli, "best", "--store", s3], env=env, capture_output=True, text=True)  # beta's stand
    assert best.returncode == 0 and len(best.stderr.strip().splitlines()) == 1 and victim in best.stderr, best.stderr
    check = subprocess.run([*cli, "store", "check", "--store", s3], env=env, capture_output=True, text=True)
    assert check.returncode == 1 and victim.split("/store/", 1)[1] in check.stdout, check.stdout

    secrets = (s3_server.secret, s3_server.key_id)
    for text in outputs + [best.stdout, best.stderr, check.stdout]:
        assert not any(secret in text for secret in secrets)
    for info in store.fs.get_file_info(pafs.FileSelector(store.root, recursive=True)):
        if info.type == pafs.FileType.File:
            with store.fs.open_input_stream(info.path) as stream:
                data = stream.read()
            assert not any(secret.encode() in data for secret in secrets), info.path
    logs = [path for path in Path(ray_logs).rglob("*") if path.is_file() and not path.is_socket()]
    assert logs  # Ray's logs of the three sessions are there, and hold no credential
    for path in logs:
        data = path.read_bytes()
        assert not any(secret.encode() in data for secret in secrets), path
