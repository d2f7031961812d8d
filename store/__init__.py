"""The Parquet store: the schema (derived from the config's declarations, ``_schema``), how
older files read (``_migrate``), its storage (``_store`` over ``_io``; which file holds a
trial: ``_files``), its compaction (``compact``), its checks (``check_store``,
``quarantine``), the one-driver-per-search lease (``Lease``) and the confirmations on fresh
repeats (``read_confirmation``, ``save_confirmation``).

``check_search_name`` loads at once and is light; every other name imports pyarrow and loads
on first use (PEP 562, :data:`LAZY`), so a launch refuses bad input before pyarrow loads.
"""

from orthotune.core import lazy_attributes
from orthotune.store._names import check_search_name

__all__ = [
    "EPOCHS_SCHEMA",
    "ORTHO_ONLY",
    "TRIALS_SCHEMA",
    "TRIAL_FILE_OPTIONS",
    "Compaction",
    "Lease",
    "LeaseHeld",
    "LeaseLost",
    "Store",
    "check_search_name",
    "check_store",
    "compact",
    "config_columns",
    "config_from_columns",
    "epoch_rows",
    "lease_info",
    "lease_stale_s",
    "now",
    "quarantine",
    "read_confirmation",
    "save_confirmation",
    "trial_row",
]

#: The names of ``__all__`` not imported above, by the module each is loaded from on first
#: access: they import pyarrow.
LAZY = {
    "check_store": "_check", "quarantine": "_check",
    "Compaction": "_compact", "compact": "_compact",
    "Lease": "_lease", "LeaseHeld": "_lease", "LeaseLost": "_lease", "lease_info": "_lease",
    "lease_stale_s": "_lease",
    "ORTHO_ONLY": "_rows", "config_columns": "_rows", "config_from_columns": "_rows", "epoch_rows": "_rows",
    "trial_row": "_rows",
    "EPOCHS_SCHEMA": "_schema", "TRIALS_SCHEMA": "_schema", "TRIAL_FILE_OPTIONS": "_schema",
    "Store": "_store", "now": "_store",
    "read_confirmation": "_confirmations", "save_confirmation": "_confirmations",
}


__getattr__ = lazy_attributes(__name__, LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
