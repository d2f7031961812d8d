import math
import threading

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
import torch

import orthotune.store._store as store_module
from orthotune.core import OrthotuneError, TrainConfig
from orthotune.store import TRIALS_SCHEMA, Store, epoch_rows, trial_row
from orthotune.store._schema import EPOCHS_SCHEMA, MARKER, SCHEMA_VERSION
from orthotune.training import run_configs


@pytest.fixture(scope="module")
def trained():
    """One real Cora result (2 splits, 3 epochs) and its per-epoch history."""
    history = {}

    def on_epoch(report):
        for repeat, (loss, val, test) in enumerate(zip(report.train_loss[0], report.val_acc[0], report.test_acc[0])):
            history[(repeat, report.epoch)] = {"train_loss": loss, "val_acc": val, "test_acc": test}

    config = TrainConfig(dataset="cora", depth=2, ortho=True, T=3, beta=0.5, epochs=3, splits=(0, 1))
    result = run_configs([config], torch.device("cpu"), None, on_epoch)[0]
    return result, history


def write(store, search, trial_id, trained, status="completed"):
    result, history = trained
    store.write_trial(trial_row(search, trial_id, result, status), epoch_rows(history, result.runs))


def test_rows_are_typed_and_readable_by_plain_pyarrow(tmp_path, trained):
    store = Store.open(str(tmp_path), create=True)
    write(store, "s1", "a", trained)
    table = ds.dataset(str(tmp_path / "trials"), partitioning="hive").to_table()
    assert table.num_rows == 1
    row = table.to_pylist()[0]
    assert row["search"] == "s1" and row["status"] == "completed" and row["T"] == 3
    assert row["repeat_split"] == [0, 1] and len(row["repeat_test_acc"]) == 2
    assert math.isclose(row["val_acc"], sum(row["repeat_val_acc"]) / 2)
    typed = store.read("trials")
    assert typed.schema.equals(TRIALS_SCHEMA, check_metadata=False)
    file_schema = pq.read_schema(next((tmp_path / "trials" / "search=s1").glob("*.parquet")))
    assert file_schema.metadata[b"orthotune.schema_version"] == str(SCHEMA_VERSION).encode()
    epochs = store.read("epochs")
    assert epochs.schema.equals(EPOCHS_SCHEMA, check_metadata=False)
    assert sorted(zip(epochs["repeat"].to_pylist(), epochs["epoch"].to_pylist())) == [
        (r, e) for r in (0, 1) for e in (1, 2, 3)]


def test_a_trial_file_is_written_plain_with_statistics_on_its_trial_id_alone(tmp_path, trained):
    """One trial's rows: no dictionary page, no compression, statistics on ``trial_id`` only
    (cheaper to write and to read back; compaction reads every one)."""
    store = Store.open(str(tmp_path), create=True)
    write(store, "s1", "a", trained)
    for table in ("trials", "epochs"):
        (path,) = (tmp_path / table / "search=s1").glob("*.parquet")
        chunks = [pq.ParquetFile(path).metadata.row_group(0).column(i)
                  for i in range(pq.ParquetFile(path).metadata.num_columns)]
        assert all(c.compression == "UNCOMPRESSED" and not c.has_dictionary_page for c in chunks), table
        assert [c.path_in_schema for c in chunks if c.is_stats_set] == ["trial_id"], table
    # and a reader selecting trials by id still skips the others by their statistics
    write(store, "s1", "b", trained)
    assert store.read("trials", trials=[("s1", "b")])["trial_id"].to_pylist() == ["b"]


def test_original_arm_has_null_ortho_values(tmp_path, trained):
    result, history = trained
    original = type(result)(TrainConfig(dataset="cora", ortho=False, splits=(0, 1)), result.runs)
    store = Store.open(str(tmp_path), create=True)
    store.write_trial(trial_row("s", "o", original, "completed"), [])
    row = store.read("trials").to_pylist()[0]
    assert row["ortho"] is False and row["T"] is None and row["beta"] is None and row["lam"] is None


def test_writing_a_trial_again_replaces_it(tmp_path, trained):
    store = Store.open(str(tmp_path), create=True)
    for _ in range(3):  # a replayed report after restore writes the same trial again
        write(store, "s1", "a", trained)
    assert store.read("trials").num_rows == 1
    assert store.read("epochs").num_rows == 6


def test_two_searches_share_a_store_without_touching_each_other(tmp_path, trained):
    first, second = Store.open(str(tmp_path), create=True), Store.open(str(tmp_path))
    write(first, "alpha", "t1", trained)
    write(second, "beta", "t1", trained)  # same trial id, other search
    assert sorted(first.read("trials")["search"].to_pylist()) == ["alpha", "beta"]
    assert first.read("trials", search="beta").num_rows == 1


