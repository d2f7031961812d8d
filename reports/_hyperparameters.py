"""What the report tells of the hyperparameters, beside the verdicts: every hyperparameter of
each cell's winner (:func:`winners_table`), the best trial per value of T (:func:`t_effect`)
and each searched hyperparameter's fANOVA importance per cell (:func:`importance`). Read from
the select stage's trials and winners; the report computes them beside the pipeline's
stages (the importance's forests in worker processes while the figures are drawn).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Executor

import numpy as np
import pandas as pd

from orthotune.core import OBJECTIVE, Group, TrainConfig, by_group, column_name, reads
from orthotune.reports._load import (
    ARM,
    ARM_COLUMN,
    CELL,
    INTEGERS,
    LEAD,
    PLACE,
    ROW,
    VARIANT,
    keep_integers,
)
from orthotune.reports._select import TIE_RULE, eligible
from orthotune.reports._verdict import FEW_TRIALS

#: Every hyperparameter a trial has: Ortho-GConv's searched values and the training values
#: (store column names; ``max_epochs`` is the config's ``epochs``) but a cell coordinate's.
HYPERPARAMETERS = tuple(name for name in (column_name(f) for f in by_group(TrainConfig, Group.ORTHO, Group.TRAIN))
                        if name not in PLACE)


# -- winners -------------------------------------------------------------------------------

WINNER_COLUMNS = [*LEAD, ARM, VARIANT, "selection", *HYPERPARAMETERS,
                  "status", "epochs", "best_epoch", OBJECTIVE, "test_acc", "candidates", "search", "trial_id"]


def winners_table(winners: pd.DataFrame) -> pd.DataFrame:
    """Every hyperparameter each cell's winner reads (another backbone's are left empty), its
    status (a stopped winner was cut by ASHA), the epochs it trained and its validation-best
    epoch (most over the repeats)."""
    frame = winners.drop(columns=VARIANT).rename(columns={"variant_name": VARIANT})
    for f in by_group(TrainConfig, Group.ORTHO, Group.TRAIN):
        unread = ~frame["backbone"].map(lambda backbone, name=f.name: reads(name, backbone)).astype(bool)
        if column_name(f) in frame and unread.any():
            frame[column_name(f)] = frame[column_name(f)].astype(object).where(~unread, None)
    frame = frame.sort_values([*ROW, ARM_COLUMN], kind="stable")
    frame = frame[WINNER_COLUMNS].reset_index(drop=True)
    ints = [c for c in (*INTEGERS, "epochs", "best_epoch", "candidates", *HYPERPARAMETERS)
            if c in frame and _integral(frame[c])]
    return keep_integers(frame.astype(object).where(frame.notna(), None), ints)


def _integral(column: pd.Series) -> bool:
    """An integer column that nulls turned into floats (``T`` is null for the original arm)."""
    values = [v for v in column if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if pd.api.types.is_bool_dtype(column) or any(isinstance(v, (bool, np.bool_, str)) for v in values):
        return False
    return pd.api.types.is_integer_dtype(column) or (
        column.dtype == float and bool(values) and _declared_int(column.name))


def _declared_int(name: str) -> bool:
    return any(column_name(f) == name and f.metadata["rule"].kind == "int" for f in by_group(
        TrainConfig, Group.ORTHO, Group.TRAIN))


# -- effect of T ---------------------------------------------------------------------------

T_COLUMNS = [*ROW, "T", "trial_id", "status", "stuck",
             "test_acc", "test_acc_std", "seconds_per_epoch"]


def t_effect(trials: pd.DataFrame) -> pd.DataFrame:
    """For each Ortho-GConv cell and each T: the validation-best trial with that T (same tie
    rule), its status, whether it was stuck, its test accuracy and seconds per epoch."""
    ortho = eligible(trials)
    ortho = ortho[ortho[ARM_COLUMN] == True]  # noqa: E712 (a column comparison, not a truth test)
    if ortho.empty:
        return pd.DataFrame(columns=T_COLUMNS)
    columns, ascending = zip(*TIE_RULE)
    ordered = ortho.sort_values(list(columns), ascending=list(ascending), na_position="last", kind="stable")
    best = ordered.groupby([*CELL, "T"], sort=True).head(1)
    best = best.drop(columns=VARIANT).rename(columns={"variant_name": VARIANT}).assign(stuck=stuck(best))[T_COLUMNS]
    best = best.sort_values([*ROW, "T"], kind="stable")
    return keep_integers(best.reset_index(drop=True), [*INTEGERS, "T"])


def stuck(trials: pd.DataFrame) -> pd.Series:
    """Trials that never learned: no repeat's validation selection moved past the first
    epoch (the majority-class plateau of a vanishing-gradient model looks like this)."""
    return pd.Series([_never_improved(b) for b in trials["repeat_best_epoch"]], index=trials.index, dtype=bool)


def _never_improved(best_epochs: object) -> bool:
    values = [int(b) for b in (best_epochs if best_epochs is not None else []) if b is not None]
    return bool(values) and max(values) <= 1


# -- hyperparameter importance -------------------------------------------------------------

IMPORTANCE_COLUMNS = [*LEAD, ARM, VARIANT, "trials", "fitted", "importance", "few"]
#: The most trials of a cell the fANOVA forest is fitted on: a larger cell's importance comes
#: from this many of its trials drawn at random (seeded), and the report says so (``fitted``).
#: The forest's cost, and building the Optuna study it reads, grow with the trials (at 10^5
#: trials, 1,600 per cell, they were most of a report's time); 500 points still give each
#: searched hyperparameter hundreds of values to split on.
IMPORTANCE_TRIALS = 500
#: The seed of that draw (the same trials give the same sample, as the forest's own seed).
IMPORTANCE_SEED = 0


def importance(trials: pd.DataFrame) -> pd.DataFrame:
    """Per cell, Optuna's fANOVA importance of each searched hyperparameter for the objective
    (validation accuracy) over the cell's eligible trials: ``importance`` is ``name=share``
    pairs, largest first. Cells with fewer than 3 trials, nothing searched or a constant
    objective are left out. The trials go to the evaluator in a canonical order (by their
    values and objective) and its forest is seeded, so the same trials give the same shares
    whatever order the store or the search held them in. ``fitted``: the trials the forest was
    fitted on, all of them up to :data:`IMPORTANCE_TRIALS`, else that many drawn at random
    (seed :data:`IMPORTANCE_SEED`) from the canonical order. ``few``: fewer than
    :data:`~orthotune.reports._verdict.FEW_TRIALS` trials (the report labels those shares)."""
    return start_importance(trials)()


def start_importance(trials: pd.DataFrame, executor: Executor | None = None) -> Callable[[], pd.DataFrame]:
    """:func:`importance` begun: each cell's forest is submitted to ``executor`` (a report's
    process pool fits them while it draws its figures; they were its largest cost), and the
    call returned gives the table once they are done. Without ``executor`` the call fits them."""
    cells = [(_importance_row(key, group), params, points)
             for key, group in eligible(trials).groupby(list(CELL), sort=True)
             for params, points in [_importance_points(group)] if points]
    if executor is None:
        return lambda: _importance_table(cells, [fanova_shares(params, points) for _, params, points in cells])
    pending = [executor.submit(fanova_shares, params, points) for _, params, points in cells]
    return lambda: _importance_table(cells, [future.result() for future in pending])


def _importance_row(key: tuple, group: pd.DataFrame) -> dict:
    first = group.iloc[0]
    return {**dict(zip(CELL, key)), ARM: first[ARM], VARIANT: first["variant_name"], "trials": len(group),
            "few": len(group) < FEW_TRIALS}


def _importance_table(cells: list[tuple[dict, list[str], list]], shares: list[dict[str, float]]) -> pd.DataFrame:
    rows = [{**row, "fitted": len(points), "importance": ", ".join(f"{name}={share:.2f}"
                                                                    for name, share in found.items())}
            for (row, _, points), found in zip(cells, shares) if found]
    return keep_integers(pd.DataFrame(rows, columns=IMPORTANCE_COLUMNS), [*INTEGERS, "trials", "fitted"])


def importance_sample(count: int) -> np.ndarray:
    """The positions (ascending) of the points the forest is fitted on among ``count`` in
    canonical order: all of them up to :data:`IMPORTANCE_TRIALS`, else that many drawn at
    random, seeded (the same trials give the same sample)."""
    if count <= IMPORTANCE_TRIALS:
        return np.arange(count)
    return np.sort(np.random.default_rng(IMPORTANCE_SEED).choice(count, IMPORTANCE_TRIALS, replace=False))


def _importance_points(group: pd.DataFrame) -> tuple[list[str], list[tuple[list, float]]]:
    """The searched hyperparameters of a cell and the points the forest is fitted on (values,
    objective), in canonical order; no points where there is nothing to fit."""
    params = [c for c in HYPERPARAMETERS if group[c].notna().all() and group[c].nunique() > 1]
    # fANOVA splits the objective's variance: a constant objective has none to share out
    if len(group) < 3 or not params or group[OBJECTIVE].astype(float).nunique() < 2:
        return params, []
    # column by column (a row at a time is most of the cost at 10^5 trials); the same values
    columns = [[_param(v, integer) for v in group[c].to_numpy(dtype=object)]
               for c, integer in ((c, _declared_int(c)) for c in params)]
    points = [(list(values), objective) for values, objective in zip(zip(*columns),
                                                                     group[OBJECTIVE].astype(float).tolist())]
    points.sort(key=lambda point: (repr(point[0]), point[1]))  # canonical: the forest sees the same data
    points = [points[i] for i in importance_sample(len(points)).tolist()]
    if len({objective for _, objective in points}) < 2:  # a sample that drew one value of it
        return params, []
    return params, points


def fanova_shares(params: list[str], points: list[tuple[list, float]]) -> dict[str, float]:
    """Optuna's fANOVA importance of ``params`` over ``points`` (values, objective), its forest
    seeded. Plain values in, plain values out: it runs in a report's worker processes."""
    import optuna  # here: a report without importance never pays for the import

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    distributions = {c: _distribution(optuna, [p[i] for p, _ in points]) for i, c in enumerate(params)}
    study = optuna.create_study(direction="maximize")
    study.add_trials([optuna.trial.create_trial(params=dict(zip(params, values)), distributions=distributions,
                                                value=objective) for values, objective in points])
    # a fixed seed: the same store gives the same report
    evaluator = optuna.importance.FanovaImportanceEvaluator(n_trees=32, seed=0)
    return optuna.importance.get_param_importances(study, evaluator=evaluator)


def _distribution(optuna, values: list):
    if all(type(v) is int for v in values):
        return optuna.distributions.IntDistribution(min(values), max(values))
    if all(isinstance(v, float) for v in values):
        return optuna.distributions.FloatDistribution(min(values), max(values))
    return optuna.distributions.CategoricalDistribution(sorted(set(values), key=str))


def _param(value: object, integer: bool) -> object:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer, float, np.floating)):
        return int(value) if integer else float(value)
    return str(value)
