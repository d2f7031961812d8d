"""What the protocol knows by name: settings, datasets and tasks, each one declared record
(its defaults included) that every layer reads.

Pure data: loaders live in the training layer (keyed by the datasets' loader families and
the settings' splits), model classes in ``models`` (keyed by the backbone names here; a test
checks both registries agree).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orthotune.core._errors import ConfigError
from orthotune.core._registry import Registry


@dataclass(frozen=True)
class SettingInfo:
    """A protocol setting, declared once and read by every layer: its title in reports, its
    repeats (which config field holds them, the noun for one, how many by default), its
    training defaults and the data split the loaders build for it."""

    name: str
    title: str  # as reports print it
    repeat: str  # what one repeat is: "split", "seed" or "fold" (reports pair repeats on it)
    repeats_field: str  # the config field that holds the repeats: "splits" or "seeds"
    default_repeats: tuple[int, ...]
    # the split the loaders build: "geom-gcn" (Geom-GCN's ten fixed splits), "public"
    # (Planetoid's public split), "official" (the dataset's own, OGB's) or "folds"
    split: str
    defaults: Mapping[str, Any] = field(default_factory=dict, hash=False)  # training defaults


#: Protocol settings: Geom-GCN full-supervised splits, the public semi-supervised split,
#: OGB's official split and stratified 10-fold cross-validation, each with its training
#: defaults (a dataset's own defaults go on top: :func:`defaults_for`):
#: - full/semi: the authors' scripts (Adam, hidden 64, dropout 0.5, up to 1500 epochs,
#:   patience 200 on the selection metric). Weight decay 5e-5: at 5e-4 (GCNII's value)
#:   GCN-8 on Cora sits on the majority-class plateau in both arms (28.4% over splits
#:   0-4), while an equal-budget search picked 5e-5 for the winning originals and the
#:   default Ortho arm then lands on the paper's 85.3 (``shared/docs/ortho-gconv.md``).
#: - official (ogbn-arxiv): OGB's GCN example (hidden 256, dropout 0.5, 500 epochs).
#: - cv10 (PROTEINS, D&D): Graph U-Nets' protocol (Adam with amsgrad, lr 1e-3, weight decay
#:   8e-4 as Gao & Ji's trainer, 200 epochs, no early stop).
#: - alpha (GCNII's initial residual): GCNII's full-supervised script 0.5, its semi-supervised
#:   one 0.1, its ogbn-arxiv example 0.5 (gunet has none).
SETTINGS: Registry[SettingInfo] = Registry("setting")
SETTINGS.add("full", SettingInfo(
    "full", "full-supervised", repeat="split", repeats_field="splits", default_repeats=tuple(range(5)),
    split="geom-gcn",
    defaults=dict(depth=2, hidden=64, lr=0.01, weight_decay=5e-5, dropout=0.5, epochs=1500, patience=200,
                  alpha=0.5)))
SETTINGS.add("semi", SettingInfo(
    "semi", "semi-supervised", repeat="seed", repeats_field="seeds", default_repeats=tuple(range(10)),
    split="public",
    defaults=dict(depth=2, hidden=64, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=1500, patience=200,
                  alpha=0.1)))
SETTINGS.add("official", SettingInfo(
    "official", "official split", repeat="seed", repeats_field="seeds", default_repeats=tuple(range(5)),
    split="official",
    defaults=dict(depth=2, hidden=256, lr=0.01, weight_decay=0.0, dropout=0.5, epochs=500, patience=100,
                  alpha=0.5)))
SETTINGS.add("cv10", SettingInfo(
    "cv10", "10-fold cross-validation", repeat="fold", repeats_field="splits", default_repeats=tuple(range(10)),
    split="folds",
    defaults=dict(depth=3, hidden=64, lr=1e-3, weight_decay=8e-4, dropout=0.3, epochs=200, patience=200)))


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset of the protocol: its task, its settings (the first is the default), the
    loader family that reads it (``orthotune.training``'s loaders) and where its raw files lie
    below the data root (``FOLDER/NAME``, NAME as that loader knows the dataset), its size
    (what memory estimates need) and its own training defaults over its setting's."""

    name: str
    task: str  # "node" or "graph"
    settings: tuple[str, ...]
    loader: str  # "planetoid", "webkb", "ogb" or "tudataset"
    subdir: str
    nodes: int  # the graph's nodes (node task) or the mean nodes of one graph (graph task)
    features: int  # input features per node
    defaults: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def default_setting(self) -> str:
        return self.settings[0]

    def check_setting(self, setting: str) -> None:
        if setting not in self.settings:
            raise ConfigError(
                f"setting {setting!r} is not available for {self.name}; valid: {', '.join(self.settings)}"
            )


