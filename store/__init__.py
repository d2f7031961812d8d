"""The Parquet store: the schema (derived from the config's declarations, ``_schema``), how
older files read (``_migrate``), its storage (``_store`` over ``_io``), its
checks (``check_store``, ``quarantine``) and the one-driver-per-search lease (``Lease``)."""

from orthotune.store._check import QUARANTINE, Problem, check_store, quarantine
from orthotune.store._lease import Lease, LeaseHeld, LeaseInfo, lease_info
from orthotune.store._migrate import V1_VARIANT, upgrade_v1
from orthotune.store._rows import (
    ORTHO_ONLY,
    config_columns,
    config_from_columns,
    epoch_rows,
    library_versions,
    trial_row,
)
from orthotune.store._schema import EPOCHS_SCHEMA, MARKER, SCHEMA_VERSION, TRIALS_SCHEMA, check_search_name
from orthotune.store._store import Store, TolerantDataset, now

__all__ = [
    "EPOCHS_SCHEMA",
    "MARKER",
    "ORTHO_ONLY",
    "QUARANTINE",
    "SCHEMA_VERSION",
    "TRIALS_SCHEMA",
    "V1_VARIANT",
    "Lease",
    "LeaseHeld",
    "LeaseInfo",
    "Problem",
    "Store",
    "TolerantDataset",
    "check_search_name",
    "check_store",
    "config_columns",
    "config_from_columns",
    "epoch_rows",
    "lease_info",
    "library_versions",
    "now",
    "quarantine",
    "trial_row",
    "upgrade_v1",
]
