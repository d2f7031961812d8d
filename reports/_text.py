"""The report's text before any markup, laid out the same by every format: the heading, the
paper tables' grids, each table's header, rows (plain strings) and note. The formats
(``_markdown``, ``_latex``, ``_html``) only mark these up; numbers are printed here, once.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from orthotune.core import ARMS, OBJECTIVE, REFERENCE, SETTINGS, cell_label
from orthotune.reports._curve import SETTLED_RULE
from orthotune.reports._hyperparameters import IMPORTANCE_SEED, IMPORTANCE_TRIALS
from orthotune.reports._load import ARM, COLUMNS, LEAD, ROWS, VARIANT
from orthotune.reports._report import Report
from orthotune.reports._verdict import FEW_TRIALS, reference_place

#: The paper tables' one column coordinate (depth): a column pair (the arms) per value.
(COLUMN,) = COLUMNS

#: ``{figure name: link}`` for figures written beside the report; ``None`` when there are none.
Links = dict[str, str] | None


def _pct(value: object) -> str:
    return f"{100 * float(value):.2f}" if _finite(value) else "—"


def _finite(value: object) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _acc(row: pd.Series, prefix: str, pm: str = " ± ") -> str | None:
    mean, std = row[f"{prefix}_test_acc"], row[f"{prefix}_test_acc_std"]
    return f"{_pct(mean)}{pm}{_pct(std)}" if _finite(mean) else None


def _p(value: object) -> str:
    return f"{float(value):.3g}" if _finite(value) else "—"


def _signed(value: object) -> str:
    return f"{100 * float(value):+.2f}" if _finite(value) else "—"


def _plain(value: object, digits: str = ".3g") -> str:
    return format(float(value), digits) if _finite(value) else "—"


def number(value: object) -> str:
    """A value as its decimal (0.7, not 0.7000000000000001; 5, not 5.0); missing as —."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.12g}"
    return str(value)


def paper_grid(report: Report, setting: str, variant: str | None = None,
               ) -> tuple[list[int], list[tuple[tuple[str, ...], list[tuple[str | None, bool]]]]]:
    """The paper-style table of one setting (and variant): its depths, and per row (the row
    coordinates' values: dataset, backbone) the cells in depth x arm order as ``(text or None,
    better)``."""
    rows = report.summary[report.summary["setting"] == setting]
    if variant is not None:
        rows = rows[rows[VARIANT] == variant]
    depths = sorted(int(d) for d in rows[COLUMN].unique())
    out = []
    for names, group in rows.groupby(list(ROWS), sort=True):
        by_depth = {int(r[COLUMN]): r for _, r in group.iterrows()}
        cells = []
        for depth in depths:
            row = by_depth.get(depth)
            for arm in ARMS:
                if row is None:
                    cells.append((None, False))
                else:
                    cells.append((_acc(row, arm.prefix), row["better"] == arm.name))
        out.append((tuple(names), cells))
    return depths, out


def paper_header(depths: list[int]) -> list[str]:
    """The paper table's header: the row coordinates, then ``depth D ARM`` per column."""
    return [*ROWS] + [f"{cell_label(COLUMN, d)} {arm.name}" for d in depths for arm in ARMS]


def setting_title(setting: str) -> str:
    """How the report titles ``setting`` (its name, for a setting this version does not know)."""
    return SETTINGS.get(setting).title if setting in SETTINGS.names() else setting


def settings(report: Report) -> list[str]:
    return sorted(report.summary["setting"].unique())


def sections(report: Report) -> list[tuple[str, str | None, str]]:
    """The paper tables: ``(setting, variant or None, title)``, one per setting and variant."""
    variants = sorted(report.summary[VARIANT].dropna().unique())
    out = []
    for setting in settings(report):
        title = f"Test accuracy (%, mean ± std with ddof = 1), {setting_title(setting)}"
        if len(variants) <= 1:
            out.append((setting, None, title))
            continue
        mine = report.summary[report.summary["setting"] == setting]
        out += [(setting, v, f"{title}, variant {v}") for v in sorted(mine[VARIANT].dropna().unique())]
    return out


