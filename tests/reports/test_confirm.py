"""Confirmation on fresh repeats, its parts: which repeats are fresh, the looks, the configs
moved onto them, and the words the verdicts end with."""

from __future__ import annotations

import pytest

from orthotune.core import ConfigError, TrainConfig
from orthotune.reports._confirm import fresh_repeats, look_sizes, repeat_span, with_repeats
from orthotune.reports._confirmed import confirmed_words


def test_full_takes_the_geom_gcn_splits_the_search_left_unused() -> None:
    assert fresh_repeats("full", [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]) == (5, 6, 7, 8, 9)
    assert fresh_repeats("full", [0, 1, 2], [7, 9]) == (7, 9)
    with pytest.raises(ConfigError, match="none is fresh"):
        fresh_repeats("full", range(10))
    with pytest.raises(ConfigError, match=r"split\(s\) \[10\] do not exist; full has splits 0-9"):
        fresh_repeats("full", [0], [5, 10])


def test_seed_settings_take_as_many_new_seeds_after_the_largest_used() -> None:
    assert fresh_repeats("semi", [0, 1, 2, 3, 4]) == (5, 6, 7, 8, 9)
    assert fresh_repeats("official", [3]) == (4, 5)  # at least two: a paired test needs them
    with pytest.raises(ConfigError, match=r"seed\(s\) \[4\] were used by the search"):
        fresh_repeats("semi", [0, 1, 2, 3, 4], [4, 5, 6])


@pytest.mark.parametrize(("setting", "words"), [("cv10", "no fresh folds"), ("own", "no fresh splits")])
def test_settings_without_fresh_repeats_are_refused(setting: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        fresh_repeats(setting, range(10))


def test_looks_are_spread_evenly_with_two_repeats_at_least() -> None:
    assert look_sizes(5, 2) == [3, 5] and look_sizes(5, 3) == [2, 4, 5] and look_sizes(3, 2) == [2, 3]
    with pytest.raises(ConfigError, match="cannot hold 3 looks"):
        look_sizes(3, 3)
    with pytest.raises(ConfigError, match="--looks 4"):
        look_sizes(10, 4)


def test_a_config_moves_onto_the_fresh_repeats_its_other_field_broadcast_or_following() -> None:
    full = TrainConfig(dataset="texas", setting="full", splits=(0, 1, 2), seeds=(0,))
    assert with_repeats(full, [5, 6]).runs() == [(5, 0), (6, 0)]
    paired = TrainConfig(dataset="texas", setting="full", splits=(0, 1), seeds=(0, 1))
    assert with_repeats(paired, [5, 6]).runs() == [(5, 5), (6, 6)]
    semi = TrainConfig(dataset="cora", setting="semi", seeds=(0, 1, 2))
    assert with_repeats(semi, [7, 8]).runs() == [(0, 7), (0, 8)]


def test_the_verdict_words_name_the_repeats_the_design_and_the_looks() -> None:
    pair = {"repeats": [5, 6, 7, 8, 9], "repeat_kind": "split", "design": "obrien-fleming", "looks_taken": 1,
            "looks_planned": [3, 5], "verdict": "gain not significant (+1.00 pts)"}
    assert confirmed_words(pair) == ("; confirmed on fresh splits 5-9 (O'Brien-Fleming, 1 of 2 looks): "
                                      "gain not significant (+1.00 pts)")
    assert confirmed_words(None) == "" and repeat_span([5, 7]) == "5, 7" and repeat_span([3, 4]) == "3, 4"
