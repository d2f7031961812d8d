"""Reading files older than the current schema: what their missing columns mean.

Two kinds of old rows, both filled in when a table is read (``Store.read``), never rewritten:

* schema v1 rows lack every variant column; their runs trained what :data:`V1_VARIANT`
  states (:func:`upgrade_v1`);
* a variant switch added after schema v2 shipped (``io_bias``, ...) reads as null from files
  written before it; its declared default is the behaviour from before it existed, so
  :func:`fill_switch_defaults` fills every null with it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from orthotune.core import Group, TrainConfig, column_name, declared

#: What a v1 store's runs did for the switches v1 had no column for (v1 trained the paper
#: text's literal Frobenius bounding, selected on validation accuracy, linear layout).
V1_VARIANT = dict(bound="frobenius", transform="newton", hybrid="init", target="cI", target_trainable=True,
                  input_T=0, variant="v1", layout="linear", conv_bias=True, batch_norm=False,
                  feature_transform=True, gcnii_variant=False, directed=False, selection="val_acc")

#: The variant switches with their declared defaults. A switch added after schema v2
#: shipped (``io_bias``, ...) reads as null from files written before it; every switch's
#: default is the behaviour from before it existed (a new switch never changes old runs),
#: and a row written with it never holds null, so :func:`fill_switch_defaults` fills every null with
#: the default (v1 rows too, after :func:`upgrade_v1` has filled what v1 did differently).
#: Otherwise the report, which leaves null switches out of a cell's key, would split old
#: rows and new rows of the same model into two cells.
SWITCH_DEFAULTS = {column_name(f): f.default for f in declared(TrainConfig) if f.metadata["group"] is Group.VARIANT}


def fill_switch_defaults(trials: pa.Table) -> pa.Table:
    """Fill the nulls of the :data:`SWITCH_DEFAULTS` columns (files older than the switch) with its default."""
    for name, value in SWITCH_DEFAULTS.items():
        index = trials.schema.get_field_index(name)
        column = trials[name]
        trials = trials.set_column(index, trials.schema.field(index), pa.compute.fill_null(column, value))
    return trials


def upgrade_v1(trials: pa.Table) -> pa.Table:
    """Fill the columns v1 rows lack (``selection`` is null only in v1 rows) with v1's behaviour."""
    if trials.num_rows == 0:
        return trials
    is_v1 = pa.compute.is_null(trials["selection"])
    if not pa.compute.any(is_v1).as_py():
        return trials
    for name, value in V1_VARIANT.items():
        index = trials.schema.get_field_index(name)
        column = trials[name]
        filled = pa.compute.if_else(is_v1, pa.scalar(value, column.type), column)
        trials = trials.set_column(index, trials.schema.field(index), filled)
    return trials
