"""Validation-best selection per cell, and the way back from a trials row to a TrainConfig.

Tie rule (the order the candidates of one cell are sorted in; the first wins):

1. higher ``val_acc`` (the objective: mean validation accuracy over the repeats);
2. lower ``val_acc_std`` (steadier over the repeats);
3. fewer ``epochs`` trained (cheaper);
4. earlier ``finished_at``;
5. ``search`` name, then ``trial_id`` (so the choice never depends on read order).

Failed trials and trials without a finite objective never win; stopped trials compete on
the validation accuracy they reached. Test accuracy takes no part in any of this.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from orthotune.core import OBJECTIVE, Summary, TrainConfig, column_name, declared, result_column_name
from orthotune.reports._load import CELL
from orthotune.store import TRIALS_SCHEMA

#: Sort keys and directions of the tie rule, in order.
TIE_RULE: tuple[tuple[str, bool], ...] = (
    (OBJECTIVE, False),
    (result_column_name(OBJECTIVE, Summary.STD), True),
    ("epochs", True),
    ("finished_at", True),
    ("search", True),
    ("trial_id", True),
)
TIE_RULE_TEXT = (
    "highest validation accuracy (mean over repeats); ties go to the lower validation std, "
    "then fewer epochs trained, then the earlier finished trial, then search name and trial id. "
    "Failed trials never win; stopped trials compete on what they reached; test accuracy "
    "is never used to choose."
)


def eligible(trials: pd.DataFrame) -> pd.DataFrame:
    """Trials that may win: not failed, with a finite objective."""
    return trials[may_win(trials)]


def may_win(trials: pd.DataFrame) -> pd.Series:
    """Whether each trial may win (:func:`eligible`'s rows), as a mask."""
    finite = np.isfinite(trials[OBJECTIVE].astype(float))
    return (trials["status"] != "failed") & finite


def select_best(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (dataset, setting, backbone, depth, ortho, variant switches): its
    validation-best trial. ``trials`` is a :func:`load_trials` frame (it has ``switches``).

    Adds ``candidates`` (trials that could win) and ``failed`` (failed trials) per cell.
    """
    columns, ascending = zip(*TIE_RULE)
    # sorted and grouped on the keys alone, by position; then the winners' whole rows taken
    # (sorting and filtering a frame takes every column it holds: 10^5 rows of lists)
    keys = trials[list(dict.fromkeys([*columns, *CELL, "status"]))].reset_index(drop=True)
    ordered = keys[may_win(keys)].sort_values(list(columns), ascending=list(ascending),
                                              na_position="last", kind="stable")
    winners = trials.iloc[ordered.groupby(list(CELL), sort=True, dropna=False).head(1).index]
    counts = _cell_counts(trials)
    winners = winners.merge(counts, on=list(CELL), how="left")
    return winners.sort_values(list(CELL), kind="stable").reset_index(drop=True)


def _cell_counts(trials: pd.DataFrame) -> pd.DataFrame:
    flags = trials[list(CELL)].assign(
        candidates=may_win(trials).astype(int),
        failed=(trials["status"] == "failed").astype(int),
    )
    return flags.groupby(list(CELL), dropna=False, as_index=False)[["candidates", "failed"]].sum()


# -- back to a config --------------------------------------------------------------------

_CONFIG_FIELDS = declared(TrainConfig)


def row_to_config(row: Mapping[str, Any] | pd.Series) -> TrainConfig:
    """The TrainConfig a trials row was trained with (``orthotune train --config`` reruns it).

    ``max_epochs`` goes back to ``epochs``; the original arm's null Ortho-GConv values are
    dropped (TrainConfig's defaults stand in, unused since ``ortho`` is false); values are
    coerced to the Python type of their store column, since data frames turn ints with nulls
    into floats and lists into arrays.
    """
    values: dict[str, Any] = {}
    for f in _CONFIG_FIELDS:
        column = column_name(f)
        value = _python(row[column], TRIALS_SCHEMA.field(column).type)
        if value is None:  # the original arm's Ortho-GConv values; unset optional values
            continue
        values[f.name] = value
    return TrainConfig.from_dict(values)


def config_dict(row: Mapping[str, Any] | pd.Series) -> dict[str, Any]:
    """``row_to_config(row)`` as plain JSON/YAML-ready values, of the fields the run reads
    (``TrainConfig.to_dict(read=True)``): the original arm leaves out the Ortho-GConv keys and
    every config the keys its backbone does not read (a GCN has no ``alpha``: printing
    TrainConfig's defaults would suggest it had)."""
    return {k: tidy(v) for k, v in row_to_config(row).to_dict(read=True).items()}


def tidy(value: Any) -> Any:
    """A float as the decimal it stands for (0.7, not 0.7000000000000001: 12 significant
    digits, far below any hyperparameter's meaning but above binary noise); lists itemwise."""
    if isinstance(value, list):
        return [tidy(v) for v in value]
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.12g}")
    return value


def _python(value: Any, kind: pa.DataType) -> Any:
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_python(v, kind.value_type) for v in value]
    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    if pa.types.is_integer(kind):
        return int(value)
    if pa.types.is_floating(kind):
        return float(value)
    if pa.types.is_boolean(kind):
        return bool(value)
    return str(value)
