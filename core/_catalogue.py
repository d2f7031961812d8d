"""What the protocol knows by name: settings and datasets, each one declared record (its
defaults included) that every layer reads, and the training values sources give a backbone
on a dataset (the backbones and tasks themselves: ``_backbones``).

Pure data: loaders live in the training layer (keyed by the datasets' loader families and
the settings' splits).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orthotune.core._errors import ConfigError, check
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
    # (Planetoid's public split), "fastgcn" (FastGCN's full-supervised split of the Planetoid
    # files), "official" (the dataset's own, OGB's), "folds", "own" (the masks a PyG dataset or
    # a user's file ships) or "random" (seeded random splits)
    split: str
    defaults: Mapping[str, Any] = field(default_factory=dict, hash=False)  # training defaults
    # the graph operator the packed backbones propagate with (the node loaders build it):
    # "augmented", D^-1/2 (A + I) D^-1/2 (Kipf & Welling's renormalisation), "first-order",
    # I + D^-1/2 A D^-1/2 (their first-order form, the DropEdge scripts' FirstOrderGCN), or
    # "random-walk", D^-1 (A + I) (the DropEdge scripts' AugRWalk: each node's mean with its neighbours)
    adjacency: str = "augmented"


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
#:   one 0.1, its ogbn-arxiv example 0.5 (gunet has none); theta (GCNII's lambda): 0.5, the
#:   default of its scripts (a dataset's own values: :data:`BACKBONE_DEFAULTS`).
SETTINGS: Registry[SettingInfo] = Registry("setting")
SETTINGS.add("full", SettingInfo(
    "full", "full-supervised", repeat="split", repeats_field="splits", default_repeats=tuple(range(5)),
    split="geom-gcn",
    defaults=dict(depth=2, hidden=64, lr=0.01, weight_decay=5e-5, dropout=0.5, epochs=1500, patience=200,
                  alpha=0.5, theta=0.5)))
SETTINGS.add("semi", SettingInfo(
    "semi", "semi-supervised", repeat="seed", repeats_field="seeds", default_repeats=tuple(range(10)),
    split="public",
    defaults=dict(depth=2, hidden=64, lr=0.01, weight_decay=5e-4, dropout=0.5, epochs=1500, patience=200,
                  alpha=0.1, theta=0.5)))
#: - semi-rw: the public split with the random-walk operator ``D^-1 (A + I)``, which DropEdge's
#:   semi-supervised Cora JKNet and IncepGCN scripts pass (``--normalization AugRWalk``);
#:   semi's defaults.
SETTINGS.add("semi-rw", SettingInfo(
    "semi-rw", "semi-supervised (random-walk adjacency)", repeat="seed", repeats_field="seeds",
    default_repeats=tuple(range(10)), split="public", defaults=SETTINGS.get("semi").defaults,
    adjacency="random-walk"))
#: - dropedge-full: DropEdge's full-supervised protocol (Rong et al., ICLR 2020) on FastGCN's
#:   split (Chen et al., ICLR 2018; split "fastgcn"): Planetoid's 1000 public test nodes test;
#:   of the nodes before the first test node (the files' labelled ``allx`` block) the last 500
#:   validate and the rest train (Cora 1208/500/1000, CiteSeer 1812/500/1000, PubMed
#:   18217/500/1000, as the DropEdge paper's Table 3 and its authors' ``load_citation``, task
#:   type full). Its validation nodes are not Planetoid's public ones (Cora's 140-639), which
#:   train here. One split: the repeats are seeds. Its graph is their scripts' first-order
#:   adjacency (at their weight decay 5e-3, GCN-2 on the augmented one stays at 44% on Cora);
#:   defaults: their GCN script's values (hidden 128, lr 0.01, weight decay 5e-3, dropout 0.8,
#:   400 epochs, no early stop: patience 400).
SETTINGS.add("dropedge-full", SettingInfo(
    "dropedge-full", "full-supervised (DropEdge's protocol)", repeat="seed", repeats_field="seeds",
    default_repeats=tuple(range(10)), split="fastgcn",
    defaults=dict(depth=2, hidden=128, lr=0.01, weight_decay=5e-3, dropout=0.8, epochs=400, patience=400,
                  alpha=0.5, theta=0.5), adjacency="first-order"))
#: - dropedge-full-aug: the same split with Kipf & Welling's augmented adjacency
#:   ``D^-1/2 (A + I) D^-1/2``, which the DropEdge scripts of their other backbones pass
#:   (``--normalization AugNormAdj``: IncepGCN's, ResGCN's, JKNet's); defaults: their
#:   full-supervised IncepGCN script's values (hidden 128, lr 0.01, weight decay 1e-3, dropout
#:   0.5, 400 epochs, no early stop).
SETTINGS.add("dropedge-full-aug", SettingInfo(
    "dropedge-full-aug", "full-supervised (DropEdge's protocol, augmented adjacency)", repeat="seed",
    repeats_field="seeds", default_repeats=tuple(range(10)), split="fastgcn",
    defaults=dict(depth=2, hidden=128, lr=0.01, weight_decay=1e-3, dropout=0.5, epochs=400, patience=400,
                  alpha=0.5, theta=0.5)))
SETTINGS.add("official", SettingInfo(
    "official", "official split", repeat="seed", repeats_field="seeds", default_repeats=tuple(range(5)),
    split="official",
    defaults=dict(depth=2, hidden=256, lr=0.01, weight_decay=0.0, dropout=0.5, epochs=500, patience=100,
                  alpha=0.5, theta=0.5)))
SETTINGS.add("cv10", SettingInfo(
    "cv10", "10-fold cross-validation", repeat="fold", repeats_field="splits", default_repeats=tuple(range(10)),
    split="folds",
    defaults=dict(depth=3, hidden=64, lr=1e-3, weight_decay=8e-4, dropout=0.3, epochs=200, patience=200)))
#: The settings of datasets given by PyG class or by file (:func:`dynamic_dataset`), with
#: full's training defaults: ``own`` trains on the masks the dataset ships (its columns are
#: the repeats: WikipediaNetwork's and HeterophilousGraphDataset's ten, Planetoid's public
#: one, a file's), ``random`` on seeded random splits, split ``k`` drawn with seed ``k`` from
#: the ``split_*`` fields (60/20/20 by default; ``split_per_class`` takes that many training
#: nodes per class, as Planetoid's random split takes 20).
_GIVEN_DEFAULTS = SETTINGS.get("full").defaults
SETTINGS.add("own", SettingInfo(
    "own", "the dataset's own splits", repeat="split", repeats_field="splits", default_repeats=(0,),
    split="own", defaults=_GIVEN_DEFAULTS))
SETTINGS.add("random", SettingInfo(
    "random", "seeded random splits", repeat="split", repeats_field="splits", default_repeats=tuple(range(5)),
    split="random",
    defaults=dict(_GIVEN_DEFAULTS, split_train=0.6, split_val=0.2, split_stratify=False, split_per_class=0)))


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset of the protocol: its task, its settings (the first is the default), the
    loader family that reads it (``orthotune.training``'s loaders) and where its raw files lie
    below the data root (``FOLDER/NAME``, NAME as that loader knows the dataset), its size
    (what memory estimates need) and its own training defaults over its setting's.

    A ``pyg:CLASS/NAME`` record has ``subdir`` CLASS and ``argument`` NAME; a ``file:PATH``
    record has ``subdir`` PATH (:func:`dynamic_dataset`). Their sizes are unknown (0) until
    loaded, so memory estimates count their weights only."""

    name: str
    task: str  # "node" or "graph"
    settings: tuple[str, ...]
    loader: str  # "planetoid", "webkb", "ogb" or "tudataset"
    subdir: str
    nodes: int  # the graph's nodes (node task) or the mean nodes of one graph (graph task)
    features: int  # input features per node (0: unknown before loading, a dynamic dataset's)
    defaults: Mapping[str, Any] = field(default_factory=dict, hash=False)
    argument: str = ""  # a PyG class's name argument (``pyg:CLASS/ARGUMENT``); "" for none

    @property
    def default_setting(self) -> str:
        return self.settings[0]

    def check_setting(self, setting: str) -> None:
        if setting not in self.settings:
            raise ConfigError(
                f"setting {setting!r} is not available for {self.name}; valid: {', '.join(self.settings)}"
            )


