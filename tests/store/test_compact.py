"""Compaction: a search's trial files merged into compacted ones, on a local disk and on a real
S3 API (moto), read the same rows; a compaction killed after any of its steps leaves every
trial read exactly once, and running it again finishes it; a reader during a compaction reads
each trial once; a compacted search that goes on writes trial files beside its compacted ones."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from orthotune.cli import main
from orthotune.store import Lease, Store, check_store, compact
from orthotune.store._compact import STEPS

FIXTURES = Path(__file__).resolve().parent / "fixtures"
STATUSES = ("completed", "completed", "stopped", "failed")


def row(search: str, number: int) -> dict:
    status = STATUSES[number % len(STATUSES)]
    return {"search": search, "trial_id": f"t{number:03d}", "status": status, "dataset": "cora",
            "setting": "full", "backbone": "gcn", "depth": 2 + number % 3, "ortho": number % 2 == 1,
            "T": 2 if number % 2 else None, "val_acc": 0.5 + number / 1000, "repeat_val_acc": [0.5, 0.25 * number],
            "grad_norms": [1.0, float(number)], "reason": "diverged" if status == "failed" else None}


def epochs(number: int) -> list[dict]:
    if number % 7 == 3:  # a trial with no epoch rows (failed at once): its epochs file is empty
        return []
    return [{"repeat": r, "epoch": e, "val_acc": 0.1 * e + number, "grad_norms": [0.5, float(e)] if e == 2 else None}
            for r in (0, 1) for e in (1, 2, 3)]


def fill(store: Store, search: str, numbers: range) -> None:
    for number in numbers:
        store.write_trial(row(search, number), epochs(number))


def files(store: Store, table: str, search: str) -> list[str]:
    selector = pafs.FileSelector(store.path(table, f"search={search}"), allow_not_found=True)
    return sorted(i.base_name for i in store.fs.get_file_info(selector) if i.type == pafs.FileType.File)


def frames(store: Store) -> dict:
    """Both tables as data frames in a canonical row order."""
    keys = {"trials": ["search", "trial_id"], "epochs": ["search", "trial_id", "repeat", "epoch"]}
    return {table: store.read(table).to_pandas().sort_values(key).reset_index(drop=True)
            for table, key in keys.items()}


def assert_same_rows(store: Store, before: dict) -> None:
    import pandas.testing

    after = frames(store)
    for table in before:
        pandas.testing.assert_frame_equal(after[table], before[table])


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path) -> Store:
    return _store(request, tmp_path)


#: The kills on S3 are slow: each starts a process that imports orthotune and talks to moto.
@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.slow)])
def killable_store(request, tmp_path) -> Store:
    return _store(request, tmp_path)


def _store(request, tmp_path) -> Store:
    if request.param == "local":
        return Store.open(str(tmp_path / "store"), create=True)
    return Store.open(request.getfixturevalue("s3"), create=True)


@pytest.mark.slow
def test_a_compacted_search_reads_the_same_rows_in_two_files_and_keeps_its_counts(store):
    fill(store, "a", range(24))
    fill(store, "b", range(5))
    before = frames(store)
    done = compact(store, "a")
    assert done.merged == {"epochs": 24, "trials": 24} and done.removed == 48 and len(done.written) == 2
    assert [n.startswith("compacted-") for n in files(store, "trials", "a")] == [True]
    assert [n.startswith("compacted-") for n in files(store, "epochs", "a")] == [True]
    assert len(files(store, "trials", "b")) == 5  # another search is not touched
    assert_same_rows(store, before)
    assert store.summary("a") == dict(Counter(STATUSES[n % 4] for n in range(24)))
    assert check_store(store) == []
    again = compact(store, "a")  # nothing left to do
    assert again.written == () and again.removed == 0 and "nothing to compact" in again.describe()
    assert_same_rows(store, before)


def test_a_store_of_every_schema_version_reads_as_it_did_once_compacted(tmp_path):
    shutil.copytree(FIXTURES / "store-v3", tmp_path / "store")
    store = Store.open(str(tmp_path / "store"))
    before = frames(store)
    for search in ("v1", "v2", "v3"):
        compact(store, search)
    assert not list((tmp_path / "store").rglob("trial-*.parquet"))
    assert_same_rows(store, before)
    expected = json.loads((FIXTURES / "store-v3-read.json").read_text())
    assert sorted(r["trial_id"] for r in store.read("trials").to_pylist()) == sorted(
        r["trial_id"] for r in expected["trials"])


def test_files_of_the_current_schema_and_an_older_one_in_one_search_compact_into_the_declared_schema(tmp_path):
    """Files as written now are stitched together as they are; a file of an older schema
    version among them makes the group go through the cast: either way the compacted file
    holds the declared schema, its metadata included, and the same rows."""
    from orthotune.store import TRIALS_SCHEMA

    store = Store.open(str(tmp_path / "store"), create=True)
    fill(store, "now", range(6))
    fill(store, "mixed", range(6))
    shutil.copy(FIXTURES / "store-v3" / "trials" / "search=v1" / "trial-v1.parquet",
                tmp_path / "store" / "trials" / "search=mixed" / "trial-v1.parquet")
    before = frames(store)
    declared = TRIALS_SCHEMA.remove(TRIALS_SCHEMA.get_field_index("search"))
    for search in ("now", "mixed"):
        done = compact(store, search)
        schema = pq.read_schema(str(tmp_path / "store" / done.written[1]))
        assert schema.equals(declared) and schema.metadata == declared.metadata, search
    assert done.merged["trials"] == 7
    assert_same_rows(store, before)


@pytest.mark.slow
def test_a_compacted_search_that_goes_on_writes_trial_files_beside_and_compacts_again(store):
    fill(store, "s", range(10))
    compact(store, "s")
    fill(store, "s", range(10, 14))  # a resumed session's new trials
    store.write_trial(row("s", 12), epochs(12))  # a trial Tune retried: written again, still once
    assert len(files(store, "trials", "s")) == 5
    trials = store.read("trials", search="s")
    assert sorted(trials["trial_id"].to_pylist()) == [f"t{n:03d}" for n in range(14)]
    before = frames(store)
    done = compact(store, "s")
    assert done.merged == {"epochs": 4, "trials": 4}
    assert len(files(store, "trials", "s")) == 2  # one compacted file per compaction
    assert_same_rows(store, before)


@pytest.mark.slow
def test_reading_some_columns_or_some_trials_matches_the_whole_read(store):
    fill(store, "s", range(12))
    compact(store, "s")
    fill(store, "s", range(12, 16))
    whole = store.read("trials").to_pandas().set_index("trial_id").sort_index()
    some = store.read("trials", columns=["trial_id", "status", "depth"]).to_pandas().set_index("trial_id")
    assert list(some.columns) == ["status", "depth"]
    assert some.sort_index().equals(whole[["status", "depth"]])
    wanted = [("s", "t001"), ("s", "t014"), ("s", "t999"), ("other", "t001")]  # compacted, own file, none, none
    picked = store.read("trials", trials=wanted).to_pandas().set_index("trial_id").sort_index()
    assert list(picked.index) == ["t001", "t014"]
    assert picked.equals(whole.loc[["t001", "t014"]])
    assert sorted(set(store.read("epochs", trials=wanted)["trial_id"].to_pylist())) == ["t001", "t014"]


KILLER = """
import os, signal, sys
from orthotune.store import Store, compact
store = Store.open(sys.argv[1])
compact(store, "s", after_step=lambda step: os.kill(os.getpid(), signal.SIGKILL) if step == sys.argv[2] else None)
"""


@pytest.mark.slow
@pytest.mark.parametrize("step", STEPS)
def test_a_compaction_killed_after_any_step_leaves_every_trial_once_and_finishes_when_run_again(killable_store,
                                                                                                 step):
    store = killable_store
    fill(store, "s", range(12))
    before = frames(store)
    killed = subprocess.run([sys.executable, "-c", KILLER, store.uri, step], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = files(store, "trials", "s") + files(store, "epochs", "s")
    if step != "removed":
        assert any(n.startswith("trial-") for n in left), (step, left)  # trial files still there...
    if step != "epochs written":
        assert any(n.startswith("compacted-") for n in files(store, "trials", "s"))  # ... beside compacted ones
    assert_same_rows(store, before)  # every trial once, whichever file it is read from
    copies = [p for p in check_store(store) if p.kind == "compacted copy"]
    assert bool(copies) == (step in ("epochs written", "trials written", "first removed")), copies
    done = compact(store, "s")  # running it again finishes the work
    assert done.merged["trials"] == (12 if step == "epochs written" else 0)
    assert [n[:10] for n in files(store, "trials", "s") + files(store, "epochs", "s")] == ["compacted-"] * 2
    assert_same_rows(store, before)
    assert check_store(store) == []


@pytest.mark.slow
def test_a_reader_during_a_compaction_reads_each_trial_once(tmp_path, monkeypatch):
    """The trial files a reader listed are gone before it opens them: it lists again."""
    store = Store.open(str(tmp_path / "store"), create=True)
    fill(store, "s", range(30))
    before = frames(store)
    real = Store._dataset
    compacted: list = []

    def dataset_then_compact(self, table, paths):
        if not compacted and any("trial-" in p for p in paths):
            compacted.append(None)
            compacted[0] = compact(Store.open(self.uri), "s")  # between the listing and the read
        return real(self, table, paths)

    monkeypatch.setattr(Store, "_dataset", dataset_then_compact)
    assert_same_rows(store, before)
    assert compacted and compacted[0].removed == 60


def test_store_compact_on_the_command_line_skips_a_search_whose_driver_is_alive(tmp_path, capsys):
    store = Store.open(str(tmp_path / "store"), create=True)
    fill(store, "done", range(6))
    fill(store, "live", range(3))
    store.save_search_meta("done", {"state": "finished"})
    with Lease.acquire(store, "live"):
        assert main(["store", "compact", "--store", store.uri]) == 0
        out = capsys.readouterr().out
        assert "done: merged 6 epochs files and 6 trials files into 2 compacted files" in out
        assert "live: skipped, search 'live' in store" in out and "is held by driver pid" in out
        assert main(["store", "compact", "--search", "live", "--store", store.uri]) == 1
    assert len(files(store, "trials", "live")) == 3  # its driver's files were not touched
    assert main(["store", "compact", "--search", "live", "--store", store.uri]) == 0
    assert files(store, "trials", "live")[0].startswith("compacted-")
    assert main(["store", "compact", "--search", "nope", "--store", store.uri]) == 2
    assert "no search 'nope' in store" in capsys.readouterr().err


def test_an_unreadable_trial_file_is_left_for_store_check(tmp_path, capsys):
    store = Store.open(str(tmp_path / "store"), create=True)
    fill(store, "s", range(5))
    bad = Path(store.path("trials", "search=s", "trial-t002.parquet"))
    bad.write_bytes(bad.read_bytes()[:100])
    done = compact(store, "s")
    assert done.left == ("trials/search=s/trial-t002.parquet",) and "1 unreadable files left" in done.describe()
    assert bad.exists() and "trial-t002.parquet" in capsys.readouterr().err
    assert [p.path for p in check_store(store)] == ["trials/search=s/trial-t002.parquet"]
    assert sorted(store.read("trials")["trial_id"].to_pylist()) == ["t000", "t001", "t003", "t004"]


@pytest.mark.slow
def test_many_groups_of_files_read_ahead_compact_into_sorted_row_groups_with_the_same_rows(tmp_path, monkeypatch,
                                                                                           capsys):
    """A search of more files than one group (read side by side, ahead of the writer) and more
    rows than one row group: the same rows, each row group sorted by trial, an unreadable file
    and a foreign one left, a file of an older schema among current ones cast in its group."""
    import orthotune.store._compact as compaction

    monkeypatch.setattr(compaction, "SCAN_FILES", 4)
    monkeypatch.setattr(compaction, "ROW_GROUP_ROWS", 10)
    store = Store.open(str(tmp_path / "store"), create=True)
    fill(store, "s", reversed(range(40)))  # written out of order: the compacted file sorts them
    folder = tmp_path / "store" / "trials" / "search=s"
    shutil.copy(FIXTURES / "store-v3" / "trials" / "search=v1" / "trial-v1.parquet", folder / "trial-v1.parquet")
    before = frames(store)
    bad = folder / "trial-t017.parquet"
    bad.write_bytes(bad.read_bytes()[:100])
    pq.write_table(pa.table({"depth": ["deep"]}), folder / "trial-foreign.parquet")  # a depth that cannot be cast
    done = compact(store, "s")
    assert done.merged == {"epochs": 40, "trials": 40}
    assert set(done.left) == {"trials/search=s/trial-t017.parquet", "trials/search=s/trial-foreign.parquet"}
    err = capsys.readouterr().err
    assert "trial-t017.parquet" in err and "trial-foreign.parquet" in err
    compacted = pq.ParquetFile(str(tmp_path / "store" / done.written[1]))
    assert compacted.metadata.num_row_groups > 1
    for number in range(compacted.metadata.num_row_groups):
        ids = compacted.read_row_group(number, columns=["trial_id"]).column(0).to_pylist()
        assert ids == sorted(ids)
    bad.unlink()
    (folder / "trial-foreign.parquet").unlink()
    trials = before["trials"]
    assert_same_rows(store, {**before, "trials": trials[trials["trial_id"] != "t017"].reset_index(drop=True)})