@pytest.mark.slow
def test_readers_never_see_a_half_written_file(tmp_path, trained):
    store = Store.open(str(tmp_path), create=True)
    seen, errors, stop = [], [], threading.Event()

    def read_loop():
        try:
            while not stop.is_set():
                seen.append(store.read("trials").num_rows)
        except Exception as error:  # a crashing reader must fail the test, not vanish
            errors.append(error)

    reader = threading.Thread(target=read_loop)
    reader.start()
    for i in range(30):
        write(store, "s", f"t{i}", trained)
    stop.set()
    reader.join()
    assert not errors and seen, errors  # the reader ran, and never failed
    assert seen == sorted(seen) and store.read("trials").num_rows == 30
    assert not [p for p in tmp_path.rglob(".tmp-*")]


def test_a_folder_that_is_not_ours_is_refused_and_left_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OrthotuneError, match="is not an orthotune store"):
        Store.open(str(tmp_path), create=True)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_store_being_created_is_not_mistaken_for_a_foreign_folder(tmp_path):
    # its creator's marker still under its hidden temporary name: a second process (a reader,
    # or a second search's driver) must not call the folder somebody else's
    (tmp_path / ".tmp-0123abcd").write_text("{")
    with pytest.raises(OrthotuneError, match="no orthotune store at"):
        Store.open(str(tmp_path))
    assert Store.open(str(tmp_path), create=True).exists("orthotune-store.json")


class _MarkerSeenLate:
    """A store's file system on which the first look at the marker finds nothing: another
    driver creates the store, and writes on, between this process's two looks."""

    def __init__(self, fs) -> None:
        self.fs, self.looked = fs, False

    def get_file_info(self, what):
        if isinstance(what, str) and what.endswith(MARKER) and not self.looked:
            self.looked = True
            return pafs.FileInfo(what, pafs.FileType.NotFound)
        return self.fs.get_file_info(what)

    def __getattr__(self, name):
        return getattr(self.fs, name)


def test_a_store_another_driver_creates_meanwhile_is_opened_not_refused(tmp_path, monkeypatch):
    # two searches launched at once on one new store (seen on S3): the second looked for the
    # marker before the first wrote it, and listed the folder after the first wrote more
    first = Store.open(str(tmp_path), create=True)
    first.write_json("searches/alpha.json", {"name": "alpha"})
    seen_late = store_module.filesystem
    monkeypatch.setattr(store_module, "filesystem", lambda uri: (lambda fs, root: (_MarkerSeenLate(fs), root))(
        *seen_late(uri)))
    second = Store.open(str(tmp_path), create=True)
    assert second.fs.looked and second.read_json("searches/alpha.json") == {"name": "alpha"}
    (tmp_path / MARKER).unlink()  # without the marker, the same folder is somebody else's
    with pytest.raises(OrthotuneError, match="is not an orthotune store"):
        Store.open(str(tmp_path), create=True)


def test_a_newer_schema_or_a_foreign_marker_is_refused(tmp_path):
    Store.open(str(tmp_path), create=True)
    (tmp_path / MARKER).write_text('{"format": "orthotune-store", "schema_version": 99}')
    with pytest.raises(OrthotuneError, match="schema version 99"):
        Store.open(str(tmp_path))
    (tmp_path / MARKER).write_text("{not json")
    with pytest.raises(OrthotuneError, match="unreadable"):
        Store.open(str(tmp_path))


def test_missing_store_for_reading_is_a_clear_error(tmp_path):
    with pytest.raises(OrthotuneError, match="no orthotune store"):
        Store.open(str(tmp_path / "absent"))


def test_empty_store_reads_as_empty_tables(tmp_path):
    store = Store.open(str(tmp_path), create=True)
    assert store.read("trials").num_rows == 0 and store.read("epochs").num_rows == 0


def test_uri_stores_work_through_pyarrow_filesystems(tmp_path, trained):
    store = Store.open(f"file://{tmp_path}/remote", create=True)
    write(store, "s", "a", trained)
    assert Store.open(f"file://{tmp_path}/remote").read("trials").num_rows == 1


def test_bad_search_names_are_refused(tmp_path, trained):
    store = Store.open(str(tmp_path), create=True)
    with pytest.raises(OrthotuneError, match="search name '../x'"):
        write(store, "../x", "a", trained)
    assert isinstance(store.read("trials"), pa.Table)


def test_the_manual_documents_every_column():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "store.md").read_text()
    section = page[page.index("## Columns"):]
    for schema in (TRIALS_SCHEMA, EPOCHS_SCHEMA):
        missing = [name for name in schema.names if f"`{name}`" not in section]
        assert not missing, f"docs/store.md's columns do not document {missing}"


