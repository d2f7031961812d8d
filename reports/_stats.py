"""The paired test, as the pair-and-test stage (``_pair``) and the tuning curve (``_curve``) both
run it: two winners matched repeat by repeat, their differences tested, a family's p-values
Holm-adjusted. Not a stage of its own: arithmetic the stages call.

Paired test: the two winners of a pair are matched repeat by repeat on the repeat key (the
split for ``full``, the fold for ``cv10``, the seed for ``semi``/``official``); the
difference is Ortho-GConv minus original test accuracy, tested with the paired t-test of
``scipy.stats.ttest_rel`` (two-sided; computed as it computes it, with Student's t from
``scipy.special``, whose import takes a tenth of ``scipy.stats``'), with the 95% confidence
interval of the mean difference (Student's t with n - 1 degrees of freedom). The t-test rather than Wilcoxon's
signed-rank test because the paper's protocol has 5 or 10 repeats, where the exact
signed-rank test cannot go below p = 0.0625 (n = 5) and so could never call a 5-split gain
real.

Many cells, many tests: the summary's p-values are one family (with the named arms'
comparisons where the report holds both: ``_family``), corrected with Holm's step-down
method (:func:`holm`; it controls the family-wise error rate under any dependence between
the cells), and a verdict is significant when its Holm-adjusted p is below
:data:`ALPHA`; the raw p is reported beside it. The ablation table is a family of its own.
Spreads are sample standard deviations (ddof = 1), as the papers' mean +- std: a cell's
test accuracy std is recomputed from its repeats, whatever the store's column holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from orthotune.core import SETTINGS
from orthotune.reports._load import ORIGINAL, ORTHO

TEST_NAME = "paired t-test (scipy.stats.ttest_rel, two-sided)"
#: The significance level of the verdicts in words.
ALPHA = 0.05


def repeat_noun(setting: str) -> str:
    """What one repeat of ``setting`` is (``SettingInfo.repeat``: how the report labels it),
    or ``repeat`` for a setting this version does not know."""
    return SETTINGS.get(setting).repeat if setting in SETTINGS.names() else "repeat"


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
    if no_spread(diffs):
        note = f"identical differences on every repeat; no test{extra}"
        return Paired(len(keys), float(diffs[0]), 0.0, nan, nan, note)
    t, p = paired_t_test(diffs)
    low, high = confidence_interval(diffs)
    return Paired(len(keys), float(diffs.mean()), float(diffs.std(ddof=1)), t, p, extra.lstrip("; "), low, high, p)


def no_spread(diffs: np.ndarray) -> bool:
    """Whether the differences are equal up to float noise (accuracies are counts over at most
    millions of nodes, so real differences are far above 1e-12): the t statistic would divide
    by rounding error, so there is no test."""
    return bool(np.allclose(diffs, diffs[0], rtol=0.0, atol=1e-12))


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


def sample_std(values: object, statuses: object = None) -> float:
    """The sample std (ddof = 1) of a trial's per-repeat values, failed repeats left out; NaN
    below two values. Recomputed here: stores before schema 3 hold the population std."""
    statuses = list(statuses) if statuses is not None else [None] * len(list(values))
    kept = [float(v) for v, s in zip(values, statuses) if s != "failed" and v is not None and math.isfinite(v)]
    return float(np.std(kept, ddof=1)) if len(kept) >= 2 else math.nan

