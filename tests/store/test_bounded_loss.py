"""Bounded loss when a file rots (issue 51, item 3): a compacted part holds a bounded number of
trials, every page carries a checksum that readers verify, ``store check`` names what a damaged
part held, and a summary is never lowered from rows that cannot be read."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from orthotune.core import ConfigResult, RunResult, TrainConfig
from orthotune.store import Store, check_store, compact, epoch_rows, quarantine, trial_row
from orthotune.store import _compact as compaction

#: A validation accuracy no other column holds: its 8 bytes find the value in a file.
MARK = 0.8765432101234567


def write(store: Store, trial_id: str, lr: float) -> None:
    config = TrainConfig(dataset="cora", depth=2, ortho=False, lr=lr, splits=(0,))
    result = ConfigResult(config, [RunResult(split, seed, val_acc=MARK) for split, seed in config.runs()])
    history = {(0, epoch): {"train_loss": 1.0 / epoch, "val_acc": 0.5, "test_acc": 0.5} for epoch in (1, 2)}
    store.write_trial(trial_row("s", trial_id, result, "completed"), epoch_rows(history, result.runs))


@pytest.fixture
def store(tmp_path) -> Store:
    store = Store.open(str(tmp_path / "store"), create=True)
    for number in range(5):
        write(store, f"t{number}", 0.01 * (number + 1))
    store.write_summary("s", {"completed": 5})
    return store


def parts(store: Store, table: str) -> list[Path]:
    return sorted(Path(store.root, table, "search=s").glob("compacted-*.parquet"))


def test_a_truncated_compacted_part_takes_only_its_own_trials(store, monkeypatch):
    monkeypatch.setattr(compaction, "PART_TRIALS", 2)
    compact(store, "s")
    trials, epochs = parts(store, "trials"), parts(store, "epochs")
    assert [p.name for p in trials] == [p.name for p in epochs] and len(trials) == 3  # 2 + 2 + 1 trials
    trials[0].write_bytes(trials[0].read_bytes()[:100])  # the rot: its first 100 bytes kept
    assert sorted(store.read("trials", search="s")["trial_id"].to_pylist()) == ["t2", "t3", "t4"]
    problems = {p.kind: p for p in check_store(store)}
    bad = problems["corrupt parquet"]
    assert bad.path == f"trials/search=s/{trials[0].name}"
    assert f"it held 2 trials: t0, t1 (from epochs/search=s/{epochs[0].name})" in bad.detail, bad.detail
    missing = problems["trials missing from the rows"]
    assert "it counts 5 completed, the readable rows 3 completed: 2 trials were written" in missing.detail
    moved = quarantine(store, list(problems.values()))
    assert [source for source, _ in moved] == [bad.path]  # the summary stays where it is
    assert store.summary("s") == {"completed": 5}  # never lowered to the 3 rows still readable
    assert not store.write_summary("s", {"completed": 3}, never_lower=True) and store.summary("s") == {"completed": 5}


def test_twin_parts_both_damaged_are_counted_from_the_summary(store, monkeypatch):
    monkeypatch.setattr(compaction, "PART_TRIALS", 2)
    compact(store, "s")
    for table in ("epochs", "trials"):
        part = parts(store, table)[1]
        part.write_bytes(part.read_bytes()[:100])
    problems = check_store(store)
    bad = [p for p in problems if p.kind == "corrupt parquet"]
    assert len(bad) == 2 and all("which trials it held is unknown" in p.detail for p in bad), bad
    (missing,) = [p for p in problems if p.kind == "trials missing from the rows"]
    assert "the readable rows 3 completed: 2 trials were written and cannot be read now" in missing.detail


@pytest.mark.parametrize("compacted", [False, True])
def test_a_flipped_byte_in_a_page_is_caught_by_its_checksum_not_read_as_a_figure(store, compacted, capsys):
    if compacted:
        compact(store, "s")
    path = parts(store, "trials")[0] if compacted else Path(store.root, "trials", "search=s", "trial-t0.parquet")
    data = bytearray(path.read_bytes())
    at = data.index(struct.pack("<d", MARK))
    data[at] ^= 0x01  # one bit of a validation accuracy: without a checksum, a wrong figure
    path.write_bytes(bytes(data))
    values = store.read("trials", search="s")["val_acc"].to_pylist()
    assert all(v == MARK for v in values) and len(values) == (0 if compacted else 4)
    assert f"skipping unreadable file {path}" in capsys.readouterr().err
    (bad,) = [p for p in check_store(store) if p.kind == "corrupt parquet"]
    assert bad.path.endswith(path.name) and "it held" in bad.detail
