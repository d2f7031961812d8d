"""The store's columns as files hold them, pinned: the schemas written out literally, and a
store written by an earlier orthotune (``fixtures/store-v3``) that must read back exactly as
it did then (``fixtures/store-v3-read.json``). The schemas are derived from declarations
(config fields, result columns); these tests fail when a derivation moves, renames, retypes
or drops a column that files already hold.

``fixtures/store-v3`` was written by orthotune at commit 98cd2b8 (schema v3): ``search=v3``
by ``Store.write_trial`` of ``trial_row``/``epoch_rows`` from the values in
:func:`written_result`; ``search=v2`` a row without ``schema_version``, ``io_bias`` and
``input_dropout`` (as files written before v3 and before those switches); ``search=v1`` one
without the variant columns and ``repeat_val_loss`` (schema v1). ``store-v3-read.json`` is
what ``Store.read`` returned for it then (timestamps as ISO text).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from orthotune.core import ConfigResult, RunResult, Status, TrainConfig
from orthotune.store import EPOCHS_SCHEMA, TRIALS_SCHEMA, Store, epoch_rows, trial_row

FIXTURES = Path(__file__).resolve().parent / "fixtures"
STR, INT, FLOAT, BOOL = pa.string(), pa.int32(), pa.float64(), pa.bool_()
INTS, FLOATS, STRS = pa.list_(pa.int32()), pa.list_(pa.float64()), pa.list_(pa.string())
TIME, REQUIRED = pa.timestamp("ms", tz="UTC"), False
METADATA = {b"orthotune.schema_version": b"3"}

TRIALS = [
    ("search", STR, REQUIRED), ("trial_id", STR, REQUIRED), ("tune_trial_id", STR), ("status", STR, REQUIRED),
    ("reason", STR), ("T", INT), ("beta", FLOAT), ("lam", FLOAT), ("bound", STR), ("transform", STR),
    ("hybrid", STR), ("target", STR), ("target_trainable", BOOL), ("squared_norm", BOOL), ("centre_rows", BOOL),
    ("norm_groups", INT), ("input_T", INT), ("dataset", STR, REQUIRED), ("setting", STR, REQUIRED),
    ("backbone", STR, REQUIRED), ("depth", INT), ("ortho", BOOL), ("arm", STR), ("variant", STR), ("layout", STR),
    ("conv_bias", BOOL), ("io_bias", BOOL), ("batch_norm", BOOL), ("feature_transform", BOOL), ("init", STR),
    ("jk", STR),
    ("gcnii_variant", BOOL), ("self_loop", BOOL), ("directed", BOOL), ("treatment", STR), ("selection", STR),
    ("hidden", INT),
    ("lr", FLOAT), ("weight_decay", FLOAT), ("weight_decay_io", FLOAT), ("weight_decay_output", FLOAT),
    ("dropout", FLOAT), ("drop_edge", FLOAT), ("input_dropout", FLOAT), ("max_epochs", INT), ("patience", INT),
    ("alpha", FLOAT),
    ("theta", FLOAT), ("heads", INT), ("aggr", STR), ("K", INT), ("batch_size", INT), ("splits", INTS),
    ("seeds", INTS), ("split_train", FLOAT), ("split_val", FLOAT), ("split_stratify", BOOL),
    ("split_per_class", INT), ("val_acc", FLOAT), ("val_acc_std", FLOAT), ("test_acc", FLOAT),
    ("test_acc_std", FLOAT), ("repeat_split", INTS), ("repeat_seed", INTS), ("repeat_status", STRS),
    ("repeat_val_acc", FLOATS), ("repeat_test_acc", FLOATS), ("repeat_val_loss", FLOATS),
    ("repeat_best_epoch", INTS), ("repeat_epochs", INTS), ("epochs", INT), ("best_epoch", INT), ("m_sig", FLOAT),
    ("smoothness", FLOAT), ("grad_norms", FLOATS), ("grad_norm_ratio", FLOAT), ("seconds", FLOAT),
    ("seconds_per_epoch", FLOAT), ("device", STR), ("orthotune_version", STR), ("torch_version", STR),
    ("pyg_version", STR), ("ray_version", STR), ("optuna_version", STR), ("finished_at", TIME),
    ("schema_version", INT),
]
EPOCHS = [
    ("search", STR, REQUIRED), ("trial_id", STR, REQUIRED), ("repeat", INT, REQUIRED), ("split", INT), ("seed", INT),
    ("epoch", INT, REQUIRED), ("train_loss", FLOAT), ("val_acc", FLOAT), ("test_acc", FLOAT), ("val_loss", FLOAT),
    ("grad_norms", FLOATS),
]


def literal(columns: list[tuple]) -> pa.Schema:
    return pa.schema([pa.field(name, kind, nullable=not rest) for name, kind, *rest in columns], metadata=METADATA)


def test_the_tables_have_the_columns_files_hold_name_type_nullability_and_order():
    assert TRIALS_SCHEMA.equals(literal(TRIALS), check_metadata=True), TRIALS_SCHEMA
    assert EPOCHS_SCHEMA.equals(literal(EPOCHS), check_metadata=True), EPOCHS_SCHEMA


def test_a_store_written_before_reads_as_it_did(tmp_path):
    """Every row of every version (v3 as written, v2 and v1 through ``_migrate``) and the
    epochs, value for value; each file's own schema is today's minus its missing columns."""
    shutil.copytree(FIXTURES / "store-v3", tmp_path / "store")
    store = Store.open(str(tmp_path / "store"))
    expected = _with_arm(json.loads((FIXTURES / "store-v3-read.json").read_text()))
    for table in ("trials", "epochs"):
        rows = sorted(store.read(table).to_pylist(),
                      key=lambda r: (r["search"], r["trial_id"], r.get("repeat", 0), r.get("epoch", 0)))
        assert [_plain(r) for r in rows] == [_plain(r) for r in expected[table]]
        assert [list(r) for r in rows] == [list(r) for r in expected[table]]  # column order
    for path in (tmp_path / "store" / "trials").rglob("*.parquet"):
        written = pq.read_schema(path)
        assert all(TRIALS_SCHEMA.field(f.name).type == f.type for f in written), path


def written_result() -> tuple[ConfigResult, dict]:
    """The ortho trial of ``fixtures/store-v3`` (search v3, trial ``ortho``) and its history."""
    config = TrainConfig(dataset="cora", depth=4, ortho=True, T=3, beta=0.5, lam=1e-3, hidden=16, epochs=5,
                         splits=(0, 1))
    runs = [RunResult(0, 0, val_acc=0.75, test_acc=0.7, val_loss=0.9, best_epoch=3, epochs=5, m_sig=1.25,
                      smoothness=0.5, grad_norms=[2.0, 1.0, 0.5]),
            RunResult(1, 0, status=Status.STOPPED, val_acc=0.5, test_acc=0.625, val_loss=1.5, best_epoch=2,
                      epochs=4, m_sig=0.75, smoothness=0.25, grad_norms=[4.0, 2.0, 1.0])]
    history = {(r, e): {"train_loss": 1.0 / e, "val_acc": 0.1 * e, "test_acc": 0.05 * e,
                        "val_loss": 2.0 / e if e > 1 else None,
                        "grad_norms": [0.5, 0.25] if e == 4 else None} for r in (0, 1) for e in (1, 2, 3, 4)}
    return ConfigResult(config, runs, seconds=2.5, seconds_per_epoch=0.5, device="cpu"), history


def test_the_row_builders_write_what_they_wrote_then(tmp_path):
    """``trial_row`` and ``epoch_rows`` of the same result give the rows the fixture holds
    (the clock and the library versions aside), column for column."""
    result, history = written_result()
    store = Store.open(str(tmp_path / "store"), create=True)
    store.write_trial(trial_row("v3", "ortho", result, "stopped", "", "tune-1"), epoch_rows(history, result.runs))
    expected = _with_arm(json.loads((FIXTURES / "store-v3-read.json").read_text()))
    stamped = ("finished_at", "orthotune_version", "torch_version", "pyg_version", "ray_version", "optuna_version")
    (row,) = store.read("trials").to_pylist()
    (old,) = [r for r in expected["trials"] if r["trial_id"] == "ortho"]
    # a row written now holds DropEdge's rate, 0 (off), where one written before holds null
    assert _plain({k: v for k, v in row.items() if k not in stamped}) == \
        _plain({k: v for k, v in {**old, "drop_edge": 0.0}.items() if k not in stamped})
    epochs = sorted(store.read("epochs").to_pylist(), key=lambda r: (r["repeat"], r["epoch"]))
    assert [_plain(r) for r in epochs] == [_plain(r) for r in expected["epochs"] if r["trial_id"] == "ortho"]


def _plain(row: dict) -> dict:
    """Comparable values: timestamps as ISO text, NaN as a marker (NaN != NaN)."""
    def value(v):
        if hasattr(v, "isoformat"):
            return v.isoformat()
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    return {k: value(v) for k, v in row.items()}


def _with_arm(expected: dict) -> dict:
    """The fixture's rows as today's schema reads them: every column as then, and the columns
    added since, each after the one it follows: ``arm`` (named arms) null, as a default pair's
    row writes it (its arm derives from ``ortho``); the ``treatment`` switch at its declared
    default, the empty string (``_migrate.fill_switch_defaults``); ``drop_edge`` null (a run
    before DropEdge dropped no edge); the ``init`` switch at its default, ``glorot`` (how every
    weight started before it)."""
    after = {"ortho": ("arm", None), "directed": ("treatment", ""), "dropout": ("drop_edge", None),
             "feature_transform": ("init", "glorot")}

    def row(r: dict) -> dict:
        out = {}
        for key, value in r.items():
            out[key] = value
            if key in after:
                out[after[key][0]] = after[key][1]
        return out

    return {**expected, "trials": [row(r) for r in expected["trials"]]}
