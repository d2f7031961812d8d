"""The one training-config type: every field declared once, validated at the edge.

The Ortho-GConv fields are declared once in :class:`_OrthoFields`, which both :class:`OrthoSettings`
(what a model needs) and :class:`TrainConfig` (what a run needs) extend. Every field is an
:func:`~orthotune.core._fields.option`: its rule, doc and group drive validation here and the space
parser, store schema, CLI options and report keys elsewhere. A new switch is one declaration here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orthotune.core._backbones import (
    BACKBONE_INFO,
    TASKS,
    all_backbones,
    backbone_info,
    backbone_name,
    is_factory,
    readers,
)
from orthotune.core._catalogue import DATASETS, SETTINGS, defaults_for
from orthotune.core._cells import check_arm_name
from orthotune.core._errors import ConfigError, check
from orthotune.core._fields import Group, Rule, by_group, declared, option, validate_fields
from orthotune.core._treatments import NO_TREATMENT, TREATMENT_SYNTAX, check_treatment_reference

#: The ``selection`` rules: validation accuracy, the evaluation's validation loss, or the training
#: pass's own (DropEdge's code; node tasks); :data:`LOSS_SELECTIONS` are those by a loss.
PASS_SELECTION = "train_pass_val_loss"
SELECTIONS = ("val_acc", "val_loss", PASS_SELECTION)
LOSS_SELECTIONS = frozenset({"val_loss", PASS_SELECTION})

_O, _V, _C, _T, _R = Group.ORTHO, Group.VARIANT, Group.CELL, Group.TRAIN, Group.REPEATS
#: Static caps of depth and hidden width (see the fields' declarations).
MAX_DEPTH, MAX_HIDDEN = 1024, 4096
#: The values of ``layout`` (what each builds: ``orthotune.models.OrthoGNN``) and of ``init``.
LAYOUTS, INITS = ("linear", "standard", "official"), ("glorot", "fan_out")
#: The fields of the random setting's split (``orthotune.training`` draws it from them).
SPLIT_FIELDS = ("split_train", "split_val", "split_stratify", "split_per_class")
#: Who reads the fields some backbones only read (``option(..., backbones=...)``), as ``models`` and
#: ``training`` build and train them, by the capabilities the backbones declare (``core.BackboneInfo``)
#: or, for a backbone's own arguments, by name: orthotune's packed node backbones
#: (``models.build_node_model``) and PyG's (``models.build_module_model``); a user's factory gets depth,
#: hidden and dropout alone (``factory(in_size, hidden, out_size, depth, dropout)``), and its
#: Ortho-GConv arm the Ortho-GConv values; graph backbones their own arguments and the batch size.
_PACKED = readers(packed=True)
#: node models whose ``layout`` places their graph convolutions (not SGC's or DAGNN's one form)
_NODE_GRAPH = readers(task="node", reference=False, layouts=True)
#: node models that read edges (a factory's included): the graph's direction and DropEdge
_EDGES = readers(task="node", reference=False, factories=True)
#: node models trained one model per run (a factory's included): a user's treatment takes one
_TREATABLE = readers(task="node", reference=False, packed=False, factories=True)
#: every backbone with an Ortho-GConv arm (a factory's included): its switches and values
_ORTHO_ARM = readers(ortho_arm=True, factories=True)


@dataclass(frozen=True, kw_only=True)
class _OrthoFields:
    """Ortho-GConv's values (searched) and switches (the variant: fixed within a cell)."""

    T: int = option(4, Rule("int", 0, 1000), "Newton iterations of the orthogonal transformation", _O,
                    backbones=_ORTHO_ARM)
    beta: float = option(0.4, Rule("float", 0.0, 1.0),
                          "hybrid init: Q = beta * Glorot + (1 - beta) * I", _O, backbones=_ORTHO_ARM)
    lam: float = option(5e-4, Rule("float", 0.0), "weight of the orthogonal regulariser", _O, backbones=_ORTHO_ARM)
    bound: str = option("covariance", Rule("str", choices=("covariance", "frobenius")),
                         "spectral bounding before Newton: Q / sqrt(||Q Q^T||_F) (covariance, the "
                         "authors' code) or Q / ||Q||_F (frobenius, the paper text)", _V, backbones=_ORTHO_ARM)
    transform: str = option("newton", Rule("str", choices=("newton", "none")),
                             "orthogonal transformation: Newton's iteration, or none (W = Q, the "
                             "ablation without transformation)", _V, backbones=_ORTHO_ARM)
    hybrid: str = option("init", Rule("str", choices=("init", "reparam")),
                          "beta mixes the initial weight once (init), or W = Ortho(beta P + (1 - beta) I) "
                          "in every forward pass with P trained (reparam, the authors' code)", _V,
                          backbones=_ORTHO_ARM)
    target: str = option("cI", Rule("str", choices=("cI", "ones")),
                          "regulariser target: c * I with a scalar c per layer (cI, the paper), or a "
                          "d x d matrix initialised to all ones (ones, the authors' code)", _V,
                          backbones=_ORTHO_ARM)
    target_trainable: bool = option(True, Rule("bool"), "train the regulariser's target (c or the matrix)", _V,
                                    backbones=_ORTHO_ARM)
    squared_norm: bool = option(False, Rule("bool"), "regularise with the squared Frobenius norm", _V,
                                 backbones=_ORTHO_ARM)
    centre_rows: bool = option(False, Rule("bool"),
                                "centre the weight before bounding (ONI, the authors' code)", _V,
                                backbones=_ORTHO_ARM)
    norm_groups: int = option(1, Rule("int", 1), "orthogonalise this many groups separately", _V,
                            backbones=_ORTHO_ARM)
    input_T: int = option(0, Rule("int", 0, 1000),
                           "orthogonalise the input projection once at initialisation with this many "
                           "Newton steps (0: off; the authors' code does it)", _V, backbones=_PACKED)


