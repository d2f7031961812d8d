"""A search is never lost or misreported: real local Ray, real Cora, the real ``orthotune`` command.

Failing trials, signals to the driver, a killed driver, two drivers of one search, a killed
worker, and what the store holds afterwards (no pickle; every trial once).
"""

import json
import os
import pickletools
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
import yaml
from resumed import stored

from orthotune.store import Store

pytestmark = pytest.mark.slow  # each launches a real Ray and trains on Cora

DATA = Path(os.environ.get("ORTHOTUNE_DATA_ROOT", "../shared/data")).resolve()
SPACE = {
    "name": "robust",
    "datasets": ["cora"],
    "repeats": [0],
    "backbones": ["gcn"],
    "depths": [2],
    "original": True,
    "ortho": {"T": [2, 6], "beta": 1.0, "lam": 5.0e-4},
    "train": {"lr": [0.1, 0.03, 0.01, 0.003], "dropout": 0.0, "epochs": 150, "patience": 150, "hidden": 16},
    "samples": 4,  # per cell: the original and the ortho arm
}
TOTAL = 2 * SPACE["samples"]


def orthotune(*args, env=None, data_root=DATA, **kwargs):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ORTHOTUNE_DATA_ROOT": str(data_root), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "orthotune.cli", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kwargs)


def space_file(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump({**SPACE, **changes}))
    return path


def launch(tmp_path: Path, name: str, *extra: str, space: Path | None = None, **kwargs):
    space = space or space_file(tmp_path)
    return orthotune("launch", "--space", str(space), "--store", str(tmp_path / "store"),
                     "--name", name, "--concurrency", "2", "--report-every", "5", "--scheduler", "fifo",
                     "--progress", "plain", *extra, **kwargs)


def wait_for_trials(driver, store: Path, name: str, count: int, deadline_s: float = 240) -> None:
    start = time.monotonic()
    while len(stored(store, name)) < count:
        assert driver.poll() is None, driver.communicate()
        assert time.monotonic() - start < deadline_s, "no trial finished in time"
        time.sleep(0.3)


def record(store: Path, name: str) -> dict:
    return json.loads((store / "searches" / f"{name}.json").read_text())


def resume(store: Path, name: str, timeout: float = 420) -> subprocess.CompletedProcess:
    proc = orthotune("launch", "--resume", name, "--store", str(store), "--progress", "plain")
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def assert_every_trial_once(store: Path, name: str, samples: int = SPACE["samples"]) -> list[dict]:
    trials = stored(store, name)
    ids = [t["trial_id"] for t in trials]
    assert len(ids) == len(set(ids)) == 2 * samples, Counter(ids)
    per_cell = Counter(t["ortho"] for t in trials)
    assert per_cell == {True: samples, False: samples}
    configs = [(t["ortho"], t["T"], t["lr"]) for t in trials]
    assert len(configs) == len(set(configs))  # no config trained twice
    epochs = Store.open(str(store)).read("epochs", search=name).to_pylist()
    keys = [(e["trial_id"], e["repeat"], e["epoch"]) for e in epochs]
    assert len(keys) == len(set(keys))
    return trials


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_interrupts_the_search_with_the_resume_command_and_resume_finishes_it(tmp_path, sent, code):
    store, name = tmp_path / "store", "sig"
    driver = launch(tmp_path, name)
    wait_for_trials(driver, store, name, 1)
    driver.send_signal(sent)  # the driver alone, as Ctrl-C or `kill` would
    out, err = driver.communicate(timeout=120)
    assert driver.returncode == code, (out, err)
    last = err.strip().splitlines()[-1]
    assert f"orthotune launch --resume {name} --store {store}" in last and signal.Signals(sent).name in last
    meta, kept = record(store, name), stored(store, name)
    assert meta["state"] == "interrupted"
    assert sum(meta["counts"].values()) == len(kept) and f"{len(kept)} trial" in last  # counts from the store
    progress = [line for line in out.splitlines() if "configs done" in line][-1]
    assert f"{len(kept)}/{TOTAL} configs done" in progress and " 0 stopped" in progress, progress  # FIFO
    assert not (store / "leases" / f"{name}.json").exists()
    finished = resume(store, name)
    assert finished.returncode == 0, finished.stderr
    # the resumed counter goes on from the store's counts (len(kept)/TOTAL), not from 0/remaining
    counters = [re.search(r"(\d+)/(\d+) configs done", line) for line in finished.stdout.splitlines()]
    counters = [(int(m[1]), int(m[2])) for m in counters if m]
    assert counters and all(total == TOTAL for _, total in counters), finished.stdout
    assert counters[0][0] >= len(kept) and counters[-1] == (TOTAL, TOTAL), finished.stdout
    trials = assert_every_trial_once(store, name)
    before = {t["trial_id"]: t["finished_at"] for t in kept}
    assert all(t["finished_at"] == before[t["trial_id"]] for t in trials if t["trial_id"] in before)
    assert record(store, name)["state"] == "finished"