def heading(report: Report) -> list[str]:
    failed = f" ({report.failed} failed)" if report.failed else ""
    return [
        f"Store: {report.store}",
        f"Searches: {', '.join(report.searches) or 'none'}; trials: {report.trials}{failed}; "
        f"filters: {report.filters.describe()}; generated {report.generated_at:%Y-%m-%d %H:%M} UTC.",
        f"Selection per cell (dataset, setting, backbone, depth, arm, variant switches): {report.selection_rule}",
    ]


def pair_rows(report: Report) -> list[list[str]]:
    return [
        [*_lead(r), r[VARIANT], r["repeat_kind"],
         number(r["n_pairs"]), trials_per_arm(r), _signed(r["diff_mean"]), _signed(r["diff_std"]).lstrip("+"), _ci(r),
         _plain(r["t"]), _p(r["p"]), _p(r["p_holm"]), _acc(r, REFERENCE.prefix) or "—", reference_place(r),
         r["verdict"], r.get("settled") or "", r["note"] or ""]
        for _, r in report.summary.iterrows()
    ]


def trials_per_arm(row: pd.Series) -> str:
    """Each arm's trials: ``n``, or with an adaptive budget ``k of M`` at its stop (``k of M,
    open`` while it runs; ``_stops.with_budgets``)."""
    n, stop, most = row.get("trials_per_arm"), row.get("stop"), row.get("maximum")
    if not _finite(n):
        return "—"
    if row.get("budget") != "adaptive":
        return number(n)
    return f"{number(stop)} of {number(most)}" if _finite(stop) else f"{number(n)} of {number(most)}, open"


def _ci(row: pd.Series) -> str:
    """The 95% confidence interval of the mean difference, in points."""
    if not (_finite(row["ci_low"]) and _finite(row["ci_high"])):
        return "—"
    return f"[{_signed(row['ci_low'])}, {_signed(row['ci_high'])}]"


def _lead(row: pd.Series) -> list[str]:
    """A row's leading columns: its place in the report's order (setting, dataset, backbone, depth)."""
    return [number(row[c]) for c in LEAD]


PAIR_HEADER = [*LEAD, VARIANT, "repeat", "pairs", "trials per arm", "Δ mean (pts)",
               "Δ std (pts, ddof 1)", "Δ 95% CI (pts)", "t", "p", "p (Holm)", "structure-agnostic (test %)",
               "arms vs structure-agnostic", "verdict", "tuning curve", "note"]
#: Leading columns of each table that hold names (left-aligned in html).
PAIR_NAMES = len(LEAD) + 2
#: The pair table's columns of words (left-aligned in html): the arms against the
#: structure-agnostic baseline, the verdict, the tuning curve, the note.
PAIR_WORDS = {PAIR_HEADER.index(c) for c in ("verdict", "tuning curve", "arms vs structure-agnostic", "note")}
ACC_NOTE = ("Test accuracy (%) of each cell's validation-selected config: mean ± std (sample std, ddof = 1) over its "
            "repeats. Bold: the better of the pair (higher mean test accuracy; a label, not a selection). "
            "—: no winner (see Missing cells).")


def pair_note(report: Report) -> str:
    return (f"Δ = Ortho-GConv − original test accuracy, matched repeat by repeat ({_repeat_nouns()}), in "
            f"percentage points (Δ std: sample std of the per-repeat "
            f"differences, ddof = 1; 95% CI: Student's t on the mean difference); {report.test_name}. "
            f"p is each pair's own; p (Holm) is adjusted over {_pair_family(report)}. "
            f"Verdict: significant when the Holm-adjusted p < {report.alpha:g}; 'reversed' when "
            f"Ortho-GConv is worse. "
            f"Few repeats make p-values coarse: read them with the number of pairs. The original arm pairs "
            f"with each Ortho-GConv variant sharing its variant label and common switches. Tuning curve: the "
            f"gain of the winners among each arm's first k trials, k = 1..n (figures below). {SETTLED_RULE} "
            f"Structure-agnostic: the validation-best model of the pair's dataset, setting and split rule that "
            f"never reads an edge (an MLP on the node features; graph tasks: node features summed per graph, "
            f"then an MLP), test accuracy mean ± std over its repeats; an arm is below or above it when its mean "
            f"test accuracy lies outside the baseline's 95% CI (Student's t over its repeats).")


