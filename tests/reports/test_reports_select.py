"""Selection: validation-best per cell, the tie rule, failed/stopped trials, searches, filters."""

from __future__ import annotations

import math

import pytest
from report_stores import REAL_SEARCH, hand_row, hand_store, real_configs
from scipy import stats

from orthotune.core import ConfigError, OrthotuneError, TrainConfig
from orthotune.reports import Filters, best_configs, build_report, config_dict, row_to_config
from orthotune.reports._stats import paired


def winner_ids(store, filters=None) -> dict[tuple, str]:
    winners = best_configs(store, filters)
    return {(r.dataset, r.depth, bool(r.ortho)): r.trial_id for r in winners.itertuples()}


def only_winner(store, filters=None) -> str:
    ids = winner_ids(store, filters)
    assert len(ids) == 1, ids
    return next(iter(ids.values()))


def test_validation_best_wins_even_with_lower_test_accuracy(tmp_path):
    store = hand_store(tmp_path / "s", [
        hand_row("high-test", val=[0.70, 0.72], test=[0.95, 0.95]),
        hand_row("high-val", val=[0.80, 0.82], test=[0.50, 0.52]),
    ])
    assert only_winner(store) == "high-val"
    winners = best_configs(store)
    assert winners.loc[0, "test_acc"] == pytest.approx(0.51)  # reported, not chosen on
    assert winners.loc[0, "candidates"] == 2


@pytest.mark.parametrize(
    "loser, winner",
    [
        # equal objective: the lower validation std wins
        (dict(val=[0.7, 0.9]), dict(val=[0.8, 0.8])),
        # equal objective and std: fewer epochs trained wins
        (dict(epochs=50), dict(epochs=20)),
        # equal objective, std and epochs: the earlier finished trial wins
        (dict(minutes=5), dict(minutes=1)),
    ],
)
def test_tie_rule_order(tmp_path, loser, winner):
    # the loser is listed first and gets the smaller trial id, so only the rule can pick the winner
    store = hand_store(tmp_path / "s", [hand_row("a-loser", test=[0.99, 0.99], **loser),
                                        hand_row("b-winner", test=[0.10, 0.10], **winner)])
    assert only_winner(store) == "b-winner"


def test_full_tie_falls_to_trial_id_never_to_test_accuracy(tmp_path):
    rows = [hand_row("t1", test=[0.1, 0.1]), hand_row("t2", test=[0.9, 0.9])]
    assert only_winner(hand_store(tmp_path / "a", rows)) == "t1"
    swapped = [hand_row("t1", test=[0.9, 0.9]), hand_row("t2", test=[0.1, 0.1])]
    assert only_winner(hand_store(tmp_path / "b", swapped)) == "t1"


def test_failed_and_nan_trials_never_win_and_stopped_trials_compete(tmp_path):
    store = hand_store(tmp_path / "s", [
        hand_row("failed", val=[0.99, 0.99], status="failed", reason="non-finite loss at epoch 3"),
        hand_row("nan", val=[math.nan, math.nan], status="completed"),
        hand_row("completed", val=[0.60, 0.60]),
        hand_row("stopped", val=[0.70, 0.70], status="stopped", epochs=8),
    ])
    assert only_winner(store) == "stopped"
    winners = best_configs(store)
    assert (winners.loc[0, "candidates"], winners.loc[0, "failed"]) == (2, 1)


def test_one_winner_per_cell(tmp_path):
    store = hand_store(tmp_path / "s", [
        hand_row("o2", val=[0.8, 0.8]), hand_row("o2-worse", val=[0.7, 0.7]),
        hand_row("x2", val=[0.6, 0.6], ortho=True), hand_row("o4", val=[0.5, 0.5], depth=4),
        hand_row("c2", val=[0.9, 0.9], dataset="citeseer"),
    ])
    assert winner_ids(store) == {("cora", 2, False): "o2", ("cora", 2, True): "x2", ("cora", 4, False): "o4",
                                 ("citeseer", 2, False): "c2"}


