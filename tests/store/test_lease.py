"""The one-driver-per-search lease: exclusive, kept fresh, released, taken over only from the dead."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from orthotune.core import OrthotuneError
from orthotune.store import Lease, Store, lease_info
from orthotune.store._lease import LeaseHeld


@pytest.fixture
def store(tmp_path):
    return Store.open(str(tmp_path / "store"), create=True)


def lease_file(store, name="s"):
    return os.path.join(store.root, "leases", f"{name}.json")


def write_lease(store, name="s", pid=None, host=None, beat_age=0.0):
    """A lease written by hand, as a driver (maybe a dead one) would have left it."""
    beat = (datetime.now(UTC) - timedelta(seconds=beat_age)).isoformat()
    os.makedirs(os.path.dirname(lease_file(store, name)), exist_ok=True)
    with open(lease_file(store, name), "w") as file:
        json.dump({"search": name, "host": host or socket.gethostname(), "pid": pid or os.getpid(),
                   "token": "their-token", "started_at": beat, "heartbeat_at": beat,
                   "orthotune_version": "0.0.0"}, file)


def dead_pid() -> int:
    """The pid of a process that has run and exited (and been reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    return int(child.stdout)


def test_a_second_acquire_is_refused_naming_the_holder(store):
    with Lease.acquire(store, "s") as lease:
        with pytest.raises(LeaseHeld, match=rf"held by driver pid {os.getpid()} on {socket.gethostname()}") as err:
            Lease.acquire(store, "s")
        assert isinstance(err.value, OrthotuneError) and "\n" not in str(err.value)
        assert "60 s" in str(err.value)  # the rule
        document = json.loads(open(lease_file(store)).read())
        assert document["token"] == lease.token and document["pid"] == os.getpid()
        assert set(document) == {"search", "host", "pid", "token", "epoch", "started_at", "heartbeat_at",
                                 "orthotune_version"}
        info = lease_info(store, "s")
        assert info.alive and info.pid == os.getpid() and info.heartbeat_age < 5
    assert not os.path.exists(lease_file(store))  # released on leaving the block
    assert lease_info(store, "s") is None
    Lease.acquire(store, "s").release()  # free again


def test_the_heartbeat_advances_and_release_stops_it(store):
    lease = Lease.acquire(store, "s")
    first = lease_info(store, "s").heartbeat_at
    lease.start_heartbeat(every=0.05)
    time.sleep(0.3)
    second = lease_info(store, "s").heartbeat_at
    assert second > first
    lease.release()
    assert lease_info(store, "s") is None and lease._thread is None
    assert not [n for n in os.listdir(os.path.dirname(lease_file(store))) if n.startswith(".")]


def test_release_leaves_a_lease_that_is_no_longer_ours(store):
    lease = Lease.acquire(store, "s")
    write_lease(store)  # somebody took it over (our heartbeat had gone stale)
    assert lease.heartbeat() is False and lease.lost
    lease.release()
    assert json.loads(open(lease_file(store)).read())["token"] == "their-token"


def test_a_dead_pids_lease_is_taken_over(store):
    pid = dead_pid()
    write_lease(store, pid=pid)
    info = lease_info(store, "s")
    assert info.pid == pid and not info.alive and info.heartbeat_age < 5  # dead though fresh
    with Lease.acquire(store, "s"):
        assert lease_info(store, "s").pid == os.getpid() and lease_info(store, "s").alive
    assert not [n for n in os.listdir(os.path.dirname(lease_file(store))) if n.startswith(".")]


def test_a_live_pid_on_another_host_is_trusted_until_its_heartbeat_is_stale(store):
    write_lease(store, pid=dead_pid(), host="elsewhere", beat_age=10)
    assert lease_info(store, "s").alive  # its pid means nothing here
    with pytest.raises(LeaseHeld, match="on elsewhere"):
        Lease.acquire(store, "s")
    write_lease(store, pid=12345, host="elsewhere", beat_age=61)
    assert not lease_info(store, "s").alive
    with Lease.acquire(store, "s", stale_after=60) as lease:
        assert json.loads(open(lease_file(store)).read())["token"] == lease.token


def test_stale_after_is_the_callers(store):
    write_lease(store, host="elsewhere", beat_age=5)
    with pytest.raises(LeaseHeld):
        Lease.acquire(store, "s", stale_after=60)
    Lease.acquire(store, "s", stale_after=2).release()


def test_an_empty_lease_being_created_counts_as_alive_until_stale(store):
    os.makedirs(os.path.dirname(lease_file(store)))
    open(lease_file(store), "w").close()
    assert lease_info(store, "s").alive
    with pytest.raises(LeaseHeld):
        Lease.acquire(store, "s")
    old = time.time() - 120
    os.utime(lease_file(store), (old, old))
    assert not lease_info(store, "s").alive
    Lease.acquire(store, "s").release()


def test_bad_search_names_are_refused(store):
    with pytest.raises(OrthotuneError, match="search name"):
        Lease.acquire(store, "../x")


def _race(root: str, barrier, done, results) -> None:
    store = Store.open(root)
    barrier.wait()  # all spawned and imported: acquire at once
    try:
        lease = Lease.acquire(store, "s")
        results.put(("won", os.getpid(), lease.token))
        done.wait(60)  # hold it (alive) until every racer has answered
    except LeaseHeld as error:
        results.put(("held", os.getpid(), str(error)))


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(3))
def test_drivers_racing_for_one_dead_lease_exactly_one_wins(store, round_):
    write_lease(store, pid=dead_pid())
    context = multiprocessing.get_context("spawn")
    results, barrier, done = context.Queue(), context.Barrier(4), context.Event()
    racers = [context.Process(target=_race, args=(store.root, barrier, done, results)) for _ in range(4)]
    for racer in racers:
        racer.start()
    outcomes = [results.get(timeout=120) for _ in racers]
    done.set()
    for racer in racers:
        racer.join(timeout=60)
    winners = [o for o in outcomes if o[0] == "won"]
    assert len(winners) == 1, outcomes
    assert all("held by" in o[2] for o in outcomes if o[0] == "held")
    assert json.loads(open(lease_file(store)).read())["token"] == winners[0][2]