def test_a_killed_driver_shows_dead_in_status_and_resumes_without_loss_or_duplicates(tmp_path):
    store, name = tmp_path / "store", "killed"
    driver = launch(tmp_path, name)
    wait_for_trials(driver, store, name, 2)
    os.killpg(driver.pid, signal.SIGKILL)  # the driver and its local Ray, mid-search
    driver.communicate()
    left = list(Path(tempfile.gettempdir()).glob(f"orthotune-tune-{driver.pid}-*"))
    assert left  # Ray Tune's scratch state of the killed session
    kept = {t["trial_id"]: t["finished_at"] for t in stored(store, name)}
    status = subprocess.run([sys.executable, "-m", "orthotune.cli", "status", "--store", str(store)],
                            capture_output=True, text=True)
    assert status.returncode == 0, status.stderr
    assert re.search(rf"^{name}\s+dead", status.stdout, re.M), status.stdout
    assert f"orthotune launch --resume {name}" in status.stdout
    finished = resume(store, name)  # takes over the dead driver's lease
    assert finished.returncode == 0, finished.stderr
    assert not any(path.exists() for path in left)  # the next session swept it
    trials = assert_every_trial_once(store, name)
    assert all(t["finished_at"] == kept[t["trial_id"]] for t in trials if t["trial_id"] in kept)  # not rerun
    assert record(store, name)["state"] == "finished"


def test_a_second_driver_for_a_running_search_is_refused(tmp_path):
    store, name = tmp_path / "store", "taken"
    slow = space_file(tmp_path, train={**SPACE["train"], "epochs": 3000, "patience": 3000})
    driver = launch(tmp_path, name, space=slow)
    try:
        while not (store / "searches" / f"{name}.json").exists():
            assert driver.poll() is None, driver.communicate()
            time.sleep(0.3)
        second = resume(store, name, timeout=120)
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "held" in lines[0] and str(driver.pid) in lines[0], second.stderr
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.communicate()


def test_a_trial_that_raises_is_stored_failed_with_its_reason_and_the_search_goes_on(tmp_path):
    """Cora's raw feature file is truncated in this data root (its files are all there), so
    every Cora trial raises while loading; the Texas trials train."""
    root = tmp_path / "data"
    root.mkdir()
    (root / "WebKB").symlink_to(DATA / "WebKB")
    cora = DATA / "Planetoid" / "Cora"
    for source in cora.rglob("*"):  # every file present (as links), so launch's own check passes
        if source.is_file():
            target = root / "Planetoid" / "Cora" / source.relative_to(cora)
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.name == "ind.cora.x":
                target.write_bytes(source.read_bytes()[:100])  # truncated
            else:
                target.symlink_to(source)
    space = space_file(tmp_path, datasets=["cora", "texas"], samples=2,
                       train={**SPACE["train"], "epochs": 10, "patience": 10})
    proc = orthotune("launch", "--space", str(space), "--store", str(tmp_path / "store"), "--name", "raises",
                     "--concurrency", "2", "--scheduler", "fifo", "--progress", "off", data_root=root)
    out, err = proc.communicate(timeout=420)
    assert proc.returncode == 0, err  # the Texas cells have winners
    trials = stored(tmp_path / "store", "raises")
    assert len(trials) == 8
    for trial in trials:
        if trial["dataset"] == "cora":
            assert trial["status"] == "failed" and re.match(r"^\w+(Error|Exception)\b", trial["reason"]), trial
            assert "\n" not in trial["reason"]
        else:
            assert trial["status"] == "completed"
    assert record(tmp_path / "store", "raises")["state"] == "finished"