#: The prefixes of dataset names that are not catalogue entries: ``pyg:CLASS[/NAME]`` (a class
#: of ``torch_geometric.datasets`` with its name argument, raw files below ``DATA_ROOT/CLASS``)
#: and ``file:PATH`` (a saved PyG ``Data`` as ``.pt`` or arrays as ``.npz``; a relative PATH
#: lies below the data root, so every worker of a cluster finds the same file). A colon is
#: in no catalogue name, so the two kinds of names never collide.
PYG, FILE = "pyg", "file"
#: PyG classes whose datasets are graph classification (the rest are one graph of nodes).
GRAPH_CLASSES = ("TUDataset",)
#: PyG classes that ship train/val/test masks: their default setting is ``own``.
OWN_SPLIT_CLASSES = ("Planetoid", "WikipediaNetwork", "HeterophilousGraphDataset", "WebKB", "Actor")
FILE_SUFFIXES = (".pt", ".npz")
_CLASS = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARGUMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
SYNTAX = f"{PYG}:CLASS[/NAME] (a torch_geometric.datasets class) or {FILE}:PATH (.pt or .npz)"


def is_dynamic(name: object) -> bool:
    """Whether ``name`` is a ``pyg:`` or ``file:`` name rather than a catalogue entry."""
    return isinstance(name, str) and name.partition(":")[0].lower() in (PYG, FILE) and ":" in name


