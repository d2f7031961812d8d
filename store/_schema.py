"""The store's tables, declared once: their columns (the config's derived from its field
declarations), the schema version, and the marker that makes a folder a store."""

from __future__ import annotations

import re

import pyarrow as pa

from orthotune.core import OrthotuneError, TrainConfig, column_name, declared

#: v2 added the variant switches of the config (bound, transform, hybrid, ...) and
#: ``repeat_val_loss``; v1 files are read through ``_migrate.upgrade_v1`` (their runs used
#: the switches' v1 behaviour, which ``_migrate.V1_VARIANT`` states). v3: ``depth`` counts
#: every graph convolution (before: the hidden ones), and each row names the version it was
#: written with (``schema_version``); older rows are read through ``_migrate.upgrade_v2``.
SCHEMA_VERSION = 3
MARKER = "orthotune-store.json"
STORE_FORMAT = "orthotune-store"
SEARCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")

#: The partition column both tables share (it lives in the path, not in the files).
PARTITION = pa.schema([pa.field("search", pa.string())])

_ints = pa.list_(pa.int32())
_floats = pa.list_(pa.float64())
_ARROW = {"int": pa.int32(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string(), "ints": _ints}
_REQUIRED = {"dataset", "setting", "backbone"}


def config_fields() -> list[pa.Field]:
    """One typed column per :class:`TrainConfig` field, derived from its declaration."""
    return [pa.field(column_name(f), _ARROW[f.metadata["rule"].kind], nullable=f.name not in _REQUIRED)
            for f in declared(TrainConfig)]


TRIALS_SCHEMA = pa.schema(
    [
        pa.field("search", pa.string(), nullable=False),
        pa.field("trial_id", pa.string(), nullable=False),
        pa.field("tune_trial_id", pa.string()),  # the Ray Tune trial that trained it
        pa.field("status", pa.string(), nullable=False),  # a Status value
        pa.field("reason", pa.string()),
        # the config, one typed column per declared field (Ortho-GConv values null for the original arm)
        *config_fields(),
        # the objective and what the reports read (test at the validation-best epoch)
        pa.field("val_acc", pa.float64()),
        pa.field("val_acc_std", pa.float64()),
        pa.field("test_acc", pa.float64()),
        pa.field("test_acc_std", pa.float64()),
        pa.field("repeat_split", _ints),
        pa.field("repeat_seed", _ints),
        pa.field("repeat_status", pa.list_(pa.string())),
        pa.field("repeat_val_acc", _floats),
        pa.field("repeat_test_acc", _floats),
        pa.field("repeat_val_loss", _floats),
        pa.field("repeat_best_epoch", _ints),
        pa.field("repeat_epochs", _ints),
        pa.field("epochs", pa.int32()),  # epochs trained (most over the repeats)
        pa.field("best_epoch", pa.int32()),  # latest validation-best epoch over the repeats
        pa.field("m_sig", pa.float64()),
        pa.field("smoothness", pa.float64()),
        pa.field("grad_norms", _floats),  # per layer, mean over the repeats
        pa.field("grad_norm_ratio", pa.float64()),  # first layer / last layer
        pa.field("seconds", pa.float64()),
        pa.field("seconds_per_epoch", pa.float64()),
        pa.field("device", pa.string()),
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
        pa.field("repeat", pa.int32(), nullable=False),
        pa.field("split", pa.int32()),
        pa.field("seed", pa.int32()),
        pa.field("epoch", pa.int32(), nullable=False),
        pa.field("train_loss", pa.float64()),
        pa.field("val_acc", pa.float64()),
        pa.field("test_acc", pa.float64()),
        pa.field("val_loss", pa.float64()),
        pa.field("grad_norms", _floats),  # per layer ||dL/dW(l)||_F, at the report epochs only
    ],
    metadata={"orthotune.schema_version": str(SCHEMA_VERSION)},
)

TABLES = {"trials": TRIALS_SCHEMA, "epochs": EPOCHS_SCHEMA}


def check_search_name(name: str) -> str:
    if not isinstance(name, str) or not SEARCH_NAME.match(name):
        raise OrthotuneError(
            f"search name {name!r} must start with a letter or digit and use only letters, "
            f"digits, '_', '.', '-' (at most 100 characters)"
        )
    return name
