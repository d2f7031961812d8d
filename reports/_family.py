"""The report's one Holm family: every comparison it holds, the default pairs' (``_pair``) and
the named arms' (``_arms``), adjusted together (:func:`one_family`).

Each of the two stages adjusts its own tests as one family. A search whose store holds both
kinds (a space with ``arms:`` beside the default original-vs-Ortho-GConv pairs) has one
family, not two: here every raw p of both is Holm-adjusted over the union, and what the
adjusted p decides is rewritten (each pair's verdict; each comparison's verdict and mark).
A report of one kind is left as its stage made it: its family is already every comparison,
so its numbers are the stage's own. The ablations stay a family of their own.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from orthotune.reports._arms import ArmComparisons, mark
from orthotune.reports._pair import Pairs
from orthotune.reports._stats import Paired, with_holm


def one_family(pairs: Pairs, arms: ArmComparisons) -> tuple[Pairs, ArmComparisons]:
    """``pairs`` and ``arms`` with their p-values Holm-adjusted as one family (where both hold
    rows), the comparisons told how many pairs share their family (``ArmComparisons.pairs``)."""
    summary, comparisons = pairs.summary, arms.comparisons
    if summary.empty or comparisons.empty:
        return pairs, arms
    tests = with_holm([*tests_of(summary), *tests_of(comparisons)])
    mine, theirs = tests[:len(summary)], tests[len(summary):]
    summary = summary.assign(p_holm=[t.p_holm for t in mine], verdict=[t.verdict() for t in mine])
    comparisons = comparisons.assign(p_holm=[t.p_holm for t in theirs],
                                     verdict=[t.verdict("better", "worse") for t in theirs],
                                     mark=[mark(t) for t in theirs])
    return replace(pairs, summary=summary), replace(arms, comparisons=comparisons, pairs=len(summary))


def tests_of(frame: pd.DataFrame) -> list[Paired]:
    """The paired test each row of a stage's table holds (its raw p; the Holm p left unset)."""
    return [Paired(_count(row["n_pairs"]), _float(row["diff_mean"]), _float(row.get("diff_std")),
                   _float(row["t"]), _float(row["p"]), row["note"] if isinstance(row["note"], str) else "",
                   _float(row["ci_low"]), _float(row["ci_high"]))
            for _, row in frame.iterrows()]


def _float(value: object) -> float:
    return math.nan if value is None or value is pd.NA else float(value)  # type: ignore[arg-type]


def _count(value: object) -> int:
    return 0 if value is None or value is pd.NA else int(value)  # type: ignore[call-overload]
