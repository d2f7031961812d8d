"""Each concept is declared once: a new dataset, setting, backbone or launch switch is one
entry (plus the code that uses it), and every layer that should show it does."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import orthotune.search
from orthotune.cli import build_parser
from orthotune.cli.launch import search_options
from orthotune.cli.train import config_from_args
from orthotune.core import (
    BACKBONE_INFO,
    DATASETS,
    SETTINGS,
    TASKS,
    BackboneInfo,
    ConfigError,
    DatasetInfo,
    TrainConfig,
    defaults_for,
)
from orthotune.core._catalogue import SettingInfo
from orthotune.core._memory import memory_estimate
from orthotune.models import BACKBONES, build_node_model, register_backbone
from orthotune.models._backbones import GCN
from orthotune.reports import Filters
from orthotune.reports._stats import repeat_noun
from orthotune.reports._text import _repeat_nouns, setting_title
from orthotune.search import LaunchOptions
from orthotune.search._options import launch_option
from orthotune.spaces import parse_space
from orthotune.training import run_configs
from orthotune.training._data import required_files


@pytest.fixture
def register(monkeypatch):
    """Add an entry to one of core's registries for this test only: the one edit it takes."""
    def add(registry, info):
        monkeypatch.setitem(registry._entries, info.name, info)
        return info

    return add


def command_parser(command: str):
    return build_parser(command)._subparsers._group_actions[0].choices[command]


def help_of(command: str, dest: str | None = None) -> str:
    """The command's help, or one option's."""
    parser = command_parser(command)
    if dest is None:
        return parser.format_help()
    return next(a.help for a in parser._actions if a.dest == dest)


def test_a_dataset_is_one_entry(register):
    register(DATASETS, DatasetInfo("cora2", "node", ("full", "semi"), "planetoid", "Planetoid/Cora2", 100, 10,
                                   dict(hidden=32)))
    config = TrainConfig(dataset="cora2")
    assert (config.setting, config.backbone, config.hidden, config.lr) == ("full", "gcn", 32, 0.01)
    assert defaults_for("cora2", "semi")["hidden"] == 32 and memory_estimate(config).nodes == 100
    space = parse_space({"datasets": ["cora2"], "backbones": ["gcn"], "depths": [2]})
    assert space.protocol("cora2") == {"setting": "full", "splits": [0, 1, 2, 3, 4]}
    assert Filters(datasets=("cora2",)).datasets == ("cora2",)
    assert required_files("cora2", "semi")[0] == "Planetoid/Cora2/raw/ind.cora2.x"  # its loader family's files
    assert "Planetoid/Cora2/geom-gcn/raw/cora2_split_0.6_0.2_9.npz" in required_files("cora2", "full")
    assert "cora2" in help_of("train", "dataset") and "cora2 32" in help_of("train", "hidden")
    assert "cora2" in help_of("best", "dataset")


def test_a_setting_is_one_entry(register):
    register(SETTINGS, SettingInfo("low", "low-label", repeat="seed", repeats_field="seeds",
                                   default_repeats=(0, 1, 2), split="public",
                                   defaults=dict(depth=2, hidden=16, lr=0.05, weight_decay=5e-4, dropout=0.5,
                                                 epochs=100, patience=10)))
    register(DATASETS, DatasetInfo("cora2", "node", ("low",), "planetoid", "Planetoid/Cora2", 100, 10))
    config = TrainConfig(dataset="cora2")
    assert (config.setting, config.hidden, config.lr, config.epochs) == ("low", 16, 0.05, 100)
    space = parse_space({"datasets": ["cora2"], "backbones": ["gcn"], "depths": [2], "setting": "low"})
    assert space.protocol("cora2") == {"setting": "low", "seeds": [0, 1, 2]}
    assert space.max_epochs() == 100
    assert Filters(settings=("low",)).settings == ("low",)
    assert setting_title("low") == "low-label" and repeat_noun("low") == "seed"
    assert "seed for semi/semi-rw/dropedge-full/dropedge-full-aug/official/low" in _repeat_nouns()
    assert required_files("cora2", "low")[0] == "Planetoid/Cora2/raw/ind.cora2.x"  # the public split's files
    assert "low" in help_of("train", "setting") and "low 16" in help_of("train", "hidden")
    assert "low" in help_of("best", "setting")