def test_two_searches_select_across_both_and_filter_by_name(tmp_path):
    store = hand_store(tmp_path / "s", [
        hand_row("t1", val=[0.7, 0.7], search="first"),
        hand_row("t1", val=[0.8, 0.8], search="second"),  # same trial id in another search
        hand_row("t2", val=[0.75, 0.75], search="first"),
    ])
    winners = best_configs(store)
    assert (winners.loc[0, "search"], winners.loc[0, "trial_id"]) == ("second", "t1")
    assert only_winner(store, Filters(searches=("first",))) == "t2"
    assert only_winner(store, Filters(searches=("first", "second"))) == "t1"
    with pytest.raises(OrthotuneError, match="no search 'third'.*searches: first, second"):
        best_configs(store, Filters(searches=("third",)))


@pytest.mark.slow
def test_filters_select_cells_and_reject_unknown_names(tmp_path):
    store = hand_store(tmp_path / "s", [
        hand_row("o2"), hand_row("x2", ortho=True), hand_row("x4", ortho=True, depth=4),
        hand_row("j2", backbone="jknet"), hand_row("s2", setting="semi", repeat_seed=[0, 1]),
    ])
    assert set(winner_ids(store, Filters(ortho=True)).values()) == {"x2", "x4"}
    assert set(winner_ids(store, Filters(depths=(4,))).values()) == {"x4"}
    assert set(best_configs(store, Filters(backbones=("JKNet",)))["trial_id"]) == {"j2"}
    assert set(best_configs(store, Filters(settings=("semi",)))["trial_id"]) == {"s2"}
    assert best_configs(store, Filters(datasets=("texas",))).empty
    with pytest.raises(ConfigError, match="unknown dataset 'coraa'; valid: .*cora"):
        Filters(datasets=("coraa",))
    with pytest.raises(ConfigError, match="unknown backbone 'pna'; valid: gcn"):
        Filters(backbones=("pna",))
    with pytest.raises(ConfigError, match="unknown setting 'half'"):
        Filters(settings=("half",))
    with pytest.raises(ConfigError, match="depth=1 must be an integer >= 2"):
        Filters(depths=(1,))


def test_stores_that_are_not_stores_fail_in_one_message(tmp_path):
    with pytest.raises(OrthotuneError, match="no orthotune store"):
        best_configs(tmp_path / "absent")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(OrthotuneError, match="is not an orthotune store"):
        best_configs(tmp_path / "other")


def test_missing_cells_are_reported_with_their_reason(tmp_path):
    store = hand_store(tmp_path / "s", [
        hand_row("o2"), hand_row("x2", ortho=True), hand_row("o4", depth=4),
        hand_row("x4-failed", depth=4, ortho=True, status="failed", reason="non-finite Newton weight at epoch 2"),
        hand_row("j2", backbone="jknet"),
    ])
    report = build_report(store, plots=False)
    missing = {(r.backbone, r.depth, r.arm): r.reason for r in report.missing.itertuples()}
    assert missing == {
        ("gcn", 4, "Ortho-GConv"): "all 1 trials failed (e.g. non-finite Newton weight at epoch 2)",
        ("jknet", 2, "Ortho-GConv"): "no trials",
        ("jknet", 4, "original"): "no trials",
        ("jknet", 4, "Ortho-GConv"): "no trials",
    }
    pairs = report.summary.set_index(["backbone", "depth"])
    assert pairs.loc[("gcn", 4), "note"] == "no Ortho-GConv winner"
    assert pairs.loc[("jknet", 4), "note"] == "no original and Ortho-GConv winner"


