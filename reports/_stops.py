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
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from orthotune.core import OBJECTIVE, Summary, result_column_name
from orthotune.reports._curve import PairCurve, start_order
from orthotune.reports._load import CELL
from orthotune.reports._select import may_win
from orthotune.reports._tables import ALPHA, holm
from orthotune.search import ArmTrials, Looks, StoppingRule, stop_of

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
    table["fixed_verdict"] = [_word(g, p) for g, p in zip(table["fixed_gain"], table["fixed_p_holm"])]
    table["adaptive_verdict"] = [_word(g, p) for g, p in zip(table["adaptive_gain"], table["adaptive_p_holm"])]
    table["kept"] = table["fixed_verdict"] == table["adaptive_verdict"]
    return table


def _word(gain: float, p_holm: float) -> str:
    sign = "gain" if gain > 0 else "loss" if gain < 0 else "none"
    return f"{sign}, {'significant' if _finite(p_holm) and p_holm < ALPHA else 'not significant'}"


def _finite(value: object) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