@dataclass(frozen=True, kw_only=True)
class OrthoSettings(_OrthoFields):
    """Hyperparameters of Ortho-GConv for one model (one pack slot)."""

    def __post_init__(self) -> None:
        validate_fields(self)

    def structure(self) -> tuple:
        """The switches that must agree for models packed together."""
        return tuple(getattr(self, f.name) for f in by_group(OrthoSettings, Group.VARIANT) if f.name != "input_T")


#: Named bundles of switches. ``default`` is orthotune's; ``paper`` the paper text's literal
#: form; ``official`` the authors' code (KaiGuo20/Ortho-GConv, model.py and layers.py).
PROFILES: dict[str, dict[str, Any]] = {
    "default": {},
    "paper": dict(bound="frobenius", hybrid="init", target="cI", squared_norm=False, centre_rows=False),
    # conv_bias, io_bias and input_dropout are left to each config (the official presets set them): the
    # authors' hidden GCN convolutions have no bias; only their JKNet lacks input/output biases and input dropout
    "official": dict(bound="covariance", centre_rows=True, hybrid="reparam", target="ones",
                     squared_norm=True, input_T=4, layout="official", selection="val_loss"),
}


@dataclass(frozen=True, kw_only=True)
class TrainConfig(_OrthoFields):
    """Everything one training run of one config needs.

    ``splits`` and ``seeds`` name the repeats: run ``i`` uses ``splits[i]`` and ``seeds[i]``; a tuple of length one
    is broadcast over the other. With ``full`` the repeats are Geom-GCN splits, with ``semi``/``official`` seeds of
    the single split, with ``cv10`` the folds. Fields left ``None`` take the dataset's and setting's defaults.
    """

    dataset: str = option(None, Rule("str"), "dataset name: a catalogue name, pyg:CLASS[/NAME] (a "
                           "torch_geometric.datasets class, raw files below DATA_ROOT/CLASS) or file:PATH (a saved "
                           "PyG Data .pt or an .npz; relative to the data root unless absolute)", _C)
    setting: str | None = option(None, Rule("str"), "protocol setting (default: the dataset's first)", _C)
    backbone: str | None = option(None, Rule("str"),
                                  "backbone (default: gcn for node, gunet for graph datasets), or a user's model "
                                  "factory as package.module:factory (node datasets)", _C)
    # Caps: 16 times the paper's deepest model (GCNII, 64 layers) and widest default (OGB's
    # 256). Within them, :func:`check_memory` refuses a config whose estimate exceeds memory.
    depth: int | None = option(None, Rule("int", 2, MAX_DEPTH),
                                "node backbones: graph convolutions, i.e. propagations by A_hat per forward "
                                "pass, as PyG's num_layers (a 2-layer GCN is Kipf & Welling's; the Ortho-GConv "
                                "authors' --layer L is depth L + 2 with layout official, L for GCNII); gat, sage, "
                                "gin: their message-passing layers; appnp: its MLP's hidden x hidden layers "
                                "(linear) or all its layers (standard), K propagations follow; a factory: its "
                                "own; gunet: pooling levels", _C)
    ortho: bool = option(True, Rule("bool"), "Ortho-GConv arm (true) or the original backbone (false)", _C)
    # the named arm of a space that declares ``arms`` (its name is the arm's key); unset (null in
    # the store): the default pair, whose arm ``ortho`` selects, as every row before named arms
    arm: str | None = option(None, Rule("str", optional=True),
                             "the named arm of a space's arms (a backbone and its treatments); unset: the "
                             "original or Ortho-GConv arm that ortho selects", _C)
    variant: str = option("default", Rule("str"),
                           "label of the variant (profile or ablation); part of the report's cell key", _V)
    # a training value, not a variant switch: arms that differ in it pair on depth (propagations),
    # so a search may try every form of a backbone at one depth (the standard form among them)
    layout: str = option("linear", Rule("str", choices=LAYOUTS),
                          "where the depth graph convolutions sit: linear (linear input and output layers "
                          "around depth hidden x hidden convolutions), standard (the backbone's own paper: "
                          "GCN as Kipf & Welling, input and output are graph convolutions; JKNet as Xu et al., "
                          "a linear head after jumping knowledge; GCNII as Chen et al., linear input and "
                          "output; gat, sage, gin, appnp as PyG builds them) or official (the Ortho-GConv authors' "
                          "code: GCN and JKNet with graph input and output convolutions, GCNII linear)", _T,
                          backbones=_NODE_GRAPH)
    # GCNII's and APPNP's convolutions have no bias; GIN's cannot drop theirs (refused)
    conv_bias: bool = option(True, Rule("bool"), "bias on the hidden convolutions", _V,
                             backbones=readers(conv_bias="switch"))
    io_bias: bool = option(True, Rule("bool"),
                            "bias on the input and output layers (node backbones; false: none, as the "
                            "authors' JKNet)", _V, backbones=readers(task="node"))
    batch_norm: bool = option(False, Rule("bool"), "BatchNorm after each hidden convolution", _V,
                              backbones=readers(batch_norm=True))
    feature_transform: bool = option(True, Rule("bool"),
                                      "hidden transformations W(l); false: propagation only (the paper's "
                                      "Figure 1d)", _V, backbones=_PACKED)
    init: str = option("glorot", Rule("str", choices=INITS),
                       "how plain weights start: glorot (PyG's; biases zero) or fan_out (weights and biases "
                       "uniform in +-1/sqrt(fan-out), as the DropEdge and GCNII authors' graph convolutions)", _V,
                       backbones=_PACKED)
    jk: str = option("cat", Rule("str", choices=("cat", "max")), "JKNet aggregation", _V, backbones=readers("jknet"))
    gcnii_variant: bool = option(False, Rule("bool"), "GCNII* (separate weights for the two terms)", _V,
                                 backbones=readers("gcnii"))
    self_loop: bool = option(False, Rule("bool"), "the DropEdge authors' self-loop weight (--withloop): on every "
                             "graph convolution of GCN, on JKNet's hidden ones", _V, backbones=readers("gcn", "jknet"))
    directed: bool = option(False, Rule("bool"), "keep the graph directed (the authors' WebKB runs)", _V,
                            backbones=_EDGES)
    treatment: str = option(NO_TREATMENT, Rule("str"),
                            f"a user's treatment, {TREATMENT_SYNTAX}: called as function(model, config) on the "
                            f"built model, it returns the treated torch.nn.Module (empty: none; node backbones "
                            f"trained one model per run)", _V, backbones=_TREATABLE)
    selection: str = option("val_acc", Rule("str", choices=SELECTIONS),
                             "the epoch that gives a repeat's result: highest validation accuracy, lowest "
                             "validation loss (the authors' code), or lowest validation loss of the training "
                             "pass itself, dropout and DropEdge on (DropEdge's code; node tasks); test is only "
                             "read there", _V)
    hidden: int | None = option(None, Rule("int", 1, MAX_HIDDEN), "hidden width", _T)
    lr: float | None = option(None, Rule("float", 0.0, low_open=True), "Adam learning rate", _T)
    weight_decay: float | None = option(None, Rule("float", 0.0), "L2 weight decay (Adam's coupled form)", _T)
    weight_decay_io: float | None = option(None, Rule("float", 0.0, optional=True),
                                            "weight decay of the input/output layers (default: weight_decay)",
                                            _T, backbones=readers())
    weight_decay_output: float | None = option(None, Rule("float", 0.0, optional=True),
                                                "weight decay of the output layer alone (default: "
                                                "weight_decay_io; 0: as Kipf & Welling's GCN, which decays "
                                                "its first layer only)", _T, backbones=readers())
    dropout: float | None = option(None, Rule("float", 0.0, 1.0, high_open=True), "dropout probability", _T)
    drop_edge: float = option(0.0, Rule("float", 0.0, 1.0, high_open=True),
                              "DropEdge (Rong et al., ICLR 2020): share of the graph's edges each training epoch "
                              "removes at random, drawn from the run's own seed and split (0: off; evaluation "
                              "reads the whole graph)", _T, backbones=_EDGES)
    input_dropout: float | None = option(None, Rule("float", 0.0, 1.0, high_open=True, optional=True),
                                          "dropout on the raw input features (node backbones; default: "
                                          "dropout; 0: none, as the authors' JKNet)", _T,
                                          backbones=readers(task="node"))
    epochs: int | None = option(None, Rule("int", 1), "most epochs a repeat trains", _T, column="max_epochs")
    patience: int | None = option(None, Rule("int", 1),
                                   "stop after this many epochs without a better selection metric", _T)
    alpha: float | None = option(None, Rule("float", 0.0, 1.0, optional=True),
                                  "GCNII initial-residual weight, and APPNP's teleport probability (the same "
                                  "term: alpha * H(0) added to each propagation; node settings; unused by gunet)",
                                  _T, backbones=readers("gcnii", "appnp"))
    theta: float | None = option(None, Rule("float", 0.0, low_open=True, optional=True),
                           "GCNII identity-mapping strength (lambda in the GCNII paper)", _T,
                           backbones=readers("gcnii"))
    # PyG backbones' own arguments: read by their backbone only (as alpha is by GCNII and
    # APPNP, jk by JKNet), so one space may search them over several backbones
    heads: int = option(8, Rule("int", 1, 64), "GAT: attention heads per hidden layer (hidden must divide by it)", _T,
                        backbones=readers("gat"))
    aggr: str = option("mean", Rule("str", choices=("mean", "max", "sum")), "GraphSAGE: neighbour aggregation", _T,
                       backbones=readers("sage"))
    K: int = option(10, Rule("int", 1, MAX_DEPTH),
                    "APPNP: propagation steps after its MLP (its teleport probability is alpha)", _T,
                    backbones=readers("appnp"))
    batch_size: int | None = option(None, Rule("int", 1, optional=True), "graphs per mini-batch (graph tasks)", _T,
                                    backbones=readers(task="graph"))
    splits: tuple[int, ...] = option((0,), Rule("ints", 0), "splits (full) or folds (cv10) of the repeats", _R)
    seeds: tuple[int, ...] = option((0,), Rule("ints", 0), "seeds of the repeats", _R)
    # the random setting's split (split k is drawn with seed k): stored with every trial, so a
    # trial's split is known from its row (dataset, setting, these, its splits)
    split_train: float | None = option(None, Rule("float", 0.0, 1.0, low_open=True, high_open=True, optional=True),
                                        "random setting: share of each split's nodes for training (ignored "
                                        "with split_per_class)", _R)
    split_val: float | None = option(None, Rule("float", 0.0, 1.0, high_open=True, optional=True),
                                      "random setting: share of the nodes for validation; test takes the rest", _R)
    split_stratify: bool | None = option(None, Rule("bool", optional=True),
                                          "random setting: take the shares within each class", _R)
    split_per_class: int | None = option(None, Rule("int", 0, optional=True),
                                          "random setting: this many training nodes per class (Planetoid's "
                                          "random split: 20); 0: split_train of the nodes", _R)

    def __post_init__(self) -> None:
        check(self.dataset is not None, "config key 'dataset' is required")
        info = DATASETS.get(self.dataset)
        set_ = object.__setattr__
        set_(self, "dataset", info.name)
        set_(self, "setting", self.setting or info.default_setting)
        info.check_setting(self.setting)
        task = TASKS.get(info.task)
        check(self.backbone is None or isinstance(self.backbone, str), f"backbone={self.backbone!r} must be a string")
        set_(self, "backbone", backbone_name(self.backbone or task.default_backbone))
        if is_factory(self.backbone):
            check(info.task == "node", f"backbone {self.backbone!r}: a model factory applies to node datasets, "
                                       f"not {info.task}-classification dataset {info.name}")
        elif self.backbone not in task.backbones:
            problem = (f"backbone {self.backbone!r} does not apply to {info.task}-classification dataset "
                       f"{info.name}" if self.backbone in all_backbones() else f"unknown backbone {self.backbone!r}")
            raise ConfigError(f"{problem}; valid: {', '.join(task.backbones)}")
        for key, value in defaults_for(info.name, self.setting, self.backbone).items():
            if getattr(self, key) is None:
                set_(self, key, value)
        for key in ("splits", "seeds"):
            set_(self, key, _as_tuple(key, getattr(self, key)))
        validate_fields(self)
        if self.arm:
            check_arm_name(self.arm)
        check(len(self.splits) == len(self.seeds) or 1 in (len(self.splits), len(self.seeds)),
              f"splits={self.splits} and seeds={self.seeds} must have equal lengths, or one of length 1")
        check(self.hidden % self.norm_groups == 0,
              f"norm_groups={self.norm_groups} must divide hidden={self.hidden}")
        check(not reads("heads", self.backbone) or self.hidden % self.heads == 0,
              f"heads={self.heads} must divide hidden={self.hidden} ({self.backbone} concatenates its heads)")
        self._check_capabilities(info.task)
        self._check_treatments()
        # only the node backbones read these: refuse them rather than ignore them
        check(info.task == "node" or self.input_dropout is None,
              f"input_dropout={self.input_dropout!r} applies to node backbones only, not {self.backbone}")
        check(info.task == "node" or self.io_bias,
              f"io_bias={self.io_bias!r} applies to node backbones only, not {self.backbone}")
        check(info.task == "node" or self.selection != PASS_SELECTION,
              f"selection={PASS_SELECTION!r} applies to node tasks only (a training pass over graphs sees "
              f"no validation graph), not {info.name}")
        self._check_split_fields()

    def _check_split_fields(self) -> None:
        """The ``split_*`` fields belong to the random setting (its defaults fill them); elsewhere refused."""
        fields = {name: getattr(self, name) for name in SPLIT_FIELDS}
        if SETTINGS.get(self.setting).split != "random":
            given = [f"{k}={v!r}" for k, v in fields.items() if v is not None]
            check(not given, f"{given[0] if given else ''} applies to the random setting only, not {self.setting}")
            return
        check(self.split_per_class > 0 or self.split_train + self.split_val < 1,
              f"split_train={self.split_train} + split_val={self.split_val} must be below 1 (test takes the rest)")

    def _check_capabilities(self, task: str) -> None:
        """What the backbone's declaration says it cannot do is refused, not ignored: an Ortho-GConv arm, dropping a
        bias it always has, and (outside the packed family) that family's switches and settings' operators."""
        backbone = backbone_info(self.backbone)
        what = " is the structure-agnostic reference (it never reads an edge) and" if backbone.reference else ""
        check(not self.ortho or backbone.ortho_arm, f"backbone {self.backbone!r} with ortho=True: "
                                                     f"{self.backbone}{what} has no Ortho-GConv arm; set ortho false")
        check(self.conv_bias or backbone.conv_bias != "fixed",
              f"conv_bias=False does not apply to {self.backbone} (its convolutions always have a bias)")
        packed = ", ".join(n for n in BACKBONE_INFO if BACKBONE_INFO.get(n).packed)
        check(self.init == "glorot" or backbone.packed, f"init={self.init!r} applies to {packed}, not {self.backbone}")
        if task != "node" or backbone.packed:
            return
        check(self.layout != "official", f"layout='official' applies to {packed}, not {self.backbone}")
        check(self.feature_transform, f"feature_transform=False applies to {packed}, not {self.backbone}")
        adjacency = SETTINGS.get(self.setting).adjacency  # PyG's convolutions and factories normalise their own way
        check(backbone.reference or adjacency == "augmented", f"setting {self.setting!r} propagates the {adjacency} "
              f"adjacency, which {packed} read; {self.backbone}'s own convolutions normalise theirs")

    def _check_treatments(self) -> None:
        """DropEdge and a user's treatment are refused, not ignored, where the backbone cannot
        take them; a treatment's reference must be well formed (its import is checked where a
        user names it and where a model is built, never on a stored row read back)."""
        for name in ("drop_edge", "treatment"):
            check(not getattr(self, name) or reads(name, self.backbone),
                  f"{name}={getattr(self, name)!r} does not apply to {self.backbone}; it applies to "
                  f"{', '.join(option_readers(name))}")
        if self.treatment:
            check_treatment_reference(self.treatment)

    def ortho_settings(self) -> OrthoSettings | None:
        """The Ortho-GConv settings of this config, or None for the original arm."""
        if not self.ortho:
            return None
        return OrthoSettings(**{f.name: getattr(self, f.name) for f in dataclasses.fields(_OrthoFields)})

    def runs(self) -> list[tuple[int, int]]:
        """The repeats as ``(split, seed)`` pairs."""
        count = max(len(self.splits), len(self.seeds))
        splits = self.splits * count if len(self.splits) == 1 else self.splits
        seeds = self.seeds * count if len(self.seeds) == 1 else self.seeds
        return list(zip(splits, seeds))

    def to_dict(self, read: bool = False) -> dict[str, Any]:
        """Every field's value; with ``read``, only those the run reads: the fields its backbone
        reads (:func:`reads`), and Ortho-GConv's searched values only in that arm."""
        fields = declared(TrainConfig)
        if read:
            fields = [f for f in fields if reads(f.name, self.backbone)
                      and (self.ortho or f.metadata["group"] is not Group.ORTHO)]
        out = {f.name: getattr(self, f.name) for f in fields}
        out.update({k: list(getattr(self, k)) for k in ("splits", "seeds") if k in out})
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainConfig:
        """Build from a mapping (YAML, JSON, Ray); unknown keys are rejected.

        ``profile: NAME`` expands to that profile's switches (explicit keys win) and sets
        ``variant`` to the profile's name unless given.
        """
        values = dict(values)
        profile = values.pop("profile", None)
        known = {f.name for f in declared(cls)}
        unknown = sorted(set(values) - known, key=str)
        if unknown:
            raise ConfigError(f"unknown config key {unknown[0]!r}; valid: {', '.join(sorted(known | {'profile'}))}")
        if profile is not None:
            values = {**profile_values(profile), **values}
        if "dataset" not in values:
            raise ConfigError("config key 'dataset' is required")
        return cls(**values)


def reads(name: str, backbone: str) -> bool:
    """Does ``backbone`` (a catalogue name or a user's factory) read config field ``name``?"""
    backbones = next(f.metadata["backbones"] for f in declared(TrainConfig) if f.name == name)
    return backbones is None or backbone in backbones


def option_readers(name: str) -> list[str]:
    """The backbones that read config field ``name`` (a user's factory as ``package.module:factory``)."""
    return list(next(f.metadata["backbones"] for f in declared(TrainConfig) if f.name == name))


def profile_values(name: str) -> dict[str, Any]:
    """The switches of a named profile, with ``variant`` set to its name."""
    if not isinstance(name, str) or name not in PROFILES:
        raise ConfigError(f"unknown profile {name!r}; valid: {', '.join(PROFILES)}")
    return {**PROFILES[name], "variant": name}


def _as_tuple(key: str, value: Any) -> tuple[int, ...]:
    items = value if isinstance(value, (list, tuple)) else [value]
    check(all(isinstance(v, int) and not isinstance(v, bool) for v in items) and len(items) >= 1,
          f"{key}={value!r} must be a non-empty list of integers")
    return tuple(items)
