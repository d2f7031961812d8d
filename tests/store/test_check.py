"""check_store finds what readers cannot use; quarantine moves exactly that aside."""

from __future__ import annotations

import os
import time
from pathlib import Path

from orthotune.store import Store, check_store, quarantine
from orthotune.store._check import QUARANTINE


def row(trial_id: str) -> dict:
    return {"search": "s", "trial_id": trial_id, "status": "completed", "dataset": "cora", "setting": "full",
            "backbone": "gcn"}


def make_old(path: str, seconds: float = 3600) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def damaged_store(tmp_path) -> Store:
    store = Store.open(str(tmp_path / "store"), create=True)
    for i in range(3):
        store.write_trial(row(f"t{i}"), [{"repeat": 0, "epoch": 1}])
    store.save_search_meta("s", {"state": "finished"})
    store.save_search_meta("broken", {"state": "running"})
    root = tmp_path / "store"
    trial = root / "trials" / "search=s" / "trial-t1.parquet"
    trial.write_bytes(trial.read_bytes()[:100])  # truncated
    (root / "searches" / "broken.json").write_text("{")
    (root / "leases").mkdir()
    (root / "leases" / "gone.json").write_text("")  # a lease whose creator died mid-create
    make_old(str(root / "leases" / "gone.json"))
    (root / "leases" / "young.json").write_text("")  # being created right now: left alone
    left = root / "epochs" / "search=s" / ".tmp-0123"
    left.write_bytes(b"half")
    make_old(str(left))
    (root / "epochs" / "search=s" / ".tmp-live").write_bytes(b"being written")
    return store


def test_a_clean_store_has_no_problems(tmp_path):
    store = Store.open(str(tmp_path / "store"), create=True)
    store.write_trial(row("t0"), [{"repeat": 0, "epoch": 1}])
    store.save_search_meta("s", {"state": "finished"})
    assert check_store(store) == []


def test_check_lists_every_problem_and_quarantine_moves_only_those(tmp_path):
    store = damaged_store(tmp_path)
    root = tmp_path / "store"
    problems = check_store(store)
    assert [(p.path, p.kind) for p in problems] == [
        ("epochs/search=s/.tmp-0123", "leftover temporary"),
        ("leases/gone.json", "unreadable json"),
        ("searches/broken.json", "unreadable json"),
        ("trials/search=s/trial-t1.parquet", "corrupt parquet"),
    ]
    assert all(p.detail and "\n" not in p.describe() for p in problems)
    good = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()
            and str(p.relative_to(root)) not in {q.path for q in problems}}
    broken = (root / "trials" / "search=s" / "trial-t1.parquet").read_bytes()

    moved = quarantine(store, problems)
    assert [source for source, _ in moved] == [p.path for p in problems]
    stamp = moved[0][1].split("/")[1]
    for source, target in moved:
        assert target == f"{QUARANTINE}/{stamp}/{source}" and (root / target).is_file()
        assert not (root / source).exists()
    assert (root / QUARANTINE / stamp / "trials" / "search=s" / "trial-t1.parquet").read_bytes() == broken
    assert all(path.read_bytes() == data for path, data in good.items())  # nothing good touched
    assert check_store(store) == []
    assert sorted(store.read("trials")["trial_id"].to_pylist()) == ["t0", "t2"]
    assert store.read("epochs").num_rows == 3
    assert sorted(store.searches()) == ["s"]


def test_check_finds_a_summary_that_disagrees_with_the_rows_and_quarantine_writes_it_again(tmp_path):
    store = Store.open(str(tmp_path / "store"), create=True)
    for i, status in enumerate(("completed", "completed", "failed")):
        store.write_trial({**row(f"t{i}"), "status": status}, [])
    store.write_summary("s", {"completed": 2, "failed": 1})
    assert check_store(store) == []
    (Path(store.root) / "summaries" / "s.json").unlink()
    store.write_summary("s", {"completed": 2})  # a driver killed between a trial and its summary, say
    (problem,) = check_store(store)
    assert (problem.path, problem.kind) == ("summaries/s.json", "stale summary")
    assert "it counts 2 completed, the rows 2 completed, 1 failed" in problem.detail
    ((source, target),) = quarantine(store, [problem])
    assert source == "summaries/s.json" and os.path.exists(store.path(target))  # the old one kept aside
    assert store.summary("s") == {"completed": 2, "failed": 1}
    assert check_store(store) == []


def test_a_running_searchs_summary_is_its_drivers_and_not_judged(tmp_path):
    from orthotune.store import Lease

    store = Store.open(str(tmp_path / "store"), create=True)
    store.write_trial(row("t0"), [])
    store.write_summary("s", {})  # the driver is between a trial's files and its summary
    with Lease.acquire(store, "s"):
        assert check_store(store) == []
    assert [p.kind for p in check_store(store)] == ["stale summary"]
