"""How much tuning a verdict needs (issue 40): the paired gain of the winners among each arm's
first k trials, on a trials axis and an epochs axis, the settled word read off it, and the
warnings it replaces, on hand-made stores with known answers."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from report_stores import CURVE_BASE, curve_row, hand_store, shifted, shrinking_rows, stable_rows

from orthotune.reports import FEW_TRIALS, build_report, pair_verdicts, tuning_curves, write_report
from orthotune.reports._curve import LATE_SHARE, settle, start_order
from orthotune.reports._curve_plot import curve_figures
from orthotune.reports._load import load_trials
from orthotune.reports._pair import summary
from orthotune.reports._select import expected_cells, select_best

START = datetime(2025, 1, 1, tzinfo=UTC)


# -- the order -----------------------------------------------------------------------------

def test_start_order_is_the_finish_less_the_training_time_per_cell(tmp_path):
    """Finished b (minute 5), c (8), a (10), but a trained 10 minutes: it started first. The
    other cell's trials count on their own."""
    rows = [
        curve_row("a", 0.8, CURVE_BASE, 0, finished_at=START + timedelta(minutes=10), seconds=600.0),
        curve_row("b", 0.8, CURVE_BASE, 0, finished_at=START + timedelta(minutes=5), seconds=60.0),
        curve_row("c", 0.8, CURVE_BASE, 0, finished_at=START + timedelta(minutes=8), seconds=30.0),
        curve_row("d", 0.8, CURVE_BASE, 0, finished_at=START + timedelta(minutes=1), seconds=None, ortho=True),
        curve_row("e", 0.8, CURVE_BASE, 0, finished_at=START + timedelta(minutes=2), seconds=None, ortho=True),
    ]
    ordered = start_order(load_trials(hand_store(tmp_path / "s", rows)))
    assert list(zip(ordered["trial_id"], ordered["position"])) == [("a", 1), ("d", 1), ("e", 2), ("b", 2), ("c", 3)]
    assert list(ordered["trained_epochs"]) == [100] * 5  # 20 epochs on each of 5 repeats


def test_trained_epochs_sum_the_repeats_or_fall_back_on_the_most(tmp_path):
    rows = [curve_row("a", 0.8, CURVE_BASE, 0, repeat_epochs=[10, 20, 30, 40, 50]),
            curve_row("b", 0.8, CURVE_BASE, 1, repeat_epochs=None, epochs=7),
            curve_row("c", 0.8, CURVE_BASE, 2, repeat_epochs=None, epochs=None),
            curve_row("d", 0.8, CURVE_BASE, 3, repeat_epochs=[3, 4], epochs=4)]
    ordered = start_order(load_trials(hand_store(tmp_path / "s", rows)))
    assert list(ordered["trained_epochs"]) == [150, 7, 0, 7]
    # every trial's repeats whole (the common case, summed together): each its own sum
    ordered = start_order(load_trials(hand_store(tmp_path / "w", [rows[0], rows[3]])))
    assert list(ordered["trained_epochs"]) == [150, 7]


# -- first-k selection ---------------------------------------------------------------------

def _mixed_cell(prefix: str, ortho: bool) -> list[dict]:
    """Ties on validation accuracy broken by the std, then by epochs; a failed trial with the
    highest validation accuracy (never a winner); a stopped one that competes."""
    extra = {"ortho": True} if ortho else {}
    return [
        curve_row(f"{prefix}0", [0.70, 0.74], [0.60, 0.62], 0, val_acc=0.72, val_acc_std=0.02, **extra),
        curve_row(f"{prefix}1", [0.95, 0.95], [0.90, 0.90], 1, status="failed", **extra),  # never wins
        curve_row(f"{prefix}2", [0.71, 0.73], [0.61, 0.63], 2, val_acc=0.72, val_acc_std=0.01, **extra),  # steadier
        curve_row(f"{prefix}3", [0.72, 0.72], [0.62, 0.64], 3, val_acc=0.72, val_acc_std=0.0, epochs=30, **extra),
        curve_row(f"{prefix}4", [0.72, 0.72], [0.63, 0.65], 4, val_acc=0.72, val_acc_std=0.0, epochs=10,
                  **extra),  # the same, fewer epochs
        curve_row(f"{prefix}5", [0.76, 0.76], [0.64, 0.70], 5, status="stopped", repeat_epochs=[5, 5], **extra),
        curve_row(f"{prefix}6", [0.75, 0.75], [0.66, 0.66], 6, **extra),
    ]


