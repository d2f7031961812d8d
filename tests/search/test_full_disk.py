"""The store's disk fills, or turns read-only, mid-search: a real small filesystem (a tmpfs
of a few MiB mounted for the test; CI runs as root) under a real search on a local Ray.

The search stops with one line naming the store and the cause; every row written before reads
back whole (rows are written to a hidden temporary and moved into place, so nothing
half-written is visible); once the disk can be written again the resume command it printed
finishes the search with every trial once."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from required import skip_or_fail
from resumed import assert_whole, stored

pytestmark = pytest.mark.slow  # real searches

DATA = Path(os.environ.get("ORTHOTUNE_DATA_ROOT", "../shared/data")).resolve()
SPACE = {"name": "disk", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2], "original": True,
         "ortho": {"T": [2, 6], "beta": 1.0, "lam": 5.0e-4},
         "train": {"lr": [0.1, 0.03, 0.01], "dropout": 0.0, "epochs": 200, "patience": 200, "hidden": 16},
         "samples": 3}
TOTAL = 2 * SPACE["samples"]
REQUIRE_ENV = "ORTHOTUNE_REQUIRE_FULL_DISK"


@pytest.fixture
def small_disk(tmp_path):
    """A fresh 8 MiB tmpfs; skipped (saying why) where this process may not mount one, or
    failed where ``$ORTHOTUNE_REQUIRE_FULL_DISK`` is set (CI)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        skip_or_fail(f"cannot mount a small tmpfs here ({mounted.stderr.strip() or mounted.returncode}): "
                     f"needs root with CAP_SYS_ADMIN, as CI has", REQUIRE_ENV)
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """Write zeros until the filesystem is full; the file that holds them."""
    ballast = folder / "ballast"
    with open(ballast, "wb", buffering=0) as sink:  # unbuffered: closing it has nothing left to flush
        try:
            while True:
                sink.write(b"\0" * 65536)
                sink.flush()
        except OSError as full:
            assert full.errno == 28, full  # ENOSPC
    return ballast


@pytest.mark.parametrize("breakage", ["full", "read-only"])
def test_a_full_or_read_only_store_stops_the_search_in_one_line_and_resume_finishes_it(small_disk, tmp_path,
                                                                                       breakage):
    space, store, name = tmp_path / "space.yaml", small_disk / "store", "disk"
    space.write_text(yaml.safe_dump(SPACE))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ORTHOTUNE_DATA_ROOT": str(DATA),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    # TensorBoard's writers hold their files open, and Linux will not remount a filesystem
    # read-only under open writers: the read-only case runs without them
    views = ["--no-tensorboard"] if breakage == "read-only" else []
    driver = subprocess.Popen(
        [sys.executable, "-m", "orthotune.cli", "launch", "--space", str(space), "--store", str(store), "--name", name,
         "--concurrency", "1", "--scheduler", "fifo", "--report-every", "5", "--progress", "plain", *views],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while len(stored(store, name)) < 2:
            assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()
            time.sleep(0.3)
        if breakage == "full":
            ballast = fill(small_disk)
        else:
            subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True, capture_output=True)
        out, err = driver.communicate(timeout=180)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.communicate()
    lines = err.strip().splitlines()
    cause = "No space left on device" if breakage == "full" else "Read-only file system"
    print(f"{breakage}: exit {driver.returncode}; {lines[-1] if lines else ''}")
    assert driver.returncode == 1 and "Traceback" not in err, err
    assert [line for line in lines if "error" in line.lower()] == [lines[-1]], err
    assert re.search(rf"store '{re.escape(str(store))}' cannot be written \({cause}\)", lines[-1]), lines[-1]
    kept = stored(store, name)
    assert 2 <= len(kept) < TOTAL and f"{len(kept)} trials" in lines[-1]
    assert not [p for p in store.rglob(".tmp-*")]  # no temporary left, so nothing half-written
    check = subprocess.run([sys.executable, "-m", "orthotune.cli", "store", "check", "--store", str(store)],
                           env=env, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr  # every file reads whole
    status = subprocess.run([sys.executable, "-m", "orthotune.cli", "status", "--store", str(store)], env=env,
                            capture_output=True, text=True)
    command = lines[-1].split("continue it with: ", 1)[1]
    assert status.returncode == 0 and command in status.stdout, status.stdout

    if breakage == "full":
        ballast.unlink()
    else:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    resumed = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=420)
    assert resumed.returncode == 0, resumed.stderr
    trials = stored(store, name)
    ids = [t["trial_id"] for t in trials]
    print(f"{breakage}: {len(kept)} trials before, {len(trials)}/{TOTAL} after --resume, "
          f"{len(ids) - len(set(ids))} duplicated")
    before = {t["trial_id"]: t["finished_at"] for t in kept}
    assert_whole(trials, TOTAL, before)
    journal = store / "optuna" / f"{name}.journal"
    assert journal.read_bytes().endswith(b"\n")  # the studies' journal holds whole lines only