def dynamic_dataset(name: str) -> DatasetInfo:
    """The record of a ``pyg:`` or ``file:`` name, built from the name alone (no file is
    read here: the training layer checks that the class and files exist). The record keeps
    the name as given (its prefix lowercased): it is what configs, the store and the
    report's cell key show."""
    prefix, _, rest = name.partition(":")
    prefix = prefix.lower()
    return _pyg_record(f"{prefix}:{rest}", rest) if prefix == PYG else _file_record(f"{prefix}:{rest}", rest)


def _pyg_record(name: str, rest: str) -> DatasetInfo:
    cls, _, argument = rest.partition("/")
    check(bool(_CLASS.match(cls)) and (argument == "" or bool(_ARGUMENT.match(argument))),
          f"dataset {name!r} must read {PYG}:CLASS or {PYG}:CLASS/NAME (CLASS a torch_geometric.datasets class, "
          f"NAME its name argument: letters, digits, '_', '-', '.')")
    if cls in GRAPH_CLASSES:
        return DatasetInfo(name, "graph", ("cv10",), PYG, cls, 0, 0, dict(hidden=64, batch_size=64), argument)
    settings = ("own", "random") if cls in OWN_SPLIT_CLASSES else ("random", "own")
    return DatasetInfo(name, "node", settings, PYG, cls, 0, 0, {}, argument)


def _file_record(name: str, path: str) -> DatasetInfo:
    check(path.strip() != "" and path.lower().endswith(FILE_SUFFIXES),
          f"dataset {name!r} must read {FILE}:PATH with PATH a .pt (a saved PyG Data) or .npz file")
    # random by default: whether the file carries masks is known only once it is read
    return DatasetInfo(name, "node", ("random", "own"), FILE, path, 0, 0)


class DatasetRegistry(Registry[DatasetInfo]):
    """The catalogue's datasets, and a record built on demand for a ``pyg:`` or ``file:``
    name (:func:`dynamic_dataset`): every layer's ``DATASETS.get`` answers both."""

    def get(self, name: str) -> DatasetInfo:
        if is_dynamic(name):
            return dynamic_dataset(name)
        try:
            return super().get(name)
        except ConfigError as error:
            raise ConfigError(f"{error}; or {SYNTAX}") from None

    def __contains__(self, name: object) -> bool:
        return is_dynamic(name) or super().__contains__(name)