@pytest.mark.slow
def test_the_winner_among_the_first_k_is_select_best_of_those_k(tmp_path):
    store = hand_store(tmp_path / "s", [*_mixed_cell("o", False), *_mixed_cell("x", True)])
    (curve,) = tuning_curves(store)
    trials = load_trials(store)
    expected = {"o": [], "x": []}
    for k in range(1, 8):
        for arm in expected:
            first = trials[trials["trial_id"].isin([f"{arm}{i}" for i in range(k)])]
            expected[arm].append(select_best(first)["trial_id"].iloc[0])
    assert list(curve.trials["orig_trial_id"]) == expected["o"]
    assert list(curve.trials["ortho_trial_id"]) == expected["x"]
    # the rule's steps, spelled out: the steadier tie, then fewer epochs, then the stopped trial
    assert expected["o"] == ["o0", "o0", "o2", "o3", "o4", "o5", "o5"]


def test_failed_trials_count_towards_the_budget_but_never_win(tmp_path):
    rows = [curve_row("o0", 0.9, CURVE_BASE, 0, status="failed", repeat_epochs=[3] * 5),
            curve_row("o1", 0.7, CURVE_BASE, 1),
            curve_row("x0", 0.8, shifted(CURVE_BASE, 0.02, jitter=True), 0, ortho=True),
            curve_row("x1", 0.7, CURVE_BASE, 1, ortho=True)]
    (curve,) = tuning_curves(hand_store(tmp_path / "s", rows))
    first, second = curve.trials.to_dict("records")
    assert pd.isna(first["orig_trial_id"]) and first["n_pairs"] == 0 and math.isnan(first["diff_mean"])
    assert "no original winner" in first["note"]
    assert (second["orig_trial_id"], second["ortho_trial_id"], second["orig_epochs"]) == ("o1", "x0", 15 + 100)
    assert second["diff_mean"] == pytest.approx(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["semi", "full"])
def test_repeats_pair_by_seed_or_split_and_the_last_point_is_the_verdict(tmp_path, setting):
    """The Ortho-GConv winner lists its repeats in another order: the curve matches them by
    seed (semi) or split (full), and its point at the full budget is the summary's test."""
    key = "repeat_seed" if setting == "semi" else "repeat_split"
    other = "repeat_split" if setting == "semi" else "repeat_seed"
    order = [4, 2, 0, 3, 1]
    gains = [0.01, 0.03, 0.02, 0.04, 0.00]
    rows = []
    for i in range(3):
        rows.append(curve_row(f"o{i}", 0.70 + 0.01 * i, shifted(CURVE_BASE, 0.002 * i), i, setting=setting,
                              **{key: [0, 1, 2, 3, 4], other: [0] * 5}))
        ortho_test = [CURVE_BASE[r] + gains[r] for r in order]  # repeat r's value at its own place
        rows.append(curve_row(f"x{i}", 0.80 - 0.01 * i, ortho_test, i, setting=setting, ortho=True,
                              **{key: order, other: [0] * 5}))
    store = hand_store(tmp_path / "s", rows)
    (curve,) = tuning_curves(store)
    first = curve.trials.iloc[0]
    assert first["n_pairs"] == 5 and first["diff_mean"] == pytest.approx(np.mean(gains))
    trials = load_trials(store)
    table = summary(select_best(trials), expected_cells(trials))
    last = curve.trials.iloc[-1]
    for column in ("n_pairs", "diff_mean", "ci_low", "ci_high", "p"):
        assert last[column] == pytest.approx(table[column].iloc[0])


# -- the compute axis ----------------------------------------------------------------------

def test_the_compute_axis_takes_each_arms_trials_while_their_epochs_fit(tmp_path):
    """Original: 200 epochs, then an ASHA-stopped trial of 100, then 200 (cumulative 200, 300,
    500); Ortho-GConv: 200 each (200, 400, 600). At E epochs per arm each arm has the trials
    whose cumulative epochs fit in E."""
    rows = [curve_row("o0", 0.70, CURVE_BASE, 0, repeat_epochs=[40] * 5),
            curve_row("o1", 0.75, shifted(CURVE_BASE, 0.01), 1, status="stopped", repeat_epochs=[20] * 5),
            curve_row("o2", 0.72, CURVE_BASE, 2, repeat_epochs=[40] * 5)]
    rows += [curve_row(f"x{i}", 0.80 + 0.01 * i, shifted(CURVE_BASE, 0.02 + 0.01 * i, jitter=True), i, ortho=True,
                       repeat_epochs=[40] * 5) for i in range(3)]
    (curve,) = tuning_curves(hand_store(tmp_path / "s", rows))
    epochs = curve.epochs
    assert list(epochs["epochs"]) == [200, 300, 400, 500, 600]
    assert list(epochs["orig_trials"]) == [1, 2, 2, 3, 3]
    assert list(epochs["ortho_trials"]) == [1, 1, 2, 2, 3]
    assert list(epochs["orig_trial_id"]) == ["o0", "o1", "o1", "o1", "o1"]  # the stopped one competes
    assert list(epochs["ortho_trial_id"]) == ["x0", "x0", "x1", "x1", "x2"]
    assert epochs["diff_mean"].iloc[1] == pytest.approx(0.01)  # x0 (+0.02) against o1 (+0.01)
    # on the trials axis the same trials, counted: k = 2 pairs o1 with x1
    assert curve.trials["orig_epochs"].tolist() == [200, 300, 500]
    assert curve.trials["diff_mean"].iloc[1] == pytest.approx(0.02)


