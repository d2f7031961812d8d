"""The select stage, the report's second: each cell's validation-best trial, read whole from the
store, the cells a report expects and those without a winner (:func:`select`, whose
:class:`Selection` the pair-and-test stage takes); and the way back from a trials row to a
TrainConfig.

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
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from orthotune.core import OBJECTIVE, Summary, TrainConfig, arm_of, column_name, declared, result_column_name
from orthotune.reports._load import (
    ARM,
    ARM_COLUMN,
    CELL,
    COLUMNS,
    KINDS,
    NAMED_ARM,
    NAMED_ARM_KEY,
    PLACE,
    SECTIONS,
    VARIANT,
    Loaded,
)
from orthotune.store import TRIALS_SCHEMA, Store

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


@dataclass(frozen=True)
class Selection:
    """The select stage's product: the arms' trials; each arm cell's winner and each
    structure-agnostic reference cell's (:func:`select_best`, whole rows); the cells the
    report expects (:func:`expected_cells`) and those without a winner, and why."""

    trials: pd.DataFrame
    winners: pd.DataFrame
    reference_winners: pd.DataFrame
    expected: pd.DataFrame
    missing: pd.DataFrame


def select(loaded: Loaded) -> Selection:
    """The select stage: the winners of the reference's cells and of the arms' (their rows read
    whole from the store: ``loaded`` may hold only the columns selection reads), the expected
    cells of the arms the filters keep, and the missing ones."""
    trials, reference = loaded.trials, loaded.reference
    reference_winners = complete_rows(loaded.store, select_best(reference)) if len(reference) else reference
    winners = complete_rows(loaded.store, select_best(trials))
    expected = expected_cells(trials, loaded.arms)
    return Selection(trials, winners, reference_winners, expected, missing_cells(trials, winners, expected))


def complete_rows(store: Store, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (rows of :func:`load_trials` read with some ``columns``, or a selection of
    them) with every other ``trials`` column, read for its trials alone (by search and trial
    id: their own files, or the compacted files filtered), in :func:`load_trials`' order."""
    missing = [c for c in TRIALS_SCHEMA.names if c not in frame.columns]
    if not missing:
        return frame
    keys = list(zip(frame["search"], frame["trial_id"]))
    rows = store.read("trials", columns=["search", "trial_id", *missing], trials=keys).to_pandas()
    merged = frame.merge(rows.drop_duplicates(["search", "trial_id"]), on=["search", "trial_id"], how="left")
    return merged[[*TRIALS_SCHEMA.names, *(c for c in frame.columns if c not in TRIALS_SCHEMA.names)]]


def expected_cells(trials: pd.DataFrame, arms: tuple[bool, ...] = (False, True)) -> pd.DataFrame:
    """The cells a report should fill: per section (setting), every combination of the other
    place coordinates seen (dataset, backbone) times every value of a column coordinate seen
    (depth) times every (arm, variant) combination seen in that section (an arm filtered
    away is not expected). A variant run for one arm only (an ablation) expects only that arm."""
    columns = [*CELL, "variant_name", "shared"]
    if trials.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for _, group in trials.groupby(list(SECTIONS), sort=True):
        grid = group[[c for c in PLACE if c not in COLUMNS]].drop_duplicates()
        for column in COLUMNS:
            values = sorted(KINDS[column](v) for v in group[column].dropna().unique())
            grid = grid.merge(pd.DataFrame({column: values}), how="cross")
        combos = group[[ARM_COLUMN, "switches", "variant_name", "shared"]].drop_duplicates()
        combos = combos[combos[ARM_COLUMN].isin(arms)]
        rows.append(grid.merge(combos, how="cross"))
    return pd.concat(rows, ignore_index=True)[columns] if rows else pd.DataFrame(columns=columns)


def missing_cells(trials: pd.DataFrame, winners: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """Expected cells without a winner, and why (no trials, or all failed)."""
    have = set(winners[list(CELL)].itertuples(index=False, name=None))
    wanted = [(key, cell) for cell in expected.itertuples(index=False)
              if (key := tuple(getattr(cell, c) for c in CELL)) not in have]
    # the trials split by cell only where a cell lacks a winner (splitting 10^5 rows takes a third of a second)
    by_cell = dict(iter(trials.groupby(list(CELL), sort=False))) if wanted and len(trials) else {}
    rows = []
    for key, cell in wanted:
        rows.append({**dict(zip(CELL, key)), VARIANT: cell.variant_name,
                     ARM: arm_of(getattr(cell, ARM_COLUMN)).name,
                     "reason": _why_missing(by_cell.get(key, trials.iloc[:0]))})
    return pd.DataFrame(rows, columns=[*CELL, VARIANT, ARM, "reason"])


def _why_missing(cell_trials: pd.DataFrame) -> str:
    if cell_trials.empty:
        return "no trials"
    failed = cell_trials[cell_trials["status"] == "failed"]
    if len(failed) == len(cell_trials):
        first = next((r for r in failed["reason"] if isinstance(r, str) and r), "no reason recorded")
        return f"all {len(failed)} trials failed (e.g. {first})"
    return f"{len(cell_trials)} trials, none with a finite validation accuracy"


# -- back to a config, and plain values -------------------------------------------------

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
        # a loaded frame's ``arm`` column shows every arm's name; the stored one is kept apart
        if column == NAMED_ARM and NAMED_ARM_KEY in row:
            value = row[NAMED_ARM_KEY] or None
        else:
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


def plain(value: Any) -> Any:
    """A JSON value: numpy scalars as Python ones, NaN and NA as None, lists itemwise."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain(v) for v in value]
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, np.generic):
        return plain(value.item())
    return value


def plain_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame's rows as plain JSON values (:func:`plain`, then :func:`tidy`)."""
    return [{k: tidy(plain(v)) for k, v in row.items()} for row in frame.to_dict("records")]


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