#: One entry per dataset; sizes as PyG loads the files (tests/training/test_data.py checks
#: them). Graph U-Nets' per-dataset GCN width (``l_dim``) and batch size go on top of cv10's.
DATASETS: Registry[DatasetInfo] = Registry("dataset")
for _info in (
    DatasetInfo("cora", "node", ("full", "semi"), "planetoid", "Planetoid/Cora", 2708, 1433),
    DatasetInfo("citeseer", "node", ("full", "semi"), "planetoid", "Planetoid/CiteSeer", 3327, 3703),
    DatasetInfo("pubmed", "node", ("full", "semi"), "planetoid", "Planetoid/PubMed", 19717, 500),
    DatasetInfo("cornell", "node", ("full",), "webkb", "WebKB/cornell", 183, 1703),
    DatasetInfo("texas", "node", ("full",), "webkb", "WebKB/texas", 183, 1703),
    DatasetInfo("wisconsin", "node", ("full",), "webkb", "WebKB/wisconsin", 251, 1703),
    DatasetInfo("ogbn-arxiv", "node", ("official",), "ogb", "ogbn_arxiv", 169343, 128),
    DatasetInfo("proteins", "graph", ("cv10",), "tudataset", "TUDataset/PROTEINS", 40, 3,
                dict(hidden=64, batch_size=64)),
    DatasetInfo("dd", "graph", ("cv10",), "tudataset", "TUDataset/DD", 285, 89, dict(hidden=128, batch_size=32)),
):
    DATASETS.add(_info.name, _info)


@dataclass(frozen=True)
class TaskInfo:
    """A kind of dataset: its backbones (the first is the default)."""

    name: str
    backbones: tuple[str, ...]

    @property
    def default_backbone(self) -> str:
        return self.backbones[0]


TASKS: Registry[TaskInfo] = Registry("task")
#: Node backbones: orthotune's packed GCN, JKNet and GCNII, then PyG's own GAT, GraphSAGE, GIN
#: (``torch_geometric.nn.models``) and APPNP (an MLP, then PyG's APPNP propagation), which
#: train one run per model. A node config may also name a user's factory (:data:`FACTORY`).
PACKED_NODE_BACKBONES = ("gcn", "jknet", "gcnii")
PYG_NODE_BACKBONES = ("gat", "sage", "gin", "appnp")
TASKS.add("node", TaskInfo("node", PACKED_NODE_BACKBONES + PYG_NODE_BACKBONES))
TASKS.add("graph", TaskInfo("graph", ("gunet",)))


def all_backbones() -> list[str]:
    """Every task's backbones, in the catalogue's order: the valid values of ``backbone``."""
    return list(dict.fromkeys(b for task in TASKS for b in TASKS.get(task).backbones))


#: A user's model factory as a backbone: ``package.module:factory`` (imported only when a model
#: is built from it; ``orthotune.models`` says what it must return).
FACTORY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def is_factory(name: object) -> bool:
    """Does ``name`` name a user's factory (``package.module:factory``), not a catalogue backbone?"""
    return isinstance(name, str) and ":" in name


def backbone_name(name: object) -> str:
    """``name`` as configs, spaces, the CLI and reports spell a backbone: a catalogue name in
    lower case, or a user's ``package.module:factory`` as given (syntax checked, not imported)."""
    if is_factory(name):
        if not FACTORY.fullmatch(name):
            raise ConfigError(f"backbone {name!r} must be package.module:factory (dotted module path, a colon, "
                              f"a Python name) to name a user's model factory")
        return name
    key = str(name).lower()
    if key not in all_backbones():
        raise ConfigError(f"unknown backbone {name!r}; valid: {', '.join(all_backbones())}, "
                          f"or package.module:factory")
    return key


def defaults_for(dataset: str, setting: str) -> dict[str, Any]:
    """The training defaults of ``dataset`` in ``setting`` (the one lookup every layer uses)."""
    return {**SETTINGS.get(setting).defaults, **DATASETS.get(dataset).defaults}