# -- the rule ------------------------------------------------------------------------------

def _points(gains: list[float], half_width: float = 0.003) -> pd.DataFrame:
    """A curve's k points with these gains (fractions) and a CI of +- ``half_width``."""
    return pd.DataFrame({"k": range(1, len(gains) + 1), "diff_mean": gains,
                         "ci_low": [g - half_width for g in gains], "ci_high": [g + half_width for g in gains]})


def test_a_gain_inside_the_final_ci_over_the_last_half_is_settled():
    gains = [0.05, 0.03, 0.01, 0.015, 0.012, 0.018, 0.016, 0.015]
    word = settle(_points(gains[:3] + [0.015] * 9 + [0.012, 0.018, 0.016, 0.015] * 3))  # 24 trials per arm
    assert word.settled is True and word.word == "stable over the last half of the budget (k = 13..24)"
    # below the few-trials threshold a flat curve is no all-clear (issue 47)
    word = settle(_points(gains))
    assert word.settled is None and word.word == ("not judged: 8 trials per arm, fewer than the 20 a settled word "
                                                  "needs (stable over the last half of the budget (k = 5..8))")


def test_the_rule_names_how_an_unsettled_gain_moves():
    shrinking = settle(_points([0.05, 0.045, 0.04, 0.035, 0.03, 0.025, 0.02, 0.015]))
    assert shrinking.settled is False
    assert shrinking.word == "still shrinking (+2.00 pts at k = 7, outside the 95% CI at k = 8)"
    growing = settle(_points([0.0, 0.0, 0.0, 0.005, 0.006, 0.007, 0.008, 0.03]))
    assert growing.settled is False and growing.word.startswith("still growing (+0.80 pts at k = 7")
    # a reversal that shrinks: the earlier losses were further from zero
    assert settle(_points([-0.05, -0.05, -0.05, -0.05, -0.04, -0.03, -0.02, -0.01])).word.startswith(
        "still shrinking (-2.00 pts at k = 7")


def test_a_sign_change_outside_the_final_ci_is_named_with_its_k():
    word = settle(_points([0.02, 0.02, 0.02, 0.02, -0.01, -0.02, 0.012, 0.015]))
    assert word.settled is False and word.word == "changed sign at k = 7"
    # inside a CI that spans zero a sign change is the noise the verdict already admits
    inside = settle(_points([0.02] * 12 + [-0.002, 0.003, -0.001, 0.002] * 3, half_width=0.01))
    assert inside.settled is True


def test_too_short_or_untested_curves_are_not_judged():
    assert settle(_points([0.05, 0.04])).settled is None  # one point in the last half
    assert "too few" in settle(_points([0.05, 0.04])).word
    no_ci = _points([0.05, 0.04, 0.03, 0.02]).assign(ci_low=math.nan, ci_high=math.nan)
    assert settle(no_ci).settled is None and settle(no_ci).word == "not judged: no CI at the full budget"


@pytest.mark.slow
def test_the_rule_on_hand_made_stores(tmp_path):
    (shrinking,) = tuning_curves(hand_store(tmp_path / "shrinking", shrinking_rows()))
    assert list(shrinking.trials["diff_mean"].round(4)) == [0.05, 0.045, 0.04, 0.035, 0.03, 0.025, 0.02, 0.015]
    assert shrinking.settled.word == "still shrinking (+2.00 pts at k = 7, outside the 95% CI at k = 8)"
    (stable,) = tuning_curves(hand_store(tmp_path / "stable", stable_rows()))
    assert stable.settled.word == ("not judged: 8 trials per arm, fewer than the 20 a settled word needs "
                                   "(stable over the last half of the budget (k = 5..8))")


# -- where people look ---------------------------------------------------------------------

def test_each_verdict_line_ends_with_its_curves_word(tmp_path):
    store = hand_store(tmp_path / "s", shrinking_rows())
    (line,) = pair_verdicts(store).lines
    assert line.startswith("cora full gcn depth 2 (default): gain significant (+1.50 pts")
    assert line.endswith("; tuning curve: still shrinking (+2.00 pts at k = 7, outside the 95% CI at k = 8)")