def test_a_schema_v1_store_is_read_with_its_variant_filled_in(tmp_path):
    """A store written by schema v1 (no variant columns; marker version 1) still opens, and
    its rows come back as the ``v1`` variant with v1's behaviour (Frobenius bounding)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from orthotune.store._migrate import V1_VARIANT

    (tmp_path / MARKER).write_text('{"format": "orthotune-store", "schema_version": 1}')
    v1_columns = [f for f in TRIALS_SCHEMA if f.name not in V1_VARIANT and f.name not in ("search",
                                                                                       "repeat_val_loss")]
    row = {f.name: None for f in v1_columns}
    row.update(trial_id="old", status="completed", dataset="cora", setting="full", backbone="gcn", depth=8,
               ortho=True, T=4, beta=0.4, lam=5e-4, val_acc=0.3)
    folder = tmp_path / "trials" / "search=old"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row], schema=pa.schema(v1_columns)), folder / "trial-old.parquet")
    store = Store.open(str(tmp_path))
    (read,) = store.read("trials").to_pylist()
    assert read["variant"] == "v1" and read["bound"] == "frobenius" and read["selection"] == "val_acc"
    assert (read["T"], read["val_acc"], read["search"]) == (4, 0.3, "old")


def test_a_v2_file_written_before_io_bias_and_input_dropout_reads_as_their_old_behaviour(tmp_path):
    """A schema-v2 trial file without the later ``io_bias``/``input_dropout`` columns reads
    ``io_bias`` true (those runs had the biases) and ``input_dropout`` null (= dropout)."""
    store = Store.open(str(tmp_path), create=True)
    old_columns = [f for f in TRIALS_SCHEMA if f.name not in ("search", "io_bias", "input_dropout")]
    row = {f.name: None for f in old_columns}
    row.update(trial_id="old", status="completed", dataset="cora", setting="full", backbone="jknet", depth=8,
               ortho=False, selection="val_acc", variant="default", conv_bias=False, val_acc=0.3)
    folder = tmp_path / "trials" / "search=old"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row], schema=pa.schema(old_columns)), folder / "trial-old.parquet")
    (read,) = store.read("trials").to_pylist()
    assert read["io_bias"] is True and read["input_dropout"] is None
    assert (read["conv_bias"], read["variant"], read["val_acc"]) == (False, "default", 0.3)


def test_every_switch_missing_from_an_old_file_reads_as_its_default_and_joins_the_new_rows_cell(
        tmp_path, trained):
    """A file written before a switch existed (here ``self_loop``, ``jk``, ``io_bias``) and
    one written after hold the same model: the report must see one cell, not two."""
    store = Store.open(str(tmp_path), create=True)
    write(store, "both", "new", trained)
    late = ("search", "self_loop", "jk", "io_bias")
    old_columns = [f for f in TRIALS_SCHEMA if f.name not in late]
    new = store.read("trials").to_pylist()[0]
    old = {**{k: v for k, v in new.items() if k not in late}, "trial_id": "old"}
    folder = tmp_path / "trials" / "search=both"
    pq.write_table(pa.Table.from_pylist([old], schema=pa.schema(old_columns)), folder / "trial-old.parquet")
    rows = {r["trial_id"]: r for r in store.read("trials").to_pylist()}
    assert (rows["old"]["self_loop"], rows["old"]["jk"], rows["old"]["io_bias"]) == (False, "cat", True)
    assert {k: v for k, v in rows["old"].items() if k != "trial_id"} == \
        {k: v for k, v in rows["new"].items() if k != "trial_id"}


def test_rows_written_before_v3_read_their_depth_as_graph_convolutions(tmp_path):
    """Before v3 ``depth`` counted hidden convolutions: the official layout's GCN and JKNet
    (graph-convolution input and output layers, the authors' --layer L stored as L) read as
    depth L + 2; linear-layout rows, GCNII and v3 rows keep theirs (issue 22)."""
    store = Store.open(str(tmp_path), create=True)
    old_columns = [f for f in TRIALS_SCHEMA if f.name not in ("search", "schema_version")]
    base = {f.name: None for f in old_columns}
    base.update(status="completed", dataset="cora", setting="semi", ortho=False, selection="val_loss",
                variant="official", val_acc=0.8)
    cases = {"gcn-official": ("gcn", "official", 2, 4), "jknet-official": ("jknet", "official", 8, 10),
             "gcnii-official": ("gcnii", "official", 64, 64), "gcn-linear": ("gcn", "linear", 2, 2)}
    folder = tmp_path / "trials" / "search=old"
    folder.mkdir(parents=True)
    rows = [{**base, "trial_id": name, "backbone": b, "layout": layout, "depth": depth}
            for name, (b, layout, depth, _) in cases.items()]
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(old_columns)), folder / "trial-old.parquet")
    store.write_trial({**base, "search": "new", "trial_id": "v3", "backbone": "gcn", "layout": "official",
                       "depth": 4}, [])
    read = {r["trial_id"]: r for r in store.read("trials").to_pylist()}
    assert {name: read[name]["depth"] for name in cases} == {name: c[3] for name, c in cases.items()}
    assert (read["v3"]["depth"], read["v3"]["schema_version"]) == (4, SCHEMA_VERSION)
    assert read["gcn-official"]["schema_version"] is None
