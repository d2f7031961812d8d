"""Durable writes (fsync, retries on remote filesystems) and readers that survive a bad file."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from orthotune.core import OrthotuneError
from orthotune.store import TRIALS_SCHEMA, Store


def row(search: str, trial_id: str, **columns) -> dict:
    return {"search": search, "trial_id": trial_id, "status": "completed", "dataset": "cora",
            "setting": "full", "backbone": "gcn", "depth": 2, **columns}


def epochs(n: int = 2) -> list[dict]:
    return [{"repeat": 0, "epoch": e, "val_acc": 0.5} for e in range(1, n + 1)]


def filled(tmp_path, searches=("s",), trials=4) -> Store:
    store = Store.open(str(tmp_path / "store"), create=True)
    for search in searches:
        for i in range(trials):
            store.write_trial(row(search, f"t{i}", val_acc=i / 10), epochs())
    return store


def trial_file(store: Store, search: str, trial_id: str, table: str = "trials") -> str:
    return os.path.join(store.root, table, f"search={search}", f"trial-{trial_id}.parquet")


def truncate(path: str) -> None:
    with open(path, "r+b") as file:
        file.truncate(os.path.getsize(path) // 2)


def test_a_truncated_file_is_skipped_with_one_warning_naming_it_and_the_repair(tmp_path, capsys):
    store = filled(tmp_path)
    assert capsys.readouterr().err == ""
    bad = trial_file(store, "s", "t1")
    truncate(bad)
    table = store.read("trials")
    assert sorted(table["trial_id"].to_pylist()) == ["t0", "t2", "t3"]
    assert table.schema.equals(TRIALS_SCHEMA, check_metadata=False)
    store.read("trials")  # read again: not warned again
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert bad in lines[0] and f"orthotune store check --store {store.uri}" in lines[0]


def test_the_dataset_reads_around_a_bad_file_with_columns_and_filters(tmp_path, capsys):
    store = filled(tmp_path, searches=("a", "b"))
    with open(trial_file(store, "a", "t0", "epochs"), "wb") as file:
        file.write(b"PAR1 this is not parquet")
    dataset = store.dataset("epochs")
    assert "val_acc" in dataset.schema.names
    found = dataset.to_table(columns=["search", "trial_id", "epoch"], filter=ds.field("trial_id").isin(["t0", "t1"]))
    assert found.column_names == ["search", "trial_id", "epoch"]
    assert sorted(set(zip(found["search"].to_pylist(), found["trial_id"].to_pylist()))) == [
        ("a", "t1"), ("b", "t0"), ("b", "t1")]
    assert "trial-t0.parquet" in capsys.readouterr().err
    assert store.read("epochs", search="b").num_rows == 8


def test_a_bad_column_is_the_callers_error_not_every_files(tmp_path, capsys):
    store = filled(tmp_path)
    truncate(trial_file(store, "s", "t1"))
    with pytest.raises(pa.ArrowInvalid, match="no_such_column"):
        store.dataset("trials").to_table(columns=["no_such_column"])
    assert capsys.readouterr().err == ""


def test_a_file_whose_schema_does_not_cast_is_skipped(tmp_path, capsys):
    store = filled(tmp_path)
    foreign = os.path.join(store.root, "trials", "search=s", "trial-foreign.parquet")
    pq.write_table(pa.table({"trial_id": ["x"], "status": ["completed"], "depth": ["very deep"]}), foreign)
    assert sorted(store.read("trials")["trial_id"].to_pylist()) == ["t0", "t1", "t2", "t3"]
    assert foreign in capsys.readouterr().err


def test_every_file_bad_reads_as_an_empty_table(tmp_path, capsys):
    store = filled(tmp_path, trials=2)
    for i in range(2):
        truncate(trial_file(store, "s", f"t{i}"))
    table = store.read("trials")
    assert table.num_rows == 0 and table.schema.equals(TRIALS_SCHEMA, check_metadata=False)
    assert len(capsys.readouterr().err.splitlines()) == 2


def test_an_unreadable_search_record_is_skipped_in_listings_and_a_clear_error_when_needed(tmp_path, capsys):
    store = filled(tmp_path)
    store.save_search_meta("good", {"state": "finished"})
    store.save_search_meta("bad", {"state": "running"})
    with open(os.path.join(store.root, "searches", "bad.json"), "w") as file:
        file.write('{"state": "runn')
    assert store.searches() == {"good": {"state": "finished"}}
    assert "bad.json" in capsys.readouterr().err
    with pytest.raises(OrthotuneError, match=r"search record .*bad.json' is unreadable .*orthotune store check") as err:
        store.search_meta("bad")
    assert "\n" not in str(err.value)


def test_local_writes_are_fsynced_file_and_folder(tmp_path, monkeypatch):
    store = Store.open(str(tmp_path / "store"), create=True)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    store.save_search_meta("s", {"state": "running"})
    folder = os.path.join(store.root, "searches")
    assert any(os.path.basename(p).startswith(".tmp-") for p in synced)  # the file, before the rename
    assert folder in synced  # the folder, after it
    assert json.loads(open(os.path.join(folder, "s.json")).read()) == {"state": "running"}
    assert os.listdir(folder) == ["s.json"]


def test_a_failed_local_write_leaves_the_old_file_and_no_temporary(tmp_path):
    store = filled(tmp_path, trials=1)
    before = open(trial_file(store, "s", "t0"), "rb").read()
    with pytest.raises(pa.ArrowInvalid):
        store.write_trial(row("s", "t0", depth="not an int"), [])
    assert open(trial_file(store, "s", "t0"), "rb").read() == before
    assert not list((tmp_path / "store").rglob(".tmp-*"))


class Flaky(pafs.FSSpecHandler):
    """A 'remote' filesystem (local underneath) whose first ``failures`` puts fail."""

    def __init__(self, failures: int) -> None:
        import fsspec

        super().__init__(fsspec.filesystem("file"))
        self.failures, self.puts = failures, 0

    def open_output_stream(self, path, metadata):
        self.puts += 1
        if self.puts <= self.failures:
            raise OSError("503 Slow Down")
        return super().open_output_stream(path, metadata)


def remote(tmp_path, failures: int) -> tuple[Store, Flaky]:
    handler = Flaky(failures)
    root = str(tmp_path / "remote")
    os.makedirs(root)
    return Store("flaky://remote", pafs.PyFileSystem(handler), root), handler


@pytest.mark.slow
def test_remote_writes_retry_transient_errors(tmp_path):
    store, handler = remote(tmp_path, failures=2)
    store.write_trial(row("s", "t0"), epochs())
    assert handler.puts == 4  # epochs: 2 failures + 1; trials: 1
    assert store.read("trials")["trial_id"].to_pylist() == ["t0"]
    assert not list((tmp_path / "remote").rglob(".tmp-*"))


@pytest.mark.slow
def test_remote_writes_give_up_after_a_few_attempts(tmp_path):
    store, handler = remote(tmp_path, failures=100)
    with pytest.raises(OSError, match="Slow Down"):
        store.save_search_meta("s", {"state": "running"})
    assert handler.puts == 4
    assert not store.exists("searches/s.json")