def test_paired_test_matches_repeats_and_uses_scipy(tmp_path):
    original = [0.60, 0.62, 0.65, 0.61]
    ortho = [0.66, 0.63, 0.70, 0.64]
    # the Ortho-GConv trial ran the splits in another order: pairing must follow the split
    rows = [hand_row("o", val=[0.7] * 4, test=original),
            hand_row("x", val=[0.7] * 4, test=[ortho[i] for i in (2, 0, 3, 1)], ortho=True,
                     repeat_split=[2, 0, 3, 1])]
    result = build_report(hand_store(tmp_path / "s", rows), plots=False).summary.iloc[0]
    expected = stats.ttest_rel(ortho, original)
    assert result["n_pairs"] == 4
    assert result["p"] == pytest.approx(expected.pvalue)
    assert result["t"] == pytest.approx(expected.statistic)
    assert result["diff_mean"] == pytest.approx(sum(ortho) / 4 - sum(original) / 4)
    assert result["better"] == "Ortho-GConv"


def test_paired_test_needs_two_matched_repeats():
    base = hand_row("o", val=[0.7, 0.7], test=[0.6, 0.7])
    other = hand_row("x", val=[0.7, 0.7], test=[0.8, 0.9], ortho=True, repeat_split=[1, 5])
    result = paired("full", base, other)
    assert result.n_pairs == 1 and math.isnan(result.p)
    assert "1 matched split(s); a paired test needs 2" in result.note
    # semi-supervised repeats are seeds of one split: they pair by seed
    semi_a = hand_row("o", test=[0.6, 0.7], setting="semi", repeat_split=[0, 0], repeat_seed=[3, 4])
    semi_b = hand_row("x", test=[0.8, 0.7], setting="semi", repeat_split=[0, 0], repeat_seed=[4, 3])
    result = paired("semi", semi_a, semi_b)  # seed 3: 0.7 - 0.6, seed 4: 0.8 - 0.7
    assert result.n_pairs == 2 and result.diff_mean == pytest.approx(0.1)
    assert result.note == "identical differences on every repeat; no test"


def test_real_store_winners_rerun_as_their_configs(real_store):
    winners = best_configs(real_store)
    assert len(winners) == 4 and set(winners["search"]) == {REAL_SEARCH}
    configs = real_configs()
    for row in winners.itertuples():
        config = row_to_config(winners.loc[row.Index])
        assert config == configs[int(row.trial_id[1:])]  # trial tNN trained real_configs()[NN]
        printed = config_dict(winners.loc[row.Index])
        assert TrainConfig.from_dict(printed) == config
        assert ("T" in printed) == config.ortho  # the original arm prints no Ortho-GConv keys
    # the winner of each Ortho-GConv cell has the best objective among its T values
    trials = best_configs(real_store, Filters(ortho=True))
    assert (trials["candidates"] == 2).all()


def test_selection_takes_the_winners_whole_rows_by_position_whatever_the_frames_index(tmp_path):
    """select_best sorts the keys alone and takes the winners' rows by position: a frame in
    another row order, with labels that are not positions (repeated ones too), gives the same
    winners, every column whole; failed trials never win and are counted."""
    import pandas as pd

    from orthotune.reports._load import load_trials, open_store
    from orthotune.reports._select import select_best

    rows = [hand_row("a", val=[0.7, 0.7], test=[0.5, 0.5]), hand_row("b", val=[0.8, 0.8], test=[0.6, 0.6]),
            hand_row("c", val=[0.9, 0.9], test=[0.7, 0.7], status="failed"),
            hand_row("d", val=[0.6, 0.6], test=[0.4, 0.4], depth=4), hand_row("e", val=[0.65, 0.65], test=[0.3, 0.3],
                                                                             depth=4, ortho=True)]
    trials = load_trials(open_store(hand_store(tmp_path / "s", rows)))
    expected = select_best(trials)
    assert expected["trial_id"].tolist() == ["b", "d", "e"] and expected["failed"].tolist() == [1, 0, 0]
    shuffled = trials.iloc[[4, 2, 0, 3, 1]].set_axis([7, 7, 3, 0, 1])
    pd.testing.assert_frame_equal(select_best(shuffled), expected)