def test_a_racer_that_moved_a_fresh_lease_aside_puts_it_back(store, monkeypatch):
    """The tight race, made deterministic: B judged the old lease dead, but before B renames it
    aside, A has taken it over. B's rename then moves A's fresh lease: B must put it back."""
    write_lease(store, pid=dead_pid())
    real_rename, winner = os.rename, []

    def rename(source, target):
        if source == lease_file(store) and not winner:
            monkeypatch.setattr(os, "rename", real_rename)
            winner.append(Lease.acquire(store, "s"))  # A: takes the dead lease over first
        real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(LeaseHeld, match=f"held by driver pid {os.getpid()}"):
        Lease.acquire(store, "s")  # B
    assert json.loads(open(lease_file(store)).read())["token"] == winner[0].token
    assert winner[0].heartbeat() and not winner[0].lost
    assert os.listdir(os.path.dirname(lease_file(store))) == ["s.json"]
    winner[0].release()


@pytest.mark.slow
def test_on_a_remote_filesystem_the_lease_is_written_and_read_back(tmp_path):
    import fsspec
    import pyarrow.fs as pafs

    root = tmp_path / "remote"
    root.mkdir()
    remote = Store("memory-like://remote", pafs.PyFileSystem(pafs.FSSpecHandler(fsspec.filesystem("file"))),
                   str(root))
    with Lease.acquire(remote, "s") as lease:
        with pytest.raises(LeaseHeld, match="held by driver pid"):
            Lease.acquire(remote, "s")
        before = lease_info(remote, "s")
        time.sleep(0.01)
        assert lease.heartbeat() and lease_info(remote, "s").heartbeat_at > before.heartbeat_at
    assert lease_info(remote, "s") is None
    write_lease(Store(str(root), pafs.LocalFileSystem(), str(root)), pid=dead_pid())
    Lease.acquire(remote, "s").release()  # a dead holder's lease is taken over there too
