"""The comparisons stage of a space with named arms (``spaces._arms``), beside the pairs':
each arm's validation-best winner per place (setting, dataset, variant), every comparison
its search declares tested repeat by repeat (difference: arm minus baseline; one Holm
family over every comparison, the default pairs' too where the report holds some:
``_family``), each with its tuning curve and the structure-agnostic
reference of its place (:func:`compare_arms`); and the paper's table of them
(:func:`arms_table`): arms as rows, datasets as columns, each cell marked by its verdict
against the arm the comparisons share as baseline.

The rows of named arms never enter the pairs' stages (``_load.split_named``), so a store that
holds both reads each as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from orthotune.core import OBJECTIVE, REFERENCE
from orthotune.reports._curve import PairCurve, pair_curves
from orthotune.reports._load import LEAD, NAMED_ARM_KEY, VARIANT, Loaded
from orthotune.reports._pair import REFERENCE_COLUMNS, REFERENCE_PLACE, arm_columns, reference_table
from orthotune.reports._select import TIE_RULE, complete_rows, plain_records, select_best
from orthotune.reports._stats import ALPHA, Paired, paired, sample_std, with_holm

#: Where a comparison is made: the arms of one search differ in backbone and depth.
PLACE = ("setting", "dataset", "variant_name")
#: What a comparison row shows of each arm's winner (``arm_*``, ``base_*``).
_WINNER = ("search", "trial_id", "backbone", "depth", OBJECTIVE, "test_acc", "test_acc_std", "repeats")
_REF = REFERENCE_COLUMNS[len(REFERENCE_PLACE):]
COMPARISON_COLUMNS = [*PLACE, "arm", "baseline", *(f"arm_{f}" for f in _WINNER), *(f"base_{f}" for f in _WINNER),
                      "n_pairs", "diff_mean", "ci_low", "ci_high", "t", "p", "p_holm", "mark", "verdict", "note",
                      "settled", *_REF]
#: A comparison's mark in words, as the table's cells carry it (Holm-adjusted, at ``ALPHA``).
MARKS = ("better", "worse", "not different", "no test")


@dataclass(frozen=True)
class ArmComparisons:
    """The stage's product: the arms in declaration order, their winners, one row per
    comparison and place (:data:`COMPARISON_COLUMNS`), each row's tuning curve (None: an arm
    without a winner), the arm every comparison has as baseline (None: no one arm), the
    references of the places and the default pairs in their Holm family (``_family``)."""

    arms: tuple[str, ...] = ()
    winners: pd.DataFrame = field(default_factory=pd.DataFrame)
    comparisons: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COMPARISON_COLUMNS))
    curves: tuple[PairCurve | None, ...] = ()
    target: str | None = None
    references: pd.DataFrame = field(default_factory=pd.DataFrame)
    pairs: int = 0  # the report's default pairs, adjusted in one Holm family with these comparisons

    @property
    def empty(self) -> bool:
        return not self.arms

    @property
    def family(self) -> int:
        """How many comparisons the Holm family holds: these and the default pairs beside them."""
        return len(self.comparisons) + self.pairs

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML-ready values (``best --json``): the arms, the target, every
        comparison's row with its tuning curve."""
        rows = plain_records(self.comparisons)
        for row, curve in zip(rows, self.curves):
            row["curve"] = curve.to_dict() if curve is not None else None
        return {"arms": list(self.arms), "target": self.target, "comparisons": rows}

    def lines(self) -> tuple[str, ...]:
        """One verdict line per comparison and place."""
        return tuple(verdict_line(row) for _, row in self.comparisons.iterrows())


def compare_arms(loaded: Loaded, reference_winners: pd.DataFrame) -> ArmComparisons:
    """The comparisons stage over the named arms' rows of ``loaded`` (none: an empty product)."""
    named = loaded.named
    if named.empty:
        return ArmComparisons()
    arms, declared = _declared(loaded.records, sorted(named["search"].unique()))
    winners = complete_rows(loaded.store, select_best(named))
    references = reference_table(reference_winners) if len(reference_winners) else pd.DataFrame()
    entries = []
    for place, group in winners.groupby(list(PLACE), sort=True):
        best = _best_per_arm(group)
        for arm, baseline in declared:
            if arm in best or baseline in best:
                entries.append((dict(zip(PLACE, place)), arm, baseline, best.get(arm), best.get(baseline)))
    tests = with_holm([paired(place["setting"], base, mine) for place, _, _, mine, base in entries])
    rows = [_row(place, arm, baseline, mine, base, test, references)
            for (place, arm, baseline, mine, base), test in zip(entries, tests)]
    frame = pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
    curves = _curves(named, frame)
    frame["settled"] = [c.settled.word if c is not None else "" for c in curves]
    baselines = {baseline for _, baseline in declared}
    target = next(iter(baselines)) if len(baselines) == 1 else None
    return ArmComparisons(tuple(arms), winners, frame, tuple(curves), target, references)