@pytest.mark.slow
def test_a_late_winner_replaces_the_few_trials_warning_with_the_curves_statement(tmp_path):
    """Depth 2: the original arm's winner is its last trial (8 of 8); depth 4: both winners are
    first trials, so only the budget can be said of them."""
    rows = shrinking_rows() + [{**r, "depth": 4, "trial_id": f"d4{r['trial_id']}"} for r in stable_rows()]
    warnings = pair_verdicts(hand_store(tmp_path / "s", rows)).warnings
    late = f"the last {round(100 * LATE_SHARE)}%"
    assert (f"cora full gcn depth 2 (default): the original arm's winner improved in {late} of its trials "
            f"(original: trial 8 of 8): the gain may shrink with more") in warnings
    few = [w for w in warnings if "fewer than" in w]
    assert few == [f"2 of 4 cells chose their winner among fewer than {FEW_TRIALS} trials (fewest: 8); TPE's first "
                   f"10 proposals are random, so these winners are barely tuned"]
    assert not [w for w in warnings if "depth 4" in w]


@pytest.mark.slow
def test_the_late_statement_says_which_way_the_gain_may_move(tmp_path):
    ortho_late = [{**r, "val_acc": (0.70 + 0.01 * int(r["trial_id"][1:])) if r["ortho"] else r["val_acc"]}
                  for r in stable_rows()]
    warnings = pair_verdicts(hand_store(tmp_path / "ortho", ortho_late)).warnings
    assert any("the Ortho-GConv arm's winner improved in the last 25% of its trials (Ortho-GConv: trial 8 of 8): "
               "the gain may grow with more" in w for w in warnings)
    both = [{**r, "val_acc": 0.70 + 0.01 * int(r["trial_id"][1:])} for r in stable_rows()]
    warnings = pair_verdicts(hand_store(tmp_path / "both", both)).warnings
    assert any("both arms' winners improved in the last 25% of their trials (original: trial 8 of 8; "
               "Ortho-GConv: trial 8 of 8): more trials may move the gain either way" in w for w in warnings)
    # a reversal: the original arm improving late makes the loss larger
    loss = [{**r, "repeat_test_acc": shifted(CURVE_BASE, -0.05, jitter=True)} if r["ortho"] else r
            for r in shrinking_rows()]
    warnings = pair_verdicts(hand_store(tmp_path / "loss", loss)).warnings
    assert any("the original arm's winner improved in the last 25% of its trials (original: trial 8 of 8): "
               "the loss may grow with more" in w for w in warnings)


@pytest.mark.slow
def test_the_report_draws_one_curve_per_pair_and_shows_the_word(tmp_path):
    rows = shrinking_rows() + [{**r, "depth": 4, "trial_id": f"d4{r['trial_id']}"} for r in stable_rows()]
    report = build_report(hand_store(tmp_path / "s", rows))
    curves = [f for f in report.figures if f.name.startswith("curve-")]
    assert [f.name for f in curves] == ["curve-full-cora-gcn-2-default", "curve-full-cora-gcn-4-default"]
    assert curves[0].png.startswith(b"\x89PNG") and "still shrinking" in curves[0].caption
    assert list(report.summary["settled"]) == [
        "still shrinking (+2.00 pts at k = 7, outside the 95% CI at k = 8)",
        "not judged: 8 trials per arm, fewer than the 20 a settled word needs "
        "(stable over the last half of the budget (k = 5..8))"]
    md = write_report(report, "md")
    assert "| verdict | tuning curve | note |" in md and "| not judged: 8 trials per arm, fewer" in md
    assert "A verdict is settled when every gain" in md
    csv = write_report(report, "csv")
    assert "settled" in csv.splitlines()[0].split(",")


@pytest.mark.slow
def test_curves_too_short_to_judge_are_not_drawn(tmp_path):
    """Two trials per arm: the last half (k > 1) is one point, no trend."""
    rows = [curve_row(f"o{i}", 0.8, CURVE_BASE, i) for i in range(2)]
    rows += [curve_row(f"x{i}", 0.8, shifted(CURVE_BASE, 0.02, jitter=True), i, ortho=True) for i in range(2)]
    curves = tuning_curves(hand_store(tmp_path / "s", rows))
    assert curve_figures(curves) == []
    assert curves[0].settled.word == "not judged: 2 trial(s) per arm, too few for a curve"
    three = tuning_curves(hand_store(tmp_path / "three", rows + [curve_row("o2", 0.8, CURVE_BASE, 2)]))
    assert [f.name for f in curve_figures(three)] == ["curve-full-cora-gcn-2-default"]
