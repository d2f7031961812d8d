"""`orthotune status` (states, dead drivers) and `orthotune store check` end to end, no Ray needed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))  # the shared store builders
from report_stores import hand_row  # noqa: E402

from orthotune.cli import main  # noqa: E402
from orthotune.store import Lease, Store  # noqa: E402


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def write_lease(store: Store, name: str, pid: int, host: str | None = None, beat_age: float = 0.0) -> None:
    beat = (datetime.now(UTC) - timedelta(seconds=beat_age)).isoformat()
    os.makedirs(store.path("leases"), exist_ok=True)
    with open(store.path("leases", f"{name}.json"), "w") as file:
        json.dump({"search": name, "host": host or socket.gethostname(), "pid": pid, "token": "t",
                   "started_at": beat, "heartbeat_at": beat, "orthotune_version": "0.2.0"}, file)


def dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    return int(child.stdout)


def status_store(tmp_path) -> Store:
    store = Store.open(str(tmp_path / "store"), create=True)
    records = {"live": {"state": "running"}, "gone": {"state": "running"}, "stale": {"state": "running"},
               "orphan": {"state": "running"}, "done": {"state": "finished"}, "stopped": {"state": "interrupted"},
               "broke": {"state": "crashed", "reason": "ValueError: no space left in the cell"}}
    for name, record in records.items():
        store.save_search_meta(name, {"options": {"name": name}, **record})
    for i, status in enumerate(("completed", "completed", "failed")):
        store.write_trial(hand_row(f"t{i}", search="done", status=status), [])
    return store


def test_status_shows_states_and_what_to_do_without_touching_leases(tmp_path, capsys):
    store = status_store(tmp_path)
    live = Lease.acquire(store, "live")  # this process: alive
    write_lease(store, "gone", dead_pid())  # its pid has exited on this host
    write_lease(store, "stale", 4242, host="far-away", beat_age=300)  # no heartbeat for 5 minutes
    leases = {p: Path(p).read_text() for p in (store.path("leases", f"{n}.json") for n in ("live", "gone", "stale"))}

    code, out, err = run_cli(capsys, "status", "--store", store.uri)
    assert code == 0 and err == ""
    table, _, notes = out.partition("\n\n")
    states = {line.split()[0]: line.split()[1:3] for line in table.splitlines()[1:]}
    assert states == {"broke": ["crashed", "0"], "done": ["finished", "3"], "gone": ["dead", "0"],
                      "live": ["running", "0"], "orphan": ["running", "0"], "stale": ["dead", "0"],
                      "stopped": ["interrupted", "0"]}
    assert table.splitlines()[0].split()[3:5] == ["completed", "stopped"]
    assert table.splitlines()[2].split()[3:] == ["2", "0", "1"]  # done: counts read from the rows
    notes = dict(line.split(": ", 1) for line in notes.splitlines())
    resume = "continue with: orthotune launch --resume {} --store " + store.uri
    assert notes["stale"] == ("driver pid 4242 on far-away stopped heartbeating 300 s ago; "
                              + resume.format("stale"))
    assert notes["gone"].startswith("driver pid ") and notes["gone"].endswith(resume.format("gone"))
    assert notes["stopped"] == "interrupted; " + resume.format("stopped")
    assert notes["broke"] == "crashed: ValueError: no space left in the cell"
    assert "no driver holds its lease" in notes["orphan"]
    assert set(notes) == {"stale", "gone", "stopped", "broke", "orphan"}
    assert {p: Path(p).read_text() for p in leases} == leases  # status read the leases, changed none
    assert sorted(os.listdir(store.path("leases"))) == ["gone.json", "live.json", "stale.json"]
    live.release()


def test_status_counts_from_summaries_without_opening_a_trial_file(tmp_path, capsys, monkeypatch):
    store = status_store(tmp_path)
    store.write_summary("done", {"completed": 2, "failed": 1})
    for path in Path(store.root).rglob("*.parquet"):  # had status read a trial file, it would say so
        path.write_bytes(b"PAR1 not parquet")

    def no_trial_file(*args, **kwargs):
        raise AssertionError("status opened a trial file")

    monkeypatch.setattr(Store, "_dataset", no_trial_file)
    monkeypatch.setattr(Store, "trial_statuses", lambda self, search: {} if search != "done" else no_trial_file())
    code, out, err = run_cli(capsys, "status", "--store", store.uri)
    assert code == 0 and err == ""
    counts = {line.split()[0]: line.split()[2:] for line in out.splitlines()[1:8]}
    assert counts["done"] == ["3", "2", "0", "1"]


def test_status_lists_a_search_with_an_unreadable_record_from_its_rows(tmp_path, capsys):
    store = status_store(tmp_path)
    Path(store.path("searches", "done.json")).write_text("{oops")
    code, out, err = run_cli(capsys, "status", "--store", store.uri)
    assert code == 0
    assert [line.split()[:3] for line in out.splitlines() if line.startswith("done")] == [["done", "unknown", "3"]]
    assert len(err.splitlines()) == 1 and "done.json" in err and "orthotune store check" in err


@pytest.mark.slow
def test_a_truncated_file_is_reported_checked_and_quarantined(tmp_path, capsys):
    store = Store.open(str(tmp_path / "store"), create=True)
    store.save_search_meta("hand", {"options": {"name": "hand"}, "state": "finished"})
    for i in range(5):
        store.write_trial(hand_row(f"t{i}", val=[0.5 + i / 20] * 2), [{"repeat": 0, "epoch": 1}])
    bad = Path(store.path("trials", "search=hand", "trial-t4.parquet"))  # the best one, so `best` changes
    bad.write_bytes(bad.read_bytes()[:-40])

    code, out, err = run_cli(capsys, "status", "--store", store.uri)
    assert code == 0 and out.splitlines()[1].split()[:3] == ["hand", "finished", "4"]
    assert len(err.splitlines()) == 1 and str(bad) in err and f"orthotune store check --store {store.uri}" in err

    code, out, err = run_cli(capsys, "best", "--store", store.uri, "--json")
    assert code == 0 and len(json.loads(out)["configs"]) == 1
    assert len(err.splitlines()) == 1 and "trial-t4.parquet" in err
    code, out, _ = run_cli(capsys, "best", "--store", store.uri)
    assert out.splitlines()[1].split()[-1] == "t3"  # the best readable trial

    code, out, _ = run_cli(capsys, "store", "check", "--store", store.uri)
    assert code == 1
    assert out.splitlines()[0].startswith("trials/search=hand/trial-t4.parquet: corrupt parquet (")
    assert f"orthotune store check --quarantine --store {store.uri}" in out.splitlines()[-1]
    assert bad.exists()

    code, out, _ = run_cli(capsys, "store", "check", "--quarantine", "--store", store.uri)
    assert code == 0 and not bad.exists()
    (line,) = [line for line in out.splitlines() if line.startswith("moved ")]
    target = line.split(" -> ")[1]
    assert target.startswith("quarantine/") and target.endswith("/trials/search=hand/trial-t4.parquet")
    assert Path(store.path(target)).is_file()
    assert sorted(store.read("trials")["trial_id"].to_pylist()) == ["t0", "t1", "t2", "t3"]
    assert store.read("epochs").num_rows == 5

    code, out, _ = run_cli(capsys, "store", "check", "--store", store.uri)
    assert code == 0 and out.strip() == f"store {store.uri} is clean"
    code, _, err = run_cli(capsys, "status", "--store", store.uri)
    assert code == 0 and err == ""


def test_store_needs_an_action_and_an_existing_store(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["store"])
    assert exit_.value.code == 2 and "ACTION" in capsys.readouterr().err
    code, _, err = run_cli(capsys, "store", "check", "--store", str(tmp_path / "absent"))
    assert code == 2 and "no orthotune store" in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_store_check_help_and_a_check_import_no_heavy_library(tmp_path):
    Store.open(str(tmp_path / "s"), create=True)
    code = ("import sys\nfrom orthotune.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
            "    pass\nprint([m for m in ('torch', 'ray', 'matplotlib', 'optuna') if m in sys.modules])")
    for argv in (["store", "check", "--help"], ["store", "check", "--store", str(tmp_path / "s")]):
        proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == "[]", (argv, proc.stdout, proc.stderr)
