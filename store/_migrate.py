"""Reading files older than the current schema: what their missing columns mean.

Three kinds of old rows, both filled in when a table is read (``Store.read``), never rewritten
(a compacted file holds the rows as they were written, so they read the same after it):

* schema v1 rows lack every variant column; their runs trained what :data:`V1_VARIANT`
  states (:func:`upgrade_v1`);
* a variant switch added after schema v2 shipped (``io_bias``, ...) reads as null from files
  written before it; its declared default is the behaviour from before it existed, so
  :func:`fill_switch_defaults` fills every null with it;
* rows written before v3 counted ``depth`` in hidden convolutions (:func:`upgrade_v2`).
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


#: The columns the upgrades below decide by: a read of some columns reads these too.
MIGRATION_INPUTS = ("selection", "schema_version", "layout", "backbone", "depth")


def fill_switch_defaults(trials: pa.Table) -> pa.Table:
    """Fill the nulls of the :data:`SWITCH_DEFAULTS` columns (files older than the switch) with its
    default (those of the columns ``trials`` holds)."""
    for name, value in SWITCH_DEFAULTS.items():
        index = trials.schema.get_field_index(name)
        if index < 0:
            continue
        column = trials[name]
        trials = trials.set_column(index, trials.schema.field(index), pa.compute.fill_null(column, value))
    return trials


def upgrade_v1(trials: pa.Table) -> pa.Table:
    """Fill the columns v1 rows lack (``selection`` is null only in v1 rows) with v1's behaviour
    (those of the columns ``trials`` holds, which include :data:`MIGRATION_INPUTS`)."""
    if trials.num_rows == 0:
        return trials
    is_v1 = pa.compute.is_null(trials["selection"])
    if not pa.compute.any(is_v1).as_py():
        return trials
    for name, value in V1_VARIANT.items():
        index = trials.schema.get_field_index(name)
        if index < 0:
            continue
        column = trials[name]
        filled = pa.compute.if_else(is_v1, pa.scalar(value, column.type), column)
        trials = trials.set_column(index, trials.schema.field(index), filled)
    return trials


#: Before v3, ``depth`` counted the hidden convolutions; the ``official`` layout's GCN and
#: JKNet also had graph-convolution input and output layers (the authors' ``--layer L`` was
#: stored as depth L): they had depth + 2 graph convolutions. Every other row (linear layout,
#: GCNII, Graph U-Nets' pooling levels) counted the same under both definitions.
V2_GRAPH_IO = ("gcn", "jknet")


def upgrade_v2(trials: pa.Table) -> pa.Table:
    """Rows written before v3 (``schema_version`` null, after :func:`upgrade_v1`): the
    ``official`` layout's GCN and JKNet depth becomes their graph convolutions, depth + 2."""
    if trials.num_rows == 0:
        return trials
    compute = pa.compute
    old = compute.is_null(trials["schema_version"])
    graph_io = compute.and_(compute.equal(trials["layout"], "official"),
                            compute.is_in(trials["backbone"], value_set=pa.array(V2_GRAPH_IO)))
    shift = compute.fill_null(compute.and_(old, graph_io), False)
    if not compute.any(shift).as_py():
        return trials
    index = trials.schema.get_field_index("depth")
    depth = compute.if_else(shift, compute.add(trials["depth"], pa.scalar(2, pa.int32())), trials["depth"])
    return trials.set_column(index, trials.schema.field(index), depth.cast(pa.int32()))
