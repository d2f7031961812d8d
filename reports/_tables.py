"""The report's tables: the paper-style comparison, the paired test, the missing cells, the
winners' hyperparameters, the ablations, the effect of T and hyperparameter importance.

Cells and variants: a cell is (dataset, setting, backbone, depth, arm, variant switches); see
``CELL`` in ``_load``. Trials of different variants (a profile such as ``official``, an
ablation such as ``no-hybrid``, schema-v1 rows labelled ``v1``) never compete in one cell.

Pairing: the original arm of a (setting, dataset, backbone, depth) pairs with every
Ortho-GConv cell that agrees with it on the switches both arms read (``SHARED``: the
``variant`` label, conv_bias, batch_norm, feature_transform, jk, gcnii_variant, directed,
selection). ``layout`` is a training value, not a switch: arms whose winners differ in it
still pair, on depth (the number of graph convolutions). The Ortho-only switches (bound,
transform, hybrid, target, ...) do not exist for the original arm, so two Ortho-GConv cells
that differ only in them (say bound frobenius and covariance, both labelled ``default``)
each pair with the same original winner;
an Ortho-GConv variant whose label has no original cell (an ablation run without the
original arm) has no partner, and the ablation table compares it with the full model.

Paired test: the two winners of a pair are matched repeat by repeat on the repeat key (the
split for ``full``, the fold for ``cv10``, the seed for ``semi``/``official``); the
difference is Ortho-GConv minus original test accuracy, tested with the paired t-test of
``scipy.stats.ttest_rel`` (two-sided; computed as it computes it, with Student's t from
``scipy.special``, whose import takes a tenth of ``scipy.stats``'), with the 95% confidence
interval of the mean difference (Student's t with n - 1 degrees of freedom). The t-test rather than Wilcoxon's
signed-rank test because the paper's protocol has 5 or 10 repeats, where the exact
signed-rank test cannot go below p = 0.0625 (n = 5) and so could never call a 5-split gain
real.

Many cells, many tests: the summary's p-values are one family, corrected with Holm's
step-down method (:func:`holm`; it controls the family-wise error rate under any dependence
between the cells), and a verdict is significant when its Holm-adjusted p is below
:data:`ALPHA`; the raw p is reported beside it. The ablation table is a family of its own.
Spreads are sample standard deviations (ddof = 1), as the papers' mean +- std: a cell's
test accuracy std is recomputed from its repeats, whatever the store's column holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from orthotune.core import (
    ARMS,
    OBJECTIVE,
    REFERENCE,
    SETTINGS,
    Group,
    TrainConfig,
    arm_of,
    by_group,
    column_name,
    reads,
)
from orthotune.reports._load import (
    ARM,
    ARM_COLUMN,
    CELL,
    COLUMNS,
    INTEGERS,
    KINDS,
    LEAD,
    ORIGINAL,
    ORTHO,
    PAIR,
    PLACE,
    SECTIONS,
    SPLIT_RULE,
    VARIANT,
)
from orthotune.reports._select import TIE_RULE, eligible
from orthotune.reports._verdict import FEW_TRIALS

TEST_NAME = "paired t-test (scipy.stats.ttest_rel, two-sided)"
#: The significance level of the verdicts in words.
ALPHA = 0.05
#: The columns a pair row is shown by (``PAIR`` with the variant's name for its switches).
ROW = (*LEAD, VARIANT)
#: Every hyperparameter a trial has: Ortho-GConv's searched values and the training values
#: (store column names; ``max_epochs`` is the config's ``epochs``) but a cell coordinate's.
HYPERPARAMETERS = tuple(name for name in (column_name(f) for f in by_group(TrainConfig, Group.ORTHO, Group.TRAIN))
                        if name not in PLACE)
#: Ablation references, in order of preference: the variant the others are compared with.
REFERENCES = ("full", "default")


def repeat_noun(setting: str) -> str:
    """What one repeat of ``setting`` is (``SettingInfo.repeat``: how the report labels it),
    or ``repeat`` for a setting this version does not know."""
    return SETTINGS.get(setting).repeat if setting in SETTINGS.names() else "repeat"


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


@dataclass(frozen=True)
class Paired:
    """The paired comparison of one cell's two winners: the mean difference, its sample std
    (ddof = 1) and 95% confidence interval, the t statistic, the raw p-value and the
    Holm-adjusted one (the raw p until :func:`with_holm` adjusts a family)."""

    n_pairs: int
    diff_mean: float
    diff_std: float
    t: float
    p: float
    note: str
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_holm: float = math.nan

    def verdict(self, gain: str = "gain", loss: str = "reversed") -> str:
        """The result in words, whatever the sign: ``gain`` or ``loss`` (Ortho-GConv better or
        worse than the original; for ablations, the variant better or worse than the full
        model), significant when the Holm-adjusted p is below :data:`ALPHA`, with the
        difference, its 95% CI, the raw p and the adjusted one."""
        if not math.isfinite(self.p):
            if math.isfinite(self.diff_mean):
                return f"no test ({self.note or 'no p-value'}); mean {gain} {100 * self.diff_mean:+.2f} pts"
            return f"no test ({self.note})"
        adjusted = self.p_holm if math.isfinite(self.p_holm) else self.p
        word = gain if self.diff_mean > 0 else loss if self.diff_mean < 0 else "no difference"
        significance = "significant" if adjusted < ALPHA else "not significant"
        ci = (f", 95% CI [{100 * self.ci_low:+.2f}, {100 * self.ci_high:+.2f}]"
              if math.isfinite(self.ci_low) and math.isfinite(self.ci_high) else "")
        holm_p = f", Holm p = {self.p_holm:.3g}" if math.isfinite(self.p_holm) else ""
        return f"{word} {significance} ({100 * self.diff_mean:+.2f} pts{ci}, p = {self.p:.3g}{holm_p})"


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (NaN ones are left out of the
    family and stay NaN): sorted ascending, ``p_(i)`` becomes ``max_{j <= i} min(1,
    (m - j + 1) p_(j))`` with ``m`` the number of finite p-values."""
    finite = sorted((p, i) for i, p in enumerate(pvalues) if math.isfinite(p))
    adjusted = [math.nan] * len(pvalues)
    running, m = 0.0, len(finite)
    for rank, (p, index) in enumerate(finite):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted


