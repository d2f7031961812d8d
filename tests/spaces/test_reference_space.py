"""The structure-agnostic reference in a space (issue 36): one cell per dataset, not per
cell, with the arms' budget; keyed as the reference; off unless the space asks for it."""

from __future__ import annotations

import pytest

from orthotune.core import ConfigError, reads
from orthotune.spaces import parse_space, resolve_space

SPACE = {"datasets": ["cora", "texas"], "backbones": ["gcn", "gcnii"], "depths": [2, 4],
         "ortho": {"T": [1, 2], "lam": 1.0e-4},
         "train": {"lr": [0.01, 0.005], "weight_decay": [5.0e-4, 5.0e-5], "dropout": {"low": 0.1, "high": 0.5},
                   "layout": "linear", "alpha": 0.3, "epochs": 50, "patience": 20},
         "repeats": [0, 1, 2], "samples": 3, "asha": {"grace_period": 5, "reduction_factor": 2}, "reference": True}


def _space(**change):
    return parse_space({**SPACE, **change})


def test_one_reference_cell_per_dataset_not_per_cell():
    space = _space()
    references = [cell for cell in space.cells() if cell.key.endswith("/reference")]
    assert [cell.key for cell in references] == ["cora/mlp/2/reference", "texas/mlp/2/reference"]
    assert len(space.cells()) == 2 * 2 * 2 * 2 + 2  # datasets x backbones x depths x arms, then one per dataset


def test_the_reference_gets_the_arms_budget():
    space = _space()
    arms = [cell for cell in space.cells() if not cell.key.endswith("/reference")]
    for reference in space.reference_cells():
        dataset = reference.datasets[0]
        arm = next(cell for cell in arms if cell.datasets[0] == dataset)
        assert reference.samples == arm.samples == 3
        assert reference.protocol(dataset) == arm.protocol(dataset)  # setting, repeats, split rule
        assert (reference.grace_period, reference.reduction_factor) == (arm.grace_period, arm.reduction_factor)
        assert reference.max_epochs() == arm.max_epochs()
        # every training value the arms get and the reference reads, fixed or searched, the same
        assert reference.train == {n: d for n, d in arm.train.items() if reads(n, "mlp")}
        assert set(reference.train) == {"lr", "weight_decay", "dropout", "epochs", "patience"}
        assert reference.ortho is None and reference.original


def test_the_reference_of_a_graph_dataset_is_the_sum_of_features_mlp():
    space = parse_space({"datasets": ["proteins"], "backbones": ["gunet"], "depths": [3], "ortho": {},
                         "train": {"batch_size": [32, 64], "epochs": 20}, "reference": True})
    (reference,) = space.reference_cells()
    assert reference.key == "proteins/sum-mlp/2/reference" and set(reference.train) == {"batch_size", "epochs"}
    assert reference.protocol("proteins")["setting"] == "cv10"


def test_off_unless_asked_and_round_trips():
    assert parse_space({k: v for k, v in SPACE.items() if k != "reference"}).reference_cells() == []
    space = _space()
    assert parse_space(space.to_dict()) == space and space.to_dict()["reference"] is True
    with pytest.raises(ConfigError, match="reference"):
        _space(reference="yes")


def test_variants_give_one_reference_per_dataset():
    space = _space(variants=[{"name": "full"}, {"name": "no-reg", "arms": ["ortho"], "lam": 0.0}])
    keys = [cell.key for cell in space.cells()]
    assert keys.count("cora/mlp/2/reference") == 1 and keys.count("texas/mlp/2/reference") == 1


def test_reused_cells_are_left_out():
    from dataclasses import replace

    space = _space()
    reused = replace(space, reused={"cora/mlp/2/reference": "earlier"})
    assert "cora/mlp/2/reference" not in [cell.key for cell in reused.cells()]
    assert "texas/mlp/2/reference" in [cell.key for cell in reused.cells()]
    assert reused.to_dict() == space.to_dict()  # the space file does not change


def test_the_grid_holds_the_reference_points():
    space = _space(train={"lr": [0.01, 0.005], "epochs": 5})
    points = [p for p in space.grid() if p["backbone"] == "mlp"]
    assert len(points) == 2 * 2 and all(p["ortho"] is False and p["depth"] == 2 for p in points)


@pytest.mark.parametrize("name", ["paper", "paper-full", "paper-semi", "paper-graph", "official", "official-semi",
                                  "gcnii-semi"])
@pytest.mark.slow
def test_the_presets_that_make_claims_ask_for_it(name):
    assert resolve_space(name).reference