def _pair_family(report: Report) -> str:
    """The pairs' Holm family in words: the report's pairs, with its named arms' comparisons if any."""
    named = len(report.arms.comparisons) if report.arms.pairs else 0
    if not named:
        return "all the report's pairs (Holm's step-down, one family)"
    return (f"every comparison of the report, its {report.arms.pairs} pair(s) and {named} comparison(s) of "
            f"named arms (Holm's step-down, one family of {report.arms.family})")


def _repeat_nouns() -> str:
    """``split for full, seed for semi/official, ...``: each setting's repeat."""
    by_noun: dict[str, list[str]] = {}
    for name in SETTINGS:
        by_noun.setdefault(SETTINGS.get(name).repeat, []).append(name)
    return ", ".join(f"{noun} for {'/'.join(names)}" for noun, names in by_noun.items())


def missing_rows(report: Report) -> list[list[str]]:
    return [[*_lead(r), r[VARIANT], r[ARM], r["reason"]] for _, r in report.missing.iterrows()]


MISSING_HEADER = [*LEAD, VARIANT, ARM, "why"]


def _winner_columns(report: Report) -> list[str]:
    """The winners table's columns: hyperparameters that some winner has (the original arm has no T)."""
    frame = report.hyperparameters
    return [c for c in frame.columns if c not in ("search", "trial_id") and frame[c].notna().any()]


def _winner_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    columns = _winner_columns(report)
    rows = [[_pct(r[c]) if c in (OBJECTIVE, "test_acc") else number(r[c]) for c in columns]
            for _, r in report.hyperparameters.iterrows()]
    return columns, rows


WINNERS_NOTE = ("Every hyperparameter of each cell's winner; selection: the validation metric that picks "
                "each repeat's epoch (test is read there); status 'stopped': cut by ASHA (it competed on the "
                "validation accuracy it had reached); epochs: trained (most over the repeats); best_epoch: "
                "the selected epoch; val_acc/test_acc: mean over the repeats (%).")


def _ablation_rows(report: Report) -> list[list[str]]:
    return [[*_lead(r), r[VARIANT], r["reference"],
             _acc_pm(r), _signed(r["diff_mean"]), _ci(r), number(r["n_pairs"]), _p(r["p"]), _p(r["p_holm"]),
             r["verdict"]]
            for _, r in report.ablation.iterrows()]


ABLATION_HEADER = [*LEAD, VARIANT, "reference", "test acc (%, std ddof 1)",
                   "Δ vs reference (pts)", "Δ 95% CI (pts)", "pairs", "p", "p (Holm)", "verdict"]
ABLATION_NOTE = ("Ortho-GConv variants of the same cell, each the validation-selected winner of its own "
                 "search; Δ = variant − reference, matched repeat by repeat (paired t-test); p (Holm): "
                 "adjusted over this table's comparisons; verdict: the variant better or worse than the "
                 "reference, significant when the Holm-adjusted p < 0.05 (a significant "
                 "'worse' means the removed component helps).")


def _acc_pm(row: pd.Series) -> str:
    return f"{_pct(row['test_acc'])} ± {_pct(row['test_acc_std'])}"


def _importance_rows(report: Report) -> list[list[str]]:
    return [[*_lead(r), r[ARM], r[VARIANT], _fitted(r["fitted"], r["trials"]),
             ("few trials, indicative only: " if r["few"] else "") + r["importance"]]
            for _, r in report.importance.iterrows()]


