"""A space's named arms and the comparisons it declares (``spaces._arms``): the default pair
as the default case, every arm a cell per dataset with the same budget, the three forms of
``compare``, and bad declarations refused in one line (exit 2 from the CLI)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from orthotune.core import ConfigError, TrainConfig
from orthotune.spaces import comparisons_of, default_config, parse_space, resolve_space

ARMS = {
    "GCN": {"backbone": "gcn", "depth": 2},
    "GCNII": {"backbone": "gcnii", "depth": {"texas": 8, "wisconsin": 4}, "theta": [0.5, 1.0]},
    "Ortho-GCNII": {"backbone": "gcnii", "depth": {"texas": 8, "wisconsin": 4}, "treatments": {"ortho": True}},
}


def space(**changes) -> dict:
    values = {"name": "t", "datasets": ["texas", "wisconsin"], "setting": "full", "repeats": [0, 1],
              "ortho": {"T": {"low": 1, "high": 6}}, "train": {"lr": [0.01, 0.05], "epochs": 20, "patience": 10},
              "arms": ARMS, "compare": {"against": "Ortho-GCNII"}, "samples": 3, "reference": True}
    values.update(changes)
    return {k: v for k, v in values.items() if v is not None}


def test_a_space_without_arms_is_the_default_pair_as_before():
    quick = resolve_space("quick")
    assert quick.arms == () and quick.comparisons() == [("ortho", "original")]
    assert [c.key for c in quick.cells()] == ["cora/gcn/2/original", "cora/gcn/2/ortho", "cora/gcn/4/original",
                                              "cora/gcn/4/ortho", "cora/mlp/2/reference"]
    assert "arms" not in quick.to_dict() and default_config(quick.cells()[1]).get("arm") is None


def test_every_arm_is_a_cell_per_dataset_with_the_same_budget_and_its_own_values():
    parsed = parse_space(space())
    cells = parsed.arm_cells()
    assert [c.key for c in cells] == ["texas/gcn/2/GCN", "wisconsin/gcn/2/GCN", "texas/gcnii/8/GCNII",
                                      "wisconsin/gcnii/4/GCNII", "texas/gcnii/8/Ortho-GCNII",
                                      "wisconsin/gcnii/4/Ortho-GCNII"]
    assert {c.samples for c in parsed.cells()} == {3}  # the arms and the reference alike
    configs = {c.key: TrainConfig.from_dict(default_config(c)) for c in cells}
    assert {k: (c.arm, c.ortho, c.depth) for k, c in configs.items() if k.startswith("texas")} == {
        "texas/gcn/2/GCN": ("GCN", False, 2), "texas/gcnii/8/GCNII": ("GCNII", False, 8),
        "texas/gcnii/8/Ortho-GCNII": ("Ortho-GCNII", True, 8)}
    gcnii, ortho = cells[2], cells[4]
    assert "theta" in gcnii.train and "theta" not in ortho.train and "T" in ortho.ortho and gcnii.ortho is None
    assert "theta" not in cells[0].train  # the space's values go to the arms whose backbone reads them
    assert parse_space(parsed.to_dict()) == parsed  # a search's record holds it and reads it back


def test_the_comparisons_of_each_form():
    assert parse_space(space()).comparisons() == [("GCN", "Ortho-GCNII"), ("GCNII", "Ortho-GCNII")]
    assert parse_space(space(compare="all-pairs")).comparisons() == [
        ("GCNII", "GCN"), ("Ortho-GCNII", "GCN"), ("Ortho-GCNII", "GCNII")]
    assert parse_space(space(compare="treatments")).comparisons() == [("Ortho-GCNII", "GCNII")]
    assert parse_space(space(compare=None)).comparisons() == [("Ortho-GCNII", "GCNII")]  # the default
    names, pairs = comparisons_of(parse_space(space()).to_dict())
    assert names == ["GCN", "GCNII", "Ortho-GCNII"] and pairs == [("GCN", "Ortho-GCNII"), ("GCNII", "Ortho-GCNII")]
    assert comparisons_of(resolve_space("quick").to_dict()) == ([], [])


def test_a_treatment_is_any_config_field_and_its_value_may_be_searched():
    arms = {"JKNet": {"backbone": "jknet", "depth": 4},
            "JKNet+DropEdge": {"backbone": "jknet", "depth": 4, "treatments": {"drop_edge": [0.1, 0.3]}},
            "JKNet+wd": {"backbone": "jknet", "depth": 4, "treatments": {"weight_decay_io": 0.0}}}
    parsed = parse_space(space(arms=arms, compare="treatments"))
    assert parsed.comparisons() == [("JKNet+DropEdge", "JKNet"), ("JKNet+wd", "JKNet")]
    treated = next(c for c in parsed.arm_cells() if c.key.endswith("JKNet+DropEdge"))
    assert treated.train["drop_edge"].values == (0.1, 0.3) and "drop_edge" not in parsed.arm_cells()[0].train
    config = TrainConfig.from_dict(default_config(treated))
    assert (config.arm, config.drop_edge) == ("JKNet+DropEdge", 0.1)


@pytest.mark.parametrize(("changes", "words"), [
    ({"compare": {"against": "GAT"}}, "compare.against 'GAT' is no arm; arms: GCN, GCNII, Ortho-GCNII"),
    ({"compare": "pairs"}, "compare 'pairs' must be one of"),
    ({"compare": {"versus": "GCN"}}, "must be {against: ARM}"),
    ({"arms": {"GCN": ARMS["GCN"], "Ortho-GCNII": ARMS["Ortho-GCNII"]}, "compare": "treatments"},
     "arm 'Ortho-GCNII' needs one bare gcnii arm"),
    ({"arms": {"GCN": ARMS["GCN"]}}, "compare needs two arms or more"),
    ({"arms": {"ortho": ARMS["GCN"], "GCN": ARMS["GCN"]}}, "arm name 'ortho' is taken"),
    ({"arms": {"GCN": ARMS["GCN"], "G/X": ARMS["GCN"]}}, "must start with a letter"),
    ({"arms": {**ARMS, "JK": {"backbone": "jknet", "depth": {"texas": 4}}}}, "has no depth for dataset wisconsin"),
    ({"arms": {**ARMS, "JK": {"backbone": "jknet"}}}, "arms.JK.depth is required"),
    ({"arms": {**ARMS, "JK": {"backbone": "jknet", "depth": 4, "treatments": {"nope": 1}}}},
     "treatments: unknown key 'nope'"),
    ({"backbones": ["gcn"]}, "backbones does not go with arms"),
    ({"arms": None, "backbones": ["gcn"], "depths": [2]}, "compare applies to a space with arms"),
])
def test_a_bad_declaration_is_one_line(changes, words):
    with pytest.raises(ConfigError) as caught:
        parse_space(space(**changes))
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_a_bad_comparison_exits_2_before_any_work(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(space(compare={"against": "GAT"})))
    done = subprocess.run([sys.executable, "-m", "orthotune.cli", "plan", "--space", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "compare.against 'GAT' is no arm" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_sota_presets_train_sgc_without_dropout_as_its_paper_does():
    # SGC has no dropout (Wu et al.); with none its propagated features are computed once
    for name in ("paper-sota", "paper-sota-semi"):
        sgc = [c for c in resolve_space(name).arm_cells() if c.backbones == ("sgc",)]
        assert sgc and all(not c.train["dropout"].searched() and c.train["dropout"].grid() == [0.0] for c in sgc)
        others = [c for c in resolve_space(name).arm_cells() if c.backbones == ("gcn",)]
        assert all(c.train["dropout"].searched() for c in others)


@pytest.mark.slow
def test_the_sota_presets_compare_ortho_gcnii_against_every_other_arm():
    for name, datasets in (("paper-sota", 6), ("paper-sota-semi", 3)):
        preset = resolve_space(name)
        names = [arm.name for arm in preset.arms]
        assert "Ortho-GCNII" in names and len(preset.datasets) == datasets
        assert preset.comparisons() == [(n, "Ortho-GCNII") for n in names if n != "Ortho-GCNII"]
        assert len(preset.arm_cells()) == len(names) * datasets and preset.reference
    small = resolve_space("paper-sota").with_datasets(["texas", "wisconsin"])
    assert {c.key.split("/")[0] for c in small.cells()} == {"texas", "wisconsin"}


@pytest.mark.slow
def test_arms_keeps_the_named_arms_in_the_space_order_and_their_comparisons():
    sota = resolve_space("paper-sota-semi")
    kept = sota.with_arms(["Ortho-GCNII", "GCN", "JKNet+DropEdge"])
    assert [arm.name for arm in kept.arms] == ["GCN", "JKNet+DropEdge", "Ortho-GCNII"]
    assert kept.comparisons() == [("GCN", "Ortho-GCNII"), ("JKNet+DropEdge", "Ortho-GCNII")]
    assert {c.train["arm"].values[0] for c in kept.arm_cells()} == {"GCN", "JKNet+DropEdge", "Ortho-GCNII"}
    assert kept.reference and len(kept.cells()) == 3 * 3 + 3  # three arms and the reference, per dataset
    assert parse_space(kept.to_dict()).arms == kept.arms  # the search's record reads back the arms kept


def test_arms_refuses_a_choice_its_comparisons_cannot_answer():
    treatments = parse_space(space(compare="treatments"))
    with pytest.raises(ConfigError, match="arm 'Ortho-GCNII' needs one bare gcnii arm"):
        treatments.with_arms(["GCN", "Ortho-GCNII"])
    with pytest.raises(ConfigError, match="compare needs two arms or more"):
        treatments.with_arms(["GCN"])
