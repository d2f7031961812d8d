"""Verdicts a reviewer accepts (issue 22, item 4): Holm-adjusted p-values beside the raw ones,
the paired difference's 95% confidence interval, and sample stds (ddof = 1), each checked on
a case computed by hand."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest
from report_stores import hand_row, hand_store

from orthotune.reports import build_report, write_report
from orthotune.reports._stats import confidence_interval, holm, paired, paired_t_test

#: Student's t quantile t(0.975, 4), from a table: the 95% interval of a 5-repeat mean.
T_975_4 = 2.7764451


def test_holm_on_a_hand_computed_family():
    """p = (0.01, 0.04, 0.03, 0.005), m = 4: sorted 0.005, 0.01, 0.03, 0.04 give 4 x 0.005 =
    0.02, 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, max(0.06, 1 x 0.04) = 0.06 (step-down keeps the
    adjusted values monotone). A NaN p (no test) stays NaN and is not counted in m."""
    adjusted = holm([0.01, 0.04, math.nan, 0.03, 0.005])
    assert adjusted[:2] + adjusted[3:] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert math.isnan(adjusted[2])
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.2]) == [0.2] and holm([]) == []


def test_holm_gives_statsmodels_multipletests_on_random_families(monkeypatch):
    """The very floats of statsmodels' ``multipletests(method="holm")`` on random families of
    1 to 40 p-values (skewed towards 0 as a report's are, with ties), and with NaN p-values
    mixed in: those stay NaN and the others are adjusted as the family of the finite ones."""
    from statsmodels.stats.multitest import multipletests

    # its Holm branch ends with a full gc.collect(), a quarter second each in a test process
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    rng = np.random.default_rng(46)
    for _ in range(400):
        family = rng.uniform(0, 1, rng.integers(1, 41)) ** rng.uniform(0.5, 8)
        if rng.random() < 0.3:  # ties
            family[rng.integers(0, len(family), len(family) // 2)] = family[0]
        expected = [float(p) for p in multipletests(family, method="holm")[1]]
        assert holm(family.tolist()) == expected
        mixed = family.tolist()
        gaps = sorted(rng.integers(0, len(mixed) + 1, rng.integers(1, 4)).tolist(), reverse=True)
        for gap in gaps:
            mixed.insert(gap, math.nan)
        adjusted = holm(mixed)
        assert [p for p in adjusted if not math.isnan(p)] == expected
        assert [i for i, p in enumerate(adjusted) if math.isnan(p)] == [i for i, p in enumerate(mixed) if math.isnan(p)]


def test_confidence_interval_on_a_hand_computed_case():
    """diffs 1, 3, 2, 4, 0 pts: mean 2, sample std sqrt(10 / 4) = 1.5811, standard error
    1.5811 / sqrt(5) = 0.70711, half width 2.77645 x 0.70711 = 1.96324 pts."""
    low, high = confidence_interval(np.array([0.01, 0.03, 0.02, 0.04, 0.00]))
    half = T_975_4 * math.sqrt(10 / 4) / math.sqrt(5) / 100
    assert (low, high) == pytest.approx((0.02 - half, 0.02 + half), abs=1e-9)
    assert half == pytest.approx(0.0196324, abs=1e-7)


def test_paired_t_test_gives_scipys_ttest_rel_bit_for_bit():
    """The t-test without ``scipy.stats`` (its import alone was a second of `orthotune best`)
    gives the very floats of ``scipy.stats.ttest_rel`` and ``stats.t.ppf``, on accuracies as a
    store holds them (counts over nodes) and on a few repeats, so reports do not change."""
    from scipy import stats

    rng = np.random.default_rng(38)
    for n in [2, 3, 5, 10] * 50:
        ortho, original = rng.integers(0, 2708, n) / 2708, rng.integers(0, 2708, n) / 2708
        expected = stats.ttest_rel(ortho, original)
        assert paired_t_test(ortho - original) == (float(expected.statistic), float(expected.pvalue))
        diffs = ortho - original
        half = float(stats.t.ppf(0.975, n - 1)) * float(diffs.std(ddof=1)) / math.sqrt(n)
        assert confidence_interval(diffs) == (float(diffs.mean()) - half, float(diffs.mean()) + half)


def _row(trial_id: str, test: list[float], **columns) -> dict:
    return hand_row(trial_id, val=[0.8] * len(test), test=test, setting="semi", seeds=list(range(len(test))),
                    repeat_seed=list(range(len(test))), **columns)


def test_report_adjusts_the_pairs_together_and_states_ci_and_ddof(tmp_path):
    """Two cells (depths 2 and 4), five seeds each: the summary holds each pair's raw p, its
    Holm-adjusted p over the two, the CI of the mean difference and sample stds; the verdict
    follows the adjusted p, and the tables say ddof = 1."""
    base = [0.70, 0.72, 0.71, 0.73, 0.69]
    shifted = [0.60, 0.66, 0.61, 0.64, 0.62]
    weak = [0.01, 0.03, 0.02, 0.04, 0.00]  # the diffs of the CI case: t = 2.828, p = 0.047 raw
    store = hand_store(tmp_path / "s", [
        _row("o2", base), _row("x2", [b + d for b, d in zip(base, weak[::-1])], ortho=True),
        _row("o4", shifted, depth=4), _row("x4", [b + d for b, d in zip(shifted, weak)], depth=4, ortho=True),
    ])
    report = build_report(store, plots=False)
    summary = report.summary.set_index("depth")
    raw = {d: summary.loc[d, "p"] for d in (2, 4)}
    # the raw p of each pair is its own paired t-test (t = mean / (sd / sqrt(n)), 4 df)
    assert summary.loc[4, "t"] == pytest.approx(0.02 / (math.sqrt(2.5e-4) / math.sqrt(5)))
    small, large = sorted(raw, key=raw.get)
    assert summary.loc[small, "p_holm"] == pytest.approx(2 * raw[small])
    assert summary.loc[large, "p_holm"] == pytest.approx(max(2 * raw[small], raw[large]))
    assert (summary.loc[4, "ci_low"], summary.loc[4, "ci_high"]) == pytest.approx(
        confidence_interval(np.array([0.01, 0.03, 0.02, 0.04, 0.00])))
    assert summary.loc[2, "orig_test_acc_std"] == pytest.approx(np.std(base, ddof=1))
    # two equal p of 0.047: Holm gives both 2 x 0.047 = 0.095, so neither is significant
    assert raw[2] == pytest.approx(raw[4]) and raw[4] == pytest.approx(0.0474207, abs=1e-6)
    assert summary.loc[4, "p_holm"] == pytest.approx(2 * raw[4]) and raw[4] < 0.05 < summary.loc[4, "p_holm"]
    assert summary.loc[4, "verdict"].startswith("gain not significant (+2.00 pts, 95% CI [+0.04, +3.96]")
    assert f"Holm p = {summary.loc[4, 'p_holm']:.3g}" in summary.loc[4, "verdict"]
    text = write_report(report, "md")
    assert "ddof = 1" in text and "p (Holm)" in text and "Δ 95% CI (pts)" in text
    assert paired("semi", None, None).p_holm != paired("semi", None, None).p_holm  # NaN: no test, no family
