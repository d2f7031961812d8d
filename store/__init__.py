"""The Parquet store: the schema (derived from the config's declarations, ``_schema``), how
older files read (``_migrate``), its storage (``_store`` over ``_io``), its
checks (``check_store``, ``quarantine``) and the one-driver-per-search lease (``Lease``)."""

from orthotune.store._check import check_store, quarantine
from orthotune.store._lease import Lease, lease_info
from orthotune.store._rows import ORTHO_ONLY, config_columns, config_from_columns, epoch_rows, trial_row
from orthotune.store._schema import EPOCHS_SCHEMA, TRIALS_SCHEMA, check_search_name
from orthotune.store._store import Store, now

__all__ = [
    "EPOCHS_SCHEMA",
    "ORTHO_ONLY",
    "TRIALS_SCHEMA",
    "Lease",
    "Store",
    "check_search_name",
    "check_store",
    "config_columns",
    "config_from_columns",
    "epoch_rows",
    "lease_info",
    "now",
    "quarantine",
    "trial_row",
]
