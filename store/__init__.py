"""The Parquet store: the schema (derived from the config's declarations, ``_schema``), how
older files read (``_migrate``), its storage (``_store`` over ``_io``; which file holds a
trial: ``_files``), its compaction (``compact``), its checks (``check_store``,
``quarantine``) and the one-driver-per-search lease (``Lease``)."""

from orthotune.store._check import check_store, quarantine
from orthotune.store._compact import Compaction, compact
from orthotune.store._lease import Lease, LeaseHeld, lease_info
from orthotune.store._rows import ORTHO_ONLY, config_columns, config_from_columns, epoch_rows, trial_row
from orthotune.store._schema import EPOCHS_SCHEMA, TRIALS_SCHEMA, check_search_name
from orthotune.store._store import Store, now

__all__ = [
    "EPOCHS_SCHEMA",
    "ORTHO_ONLY",
    "TRIALS_SCHEMA",
    "Compaction",
    "Lease",
    "LeaseHeld",
    "Store",
    "check_search_name",
    "check_store",
    "compact",
    "config_columns",
    "config_from_columns",
    "epoch_rows",
    "lease_info",
    "now",
    "quarantine",
    "trial_row",
]
