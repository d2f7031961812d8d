"""The stopping rules of an adaptive budget: the winners they read, the looks, the lockstep,
the registry, and that the rule reads validation only, the same way for both arms."""

from __future__ import annotations

import numpy as np
import pytest

from orthotune.core import ConfigError
from orthotune.search._stopping import (
    FEW_TRIALS,
    STOPPING_RULES,
    ArmTrials,
    Looks,
    budget_looks,
    flat_on_validation,
    stop_of,
    stopping_k,
    stopping_rule,
    trial_fraction,
)

FLAT = STOPPING_RULES.get("flat")


def arm(val: list[float], std: float | list[float] = 0.02, repeats: int = 5) -> ArmTrials:
    return ArmTrials(np.array(val, dtype=float), np.broadcast_to(np.array(std, dtype=float), (len(val),)), repeats)


def test_the_winner_is_the_best_validation_ties_to_the_lower_std_failed_never() -> None:
    trials = arm([np.nan, 0.5, 0.7, 0.7, 0.6, 0.8], [0.0, 0.1, 0.2, 0.1, 0.0, 0.3])
    assert trials.winners.tolist() == [-1, 1, 2, 3, 3, 5]
    # a batch decides each row alone
    batch = ArmTrials(np.array([[0.1, 0.3], [0.4, 0.2]]), np.zeros((2, 2)), 5)
    assert batch.winners.tolist() == [[0, 1], [0, 0]]


def test_flat_reads_the_winners_move_over_the_last_half_against_its_own_error() -> None:
    # se = 0.02 / sqrt(4) = 0.01: the winner at k = 20 is 0.009 above the one at k = 10 -> flat
    rising = [0.5] * 10 + [0.509] + [0.4] * 9
    assert bool(flat_on_validation(arm(rising, 0.02, 4), 20))
    rising[10] = 0.511  # 0.011 above: moved beyond its error
    assert not bool(flat_on_validation(arm(rising, 0.02, 4), 20))
    assert bool(flat_on_validation(arm(rising, 0.02, 4), 20, errors=2.0))
    # no winner yet (every trial failed): never settled
    assert not bool(flat_on_validation(arm([np.nan] * 20), 20))


def test_looks_start_at_the_few_trials_threshold_and_end_at_the_maximum() -> None:
    assert Looks(20, 5, 40).at() == (20, 25, 30, 35, 40)
    assert Looks(20, 7, 30).at() == (20, 27, 30)
    assert Looks(20, 5, 20).at() == (20,)
    with pytest.raises(ConfigError, match=f"first look 10: must be at least {FEW_TRIALS} trials per arm"):
        Looks(10, 5, 40)
    with pytest.raises(ConfigError, match="first look 30: beyond the maximum of 25 trials per arm"):
        Looks(30, 5, 25)
    with pytest.raises(ConfigError, match="look step 0: must be at least 1"):
        Looks(20, 0, 40)
    # an adaptive budget on a space of one trial per arm (the official scripts) says so
    with pytest.raises(ConfigError, match="the space gives 1 trial\\(s\\) per cell and arm; an adaptive budget "
                                         "needs at least 20"):
        budget_looks(1)
    assert budget_looks(40, 25, 5).at() == (25, 30, 35, 40)


def test_an_unknown_rule_fails_listing_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown stopping rule 'race'; valid: flat, flat-or-same, never"):
        stopping_rule("race")
    assert stopping_rule("FLAT") is FLAT


def test_a_pair_stops_when_both_arms_are_flat_and_not_before() -> None:
    looks = Looks(20, 5, 40)
    flat = arm([0.8] + [0.5] * 39)
    moving = arm([0.5 + 0.01 * i for i in range(40)])  # a new winner every trial, 0.1 per half
    assert stop_of(FLAT, looks, flat, flat).k == 20
    assert stop_of(FLAT, looks, flat, flat).reason == "both arms flat on validation over k = 11..20"
    assert stop_of(FLAT, looks, flat, moving).k == 40  # one arm still moving: both go on
    assert stop_of(FLAT, looks, flat, moving).reason == "the maximum reached"
    assert stop_of(STOPPING_RULES.get("never"), looks, flat, flat).k == 40
    assert stopping_k(FLAT, looks, flat, moving).tolist() == 40


def test_lockstep_a_look_waits_for_both_arms_first_k() -> None:
    looks = Looks(20, 5, 40)
    flat = arm([0.8] + [0.5] * 39)
    ahead, behind = ArmTrials(flat.val[:27], flat.val_std[:27], 5), ArmTrials(flat.val[:19], flat.val_std[:19], 5)
    stop = stop_of(FLAT, looks, ahead, behind)
    assert (stop.k, stop.next_look) == (None, 20)
    assert stop.reason == "open: next look at 20 trials per arm"


def test_the_rule_is_symmetric_and_blind_to_test_and_to_which_arm_leads() -> None:
    """Swapping the arms never changes a stop, and a constant added to one arm's validation
    (which arm leads) neither: the rule reads each arm's own path only."""
    rng = np.random.default_rng(3)
    val = rng.normal(0.7, 0.02, size=(500, 2, 40))
    std = np.abs(rng.normal(0.02, 0.005, size=(500, 2, 40)))
    a, b = ArmTrials(val[:, 0], std[:, 0], 5), ArmTrials(val[:, 1], std[:, 1], 5)
    looks = Looks(20, 5, 40)
    stops = stopping_k(FLAT, looks, a, b)
    assert np.array_equal(stops, stopping_k(FLAT, looks, b, a))
    assert np.array_equal(stops, stopping_k(FLAT, looks, ArmTrials(val[:, 0] + 0.1, std[:, 0], 5), b))
    assert len(set(stops.tolist())) > 1  # the pairs stop at different looks: the assertions bite
    assert trial_fraction(stops, 40) == pytest.approx(stops.mean() / 40)


def test_flat_or_same_also_settles_an_arm_whose_winner_did_not_change_over_the_last_step() -> None:
    rule = STOPPING_RULES.get("flat-or-same")
    # the winner (trial 14, far above the half-budget winner: not flat) stands over trials 15-19
    late = arm([0.5] * 14 + [0.9] + [0.4] * 5, std=0.02, repeats=4)
    assert not bool(flat_on_validation(late, 20)) and bool(rule.settled(late, 20))
    # a new winner among the last five trials and not flat: still moving under both
    newer = arm([0.5] * 16 + [0.9] + [0.4] * 3, std=0.02, repeats=4)
    assert not bool(rule.settled(newer, 20))
    # flat settles it whatever the winner did
    flat = arm([0.5] * 16 + [0.505] + [0.4] * 3, std=0.02, repeats=4)
    assert bool(rule.settled(flat, 20))
    assert "unchanged winners over the last 5 trials" in rule.reason(20)
