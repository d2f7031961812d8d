"""The store's tables, declared once: their columns (the config's derived from its field
declarations), the schema version, and the marker that makes a folder a store."""

from __future__ import annotations

import pyarrow as pa

from orthotune.core import (
    RESULT_COLUMNS,
    EpochRow,
    RunResult,
    TrainConfig,
    column_name,
    declared,
    epoch_values,
    measures,
)

#: v2 added the variant switches of the config (bound, transform, hybrid, ...) and
#: ``repeat_val_loss``; v1 files are read through ``_migrate.upgrade_v1`` (their runs used
#: the switches' v1 behaviour, which ``_migrate.V1_VARIANT`` states). v3: ``depth`` counts
#: every graph convolution (before: the hidden ones), and each row names the version it was
#: written with (``schema_version``); older rows are read through ``_migrate.upgrade_v2``.
SCHEMA_VERSION = 3
MARKER = "orthotune-store.json"
STORE_FORMAT = "orthotune-store"

#: The partition column both tables share (it lives in the path, not in the files).
PARTITION = pa.schema([pa.field("search", pa.string())])

_ints = pa.list_(pa.int32())
_floats = pa.list_(pa.float64())
#: The Arrow type of each kind of config field (its rule's) and of result value.
_ARROW = {"int": pa.int32(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string(), "ints": _ints,
          "floats": _floats, "strs": pa.list_(pa.string())}
_REQUIRED = {"dataset", "setting", "backbone"}


def config_fields() -> list[pa.Field]:
    """One typed column per :class:`TrainConfig` field, derived from its declaration."""
    return [pa.field(column_name(f), _ARROW[f.metadata["rule"].kind], nullable=f.name not in _REQUIRED)
            for f in declared(TrainConfig)]


def result_fields() -> list[pa.Field]:
    """One typed column per ``core.RESULT_COLUMNS`` entry, in its order."""
    return [pa.field(column.name, _ARROW[column.kind]) for column in RESULT_COLUMNS]


def _value_field(name: str, owner: type, nullable: bool = True) -> pa.Field:
    return pa.field(name, _ARROW[measures(owner)[name].metadata["kind"]], nullable=nullable)


TRIALS_SCHEMA = pa.schema(
    [
        pa.field("search", pa.string(), nullable=False),
        pa.field("trial_id", pa.string(), nullable=False),
        pa.field("tune_trial_id", pa.string()),  # the Ray Tune trial that trained it
        pa.field("status", pa.string(), nullable=False),  # a Status value
        pa.field("reason", pa.string()),
        # the config, one typed column per declared field (Ortho-GConv values null for the original arm)
        *config_fields(),
        # the result, one typed column per declared summary of a repeat's or the config's values
        *result_fields(),
        pa.field("orthotune_version", pa.string()),
        pa.field("torch_version", pa.string()),
        pa.field("pyg_version", pa.string()),
        pa.field("ray_version", pa.string()),
        pa.field("optuna_version", pa.string()),
        pa.field("finished_at", pa.timestamp("ms", tz="UTC")),
        pa.field("schema_version", pa.int32()),  # the version that wrote the row; null: before v3
    ],
    metadata={"orthotune.schema_version": str(SCHEMA_VERSION)},
)

EPOCHS_SCHEMA = pa.schema(
    [
        pa.field("search", pa.string(), nullable=False),
        pa.field("trial_id", pa.string(), nullable=False),
        _value_field("repeat", EpochRow, nullable=False),
        _value_field("split", RunResult),
        _value_field("seed", RunResult),
        _value_field("epoch", EpochRow, nullable=False),
        # a repeat's values at that epoch, as a trial reports them (``core.EpochRow``)
        *(_value_field(name, EpochRow) for name in epoch_values()),
    ],
    metadata={"orthotune.schema_version": str(SCHEMA_VERSION)},
)

TABLES = {"trials": TRIALS_SCHEMA, "epochs": EPOCHS_SCHEMA}
#: How every reader opens the tables' files: each page's CRC checked where the file has one.
CHECKSUMS = {"page_checksum_verification": True}


#: How a search writes its per-trial files (``pq.write_table`` options): a file holds one
#: trial's rows, so a dictionary page and compression cost more to write and to read than they
#: save, and statistics only help readers that select trials by id. Measured on 1,000 files
#: of a generated search (``bench/scale.py``'s layout): reading a trials file 2.65 -> 1.72 ms
#: of CPU, an epochs file 0.61 -> 0.36 ms (what compaction spends its time on), writing 22%
#: and 28% less, files no larger. Compacted files keep pyarrow's defaults (few and large).
TRIAL_FILE_OPTIONS = {"compression": "none", "use_dictionary": False, "write_statistics": ["trial_id"],
                      "write_page_checksum": True}