def _fitted(fitted: int, trials: int) -> str:
    return number(trials) if fitted == trials else f"{number(fitted)} of {number(trials)}"


def _importance_note(report: Report) -> str:
    """:data:`IMPORTANCE_NOTE`, and where a cell held more trials than the forest is fitted on,
    how its sample was drawn."""
    if not (report.importance["fitted"] < report.importance["trials"]).any():
        return IMPORTANCE_NOTE
    return (f"{IMPORTANCE_NOTE} A cell of more than {number(IMPORTANCE_TRIALS)} trials has its forest fitted "
            f"on {number(IMPORTANCE_TRIALS)} of them drawn at random (seed {IMPORTANCE_SEED}) from that canonical "
            "order (trials: fitted of all).")


IMPORTANCE_HEADER = [*LEAD, ARM, VARIANT, "trials", "importance"]
IMPORTANCE_NOTE = ("Optuna's fANOVA importance (optuna.importance, 32 trees, seed 0) of each searched "
                   "hyperparameter for the objective over the cell's trials, given in a canonical order "
                   "(the same trials give the same shares); shares sum to 1. Cells with fewer than 3 trials, "
                   f"nothing searched or a constant objective are left out; below {FEW_TRIALS} trials the "
                   "shares are marked indicative: the forest splits the variance of a handful of points, most "
                   "of them TPE's random start-up proposals.")


COMPARISON_HEADER = ["setting", "dataset", "variant", "arm", "baseline", "arm test %", "baseline test %", "n",
                     "Δ mean (pts)", "95% CI (pts)", "p", "p (Holm)", "verdict", "tuning curve"]
COMPARISON_NOTE = ("One paired test per comparison the search declares and dataset (arm − baseline test accuracy, "
                   "matched repeat by repeat, each arm's winner selected on validation); Holm over every comparison.")


def comparison_note(report: Report) -> str:
    """:data:`COMPARISON_NOTE`, and where the default pairs share the family, how many."""
    if not report.arms.pairs:
        return COMPARISON_NOTE
    return (f"{COMPARISON_NOTE[:-1]}, the {report.arms.pairs} default pair(s) included (one family of "
            f"{report.arms.family}).")


def _comparison_rows(report: Report) -> list[list[str]]:
    def acc(mean: object, std: object) -> str:
        return f"{_pct(mean)} ± {_pct(std)}" if _finite(mean) else "—"

    return [[r["setting"], r["dataset"], r["variant_name"], r["arm"], r["baseline"],
             acc(r["arm_test_acc"], r["arm_test_acc_std"]), acc(r["base_test_acc"], r["base_test_acc_std"]),
             number(r["n_pairs"]), _signed(r["diff_mean"]), _ci(r), _p(r["p"]), _p(r["p_holm"]), r["verdict"],
             r.get("settled") or ""] for _, r in report.arms.comparisons.iterrows()]


def extra_tables(report: Report) -> list[tuple[str, list[str], list[list[str]], str]]:
    """The tables after the paired comparison: ``(title, header, rows, note)``, non-empty only."""
    out = []
    if len(report.arms.comparisons):
        out.append(("Comparisons of the named arms", COMPARISON_HEADER, _comparison_rows(report),
                    comparison_note(report)))
    columns, rows = _winner_rows(report)
    if rows:
        out.append(("Winners: hyperparameters", columns, rows, WINNERS_NOTE))
    if len(report.ablation):
        out.append(("Ablations", ABLATION_HEADER, _ablation_rows(report), ABLATION_NOTE))
    if len(report.importance):
        out.append(("Hyperparameter importance", IMPORTANCE_HEADER, _importance_rows(report), _importance_note(report)))
    return out


def no_plots(report: Report) -> str:
    return "No plots: no cell has a winner." if report.winners.empty else "No plots: not drawn for this report."