@pytest.mark.parametrize("retries", [2, 0])
def test_a_killed_worker_is_retried_and_its_trial_stored_once(tmp_path, retries):
    store, name = tmp_path / "store", "worker"
    # Trials of several seconds: a 150-epoch trial ends within the second the test waits
    # below, and the whole search could end before any worker is caught training.
    long = space_file(tmp_path, samples=2, train={**SPACE["train"], "epochs": 1000, "patience": 1000})
    driver = launch(tmp_path, name, "--retries", str(retries), space=long)
    deadline = time.monotonic() + 240
    while True:
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()
        victim = _trial_worker(driver.pid)
        time.sleep(1.0)  # mid-trial
        # Still training? Ray Tune retries only a trial that was running when its worker died:
        # one whose worker dies while a reused actor is reset for it fails (Tune's rule).
        if victim is not None and _training(victim):
            break
    victim.kill()
    out, err = driver.communicate(timeout=420)
    assert driver.returncode == 0, err
    trials = assert_every_trial_once(store, name, samples=2)
    failed = [t for t in trials if t["status"] == "failed"]
    if retries:
        assert not failed  # the killed trial trained again
    else:  # no retry left: stored as failed, saying why in one line, and the search went on
        assert len(failed) == 1 and "\n" not in failed[0]["reason"], failed
        assert "worker failed" in failed[0]["reason"] and "died" in failed[0]["reason"], failed[0]["reason"]


def test_the_store_holds_no_pickle_and_no_ray_tune_state(tmp_path):
    store, name = tmp_path / "store", "clean"
    proc = launch(tmp_path, name, "--samples", "2")
    _, err = proc.communicate(timeout=420)
    assert proc.returncode == 0, err
    assert not (store / "tune").exists()
    for path in store.rglob("*"):
        if path.is_file():
            assert path.suffix not in (".pkl", ".pickle"), path
            assert not _is_pickle(path.read_bytes()), path


def _is_pickle(data: bytes) -> bool:
    if not data.startswith(b"\x80") or len(data) < 2 or data[1] > 5:
        return False
    try:
        pickletools.dis(data, out=open(os.devnull, "w"))  # noqa: SIM115
    except Exception:  # noqa: BLE001
        return False
    return True


def _training(worker: psutil.Process) -> bool:
    try:
        return "ray::ImplicitFunc.train" in " ".join(worker.cmdline())
    except psutil.Error:
        return False


