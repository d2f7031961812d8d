from dataclasses import replace

import optuna
import pytest
import yaml

from orthotune.cli import main
from orthotune.core import ConfigError
from orthotune.spaces import PRESETS, is_smoke_test, parse_space, resolve_space

BASE = {"datasets": ["cora"], "backbones": ["gcn"], "depths": [2]}


@pytest.mark.slow
def test_paper_preset_is_the_papers_grid_and_equals_paper_full():
    space = resolve_space("paper")
    assert space.datasets == ("cora", "citeseer", "pubmed", "cornell", "texas", "wisconsin")
    assert space.backbones == ("gcn", "jknet", "gcnii") and space.depths == (2, 4, 8)
    assert space.ortho["T"].grid() == [1, 2, 3, 4, 5, 6]
    assert space.ortho["beta"].grid() == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert space.ortho["lam"].grid() == [1e-4, 5e-4]
    original, ortho = space.cells()[:2]  # cora/gcn/2: the original arm, then Ortho-GConv
    train = 4 * 4 * 7  # lr x weight decay x dropout: both arms search them
    assert len(original.grid()) == train and len(ortho.grid()) == 6 * 10 * 2 * train
    assert all("T" not in p and "beta" not in p and "lam" not in p for p in original.grid())
    assert all(p["splits"] == [0, 1, 2, 3, 4] and p["setting"] == "full" for p in ortho.grid())
    assert replace(space, name="paper-full") == resolve_space("paper-full")


def test_presets_are_listed_and_unknown_names_list_them():
    assert {"quick", "paper"} <= set(PRESETS.names())
    with pytest.raises(ConfigError, match="unknown space preset 'nope'; valid: .*paper.*quick"):
        resolve_space("nope")


def test_define_by_run_samples_the_ortho_arm_conditionally():
    space = resolve_space("quick")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    arms = set()
    for _ in range(20):
        trial = study.ask()
        fixed = space.define_by_run(trial)
        config = {**fixed, **trial.params}
        arms.add(config["ortho"])
        assert ("T" in config) == config["ortho"] and ("beta" in config) == config["ortho"]
        assert config["dataset"] == "cora" and config["splits"] == [0, 1, 2, 3, 4]
        study.tell(trial, 0.0)
    assert arms == {True, False}


def test_space_round_trips_through_its_dict():
    space = resolve_space("quick")
    assert parse_space(space.to_dict()) == space


def test_repeats_default_per_setting():
    semi = parse_space({**BASE, "setting": "semi"})
    assert semi.protocol("cora") == {"setting": "semi", "seeds": list(range(10))}


