"""Where each pair's adaptive budget stops, read from the stored trials, and what its verdict
is there: the replay of a stopping rule on the first-k prefixes of a fixed-budget search.

Each arm's trials are put in the tuning curve's start order (``_curve.start_order``); the
rule (``search._stopping``) reads each arm's validation means and stds in that order, so a
stop is a pure function of the stored rows: a resumed search, ``best`` and the report find the
same one. At a pair's stop k its verdict is its curve's point at k (the winners among the
first k trials by the report's tie rule, compared by the report's paired test), and the
pairs' raw p-values at their stops are one Holm family, as at the fixed budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from orthotune.core import OBJECTIVE, Summary, result_column_name
from orthotune.reports._curve import Curves, PairCurve, start_order
from orthotune.reports._load import CELL, Loaded
from orthotune.reports._select import Selection, may_win
from orthotune.reports._stats import ALPHA, holm
from orthotune.search import ArmTrials, Looks, StoppingRule, stop_of, stopping_rule

#: The objective's std over the repeats: the rule's standard error is it over sqrt(repeats).
OBJECTIVE_STD = result_column_name(OBJECTIVE, Summary.STD)
#: The trials columns the stops read (beside the start order's).
STOP_READS = (OBJECTIVE, OBJECTIVE_STD, "status", "repeat_status", "seconds")


@dataclass(frozen=True)
class PairStop:
    """One pair's stop: ``k`` trials per arm of ``trials`` (None: still open), why, and the
    training seconds of each arm's first k trials against all of them."""

    label: str
    k: int | None
    trials: int
    reason: str
    seconds: float
    seconds_all: float


def arm_trials(cell: pd.DataFrame) -> tuple[ArmTrials, np.ndarray]:
    """One cell's trials (in start order) as the rule reads them, and each trial's training
    seconds (the trial's own clock; a missing one counts as 0)."""
    val = cell[OBJECTIVE].astype(float).where(may_win(cell)).to_numpy(dtype=float)
    repeats = np.array([max(len(r) if r is not None else 0, 1) for r in cell["repeat_status"]], dtype=float)
    seconds = pd.to_numeric(cell["seconds"], errors="coerce").fillna(0.0).to_numpy(dtype=float)
    return ArmTrials(val, cell[OBJECTIVE_STD].astype(float).to_numpy(dtype=float), repeats), seconds


def pair_stops(trials: pd.DataFrame, curves: Sequence[PairCurve | None], rule: StoppingRule,
               looks: Looks) -> list[PairStop | None]:
    """Per curve (None stays None), the pair's stop under ``rule`` at ``looks``."""
    ordered = start_order(trials)
    cells = {key: group for key, group in ordered.groupby(list(CELL), sort=False, dropna=False)}
    out: list[PairStop | None] = []
    for curve in curves:
        if curve is None:
            out.append(None)
            continue
        (original, first), (ortho, second) = (arm_trials(cells[key]) for key in curve.cells)
        stop = stop_of(rule, looks, original, ortho)
        k = stop.k
        spent = sum(float(s[: k or len(s)].sum()) for s in (first, second))
        out.append(PairStop(curve.label, k, min(original.n, ortho.n), stop.reason, spent,
                            float(first.sum() + second.sum())))
    return out


def _point(curve: PairCurve, k: int) -> dict[str, Any]:
    row = curve.trials[curve.trials["k"] == k]
    return row.iloc[0].to_dict() if len(row) else {"diff_mean": math.nan, "p": math.nan}


def replay_table(curves: Sequence[PairCurve], stops: Sequence[PairStop]) -> pd.DataFrame:
    """Per pair: the fixed budget's verdict (its full curve) beside the verdict at its stop,
    each with its Holm p over the pairs (one family per budget), and whether the stop kept
    the fixed budget's sign and significance."""
    fixed = [_point(c, int(c.trials["k"].max())) for c in curves]
    adaptive = [_point(c, s.k if s.k is not None else int(c.trials["k"].max())) for c, s in zip(curves, stops)]
    rows = []
    for points in (fixed, adaptive):  # one Holm family per budget
        adjusted = holm([float(p["p"]) if _finite(p["p"]) else math.nan for p in points])
        gains = [float(p["diff_mean"]) if _finite(p["diff_mean"]) else math.nan for p in points]
        rows.append(list(zip(gains, adjusted)))
    table = pd.DataFrame({
        "pair": [s.label for s in stops], "trials": [s.trials for s in stops], "stop": [s.k for s in stops],
        "reason": [s.reason for s in stops],
        "fixed_gain": [g for g, _ in rows[0]], "fixed_p_holm": [a for _, a in rows[0]],
        "adaptive_gain": [g for g, _ in rows[1]], "adaptive_p_holm": [a for _, a in rows[1]],
        "seconds": [s.seconds for s in stops], "seconds_fixed": [s.seconds_all for s in stops]})
    table["fixed_verdict"] = [verdict_word(g, p) for g, p in zip(table["fixed_gain"], table["fixed_p_holm"])]
    table["adaptive_verdict"] = [verdict_word(g, p) for g, p in zip(table["adaptive_gain"], table["adaptive_p_holm"])]
    table["kept"] = table["fixed_verdict"] == table["adaptive_verdict"]
    return table


