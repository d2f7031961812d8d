"""The paper presets load and validate; named variants in a space are searched as their own cells."""

from __future__ import annotations

import optuna
import pytest

from orthotune.core import PROFILES, ConfigError, TrainConfig
from orthotune.spaces import PRESETS, parse_space, resolve_space

PAPER_PRESETS = ("paper-full", "paper-semi", "gcnii-semi", "paper-graph", "ablation", "t-sweep", "official")
BASE = {"datasets": ["cora"], "backbones": ["gcn"], "depths": [2], "ortho": {"T": [2, 4]}}


def configs(space, per_cell: int = 40) -> list[TrainConfig]:
    """The first grid points of every cell (whole grids are tens of thousands of configs)."""
    return [TrainConfig.from_dict(point) for cell in space.cells() for point in cell.grid()[:per_cell]]


@pytest.mark.slow
@pytest.mark.parametrize("name", [*PAPER_PRESETS, "quick"])
def test_presets_load_validate_round_trip_and_document_their_budget(name):
    space = resolve_space(name)
    assert name in PRESETS.names() and space.name == name
    assert parse_space(space.to_dict()) == space
    text = PRESETS.get(name).read_text()
    # the budget is written down; the run time is measured (`orthotune plan`), never hand-estimated
    assert "Budget:" in text or name == "quick"
    assert f"orthotune plan --space {name}" in text and "ESTIMATES" not in text and "Expected run time" not in text
    # every cell's corner configs are valid TrainConfigs (SearchSpace validates on creation);
    # every cell is one dataset, backbone, depth and arm with the space's budget
    for cell in space.arm_cells():
        assert len(cell.datasets) == len(cell.backbones) == len(cell.depths) == 1
        assert cell.original != (cell.ortho is not None) and cell.samples == space.samples


@pytest.mark.slow
def test_paper_full_gives_both_arms_equal_searched_budgets():
    space = resolve_space("paper-full")
    cells = space.arm_cells()
    assert len(cells) == 6 * 3 * 3 * 2
    searched = {name for name, d in space.train.items() if d.searched()}
    assert searched == {"lr", "weight_decay", "dropout"}  # the original arm searches too
    assert space.ortho["T"].grid() == [1, 2, 3, 4, 5, 6] and space.ortho["lam"].grid() == [1e-4, 5e-4]
    assert space.ortho["beta"].grid() == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert space.max_epochs() == 1500 and space.protocol("cora") == {"setting": "full", "splits": [0, 1, 2, 3, 4]}


@pytest.mark.slow
def test_paper_semi_runs_table_3s_depths_and_ten_seeds_and_gcnii_deep_apart():
    cells = resolve_space("paper-semi").arm_cells()
    depths = {b: sorted({c.depths[0] for c in cells if c.backbones == (b,)}) for b in ("gcn", "jknet", "gcnii")}
    assert depths == {"gcn": [2, 4, 8], "jknet": [2, 4, 8], "gcnii": [2, 4, 8]}
    assert cells[0].protocol("pubmed") == {"setting": "semi", "seeds": list(range(10))}
    assert len(cells) == 3 * 9 * 2
    deep = resolve_space("gcnii-semi").arm_cells()
    assert sorted({c.depths[0] for c in deep}) == [16, 32, 64] and {c.backbones for c in deep} == {("gcnii",)}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["paper-semi", "gcnii-semi"])
def test_semi_original_arms_start_at_the_standard_form_at_its_published_settings(name):
    """Issue 22: every original arm's first trial is its backbone's standard form (Kipf &
    Welling's GCN, Chen et al.'s GCNII per dataset) in every value the arm searches, and
    both arms search the same training values (the layout among them)."""
    from orthotune.core import standard_form

    cells = {cell.name: cell for cell in resolve_space(name).arm_cells()}
    for cell in cells.values():
        if cell.ortho is not None:
            assert cells[cell.name.replace("/ortho", "/original")].train == cell.train
            continue
        dataset, backbone = cell.datasets[0], cell.backbones[0]
        published = standard_form("semi", backbone, dataset)
        searched = {n for n, d in cell.train.items() if d.searched()}
        start = cell.default_point()
        assert start == {k: v for k, v in published.items() if k in searched}, cell.name
        assert start, cell.name
        config = TrainConfig.from_dict({**cell.grid()[0], **start})
        if backbone == "gcn":
            assert (config.layout, config.hidden, config.lr, config.weight_decay_io, config.weight_decay_output,
                    config.dropout) == ("standard", 16, 0.01, 5e-4, 0.0, 0.5)


def test_paper_graph_is_gunet_on_dd_and_proteins():
    space = resolve_space("paper-graph")
    assert space.datasets == ("dd", "proteins") and space.backbones == ("gunet",)
    assert {c.setting for c in configs(space)} == {"cv10"}
    assert {(c.T, c.beta) for c in configs(space) if c.ortho} == {(4, 0.4)}