def test_a_launch_switch_is_one_declaration(monkeypatch):
    switch = launch_option(False, "check the inputs, train nothing", "cluster")
    extended = dataclasses.make_dataclass("LaunchOptions", [("dry_run", bool, switch)], bases=(LaunchOptions,),
                                          frozen=True)
    monkeypatch.setattr(orthotune.search, "LaunchOptions", extended)
    assert "check the inputs, train nothing" in help_of("launch", "dry_run")
    args = build_parser("launch").parse_args(["launch", "--space", "quick", "--store", "s", "--dry-run"])
    options = search_options(args)
    assert isinstance(options, extended) and options.dry_run is True
    meta = options.to_meta()
    assert meta["dry_run"] is True and extended.from_meta(meta).dry_run is True
    args = build_parser("launch").parse_args(["launch", "--space", "quick", "--store", "s"])
    assert search_options(args).dry_run is False


class ThrowawayGCN(GCN):
    """A backbone from outside the catalogue: GCN's convolution under a name of its own, with
    one constructor argument of its own (``marker``) that it takes from a config itself."""

    info = BackboneInfo("throwaway", "node", "a test's throwaway", packed=True, conv_bias="switch",
                        batch_norm=True)

    def __init__(self, *args, marker: int = 0, **kwargs) -> None:
        self.marker = marker
        super().__init__(*args, **kwargs)

    @classmethod
    def config_arguments(cls, config):
        return {**super().config_arguments(config), "marker": config.hidden}


@pytest.fixture
def backbone_registries(monkeypatch):
    """Both registries a backbone joins (core's declarations, models' classes), restored after."""
    for registry in (BACKBONE_INFO, BACKBONES):
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))


def test_a_backbone_is_one_entry(backbone_registries, data_root):
    register_backbone(ThrowawayGCN)  # the one edit
    assert "throwaway" in help_of("train", "backbone") and "throwaway" in TASKS.get("node").backbones
    args = build_parser("train").parse_args(["train", "--dataset", "cora", "--backbone", "Throwaway", "--depth", "3",
                                             "--hidden", "8", "--no-conv-bias", "--epochs", "2", "--split", "0"])
    config = config_from_args(args)
    assert (config.backbone, config.conv_bias, config.ortho) == ("throwaway", False, True)
    # the fields it reads follow from its declared capabilities, not from a list of names
    shown = config.to_dict(read=True)
    assert {"conv_bias", "batch_norm", "layout", "input_T", "feature_transform", "T", "bound"} <= set(shown)
    assert not {"jk", "alpha", "heads", "batch_size"} & set(shown)
    space = parse_space({"datasets": ["cora"], "backbones": ["throwaway"], "depths": [3],
                         "ortho": {"T": [2, 4]}, "train": {"conv_bias": [True, False]}, "reference": True})
    assert [cell.key for cell in space.cells()] == ["cora/throwaway/3/original", "cora/throwaway/3/ortho",
                                                    "cora/mlp/2/reference"]
    model = build_node_model(config, 1433, 7, seeds=(0,), ortho=[config.ortho_settings()])
    assert type(model) is ThrowawayGCN and model.marker == 8 and len(model.conv_biases) == 0
    (result,) = run_configs([config], torch.device("cpu"))
    assert result.status == "completed" and len(result.runs) == 1 and result.runs[0].epochs == 2


def test_a_backbone_the_catalogue_declares_is_registered_with_that_declaration(backbone_registries):
    """A class whose declaration differs from the catalogue's under the same name is refused."""

    class Impostor(GCN):
        info = BackboneInfo("jknet", "node", "not JKNet", packed=True)

    with pytest.raises(ConfigError, match="Impostor's declaration differs from the catalogue's"):
        register_backbone(Impostor)


