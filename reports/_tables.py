"""The report's tables: the paper-style comparison, the paired test and the missing cells.

Paired test: the two winners of a pair (original and Ortho-GConv at the same dataset,
setting, backbone and depth) are matched repeat by repeat on the repeat key (the split for
``full``, the fold for ``cv10``, the seed for ``semi``/``official``); the difference is
Ortho-GConv minus original test accuracy, tested with SciPy's paired t-test
(``scipy.stats.ttest_rel``, two-sided). The t-test rather than Wilcoxon's signed-rank test
because the paper's protocol has 5 or 10 repeats, where the exact signed-rank test cannot
go below p = 0.0625 (n = 5) and so could never call a 5-split gain real.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from orthotune.reports._load import CELL, ORIGINAL, ORTHO
from orthotune.reports._select import TIE_RULE, eligible

#: What one repeat is in each setting (how the report labels it and pairs on it).
REPEAT_KIND = {"full": "split", "cv10": "fold", "semi": "seed", "official": "seed"}
#: The row of a pair: everything of the cell but the arm.
PAIR = ("setting", "dataset", "backbone", "depth")
TEST_NAME = "paired t-test (scipy.stats.ttest_rel, two-sided)"


def expected_cells(trials: pd.DataFrame, arms: tuple[bool, ...] = (False, True)) -> pd.DataFrame:
    """The cells a report should fill: per setting, every (dataset, backbone) seen times
    every depth seen in that setting times both arms (or the arm filtered to)."""
    if trials.empty:
        return pd.DataFrame(columns=list(CELL))
    rows = []
    for setting, group in trials.groupby("setting", sort=True):
        pairs = group[["dataset", "backbone"]].drop_duplicates().itertuples(index=False)
        depths = sorted(int(d) for d in group["depth"].dropna().unique())
        rows += [(d, setting, b, depth, arm) for d, b in pairs for depth in depths for arm in arms]
    return pd.DataFrame(rows, columns=list(CELL))


def missing_cells(trials: pd.DataFrame, winners: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """Expected cells without a winner, and why (no trials, or all failed)."""
    have = set(winners[list(CELL)].itertuples(index=False, name=None))
    rows = []
    for cell in expected.itertuples(index=False, name=None):
        if cell in have:
            continue
        mask = np.logical_and.reduce([trials[c] == v for c, v in zip(CELL, cell)])
        rows.append({**dict(zip(CELL, cell)), "arm": ORTHO if cell[-1] else ORIGINAL,
                     "reason": _why_missing(trials[mask])})
    return pd.DataFrame(rows, columns=[*CELL, "arm", "reason"])


def _why_missing(cell_trials: pd.DataFrame) -> str:
    if cell_trials.empty:
        return "no trials"
    failed = cell_trials[cell_trials["status"] == "failed"]
    if len(failed) == len(cell_trials):
        first = next((r for r in failed["reason"] if isinstance(r, str) and r), "no reason recorded")
        return f"all {len(failed)} trials failed (e.g. {first})"
    return f"{len(cell_trials)} trials, none with a finite validation accuracy"


@dataclass(frozen=True)
class Paired:
    """The paired comparison of one cell's two winners."""

    n_pairs: int
    diff_mean: float
    diff_std: float
    t: float
    p: float
    note: str


def paired(setting: str, original: pd.Series | None, ortho: pd.Series | None) -> Paired:
    """Ortho-GConv minus original over the repeats both winners ran (see the module doc)."""
    nan = math.nan
    if original is None or ortho is None:
        absent = " and ".join(n for n, r in ((ORIGINAL, original), (ORTHO, ortho)) if r is None)
        return Paired(0, nan, nan, nan, nan, f"no {absent} winner")
    left, right = _per_repeat(setting, original), _per_repeat(setting, ortho)
    keys = sorted(set(left) & set(right))
    unmatched = len(set(left) ^ set(right))
    extra = f"; {unmatched} repeats without a partner left out" if unmatched else ""
    diffs = np.array([right[k] - left[k] for k in keys], dtype=float)
    if len(keys) < 2:
        kind = REPEAT_KIND.get(setting, "repeat")
        mean = float(diffs.mean()) if len(keys) else nan
        return Paired(len(keys), mean, nan, nan, nan, f"{len(keys)} matched {kind}(s); a paired test needs 2{extra}")
    # equal up to float noise (accuracies are counts over at most millions of nodes, so real
    # differences are far above 1e-12): the t statistic would divide by rounding error
    if np.allclose(diffs, diffs[0], rtol=0.0, atol=1e-12):
        note = f"identical differences on every repeat; no test{extra}"
        return Paired(len(keys), float(diffs[0]), 0.0, nan, nan, note)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.ttest_rel([right[k] for k in keys], [left[k] for k in keys])
    return Paired(len(keys), float(diffs.mean()), float(diffs.std(ddof=1)), float(result.statistic),
                  float(result.pvalue), extra.lstrip("; "))


