"""The pair-and-test stage, the report's third: each Ortho-GConv winner beside its original
partner and the structure-agnostic reference of its place, tested (:func:`pair_and_test`,
whose :class:`Pairs` the curve stage takes); the ablations, each Ortho-GConv variant against
the full model, tested the same way (the test itself: ``_stats``).

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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from orthotune.core import ARMS, OBJECTIVE, REFERENCE, cell_label
from orthotune.reports._load import (
    ARM_COLUMN,
    CELL,
    INTEGERS,
    LEAD,
    ORIGINAL,
    ORTHO,
    PAIR,
    PLACE,
    ROW,
    SPLIT_RULE,
    VARIANT,
    keep_integers,
)
from orthotune.reports._select import TIE_RULE, Selection
from orthotune.reports._stats import Paired, confidence_interval, paired, repeat_noun, sample_std, with_holm

#: Ablation references, in order of preference: the variant the others are compared with.
REFERENCES = ("full", "default")


@dataclass(frozen=True)
class Pairs:
    """The pair-and-test stage's product: one row per pair (:func:`summary`), the reference of
    each setting, dataset and split rule (:func:`reference_table`) and the ablations
    (:func:`ablation`)."""

    summary: pd.DataFrame
    references: pd.DataFrame
    ablation: pd.DataFrame


def pair_and_test(selection: Selection) -> Pairs:
    """The pair-and-test stage: the reference of each place from its winners, every pair's
    test beside it (one Holm family), and the ablations (a family of their own)."""
    references = reference_table(selection.reference_winners)
    return Pairs(summary(selection.winners, selection.expected, references), references,
                 ablation(selection.winners))


def pair_label(row: Mapping[str, Any]) -> str:
    """``cora full gcn depth 2 (default)``: the pair a summary row is about."""
    return " ".join(cell_label(name, row[name]) for name in PLACE) + f" ({row[VARIANT]})"


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
    return keep_integers(frame.reset_index(drop=True), [*INTEGERS, *repeats, "n_pairs"])


def _summary_row(cell: pd.Series, original: pd.Series | None, ortho: pd.Series | None, test: Paired) -> dict:
    return {
        **{c: cell[c] for c in LEAD},
        VARIANT: cell["variant_name"], "switches": cell["switches"],
        "repeat_kind": repeat_noun(cell["setting"]),
        **arm_columns(ARMS[0].prefix, original),
        **arm_columns(ARMS[1].prefix, ortho),
        "better": _better(original, ortho),
        **vars(test),
        "verdict": test.verdict(),
    }


_ARM_FIELDS = ("search", "trial_id", OBJECTIVE, "test_acc", "test_acc_std", "repeats")
SUMMARY_COLUMNS = [*ROW, "switches", "repeat_kind",
                   *(f"{arm.prefix}_{f}" for arm in ARMS for f in _ARM_FIELDS),
                   "better", "n_pairs", "diff_mean", "diff_std", "ci_low", "ci_high", "t", "p", "p_holm", "verdict",
                   "note", *REFERENCE_COLUMNS[len(REFERENCE_PLACE):]]


def arm_columns(prefix: str, row: pd.Series | None, fields: tuple[str, ...] = _ARM_FIELDS) -> dict:
    """A winner's ``fields`` as ``PREFIX_field`` columns, its test std (ddof = 1) and repeats
    recomputed from its repeats (``fields`` end with ``test_acc_std`` and ``repeats``)."""
    if row is None:
        return {f"{prefix}_{f}": None for f in fields}
    values = {f: row[f] for f in fields[:-2]}
    values["test_acc_std"] = sample_std(row["repeat_test_acc"], row["repeat_status"])
    values["repeats"] = len(row["repeat_test_acc"])
    return {f"{prefix}_{k}": v for k, v in values.items()}


def _better(original: pd.Series | None, ortho: pd.Series | None) -> str | None:
    if original is None or ortho is None:
        return None
    a, b = float(original["test_acc"]), float(ortho["test_acc"])
    if not (math.isfinite(a) and math.isfinite(b)) or a == b:
        return None
    return ORTHO if b > a else ORIGINAL


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
    return keep_integers(pd.DataFrame(rows, columns=ABLATION_COLUMNS), [*INTEGERS, "n_pairs"])