def with_holm(tests: Sequence[Paired | None]) -> list[Paired | None]:
    """The tests of one family with their Holm-adjusted p-values (None entries stay None)."""
    adjusted = holm([t.p if t is not None else math.nan for t in tests])
    return [None if t is None else replace(t, p_holm=a) for t, a in zip(tests, adjusted)]


def confidence_interval(diffs: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The ``level`` confidence interval of the mean of ``diffs`` (Student's t, n - 1 df)."""
    from scipy import special  # here, not at import: `orthotune best` needs no SciPy

    n = len(diffs)
    half = float(special.stdtrit(n - 1, 0.5 + level / 2)) * float(diffs.std(ddof=1)) / math.sqrt(n)
    mean = float(diffs.mean())
    return mean - half, mean + half


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
        kind = repeat_noun(setting)
        mean = float(diffs.mean()) if len(keys) else nan
        return Paired(len(keys), mean, nan, nan, nan, f"{len(keys)} matched {kind}(s); a paired test needs 2{extra}")
    # equal up to float noise (accuracies are counts over at most millions of nodes, so real
    # differences are far above 1e-12): the t statistic would divide by rounding error
    if np.allclose(diffs, diffs[0], rtol=0.0, atol=1e-12):
        note = f"identical differences on every repeat; no test{extra}"
        return Paired(len(keys), float(diffs[0]), 0.0, nan, nan, note)
    t, p = paired_t_test(diffs)
    low, high = confidence_interval(diffs)
    return Paired(len(keys), float(diffs.mean()), float(diffs.std(ddof=1)), t, p, extra.lstrip("; "), low, high, p)


def paired_t_test(diffs: np.ndarray) -> tuple[float, float]:
    """The t statistic and two-sided p-value of the paired differences ``diffs`` (n >= 2): the
    same operations as ``scipy.stats.ttest_rel`` (the mean over the standard error from the
    second central moment, p from Student's t with n - 1 df), so the same bits, without
    importing ``scipy.stats`` (about a second of `orthotune best`)."""
    from scipy import special  # here, not at import: `orthotune best` needs no SciPy

    n, mean = len(diffs), diffs.mean()
    variance = np.mean((diffs - mean) ** 2) * (n / (n - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / np.sqrt(variance / n)
    return float(t), float(2 * special.stdtr(n - 1, -abs(t)))


def _per_repeat(setting: str, row: pd.Series) -> dict:
    """``{repeat key: test accuracy}`` over the repeats that did not fail."""
    splits, seeds = list(row["repeat_split"]), list(row["repeat_seed"])
    by_seed = setting in SETTINGS.names() and SETTINGS.get(setting).repeats_field == "seeds"
    keys = seeds if by_seed else splits
    if len(set(keys)) != len(keys):  # e.g. one split with several seeds: the pair is the key
        keys = list(zip(splits, seeds))
    statuses, tests = list(row["repeat_status"]), list(row["repeat_test_acc"])
    return {k: float(t) for k, s, t in zip(keys, statuses, tests)
            if s != "failed" and t is not None and math.isfinite(t)}


# -- the structure-agnostic reference ---------------------------------------------------

#: Where a reference stands: per setting, dataset and split rule (``core.REFERENCE``).
REFERENCE_PLACE = ("setting", "dataset", SPLIT_RULE)
_REF_FIELDS = ("search", "trial_id", "backbone", OBJECTIVE, "test_acc", "test_acc_std", "ci_low", "ci_high", "repeats")
REFERENCE_COLUMNS = [*REFERENCE_PLACE, *(f"{REFERENCE.prefix}_{f}" for f in _REF_FIELDS)]


def reference_table(reference_winners: pd.DataFrame) -> pd.DataFrame:
    """The validation-best reference trial of each (setting, dataset, split rule) (from
    ``select_best`` over the reference's rows; the tie rule picks among searches too), with its
    test accuracy's mean, sample std and 95% confidence interval over its repeats (Student's
    t, n - 1 df, failed repeats left out)."""
    rows = []
    columns, ascending = zip(*TIE_RULE)
    ordered = reference_winners.sort_values(list(columns), ascending=list(ascending), na_position="last",
                                            kind="stable")
    for _, row in ordered.groupby(list(REFERENCE_PLACE), sort=True).head(1).iterrows():
        tests = [float(t) for t, status in zip(row["repeat_test_acc"], row["repeat_status"])
                 if status != "failed" and t is not None and math.isfinite(t)]
        low, high = confidence_interval(np.array(tests)) if len(tests) >= 2 else (math.nan, math.nan)
        values = {"search": row["search"], "trial_id": row["trial_id"], "backbone": row["backbone"],
                  OBJECTIVE: row[OBJECTIVE], "test_acc": float(np.mean(tests)) if tests else math.nan,
                  "test_acc_std": sample_std(tests), "ci_low": low, "ci_high": high,
                  "repeats": len(row["repeat_test_acc"])}
        rows.append({**{c: row[c] for c in REFERENCE_PLACE},
                     **{f"{REFERENCE.prefix}_{k}": v for k, v in values.items()}})
    return pd.DataFrame(rows, columns=REFERENCE_COLUMNS)


def _reference_of(cell: pd.Series, original: pd.Series | None, ortho: pd.Series | None,
                  references: pd.DataFrame) -> dict:
    """The reference columns of a pair: its setting's and dataset's reference, of the split rule
    its winners trained on (any of its place's where it has no winner)."""
    empty = {c: None for c in REFERENCE_COLUMNS[len(REFERENCE_PLACE):]}
    if references.empty:
        return empty
    mine = references[(references["setting"] == cell["setting"]) & (references["dataset"] == cell["dataset"])]
    rule = next((r[SPLIT_RULE] for r in (original, ortho) if r is not None), None)
    if rule is not None and (mine[SPLIT_RULE] == rule).any():
        mine = mine[mine[SPLIT_RULE] == rule]
    return empty if mine.empty else {c: mine.iloc[0][c] for c in empty}


def summary(winners: pd.DataFrame, expected: pd.DataFrame, references: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per pair: an Ortho-GConv cell with its original partner (see the module doc),
    or an original cell no Ortho-GConv cell pairs with.

    Columns per arm ``orig_*`` / ``ortho_*``: search, trial_id, val_acc, test_acc (mean over
    repeats), test_acc_std, repeats; then ``better`` (the arm with the higher mean test
    accuracy: a label on the table, not a choice), ``n_pairs``, ``diff_mean``, ``diff_std``,
    ``t``, ``p``, ``verdict`` (in words) and ``note``; then the structure-agnostic reference of
    its setting, dataset and split rule (``ref_*``: :func:`reference_table`'s columns; empty
    where the store has none).
    """
    references = references if references is not None else pd.DataFrame(columns=REFERENCE_COLUMNS)
    columns = [*CELL, "variant_name", "shared"]
    cells = pd.concat([expected[columns], winners[columns]]).drop_duplicates(subset=list(CELL))
    lookup = {tuple(r[c] for c in CELL): r for _, r in winners.iterrows()}
    originals = {tuple(r[c] for c in PAIR): r for _, r in cells[~cells[ARM_COLUMN].astype(bool)].iterrows()}
    paired_keys: set[tuple] = set()
    pairs = []
    for _, cell in cells[cells[ARM_COLUMN].astype(bool)].iterrows():
        pair = tuple(cell[c] for c in PAIR)
        partner = originals.get(pair)
        paired_keys.add(pair)
        original = None if partner is None else lookup.get(tuple(partner[c] for c in CELL))
        pairs.append((cell, original, lookup.get(tuple(cell[c] for c in CELL))))
    for pair, cell in originals.items():
        if pair not in paired_keys:
            pairs.append((cell, lookup.get(tuple(cell[c] for c in CELL)), None))
    # the report's pairs are one family of tests: Holm-adjust their p-values together
    tests = with_holm([paired(cell["setting"], original, ortho) for cell, original, ortho in pairs])
    rows = [{**_summary_row(cell, original, ortho, test), **_reference_of(cell, original, ortho, references)}
            for (cell, original, ortho), test in zip(pairs, tests)]
    frame = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    frame = frame.sort_values(list(ROW), kind="stable")
    repeats = [f"{arm.prefix}_repeats" for arm in (*ARMS, REFERENCE)]
    return _integers(frame.reset_index(drop=True), [*INTEGERS, *repeats, "n_pairs"])


def _summary_row(cell: pd.Series, original: pd.Series | None, ortho: pd.Series | None, test: Paired) -> dict:
    return {
        **{c: cell[c] for c in LEAD},
        VARIANT: cell["variant_name"], "switches": cell["switches"],
        "repeat_kind": repeat_noun(cell["setting"]),
        **_arm_columns(ARMS[0].prefix, original),
        **_arm_columns(ARMS[1].prefix, ortho),
        "better": _better(original, ortho),
        **vars(test),
        "verdict": test.verdict(),
    }


_ARM_FIELDS = ("search", "trial_id", OBJECTIVE, "test_acc", "test_acc_std", "repeats")
SUMMARY_COLUMNS = [*ROW, "switches", "repeat_kind",
                   *(f"{arm.prefix}_{f}" for arm in ARMS for f in _ARM_FIELDS),
                   "better", "n_pairs", "diff_mean", "diff_std", "ci_low", "ci_high", "t", "p", "p_holm", "verdict",
                   "note", *REFERENCE_COLUMNS[len(REFERENCE_PLACE):]]


def _integers(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Counts stay integers when some are missing (pandas would make them floats: ``5.0``)."""
    for column in columns:
        frame[column] = pd.array([None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
                                  for v in frame[column]], dtype="Int64")
    return frame


def _arm_columns(prefix: str, row: pd.Series | None) -> dict:
    if row is None:
        return {f"{prefix}_{f}": None for f in _ARM_FIELDS}
    values = {f: row[f] for f in _ARM_FIELDS[:-1]}
    values["test_acc_std"] = sample_std(row["repeat_test_acc"], row["repeat_status"])
    values["repeats"] = len(row["repeat_test_acc"])
    return {f"{prefix}_{k}": v for k, v in values.items()}


def sample_std(values: object, statuses: object = None) -> float:
    """The sample std (ddof = 1) of a trial's per-repeat values, failed repeats left out; NaN
    below two values. Recomputed here: stores before schema 3 hold the population std."""
    statuses = list(statuses) if statuses is not None else [None] * len(list(values))
    kept = [float(v) for v, s in zip(values, statuses) if s != "failed" and v is not None and math.isfinite(v)]
    return float(np.std(kept, ddof=1)) if len(kept) >= 2 else math.nan


def _better(original: pd.Series | None, ortho: pd.Series | None) -> str | None:
    if original is None or ortho is None:
        return None
    a, b = float(original["test_acc"]), float(ortho["test_acc"])
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        return None
    return ORTHO if b > a else ORIGINAL


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
    return _integers(frame.astype(object).where(frame.notna(), None), ints)


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


# -- ablations -----------------------------------------------------------------------------

ABLATION_COLUMNS = [*ROW, "reference", "search", "trial_id",
                    OBJECTIVE, "test_acc", "test_acc_std", "n_pairs", "diff_mean", "ci_low", "ci_high", "p", "p_holm",
                    "verdict"]


def ablation(winners: pd.DataFrame) -> pd.DataFrame:
    """Ortho-GConv variants of one (setting, dataset, backbone, depth) side by side: each
    against the reference variant (``full``, else ``default``, else the first label), paired
    repeat by repeat like the arms (difference: variant minus reference). Only where a cell
    has two or more Ortho-GConv variants."""
    ortho = winners[winners[ARM_COLUMN].astype(bool)]
    entries = []
    for key, group in ortho.groupby(list(LEAD), sort=True):
        if group["variant_name"].nunique() < 2:
            continue
        names = list(group["variant_name"])
        reference = next((n for n in REFERENCES if n in names), sorted(names)[0])
        base = group[group["variant_name"] == reference].iloc[0]
        for _, row in group.sort_values("variant_name").iterrows():
            test = paired(row["setting"], base, row) if row["variant_name"] != reference else None
            entries.append((key, reference, row, test))
    tests = with_holm([test for *_, test in entries])  # the ablation table: a family of its own
    rows = []
    for (key, reference, row, _), test in zip(entries, tests):
        rows.append({
            **dict(zip(LEAD, key)),
            VARIANT: row["variant_name"], "reference": reference,
            **{c: row[c] for c in ("search", "trial_id", OBJECTIVE, "test_acc")},
            "test_acc_std": sample_std(row["repeat_test_acc"], row["repeat_status"]),
            **{f: getattr(test, f) if test else None for f in ("n_pairs", "diff_mean", "ci_low", "ci_high", "p",
                                                                 "p_holm")},
            "verdict": test.verdict("better", "worse") if test else "reference",
        })
    return _integers(pd.DataFrame(rows, columns=ABLATION_COLUMNS), [*INTEGERS, "n_pairs"])


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
    return _integers(best.reset_index(drop=True), [*INTEGERS, "T"])


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
    return _integers(pd.DataFrame(rows, columns=IMPORTANCE_COLUMNS), [*INTEGERS, "trials", "fitted"])


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