def _declared(records: Mapping[str, Any], searches: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The arms and comparisons the searches' records declare, in order, each once."""
    from orthotune.spaces import comparisons_of

    arms: dict[str, None] = {}
    comparisons: dict[tuple[str, str], None] = {}
    for name in searches:
        options = (records.get(name) or {}).get("options") or {}
        names, pairs = comparisons_of(options.get("space") if isinstance(options, Mapping) else None)
        arms.update(dict.fromkeys(names))
        comparisons.update(dict.fromkeys(pairs))
    return list(arms), list(comparisons)


def _best_per_arm(group: pd.DataFrame) -> dict[str, pd.Series]:
    """Each arm's winner at one place (the tie rule across its cells, should it have several)."""
    columns, ascending = zip(*TIE_RULE)
    ordered = group.sort_values(list(columns), ascending=list(ascending), na_position="last", kind="stable")
    return {str(arm): rows.iloc[0] for arm, rows in ordered.groupby(NAMED_ARM_KEY, sort=False)}


def mark(test: Paired) -> str:
    """The comparison in one word (:data:`MARKS`): significant after Holm, or not, or untested."""
    if not math.isfinite(test.p):
        return MARKS[3]
    adjusted = test.p_holm if math.isfinite(test.p_holm) else test.p
    if adjusted >= ALPHA or test.diff_mean == 0:
        return MARKS[2]
    return MARKS[0] if test.diff_mean > 0 else MARKS[1]


def _row(place: dict, arm: str, baseline: str, mine: pd.Series | None, base: pd.Series | None, test: Paired,
         references: pd.DataFrame) -> dict[str, Any]:
    ref = {c: None for c in _REF}
    if not references.empty:
        found = references[(references["setting"] == place["setting"]) & (references["dataset"] == place["dataset"])]
        ref = ref if found.empty else {c: found.iloc[0][c] for c in _REF}
    return {**place, "arm": arm, "baseline": baseline,
            **arm_columns("arm", mine, _WINNER), **arm_columns("base", base, _WINNER),
            **{f: getattr(test, f) for f in ("n_pairs", "diff_mean", "ci_low", "ci_high", "t", "p", "p_holm", "note")},
            "mark": mark(test), "verdict": test.verdict("better", "worse"), "settled": "", **ref}


def _curves(named: pd.DataFrame, frame: pd.DataFrame) -> list[PairCurve | None]:
    """Each comparison's tuning curve: the pairs' curve (``_curve``) with the baseline in the
    first arm's place and the arm in the second's, named by them."""
    if frame.empty:
        return []
    pseudo = pd.DataFrame({
        **{c: frame[c] for c in ("setting", "dataset")}, "backbone": frame["arm_backbone"],
        "depth": frame["arm_depth"], VARIANT: frame["variant_name"], "switches": "",
        "orig_search": frame["base_search"], "orig_trial_id": frame["base_trial_id"],
        "ortho_search": frame["arm_search"], "ortho_trial_id": frame["arm_trial_id"]})
    assert set(LEAD) <= set(pseudo.columns)
    curves = pair_curves(named, pseudo)
    out: list[PairCurve | None] = []
    for curve, (_, row) in zip(curves, frame.iterrows()):
        if curve is None:
            out.append(None)
            continue
        sizes = list(curve.trials_per_arm.values())
        out.append(replace(curve, pair={**curve.pair, "arm": row["arm"], "baseline": row["baseline"]},
                           label=comparison_label(row), trials_per_arm=dict(zip((row["baseline"], row["arm"]), sizes)),
                           late={}))
    return out


def comparison_label(row: Mapping[str, Any]) -> str:
    """``texas full (default): GCN against Ortho-GCNII``."""
    return f"{row['dataset']} {row['setting']} ({row['variant_name']}): {row['arm']} against {row['baseline']}"


def _acc(mean: Any, std: Any) -> str:
    if mean is None or not math.isfinite(float(mean)):
        return "no winner"
    std = float(std) if std is not None else math.nan
    return f"{100 * float(mean):.2f}" + (f" ± {100 * std:.2f}" if math.isfinite(std) else "")


def verdict_line(row: Mapping[str, Any]) -> str:
    """A comparison's verdict: the test in words (Holm over every comparison), both arms' test
    accuracy (selected on validation), the reference of its place and the curve's word."""
    ref = row.get("ref_test_acc")
    reference = (f"{REFERENCE.name} baseline {_acc(ref, row.get('ref_test_acc_std'))}"
                 if ref is not None and math.isfinite(float(ref)) else
                 f"no {REFERENCE.name} baseline for {row['dataset']} in the store")
    settled = f"; tuning curve: {row['settled']}" if row.get("settled") else ""
    mine = _acc(row["arm_test_acc"], row["arm_test_acc_std"])
    base = _acc(row["base_test_acc"], row["base_test_acc_std"])
    return (f"{comparison_label(row)}: {row['verdict']}; {row['arm']} {mine} vs {row['baseline']} {base} test %; "
            f"{reference}{settled}")


# -- the paper's table ---------------------------------------------------------------------

#: A cell of :func:`arms_table`: its text, whether it is its column's best, its mark.
Cell = tuple[str, bool, str]


def arms_table(result: ArmComparisons) -> list[tuple[str, list[str], list[tuple[str, list[Cell]]]]]:
    """Per setting and variant the paper's table: a row per arm (declaration order), then the
    reference's; a column per dataset; each cell the winner's test accuracy (mean ± std over its
    repeats, selected on validation), best of its column (highest mean, the reference's
    included) and its mark against :attr:`ArmComparisons.target` (empty: the target itself,
    the reference, or no one target)."""
    if result.empty or result.winners.empty:
        return []
    tables = []
    winners = result.winners
    for (setting, variant), group in winners.groupby(["setting", "variant_name"], sort=True):
        datasets = list(dict.fromkeys(group["dataset"]))
        values: dict[str, dict[str, tuple[float, float]]] = {}
        for dataset in datasets:
            best = _best_per_arm(group[group["dataset"] == dataset])
            for arm, row in best.items():
                values.setdefault(arm, {})[dataset] = (float(row["test_acc"]),
                                                       sample_std(row["repeat_test_acc"], row["repeat_status"]))
        ref_name = f"{REFERENCE.name} ({_ref_backbone(result.references)})"
        if not result.references.empty:
            for _, ref in result.references[result.references["setting"] == setting].iterrows():
                values.setdefault(ref_name, {})[ref["dataset"]] = (float(ref["ref_test_acc"]),
                                                                    float(ref["ref_test_acc_std"]))
        marks = {(r["arm"], r["dataset"]): r["mark"] for _, r in result.comparisons.iterrows()
                 if r["baseline"] == result.target and r["setting"] == setting and r["variant_name"] == variant}
        top = {d: max((v[d][0] for v in values.values() if d in v and math.isfinite(v[d][0])), default=math.nan)
               for d in datasets}
        rows = []
        for name in [*(a for a in result.arms if a in values), *(a for a in values if a not in result.arms)]:
            cells = []
            for dataset in datasets:
                mean, std = values[name].get(dataset, (math.nan, math.nan))
                text = _acc(mean, std) if math.isfinite(mean) else "—"
                cells.append((text, bool(np.isclose(mean, top[dataset])) if math.isfinite(mean) else False,
                              marks.get((name, dataset), "")))
            rows.append((name, cells))
        tables.append((f"{setting} ({variant})", datasets, rows))
    return tables


def _ref_backbone(references: pd.DataFrame) -> str:
    return ", ".join(sorted(set(references["ref_backbone"]))) if not references.empty else "none"


def table_note(result: ArmComparisons, symbols: Mapping[str, str]) -> str:
    """What the table's marks mean, with the format's ``symbols`` per mark."""
    against = result.target or "no one arm (the comparisons have several baselines)"
    legend = ", ".join(f"{symbols[m]} {m}" for m in MARKS[:3])
    pairs = f", {result.pairs} default pair(s) among them," if result.pairs else ""
    return (f"Test accuracy (%) of each arm's validation-best trial, mean ± std over its repeats; best of each "
            f"column in bold. Each cell is marked by its paired test against {against} after Holm over all "
            f"{result.family} comparisons{pairs} (α = {ALPHA}): {legend}. Test accuracy never chose a winner.")