@pytest.mark.parametrize(
    "change, message",
    [
        ({"colour": 1}, "unknown key 'colour'"),
        ({"ortho": {"T": {"low": 1, "high": 6}, "gamma": [1]}}, "ortho: unknown key 'gamma'"),
        ({"train": {"momentum": 0.9}}, "train: unknown key 'momentum'"),
        ({"ortho": {"beta": []}}, "ortho.beta: the list of values is empty"),
        ({"ortho": {"T": {"low": 6, "high": 1}}}, "ortho.T: range low=6 > high=1"),
        ({"ortho": {"T": {"low": 1}}}, "ortho.T: a range needs both 'low' and 'high'"),
        ({"ortho": {"beta": {"low": 0.1, "high": 2.0}}}, "beta=2.0 must be a number in [0, 1]"),
        ({"datasets": ["imagenet"]}, "unknown dataset 'imagenet' in datasets; valid: citeseer"),
        ({"backbones": ["pna"]}, "unknown backbone 'pna' in backbones; valid:"),
        ({"datasets": []}, "datasets must be a non-empty list"),
        ({"depths": [1]}, "depth=1 must be an integer in [2, 1024]"),
        ({"setting": "semi", "datasets": ["texas"]}, "setting 'semi' is not available for texas"),
        ({"original": False}, "nothing to search"),
        ({"train": {"lr": {"low": 0.1, "high": 0.01, "log": True}}}, "train.lr: range low=0.1 > high=0.01"),
    ],
)
def test_bad_spaces_are_rejected_naming_key_and_rule(change, message):
    with pytest.raises(ConfigError) as error:
        parse_space({**BASE, **change})
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_bad_space_file_through_the_cli_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**BASE, "ortho": {"T": {"low": 6, "high": 1}}}))
    assert main(["launch", "--space", str(bad), "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ortho.T: range low=6 > high=1" in err[0]
    assert not (tmp_path / "store").exists()  # nothing is created for a rejected space


def test_malformed_yaml_is_one_line(tmp_path, capsys):
    bad = tmp_path / "broken.yaml"
    bad.write_text("datasets: [cora\nbackbones: gcn\n")
    assert main(["launch", "--space", str(bad), "--store", str(tmp_path / "store")]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_grid_needs_a_step_for_float_ranges():
    space = parse_space({**BASE, "ortho": {"beta": {"low": 0.1, "high": 0.9}}})
    with pytest.raises(ConfigError, match="beta: grid search needs a 'step'"):
        space.grid()


def test_each_cell_names_its_default_point_where_the_space_can_take_it():
    cells = {c.name.split("/", 1)[1]: c for c in resolve_space("quick").cells()}
    assert cells["cora/gcn/2/original"].default_point() == {"lr": 0.01, "weight_decay": 5e-5}
    assert cells["cora/gcn/2/ortho"].default_point() == {"T": 4, "beta": 0.4, "lam": 5e-4, "lr": 0.01,
                                                         "weight_decay": 5e-5}
    narrow = parse_space({**BASE, "ortho": {"T": [1, 2], "beta": {"low": 0.15, "high": 0.95, "step": 0.1}},
                          "train": {"lr": {"low": 0.001, "high": 0.1, "log": True}}})
    (ortho,) = [c for c in narrow.cells() if c.ortho is not None]
    assert ortho.default_point() == {"lr": 0.01}  # T 4 and beta 0.4 lie off these values


@pytest.mark.parametrize("content, message", [
    (bytes(range(256)), "not UTF-8 text (invalid start byte at byte 128)"),
    ("datasets: [café]\n".encode("latin-1"), "not UTF-8 text"),
    (b"- cora\n", "expected a mapping of keys (datasets, backbones, depths, ...), got a list"),
    (b"", "got nothing (the file is empty)"),
    (b"datasets: [cora]\nbackbones: [gcn]\ndepths: [2]\n1: 2\nx: 3\n", "space: unknown key 1"),
    (b"datasets: [cora]\nbackbones: [gcn]\ndepths: [2]\ntrain: {lr: {low: 1, high: 2, 3: 4}}\n",
     "unknown range key 3"),
])
def test_unreadable_space_files_are_config_errors_naming_the_file(tmp_path, content, message):
    from orthotune.spaces._parse import load_space_file

    path = tmp_path / "space.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as error:
        load_space_file(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_folder_is_not_a_space_file(tmp_path):
    from orthotune.core import OrthotuneError
    from orthotune.spaces._parse import load_space_file

    with pytest.raises(OrthotuneError, match="is not a file"):
        load_space_file(tmp_path)


def test_largest_configs_take_each_cells_widest_values():
    space = parse_space({"datasets": ["cora"], "backbones": ["gcn"], "depths": [2, 8],
                         "ortho": {"T": {"low": 1, "high": 6}}, "train": {"hidden": [16, 128, 32]}})
    configs = space.largest_configs()
    assert [(c.depth, c.ortho, c.hidden) for c in configs] == [(2, False, 128), (2, True, 128), (8, False, 128),
                                                                (8, True, 128)]
    assert [c.T for c in configs if c.ortho] == [6, 6]
    assert max(c.depth for c in resolve_space("gcnii-semi").largest_configs()) == 64


def test_a_stored_spaces_smoke_flag_reads_without_parsing_it():
    """``is_smoke_test`` reads the flag of a space as a record holds it (``to_dict``): the quick
    preset's is set, the paper's is not; what is not a space of this version is not marked."""
    quick = resolve_space("quick").to_dict()
    assert is_smoke_test(quick) and not is_smoke_test(resolve_space("paper").to_dict())
    assert parse_space(quick).smoke_test  # the flag as the parser reads it
    for other in ({**quick, "budget": 3}, {**quick, "smoke_test": "yes"}, [quick], None):
        assert not is_smoke_test(other)


@pytest.mark.parametrize("setting, operator", [("semi-rw", "random-walk"), ("dropedge-full", "first-order")])
def test_a_setting_whose_operator_pygs_convolutions_cannot_read_refuses_them_at_parse(setting, operator):
    """GAT normalises its own edges: on a setting with its own operator it would train another
    graph, so the space is refused before any work, naming the operator and the backbones that read it."""
    with pytest.raises(ConfigError, match=f"setting '{setting}' propagates the {operator} adjacency, which gcn, "
                                          f"jknet, gcnii, incepgcn read; gat's own convolutions"):
        parse_space({"datasets": ["cora"], "setting": setting, "backbones": ["gcn", "gat"], "depths": [2]})
    space = parse_space({"datasets": ["cora"], "setting": setting, "backbones": ["gcn", "jknet"], "depths": [2],
                         "reference": True})  # the structure-agnostic reference never reads an edge
    assert [cell.backbones[0] for cell in space.cells()] == ["gcn", "jknet", "mlp"]