def _trial_worker(driver_pid: int) -> psutil.Process | None:
    """A Ray worker of the driver's process tree that is running a trial."""
    try:
        children = psutil.Process(driver_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return None
    for child in children:
        try:
            title = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "ray::ImplicitFunc.train" in title:  # a reused trial actor while it trains
            return child
    return None


def test_five_driver_kills_at_random_points_lose_and_duplicate_nothing(tmp_path):
    """The closing note's figures: trials lost and rows duplicated over 5 kills of one search."""
    import random

    store, name = tmp_path / "store", "chaos"
    rng = random.Random(16)
    slower = space_file(tmp_path, train={**SPACE["train"], "epochs": 400, "patience": 400})
    driver = launch(tmp_path, name, space=slower)
    kills, seen = 0, {}
    while kills < 5:
        time.sleep(rng.uniform(2.0, 12.0))
        if driver.poll() is not None:
            break
        os.killpg(driver.pid, signal.SIGKILL)
        driver.communicate()
        kills += 1
        for trial in stored(store, name):
            assert seen.setdefault(trial["trial_id"], trial["finished_at"]) == trial["finished_at"]
        if (store / "searches" / f"{name}.json").exists():
            driver = orthotune("launch", "--resume", name, "--store", str(store), "--progress", "plain")
        else:  # killed before its record was written: nothing to resume, start it again
            driver = launch(tmp_path, name, space=slower)
    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err
    trials = assert_every_trial_once(store, name)
    lost = TOTAL - len(trials)
    duplicated = len(trials) - len({t["trial_id"] for t in trials})
    print(f"driver kills: {kills}; trials stored: {len(trials)}/{TOTAL}; lost: {lost}; duplicated rows: {duplicated}")
    assert kills >= 3 and lost == 0 and duplicated == 0


def test_a_driver_that_fails_records_crashed_with_the_reason_and_resumes(tmp_path):
    """The store cannot take the search's rows (a file where its epochs folder belongs): the
    driver stops, its record says crashed and why, and once the cause is gone it resumes."""
    store, name = tmp_path / "store", "crash"
    Store.open(str(store), create=True)
    blocker = store / "epochs" / f"search={name}"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a folder")
    # the epochs folder is blocked, not the trials one: a launch reads the store's trials
    # (references to reuse) before it starts, and a damaged trials folder is refused there
    driver = launch(tmp_path, name, "--no-plan")
    out, err = driver.communicate(timeout=420)
    assert driver.returncode == 1, (out, err)
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("orthotune launch: error:") and "Traceback" not in err
    meta = record(store, name)
    assert meta["state"] == "crashed" and meta["reason"]
    status = subprocess.run([sys.executable, "-m", "orthotune.cli", "status", "--store", str(store)],
                            capture_output=True, text=True)
    assert re.search(rf"^{name}\s+crashed", status.stdout, re.M), status.stdout
    blocker.unlink()
    # an orthotune 0.2 store also held Ray Tune's pickled experiment: it is never read
    (store / "tune" / name).mkdir(parents=True)
    unloadable = b"\x80\x04\x95\x0e\x00\x00\x00\x00\x00\x00\x00\x8c\x0bno.such.mod\x94."  # fails if unpickled
    (store / "tune" / name / "tuner.pkl").write_bytes(unloadable)
    finished = resume(store, name)
    assert finished.returncode == 0, finished.stderr
    assert_every_trial_once(store, name)
    assert record(store, name)["state"] == "finished"


def test_a_corrupt_file_is_skipped_by_readers_and_resume_and_quarantined_by_store_check(tmp_path):
    store, name = tmp_path / "store", "corrupt"
    driver = launch(tmp_path, name)
    wait_for_trials(driver, store, name, 2)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.communicate()
    victim = sorted((store / "trials" / f"search={name}").glob("trial-*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[:200])  # a torn file, as a bad disk or bucket would leave
    cli = [sys.executable, "-m", "orthotune.cli"]
    status = subprocess.run([*cli, "status", "--store", str(store)], capture_output=True, text=True)
    assert status.returncode == 0 and status.stderr == ""  # counts from the search's summary: no trial file read
    shown = subprocess.run([*cli, "best", "--search", name, "--store", str(store)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert victim.name in shown.stderr and "store check" in shown.stderr and "Traceback" not in shown.stderr
    finished = resume(store, name)  # the unreadable trial does not count: its cell trains one more
    assert finished.returncode == 0, finished.stderr
    assert_every_trial_once(store, name)
    check = subprocess.run([*cli, "store", "check", "--store", str(store)], capture_output=True, text=True)
    assert check.returncode == 1 and victim.name in check.stdout + check.stderr
    moved = subprocess.run([*cli, "store", "check", "--quarantine", "--store", str(store)], capture_output=True,
                           text=True)
    assert moved.returncode == 0 and not victim.exists()
    assert list((store / "quarantine").rglob(victim.name))
    assert_every_trial_once(store, name)  # every good row is still there
    again = subprocess.run([*cli, "store", "check", "--store", str(store)], capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
