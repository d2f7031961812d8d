"""The Parquet store: the schema (derived from the config's declarations) and its storage."""

from orthotune.search.store._rows import (
    ORTHO_ONLY,
    config_columns,
    config_from_columns,
    epoch_rows,
    library_versions,
    trial_row,
)
from orthotune.search.store._store import (
    EPOCHS_SCHEMA,
    MARKER,
    SCHEMA_VERSION,
    TRIALS_SCHEMA,
    V1_VARIANT,
    Store,
    check_search_name,
    now,
    upgrade_v1,
)

__all__ = [
    "EPOCHS_SCHEMA",
    "MARKER",
    "ORTHO_ONLY",
    "SCHEMA_VERSION",
    "TRIALS_SCHEMA",
    "V1_VARIANT",
    "Store",
    "check_search_name",
    "config_columns",
    "config_from_columns",
    "epoch_rows",
    "library_versions",
    "now",
    "trial_row",
    "upgrade_v1",
]
