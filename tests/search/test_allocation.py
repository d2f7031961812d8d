"""The adaptive budget's bookkeeping inside one search: lockstep looks, stops, reference
cells as far as their dataset's furthest pair, and stops recomputed from told results."""

from __future__ import annotations

import math

from orthotune.search._allocation import AdaptiveBudget
from orthotune.search._stopping import STOPPING_RULES, Looks

FLAT = STOPPING_RULES.get("flat")


def budget() -> AdaptiveBudget:
    return AdaptiveBudget(FLAT, Looks(20, 5, 30), {"cora-2": ("o2", "x2"), "cora-4": ("o4", "x4")},
                          {"mlp": ("cora-2", "cora-4")})


def flat(position: int) -> tuple[float, float, int]:
    return (0.8 if position == 1 else 0.5, 0.02, 5)


def moving(position: int) -> tuple[float, float, int]:
    return (0.5 + 0.01 * position, 0.02, 5)


def test_a_pair_waits_at_its_look_until_both_arms_first_k_ended_then_stops() -> None:
    b = budget()
    assert b.allowed("o2") == b.allowed("x2") == b.allowed("mlp") == 20
    for position in range(1, 21):
        assert b.record("o2", position, *flat(position)) == []
    for position in range(2, 21):  # one of the ortho arm's 20 trials still running: no look yet
        assert b.record("x2", position, *flat(position)) == []
    assert not b.done("o2") and b.allowed("x2") == 20
    (stopped,) = b.record("x2", 1, *flat(1))
    assert stopped[0] == "cora-2" and stopped[1].k == 20
    assert stopped[1].reason == "both arms flat on validation over k = 11..20"
    assert b.done("o2") and b.done("x2") and not b.done("mlp")  # cora-4 still open


def test_a_moving_pair_goes_on_look_by_look_to_the_maximum_and_the_reference_follows() -> None:
    b = budget()
    for cell in ("o4", "x4"):
        for position in range(1, 21):
            b.record(cell, position, *moving(position))
    assert b.allowed("o4") == 25 and b.allowed("mlp") == 25 and b.allowed("o2") == 20
    for cell in ("o4", "x4"):
        for position in range(21, 31):
            b.record(cell, position, *moving(position))
    assert b.stops()["cora-4"].k == 30 and b.stops()["cora-4"].reason == "the maximum reached"
    assert b.allowed("mlp") == 30 and not b.done("mlp")


def test_a_failed_trial_is_never_a_winner_and_unknown_cells_are_left_alone() -> None:
    b = budget()
    for cell in ("o2", "x2"):
        for position in range(1, 21):
            b.record(cell, position, math.nan, math.nan, 5)  # every trial failed: no winner
    assert "cora-2" not in b.stops() and b.allowed("o2") == 25
    assert b.allowed("elsewhere") is None and b.record("elsewhere", 1, 0.5, 0.0, 5) == []


def test_stops_are_a_function_of_the_results_told_in_any_order() -> None:
    """A resumed search tells the stored rows at once, in whatever order: the same stops."""
    first, second = budget(), budget()
    rows = [(cell, p) for cell in ("o2", "x2", "o4", "x4") for p in range(1, 31)]
    for cell, p in rows:
        first.record(cell, p, *(flat(p) if cell.endswith("2") else moving(p)))
    for cell, p in reversed(rows):
        second.record(cell, p, *(flat(p) if cell.endswith("2") else moving(p)))
    assert first.stops() == second.stops() and {n: s.k for n, s in first.stops().items()} == {"cora-2": 20,
                                                                                              "cora-4": 30}


def test_a_spaces_cells_make_pairs_and_followers_and_stored_rows_are_told_in_start_order() -> None:
    from datetime import UTC, datetime, timedelta

    from orthotune.search._allocation import budget_of
    from orthotune.spaces import parse_space

    space = parse_space({"name": "s", "datasets": ["cora", "texas"], "setting": "full", "backbones": ["gcn"],
                         "depths": [2], "original": True, "ortho": {"T": 4}, "train": {"epochs": 50},
                         "samples": 30, "reference": True})
    b = budget_of([cell.key for cell in space.cells()], FLAT, Looks(20, 5, 30))
    assert set(b.pairs) == {"cora/gcn/2", "texas/gcn/2"}
    assert b.pairs["cora/gcn/2"] == ("cora/gcn/2/original", "cora/gcn/2/ortho")
    (reference,) = [c for c in b.references if c.startswith("cora")]
    assert tuple(b.references[reference]) == ("cora/gcn/2",)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for cell in ("cora/gcn/2/original", "cora/gcn/2/ortho"):
        for i in range(20):  # finished in reverse order, started in order: the long first one wins
            row = {"trial_id": f"{cell}{i}", "search": "s", "status": "completed", "val_acc": 0.8 if i == 0 else 0.5,
                   "val_acc_std": 0.02, "repeat_status": ["completed"] * 5, "seconds": 1000.0 - 10 * i,
                   "finished_at": start + timedelta(seconds=1000 - 9 * i)}
            stopped = b.record_row(cell, row)
    assert [(name, stop.k) for name, stop in stopped] == [("cora/gcn/2", 20)]