@pytest.mark.slow
def test_ablation_variants_are_distinct_labels_with_their_switches():
    space = resolve_space("ablation")
    by_variant: dict[str, list[TrainConfig]] = {}
    for config in configs(space):
        by_variant.setdefault(config.variant, []).append(config)
    assert set(by_variant) == {"full", "no-hybrid", "no-transform", "no-reg"}
    assert {c.ortho for c in by_variant["full"]} == {True, False}  # the original runs once, with full
    for name, check in (("no-hybrid", lambda c: c.beta == 1.0), ("no-transform", lambda c: c.transform == "none"),
                        ("no-reg", lambda c: c.lam == 0.0)):
        assert all(c.ortho and check(c) for c in by_variant[name]), name
    assert not any(c.beta == 1.0 and c.transform == "none" for c in by_variant["full"])
    assert all(c.dataset == "cora" and c.setting == "semi" and c.backbone == "gcn" for c in configs(space))
    names = [c.name for c in space.cells()]
    assert "ablation/cora/gcn/8/no-reg/ortho" in names and "ablation/cora/gcn/8/no-reg/original" not in names


def test_t_sweep_grid_is_t_1_to_6_at_depths_2_and_8():
    points = resolve_space("t-sweep").grid()
    assert sorted((p["depth"], p["T"]) for p in points) == [(d, t) for d in (2, 8) for t in range(1, 7)]
    assert all(p["ortho"] for p in points)


@pytest.mark.slow
def test_official_preset_is_the_official_profile_with_per_dataset_values():
    space = resolve_space("official")
    found = {c.dataset: c for c in configs(space) if c.backbone == "gcn"}
    assert set(found) == {"cora", "citeseer", "pubmed", "cornell", "texas", "wisconsin"}
    for config in found.values():
        assert config.variant == "official"
        assert all(getattr(config, k) == v for k, v in PROFILES["official"].items() if k not in ("input_T",))
    assert (found["cora"].weight_decay, found["cora"].beta, found["cora"].T) == (1e-4, 0.2, 1)
    assert (found["cornell"].depth, found["cornell"].patience, found["cornell"].T) == (6, 20, 4)  # --layer 4
    assert found["texas"].directed and not found["cora"].directed
    assert space.with_datasets(["texas"]).cells()[0].name == "official/texas/gcn/4/official/ortho"


def test_quick_stays_small_and_shows_the_reference():
    """The demo's verdicts name the structure-agnostic baseline: its cell is searched too."""
    space = resolve_space("quick")
    assert [cell.key for cell in space.cells()] == ["cora/gcn/2/original", "cora/gcn/2/ortho", "cora/gcn/4/original",
                                                    "cora/gcn/4/ortho", "cora/mlp/2/reference"]
    assert space.samples * len(space.cells()) == 30 and space.max_epochs() <= 100


def test_variants_define_by_run_picks_a_label_and_its_values():
    space = parse_space({**BASE, "variants": [{"name": "a", "lam": 0.0}, {"name": "b", "arms": ["ortho"],
                                                                         "transform": "none"}]})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(30):
        trial = study.ask()
        config = TrainConfig.from_dict({**space.define_by_run(trial), **trial.params})
        seen.add((config.variant, config.ortho))
        if config.variant == "b":
            assert config.transform == "none"
        if config.variant == "a" and config.ortho:
            assert config.lam == 0.0
        study.tell(trial, 0.0)
    assert seen == {("a", True), ("a", False), ("b", True)}


@pytest.mark.parametrize(
    "variants, message",
    [
        ([{"lam": 0.0}], "variants[0].name is required"),
        ([{"name": "a", "colour": 1}], "variants[0]: unknown key 'colour'"),
        ([{"name": "a", "arms": ["both"]}], "unknown variants[0].arm 'both'"),
        ([{"name": "a", "profile": "nope"}], "unknown profile 'nope'"),
        ([{"name": "a", "transform": "qr"}], "transform='qr'"),
        ([{"name": "a"}, {"name": "a"}], "variant 'a' gives cell cora/gcn/2/original twice"),
        ("a", "variants must be a list"),
    ],
)
def test_bad_variants_are_rejected_in_one_line(variants, message):
    with pytest.raises(ConfigError) as error:
        parse_space({**BASE, "variants": variants})
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_bench_reduction_of_paper_semi_changes_only_what_it_says():
    """bench/semi-cpu.yaml is paper-semi with fewer datasets, backbones, depths, trials and
    epochs (its header says which); every searched value is paper-semi's."""
    from pathlib import Path

    reduced = resolve_space(str(Path(__file__).resolve().parents[2] / "bench" / "semi-cpu.yaml"))
    paper = resolve_space("paper-semi")
    assert reduced.datasets == ("cora",) and reduced.backbones == ("gcn",) and reduced.depths == (2, 4)
    assert (reduced.samples, reduced.max_epochs()) == (8, 400) and reduced.setting == paper.setting
    assert reduced.ortho == paper.ortho
    assert {k: v for k, v in reduced.train.items() if k not in ("epochs", "patience")} == \
        {k: v for k, v in paper.train.items() if k not in ("epochs", "patience")}
    assert (reduced.grace_period, reduced.reduction_factor) == (paper.grace_period, paper.reduction_factor)


# paper-semi's grids are left out: building them takes minutes (what the count avoids)
@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in (*PAPER_PRESETS, "quick") if n != "paper-semi"])
def test_every_preset_counts_its_cells_grids_as_building_them_would(name):
    for cell in resolve_space(name).cells():
        assert cell.grid_size() == len(cell.grid()), cell.name
