"""Every arm of a space with named arms gets the same budget: the same trials per cell at a
fixed budget, and under ``--budget adaptive`` the arms of one dataset move in lockstep (a
look waits for every arm's first k, and the group stops only where every arm is settled)."""

from __future__ import annotations

from orthotune.search import cell_trials
from orthotune.search._allocation import AdaptiveBudget, budget_of
from orthotune.search._options import LaunchOptions
from orthotune.search._stopping import STOPPING_RULES, ArmTrials, Looks, stop_of
from orthotune.spaces import parse_space

FLAT = STOPPING_RULES.get("flat")
SPACE = {"name": "s", "datasets": ["texas", "wisconsin"], "setting": "full", "repeats": [0, 1],
         "train": {"lr": {"low": 0.001, "high": 0.1, "log": True}, "epochs": 20},
         "arms": {"GCN": {"backbone": "gcn", "depth": 2}, "GAT": {"backbone": "gat", "depth": 2},
                  "JKNet": {"backbone": "jknet", "depth": {"texas": 8, "wisconsin": 4}},
                  "Ortho-GCN": {"backbone": "gcn", "depth": 2, "treatments": {"ortho": True}}},
         "compare": {"against": "Ortho-GCN"}, "samples": 25, "reference": True}


def test_every_arm_and_the_reference_get_the_same_trials_per_dataset():
    trials = cell_trials(LaunchOptions(store="unused", name="s", space=parse_space(SPACE)))
    assert len(trials) == 4 * 2 + 2 and set(trials.values()) == {25}
    again = cell_trials(LaunchOptions(store="unused", name="s", space=parse_space(SPACE), samples=7))
    assert set(again.values()) == {7}


def test_the_adaptive_budget_groups_a_datasets_arms_and_the_reference_follows_them():
    keys = [cell.key for cell in parse_space(SPACE).cells()]
    budget = budget_of(keys, FLAT, Looks(20, 5, 30))
    assert budget.pairs == {
        "texas/arms": ("texas/gcn/2/GCN", "texas/gat/2/GAT", "texas/jknet/8/JKNet", "texas/gcn/2/Ortho-GCN"),
        "wisconsin/arms": ("wisconsin/gcn/2/GCN", "wisconsin/gat/2/GAT", "wisconsin/jknet/4/JKNet",
                           "wisconsin/gcn/2/Ortho-GCN")}
    assert dict(budget.references) == {"texas/mlp/2/reference": ("texas/arms",),
                                       "wisconsin/mlp/2/reference": ("wisconsin/arms",)}
    assert {budget.allowed(key) for key in keys} == {20}


def _flat(position: int) -> tuple[float, float, int]:
    return (0.8 if position == 1 else 0.5, 0.02, 5)


def _moving(position: int) -> tuple[float, float, int]:
    return (0.5 + 0.01 * position, 0.02, 5)


def test_n_arms_move_in_lockstep_and_stop_only_when_every_arm_is_settled():
    cells = ("a", "b", "c")
    budget = AdaptiveBudget(FLAT, Looks(20, 5, 30), {"g": cells}, {"ref": ("g",)})
    for cell in cells[:2]:
        for position in range(1, 21):
            assert budget.record(cell, position, *_flat(position)) == []
    for position in range(1, 20):  # the third arm's 20th trial has not ended: no look yet
        assert budget.record("c", position, *_moving(position)) == []
    assert {budget.allowed(c) for c in (*cells, "ref")} == {20}
    assert budget.record("c", 20, *_moving(20)) == []  # looked at: the third arm still moves
    assert {budget.allowed(c) for c in cells} == {25}  # all three go on together
    stopped = [budget.record(cell, position, *_flat(position)) for cell in cells for position in range(21, 26)]
    # at 25 the third arm's winner (its 20th trial) is still above its winner at 13: no stop
    assert stopped == [[]] * 15 and {budget.allowed(c) for c in (*cells, "ref")} == {30}
    assert not any(budget.done(c) for c in cells)
    stopped = [budget.record(cell, position, *_flat(position)) for cell in cells for position in range(26, 31)]
    (((name, stop),),) = [s for s in stopped if s]
    assert (name, stop.k, stop.reason) == ("g", 30, "the maximum reached")
    assert all(budget.done(c) for c in (*cells, "ref"))


def test_stop_of_reads_every_arm_alike():
    import numpy as np

    looks = Looks(20, 5, 40)
    flat = ArmTrials(np.array([0.8] + [0.5] * 29), np.full(30, 0.02), np.full(30, 5.0))
    moving = ArmTrials(np.linspace(0.5, 0.8, 30), np.full(30, 0.02), np.full(30, 5.0))
    assert stop_of(FLAT, looks, flat, flat, flat).k == 20
    assert stop_of(FLAT, looks, flat, flat, moving).k is None  # one arm moving: all go on
    short = ArmTrials(flat.val[:19], flat.val_std[:19], flat.repeats[:19])
    assert stop_of(FLAT, looks, flat, flat, short).next_look == 20  # lockstep: the shortest arm decides
