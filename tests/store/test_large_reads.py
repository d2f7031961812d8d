"""A table of many files is read in groups of files (one scan holds memory for every file it
read until it ends): the rows, their order of columns, filters and the skipping of a bad file
are the same as in one scan."""

from __future__ import annotations

import os

import pyarrow.dataset as ds
import pytest

from orthotune.store import TRIALS_SCHEMA, Store


def row(search: str, trial_id: str, **columns) -> dict:
    return {"search": search, "trial_id": trial_id, "status": "completed", "dataset": "cora",
            "setting": "full", "backbone": "gcn", "depth": 2, "val_acc": 0.5, **columns}


@pytest.fixture
def store(tmp_path) -> Store:
    store = Store.open(str(tmp_path / "store"), create=True)
    for search in ("a", "b"):
        for i in range(7):
            store.write_trial(row(search, f"t{i}", depth=2 + i), [{"repeat": 0, "epoch": e} for e in (1, 2)])
    return store


@pytest.mark.parametrize("group", [3, 1000])  # several scans of 3 files; one scan
def test_reads_in_groups_match_one_scan(store, monkeypatch, group):
    monkeypatch.setattr("orthotune.store._reading.SCAN_FILES", group)
    trials = store.read("trials")
    assert trials.num_rows == 14 and trials.schema.equals(TRIALS_SCHEMA, check_metadata=False)
    assert sorted(zip(trials["search"].to_pylist(), trials["trial_id"].to_pylist())) == sorted(
        (s, f"t{i}") for s in "ab" for i in range(7))
    assert store.read("trials", search="b")["search"].to_pylist() == ["b"] * 7
    assert store.read("epochs", search="a").num_rows == 14
    picked = store.dataset("trials").to_table(columns=["search", "depth"], filter=ds.field("depth") >= 7)
    assert picked.column_names == ["search", "depth"] and sorted(picked["depth"].to_pylist()) == [7, 7, 8, 8]


def test_a_bad_file_in_one_group_is_skipped_and_named_once(store, monkeypatch, capsys):
    monkeypatch.setattr("orthotune.store._reading.SCAN_FILES", 3)
    bad = os.path.join(store.root, "trials", "search=b", "trial-t4.parquet")
    with open(bad, "r+b") as file:
        file.truncate(os.path.getsize(bad) // 2)
    trials = store.read("trials")
    assert trials.num_rows == 13 and ("b", "t4") not in set(zip(trials["search"].to_pylist(),
                                                                 trials["trial_id"].to_pylist()))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and bad in err[0]