#: One entry per dataset; sizes as PyG loads the files (tests/training/test_data.py checks
#: them). Graph U-Nets' per-dataset GCN width (``l_dim``) and batch size go on top of cv10's.
#: The Planetoid datasets' settings: Geom-GCN's splits, the public split (either operator) and DropEdge's two forms.
_PLANETOID_SETTINGS = ("full", "semi", "semi-rw", "dropedge-full", "dropedge-full-aug")
DATASETS: DatasetRegistry = DatasetRegistry("dataset")
for _info in (
    DatasetInfo("cora", "node", _PLANETOID_SETTINGS, "planetoid", "Planetoid/Cora", 2708, 1433),
    DatasetInfo("citeseer", "node", _PLANETOID_SETTINGS, "planetoid", "Planetoid/CiteSeer", 3327, 3703),
    DatasetInfo("pubmed", "node", _PLANETOID_SETTINGS, "planetoid", "Planetoid/PubMed", 19717, 500),
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
class SourcedDefaults:
    """A backbone's own training values on one dataset and setting, over the setting's and the
    dataset's defaults, and where they come from (a script or a paper; never our test results)."""

    values: Mapping[str, Any] = field(hash=False)
    source: str


_ORTHO_SCRIPTS = "the Ortho-GConv authors' script/full-supervised/{}_Ortho-{}.sh (KaiGuo20/Ortho-GConv)"
_GCNII_FULL = "the GCNII paper's full-supervised script full.sh (chennnM/GCNII, Chen et al., ICML 2020)"
#: ``(setting, dataset, backbone)`` -> the values a source sets for that cell (only the flags the
#: source sets per dataset; its other values are the setting's defaults already, or are left
#: out and said so in ``docs/reference.md``). Where no source gives a dataset's own values the
#: setting's defaults stand, and :func:`default_source` says so.
BACKBONE_DEFAULTS: dict[tuple[str, str, str], SourcedDefaults] = {
    # --weight_decay 1e-3 on all three; --patience 20 (Cornell) and 200 (Texas, Wisconsin)
    ("full", "cornell", "gcn"): SourcedDefaults(dict(weight_decay=1e-3, patience=20),
                                                _ORTHO_SCRIPTS.format("corn", "GCN")),
    ("full", "texas", "gcn"): SourcedDefaults(dict(weight_decay=1e-3, patience=200),
                                              _ORTHO_SCRIPTS.format("texa", "GCN")),
    ("full", "wisconsin", "gcn"): SourcedDefaults(dict(weight_decay=1e-3, patience=200),
                                                  _ORTHO_SCRIPTS.format("wisc", "GCN")),
    # --hidden 128 --lr 0.005 --weight_decay 1e-4 --dropout 0.8; --epoch 400 --patience 400
    # (Texas: --epoch 40 --patience 20)
    **{("full", dataset, "jknet"): SourcedDefaults(
        dict(hidden=128, lr=0.005, weight_decay=1e-4, dropout=0.8, epochs=epochs, patience=patience),
        _ORTHO_SCRIPTS.format(short, "JKNet"))
       for dataset, short, epochs, patience in (("cornell", "corn", 400, 400), ("texas", "texa", 40, 20),
                                                ("wisconsin", "wisc", 400, 400))},
    # --weight_decay and --lamda per dataset (alpha 0.5: full's default already)
    ("full", "cornell", "gcnii"): SourcedDefaults(dict(weight_decay=1e-3, theta=1.0), _GCNII_FULL),
    ("full", "texas", "gcnii"): SourcedDefaults(dict(weight_decay=1e-4, theta=1.5), _GCNII_FULL),
    ("full", "wisconsin", "gcnii"): SourcedDefaults(dict(weight_decay=5e-4, theta=1.0), _GCNII_FULL),
}


def defaults_for(dataset: str, setting: str, backbone: str | None = None) -> dict[str, Any]:
    """The training defaults of ``dataset`` in ``setting`` (the one lookup every layer uses);
    with ``backbone``, its own values on that dataset where a source gives them
    (:data:`BACKBONE_DEFAULTS`)."""
    own = BACKBONE_DEFAULTS.get((setting, dataset, backbone)) if backbone is not None else None
    return {**SETTINGS.get(setting).defaults, **DATASETS.get(dataset).defaults, **(own.values if own else {})}


def default_source(dataset: str, setting: str, backbone: str) -> str:
    """Where the defaults of ``backbone`` on ``dataset`` in ``setting`` come from, in words."""
    own = BACKBONE_DEFAULTS.get((setting, dataset, backbone))
    if own is not None:
        return f"{', '.join(f'{k}={v}' for k, v in own.values.items())} from {own.source}; the rest the " \
               f"{setting} setting's defaults"
    return (f"no source gives {backbone}'s own values on {dataset} ({setting}): the {setting} setting's defaults "
            f"(the SETTINGS comment says where they come from)")