def _per_repeat(setting: str, row: pd.Series) -> dict:
    """``{repeat key: test accuracy}`` over the repeats that did not fail."""
    splits, seeds = list(row["repeat_split"]), list(row["repeat_seed"])
    by_seed = REPEAT_KIND.get(setting) == "seed"
    keys = seeds if by_seed else splits
    if len(set(keys)) != len(keys):  # e.g. one split with several seeds: the pair is the key
        keys = list(zip(splits, seeds))
    statuses, tests = list(row["repeat_status"]), list(row["repeat_test_acc"])
    return {k: float(t) for k, s, t in zip(keys, statuses, tests)
            if s != "failed" and t is not None and math.isfinite(t)}


def summary(winners: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """One row per pair (setting, dataset, backbone, depth): both arms' winners and the test.

    Columns per arm ``orig_*`` / ``ortho_*``: search, trial_id, val_acc, test_acc (mean over
    repeats), test_acc_std, repeats; then ``better`` (the arm with the higher mean test
    accuracy: a label on the table, not a choice), ``n_pairs``, ``diff_mean``, ``diff_std``,
    ``t``, ``p`` and ``note``.
    """
    cells = pd.concat([expected[list(CELL)], winners[list(CELL)]]).drop_duplicates()
    pairs = cells[list(PAIR)].drop_duplicates().sort_values(list(PAIR), kind="stable")
    lookup = {tuple(r[c] for c in CELL): r for _, r in winners.iterrows()}
    rows = []
    for pair in pairs.itertuples(index=False, name=None):
        setting, dataset, backbone, depth = pair
        key = (dataset, setting, backbone, depth)
        original, ortho = lookup.get((*key, False)), lookup.get((*key, True))
        test = paired(setting, original, ortho)
        rows.append({
            **dict(zip(PAIR, pair)),
            "repeat_kind": REPEAT_KIND.get(setting, "repeat"),
            **_arm_columns("orig", original),
            **_arm_columns("ortho", ortho),
            "better": _better(original, ortho),
            **vars(test),
        })
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


_ARM_FIELDS = ("search", "trial_id", "val_acc", "test_acc", "test_acc_std", "repeats")
SUMMARY_COLUMNS = [*PAIR, "repeat_kind",
                   *(f"orig_{f}" for f in _ARM_FIELDS), *(f"ortho_{f}" for f in _ARM_FIELDS),
                   "better", "n_pairs", "diff_mean", "diff_std", "t", "p", "note"]


def _arm_columns(prefix: str, row: pd.Series | None) -> dict:
    if row is None:
        return {f"{prefix}_{f}": None for f in _ARM_FIELDS}
    values = {f: row[f] for f in _ARM_FIELDS[:-1]}
    values["repeats"] = len(row["repeat_test_acc"])
    return {f"{prefix}_{k}": v for k, v in values.items()}


def _better(original: pd.Series | None, ortho: pd.Series | None) -> str | None:
    if original is None or ortho is None:
        return None
    a, b = float(original["test_acc"]), float(ortho["test_acc"])
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        return None
    return ORTHO if b > a else ORIGINAL


def t_effect(trials: pd.DataFrame) -> pd.DataFrame:
    """For each Ortho-GConv (setting, dataset, backbone, depth) and each T: the validation-best
    trial with that T (same tie rule), its test accuracy and seconds per epoch."""
    ortho = eligible(trials)
    ortho = ortho[ortho["ortho"] == True]  # noqa: E712 (a column comparison, not a truth test)
    if ortho.empty:
        return pd.DataFrame(columns=[*PAIR, "T", "test_acc", "test_acc_std", "seconds_per_epoch"])
    columns, ascending = zip(*TIE_RULE)
    ordered = ortho.sort_values(list(columns), ascending=list(ascending), na_position="last", kind="stable")
    best = ordered.groupby([*PAIR, "T"], sort=True).head(1)
    best = best[[*PAIR, "T", "test_acc", "test_acc_std", "seconds_per_epoch"]]
    return best.sort_values([*PAIR, "T"], kind="stable").reset_index(drop=True)