def verdict_word(gain: float, p_holm: float) -> str:
    """A pair's verdict as the replay compares it: the gain's sign and its Holm significance
    (a NaN gain is none, a NaN p not significant)."""
    sign = "gain" if gain > 0 else "loss" if gain < 0 else "none"
    return f"{sign}, {'significant' if _finite(p_holm) and p_holm < ALPHA else 'not significant'}"


def _finite(value: object) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


#: The columns :func:`with_budgets` adds to the summary (``best --json`` carries them).
BUDGET_COLUMNS = ("trials_per_arm", "budget", "maximum", "stop", "stop_reason", "rule")


def search_looks(record: dict[str, Any]) -> tuple[StoppingRule, Looks] | None:
    """The rule and looks a search's record holds, if it ran with an adaptive budget."""
    options = record.get("options") or {}
    if options.get("budget") != "adaptive":
        return None
    maximum = options.get("samples") or (options.get("space") or {}).get("samples")
    return stopping_rule(options["stopping_rule"]), Looks(options["first_look"], options["look_step"], maximum)


def with_budgets(summary: pd.DataFrame, trials: pd.DataFrame, curves: Sequence[PairCurve | None],
                 records: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The summary with each pair's budget (:data:`BUDGET_COLUMNS`) and ``budget_words``: the
    trials per arm, and for a pair of one adaptive search its stop, recomputed from the stored
    rows by the rule and looks that search's record holds."""
    searches = ({key: set(names) for key, names in
                 trials.groupby(list(CELL), sort=False, dropna=False)["search"].unique().items()}
                if len(trials) else {})
    specs: list[tuple[StoppingRule, Looks] | None] = []
    for curve in curves:
        names = set().union(*(searches.get(key, set()) for key in curve.cells)) if curve is not None else set()
        specs.append(search_looks(records.get(next(iter(names)), {})) if len(names) == 1 else None)
    stops: dict[int, PairStop | None] = {}
    for spec in {spec for spec in specs if spec is not None}:  # the start order once per rule and looks
        chosen = [i for i, s in enumerate(specs) if s == spec]
        stops.update(zip(chosen, pair_stops(trials, [curves[i] for i in chosen], *spec)))
    rows = [_budget_row(curve, spec, stops.get(i)) for i, (curve, spec) in enumerate(zip(curves, specs))]
    return summary.assign(**{c: [r.get(c) for r in rows] for c in (*BUDGET_COLUMNS, "budget_words")})


def _budget_row(curve: PairCurve | None, spec: tuple[StoppingRule, Looks] | None,
                stop: PairStop | None) -> dict[str, Any]:
    if curve is None:
        return {"budget_words": ""}
    n = min(curve.trials_per_arm.values())
    if spec is None or stop is None:
        return {"trials_per_arm": n, "budget": "fixed", "maximum": n,
                "budget_words": f"{n} trials per arm (fixed budget)"}
    rule, looks = spec
    words = (f"{stop.k} of {looks.maximum} trials per arm; stopped: {stop.reason}" if stop.k is not None
             else f"{n} of {looks.maximum} trials per arm; {stop.reason}")
    return {"trials_per_arm": n, "budget": "adaptive", "maximum": looks.maximum, "stop": stop.k,
            "stop_reason": stop.reason, "rule": rule.name, "budget_words": words}


def with_stops(loaded: Loaded, selection: Selection, curves: Curves) -> Curves:
    """The curve stage's product with each pair's budget in its summary (:func:`with_budgets`,
    the searches' records as ``loaded`` read them)."""
    return replace(curves, summary=with_budgets(curves.summary, selection.trials, curves.curves, loaded.records))