#: Run in a fresh interpreter: insert one coordinate, ``layout``, into ``core.Cell`` (between
#: depth and the variant, as the one line in ``core/_cells.py`` would) before any layer above
#: core reads it, then show what each layer derives from it.
NEW_COORDINATE = r"""
import dataclasses, json, sys
import orthotune.core, orthotune.core._cells as cells

old = dataclasses.fields(cells.Cell)
fields = [(f.name, f.type, dataclasses.field(metadata=f.metadata)) for f in old]
fields.insert(4, ("layout", "str", cells.coordinate("where the convolutions sit")))
methods = {name: vars(cells.Cell)[name] for name in ("of", "key")}
cells.Cell = orthotune.core.Cell = dataclasses.make_dataclass("Cell", fields, namespace=methods, frozen=True)

sys.path.insert(0, sys.argv[2])
from report_stores import hand_row, hand_store
from orthotune.cli.best import TABLE
from orthotune.reports import build_report, write_report
from orthotune.reports._hyperparameters import WINNER_COLUMNS
from orthotune.reports._load import CELL, PAIR
from orthotune.reports._pair import pair_label
from orthotune.reports._text import IMPORTANCE_HEADER, MISSING_HEADER, PAIR_HEADER
from orthotune.search import cell_key

rows = [hand_row(f"{layout}-{ortho}", [0.8, 0.7], [0.7, 0.6], layout=layout, ortho=ortho, selection="val_acc",
                 variant="default") for layout in ("linear", "standard") for ortho in (False, True)]
report = build_report(hand_store(sys.argv[1], rows), plots=False)
print(json.dumps({
    "key": cell_key({"dataset": "cora", "backbone": "gcn", "depth": 2, "layout": "standard", "ortho": True}),
    "cell": CELL, "pair": PAIR, "table": TABLE, "pair_header": PAIR_HEADER, "missing": MISSING_HEADER,
    "importance": IMPORTANCE_HEADER, "winners": WINNER_COLUMNS,
    "label": pair_label({"dataset": "cora", "setting": "full", "backbone": "gcn", "depth": 2, "layout": "standard",
                         "variant": "default"}),
    "pairs": report.summary[["layout", "orig_trial_id", "ortho_trial_id"]].values.tolist(),
    "verdicts": list(report.verdicts.lines),
    "paper": [line for line in write_report(report, "md").splitlines() if line.startswith("| ")][:3],
}))
"""


@pytest.mark.slow  # 5 s: a fresh interpreter imports the layers
def test_a_cell_coordinate_is_one_declaration(tmp_path):
    """One more coordinate of ``core.Cell`` and the search's cell key, the report's cells,
    pairs, tables and verdict lines, and ``best``'s table all have it: trials that differ in
    it are different cells, each paired with its own original."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    stores = Path(__file__).resolve().parent / "reports"
    done = subprocess.run([sys.executable, "-c", NEW_COORDINATE, str(tmp_path / "store"), str(stores)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["key"] == "cora/gcn/2/standard/ortho"
    assert seen["cell"] == ["dataset", "setting", "backbone", "depth", "layout", "ortho", "switches"]
    assert seen["pair"] == ["setting", "dataset", "backbone", "depth", "layout", "shared"]
    assert seen["table"][:7] == ["dataset", "setting", "backbone", "depth", "layout", "variant", "arm"]
    for header in ("pair_header", "missing", "importance", "winners"):
        assert seen[header][:5] == ["setting", "dataset", "backbone", "depth", "layout"], header
    assert seen["label"] == "cora full gcn depth 2 standard (default)"
    assert sorted(seen["pairs"]) == [["linear", "linear-False", "linear-True"],
                                     ["standard", "standard-False", "standard-True"]]
    assert [line.split(":")[0] for line in seen["verdicts"]] == ["cora full gcn depth 2 linear (default)",
                                                                 "cora full gcn depth 2 standard (default)"]
    assert seen["paper"][0].startswith("| dataset | backbone | layout | depth 2 original |")
    assert seen["paper"][1].startswith("| cora | gcn | linear |")


#: Run in a fresh interpreter: declare one more ``trials`` column (the mean validation loss
#: over the repeats) in ``core.RESULT_COLUMNS`` before the store derives its schema from it.
NEW_RESULT_COLUMN = r"""
import json, sys
import orthotune.core, orthotune.core._results as results

extra = results.result_column("val_loss", results.Summary.MEAN)
results.RESULT_COLUMNS = orthotune.core.RESULT_COLUMNS = (*results.RESULT_COLUMNS, extra)

from orthotune.core import ConfigResult, RunResult, TrainConfig
from orthotune.reports._load import load_trials
from orthotune.store import TRIALS_SCHEMA, Store, trial_row

config = TrainConfig(dataset="cora", depth=2, splits=(0, 1))
result = ConfigResult(config, [RunResult(0, 0, val_acc=0.5, val_loss=1.0), RunResult(1, 0, val_acc=0.7, val_loss=2.0)])
store = Store.open(sys.argv[1], create=True)
store.write_trial(trial_row("s", "t", result, "completed"), [])
print(json.dumps({"type": str(TRIALS_SCHEMA.field("val_loss").type), "after": TRIALS_SCHEMA.names[-9],
                  "stored": store.read("trials").to_pylist()[0]["val_loss"],
                  "report": float(load_trials(store)["val_loss"].iloc[0])}))
