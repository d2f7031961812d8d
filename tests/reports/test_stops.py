"""Where each pair's adaptive budget stops, read from stored trials, and its verdict there
against the fixed budget's (the replay of issue 47), on hand-made stores with known answers."""

from __future__ import annotations

import pytest
from report_stores import CURVE_BASE, curve_row, hand_store, shifted

from orthotune.core import ConfigError, OrthotuneError
from orthotune.reports import Filters, adaptive_replay, build_report, pair_verdicts, write_report

TRIALS = 40


def settled_rows(n: int = TRIALS) -> list[dict]:
    """Both arms find their winner in the first trial, +5 points on test: flat from the start."""
    rows = []
    for i in range(n):
        val = 0.80 if i == 0 else 0.70
        rows.append(curve_row(f"o{i}", shifted([val] * 5, 0.0, jitter=True), shifted(CURVE_BASE, -0.01 * i), i,
                              lr=0.001 * (i + 1)))
        rows.append(curve_row(f"x{i}", shifted([val] * 5, 0.0, jitter=True), shifted(CURVE_BASE, 0.05, jitter=True), i,
                              ortho=True, lr=0.001 * (i + 1)))
    return rows


def climbing_rows(n: int = TRIALS) -> list[dict]:
    """The original arm finds a better winner every trial (validation and test), up to +4
    points over the Ortho-GConv arm's only winner: the gain at 40 is a loss, at 20 a gain."""
    rows = []
    for i in range(n):
        rows.append(curve_row(f"co{i}", shifted([0.60 + 0.005 * i] * 5, 0.0, jitter=True),
                              shifted(CURVE_BASE, 0.002 * i - 0.04, jitter=True), i, depth=4, lr=0.001 * (i + 1)))
        rows.append(curve_row(f"cx{i}", shifted([0.80 if i == 0 else 0.70] * 5, 0.0, jitter=True),
                              shifted(CURVE_BASE, 0.0), i, depth=4, ortho=True, lr=0.001 * (i + 1)))
    return rows


@pytest.mark.slow
def test_a_settled_pair_stops_at_the_first_look_and_keeps_its_verdict(tmp_path):
    store = hand_store(tmp_path / "s", settled_rows())
    replay = adaptive_replay(store)
    (row,) = replay.table.to_dict("records")
    assert (row["stop"], row["trials"]) == (20, TRIALS)
    assert row["reason"] == "both arms flat on validation over k = 11..20"
    assert row["fixed_verdict"] == row["adaptive_verdict"] == "gain, significant" and row["kept"]
    assert replay.trial_fraction == pytest.approx(0.5) and replay.looks == (20, 25, 30, 35, 40)
    # a search without an adaptive budget: its verdict line says its trials per arm
    (line,) = pair_verdicts(store).lines
    assert "40 trials per arm (fixed budget); " in line
    md = write_report(build_report(store, plots=False), "md")
    assert "| pairs | trials per arm | Δ mean (pts) |" in md and "| 5 | 40 | +5.00 |" in md


@pytest.mark.slow
def test_a_moving_pair_trains_to_the_maximum_and_the_family_is_holm_adjusted_per_budget(tmp_path):
    store = hand_store(tmp_path / "s", settled_rows() + climbing_rows())
    replay = adaptive_replay(store, rule="flat")
    stops = dict(zip(replay.table["pair"], replay.table["stop"]))
    assert sorted(stops.values()) == [20, 40]
    assert replay.table["kept"].all()  # the moving pair's stop is the fixed budget itself
    assert replay.trial_fraction == pytest.approx(60 / 80)
    # the fixed budget as a rule: nothing stops early
    assert adaptive_replay(store, rule="never").trial_fraction == 1.0


@pytest.mark.slow
def test_bad_replays_fail_with_one_line(tmp_path):
    store = hand_store(tmp_path / "s", settled_rows())
    with pytest.raises(ConfigError, match="unknown stopping rule 'race'; valid: flat, flat-or-same, never"):
        adaptive_replay(store, rule="race")
    with pytest.raises(ConfigError, match="first look 50: beyond the maximum of 40 trials per arm"):
        adaptive_replay(store, first=50)
    with pytest.raises(OrthotuneError, match="no search .nowhere. in store"):
        adaptive_replay(store, Filters(searches=("nowhere",)))