"""


@pytest.mark.slow  # 5 s: a fresh interpreter imports the layers
def test_a_result_column_is_one_declaration(tmp_path):
    """One more entry of ``core.RESULT_COLUMNS`` and the store's schema has the typed column,
    the row builder fills it, the store reads it back and the reports' trials carry it."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", NEW_RESULT_COLUMN, str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"type": "double", "after": "device", "stored": 1.5, "report": 1.5}


#: The loop's machinery a trainer reaches through its base (``training/_base.py``), not by
#: importing it: one place drives packs through the loop.
LOOP_MACHINERY = {"TrainingLoop", "execution", "runs_of", "Rng", "Outcome", "fault_codes", "faults_of", "LOSS",
                  "OUTPUT", "adam_groups"}


@pytest.mark.parametrize("trainer", ["_node", "_modules", "_graph"])
def test_each_trainer_reaches_the_one_loop_through_its_base(trainer):
    import ast
    from pathlib import Path

    import orthotune.training

    source = (Path(orthotune.training.__file__).parent / f"{trainer}.py").read_text()
    imported = {(node.module, alias.name) for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert not {name for module, name in imported if module == "orthotune.training._loop"} & LOOP_MACHINERY
    assert {module for module, _ in imported} >= {"orthotune.training._base"}


def _layer_sources():
    from pathlib import Path

    from orthotune import LAYERS

    root = Path(__file__).resolve().parents[1]
    return {str(p.relative_to(root)): p.read_text() for layer in LAYERS for p in sorted((root / layer).rglob("*.py"))}


@pytest.mark.slow
def test_an_error_becomes_one_line_in_one_place():
    """Only ``core.one_line`` cuts an error's text into lines: no other function of any layer
    splits an error's message (five helpers once did, each cutting at its own length)."""
    import ast

    found = []
    for label, source in _layer_sources().items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef) and label != "core/_errors.py":
                arguments = {a.arg for a in node.args.args}
                splits = any(isinstance(n, ast.Attribute) and n.attr == "splitlines" for n in ast.walk(node))
                if splits and arguments & {"error", "exc", "exception"}:
                    found.append(f"{label}:{node.lineno} {node.name}")
    assert not found, found


@pytest.mark.slow
def test_the_cache_folder_is_one_rule():
    """The datasets' cache and the cost planner's measurements resolve orthotune's cache folder
    through ``core.cache_dir`` alone: no other module spells its variable or its fallback."""
    import ast

    offenders = [label for label, source in _layer_sources().items() if label != "core/_cache.py"
                 for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Constant)
                 and node.value in ("ORTHOTUNE_CACHE", "XDG_CACHE_HOME")]
    assert not offenders, offenders


def test_a_finite_searcher_is_one_entry(monkeypatch):
    """A searcher that trains a fixed list of points and keeps no Optuna study is one registry
    entry: the launch's choices list it, the options give it ``--points``, the budget counts
    its points and the strategy trains them, in its order, with no per-cell sampler. Nothing
    else reads a searcher's name."""
    from orthotune.search import SEARCHERS, Searcher, cell_trials
    from orthotune.search._strategy import strategy

    def reverse_grid(space, seed):
        return list(reversed(space.grid()))

    monkeypatch.setitem(SEARCHERS._entries, "reverse-grid",  # the one edit
                        Searcher(finite=True, points=reverse_grid, size=lambda cell: cell.grid_size()))
    assert "reverse-grid" in help_of("launch", "searcher")
    space = parse_space({"datasets": ["cora"], "backbones": ["gcn"], "depths": [2], "original": False,
                         "ortho": {"T": [2, 4, 6]}})
    options = LaunchOptions(store="unused", name="finite", space=space, searcher="reverse-grid")
    assert sum(cell_trials(options).values()) == 3
    chosen = strategy(options)
    assert [p["T"] for p in chosen.search_alg.points] == [6, 4, 2] and chosen.configs == 3
    given = LaunchOptions(store="unused", name="finite", space=space, searcher="reverse-grid",
                          points=[{**space.grid()[0]}])
    assert sum(cell_trials(given).values()) == 1
    with pytest.raises(ValueError, match="explicit points need a searcher that trains given points"):
        LaunchOptions(store="unused", name="sampled", space=space, searcher="random", points=[space.grid()[0]])
