"""The backbones as every layer sees them: one declaration each (:class:`BackboneInfo`: its
name, its task and what it can do), from which the rest derives: each task's backbones and
its structure-agnostic reference (:data:`TASKS`), the valid ``backbone`` values (the CLI's
choices, the space parser's names) and which backbones read each config field
(:class:`Readers`, asked when a field's readers are needed, so a backbone registered later
is among them).

Pure data, as the rest of the catalogue, so a config is checked before torch loads: the
model behind each name is ``orthotune.models``'s, whose ``register_backbone`` adds a new
backbone to both registries at once. Code that decides by what a backbone can do reads its
declaration's capabilities (as PyG's ``BasicGNN`` reads ``supports_edge_weight``), never its
name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from orthotune.core._catalogue import DATASETS
from orthotune.core._errors import ConfigError, check
from orthotune.core._registry import Registry

#: The kinds of hidden-convolution bias a backbone has (:attr:`BackboneInfo.conv_bias`).
CONV_BIAS_KINDS = ("switch", "fixed", "none")
#: How a backbone's hidden convolutions grow with its depth (:attr:`BackboneInfo.growth`).
GROWTH_KINDS = ("chain", "inception")


@dataclass(frozen=True)
class BackboneInfo:
    """A backbone: its name, its task and its capabilities, declared once."""

    name: str
    task: str  # "node" or "graph"
    source: str  # whose model it is
    #: orthotune's packed family (``models.OrthoGNN``: a pack of models trains as one); it alone
    #: has the ``official`` layout, ``feature_transform`` and the one-off ``input_T``
    packed: bool = False
    #: an Ortho-GConv arm (``models.orthogonalise`` applies); false for a structure-agnostic
    #: reference and for a backbone without a square hidden weight to orthogonalise
    ortho_arm: bool = True
    #: ``layout`` places its convolutions; false: one form only (``layout`` is not read)
    layouts: bool = True
    #: the structure-agnostic reference of its task: it never reads an edge, and it is the
    #: baseline every verdict names (``core.REFERENCE``)
    reference: bool = False
    #: its hidden convolutions' bias: ``switch`` (``conv_bias`` turns it off), ``fixed`` (always
    #: there: ``conv_bias=False`` is refused) or ``none`` (``conv_bias`` is not read)
    conv_bias: str = "none"
    #: takes ``batch_norm`` (BatchNorm after each hidden convolution)
    batch_norm: bool = False
    #: how its hidden convolutions grow with ``depth`` (what a memory estimate counts):
    #: ``chain``, one after another, about ``depth``; ``inception``, branches of 1 .. b
    #: convolutions side by side (b = ``depth - 2``), b (b + 1) / 2 of them
    growth: str = "chain"

    def __post_init__(self) -> None:
        check(self.growth in GROWTH_KINDS,
              f"backbone {self.name!r}: growth={self.growth!r} must be one of {', '.join(GROWTH_KINDS)}")
        check(self.conv_bias in CONV_BIAS_KINDS,
              f"backbone {self.name!r}: conv_bias={self.conv_bias!r} must be one of {', '.join(CONV_BIAS_KINDS)}")
        check(not (self.reference and self.ortho_arm),
              f"backbone {self.name!r}: a structure-agnostic reference has no Ortho-GConv arm (ortho_arm=False)")

    def hidden_convolutions(self, depth: int) -> int:
        """About how many hidden convolutions a model of ``depth`` runs (:attr:`growth`)."""
        if self.growth == "inception":
            branches = max(depth - 2, 1)
            return branches * (branches + 1) // 2
        return depth


BACKBONE_INFO: Registry[BackboneInfo] = Registry("backbone")
#: Node backbones: orthotune's packed GCN, JKNet and GCNII, then PyG's own GAT, GraphSAGE, GIN
#: (``torch_geometric.nn.models``), APPNP (an MLP, then PyG's APPNP propagation), SGC (PyG's
#: ``SGConv``) and DAGNN (``models``' own module), which train one run per model (``packed``
#: false: the packed multi-config trainer cannot pack them). SGC and DAGNN have no square hidden
#: weight, so no Ortho-GConv arm (``ortho_arm`` false). IncepGCN (the DropEdge paper's inception
#: blocks of GCN layers) is orthotune's packed family again, after them in the order it joined.
#: The structure-agnostic references
#: never read an edge: ``mlp``, an MLP on the node features alone; ``sum-mlp``, node features
#: summed per graph, then an MLP (Errica et al.'s structure-agnostic baseline for the chemical
#: datasets D&D and PROTEINS). ``depth`` counts their linear layers. A node config may also name a user's factory
#: (:data:`FACTORY`). The first backbone of a task is its default.
for _info in (
    BackboneInfo("gcn", "node", "Kipf & Welling, ICLR 2017", packed=True, conv_bias="switch", batch_norm=True),
    BackboneInfo("jknet", "node", "Xu et al., ICML 2018", packed=True, conv_bias="switch", batch_norm=True),
    BackboneInfo("gcnii", "node", "Chen et al., ICML 2020", packed=True, batch_norm=True),
    BackboneInfo("gat", "node", "PyG's GAT (Velickovic et al., ICLR 2018)", conv_bias="switch", batch_norm=True),
    BackboneInfo("sage", "node", "PyG's GraphSAGE (Hamilton et al., NeurIPS 2017)", conv_bias="switch",
                 batch_norm=True),
    BackboneInfo("gin", "node", "PyG's GIN (Xu et al., ICLR 2019)", conv_bias="fixed", batch_norm=True),
    BackboneInfo("appnp", "node", "an MLP, then PyG's APPNP propagation (Gasteiger et al., ICLR 2019)"),
    BackboneInfo("sgc", "node", "PyG's SGConv: depth propagations, then one linear layer (Wu et al., ICML 2019)",
                 ortho_arm=False, layouts=False),
    BackboneInfo("dagnn", "node", "a 2-layer MLP, then depth propagations weighed by a learned retention score "
                 "(Liu et al., KDD 2020)", ortho_arm=False, layouts=False),
    BackboneInfo("incepgcn", "node", "the DropEdge paper's IncepGCN: inception blocks of GCN branches of depth "
                 "1 .. L, concatenated (Rong et al., ICLR 2020)", packed=True, conv_bias="switch", batch_norm=True,
                 growth="inception"),
    BackboneInfo("mlp", "node", "an MLP on the node features (H2GCN's baseline, Zhu et al., NeurIPS 2020)",
                 ortho_arm=False, reference=True),
    BackboneInfo("gunet", "graph", "Graph U-Nets (Gao & Ji, ICML 2019)"),
    BackboneInfo("sum-mlp", "graph", "node features summed per graph, then an MLP (Errica et al., ICLR 2020)",
                 ortho_arm=False, reference=True),
):
    BACKBONE_INFO.add(_info.name, _info)


@dataclass(frozen=True)
class TaskInfo:
    """A kind of dataset; its backbones are the declarations of that task, in order (the first
    is the default), and its structure-agnostic reference the one declared ``reference``."""

    name: str

    @property
    def backbones(self) -> tuple[str, ...]:
        return tuple(n for n in BACKBONE_INFO if BACKBONE_INFO.get(n).task == self.name)

    @property
    def default_backbone(self) -> str:
        return self.backbones[0]

    @property
    def reference(self) -> str:
        return next(n for n in self.backbones if BACKBONE_INFO.get(n).reference)

    @property
    def reference_source(self) -> str:
        """Whose baseline the reference is."""
        return BACKBONE_INFO.get(self.reference).source


TASKS: Registry[TaskInfo] = Registry("task")
TASKS.add("node", TaskInfo("node"))
TASKS.add("graph", TaskInfo("graph"))
#: The catalogue's structure-agnostic references (``core.REFERENCE``), as declared at import.
REFERENCE_BACKBONES = tuple(n for n in BACKBONE_INFO if BACKBONE_INFO.get(n).reference)


#: A user's model factory as a backbone: ``package.module:factory`` (imported only when a model
#: is built from it; ``orthotune.models`` says what it must return).
FACTORY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
#: Every user's factory, where config fields name the backbones that read them.
ANY_FACTORY = "package.module:factory"
#: What a user's factory can do: a node model, given depth, hidden and dropout alone
#: (``factory(in_size, hidden, out_size, depth, dropout)``), with an Ortho-GConv arm.
FACTORY_INFO = BackboneInfo(ANY_FACTORY, "node", "a user's model factory")


def is_factory(name: object) -> bool:
    """Does ``name`` name a user's factory (``package.module:factory``), not a catalogue backbone?"""
    return isinstance(name, str) and ":" in name


def backbone_info(name: str) -> BackboneInfo:
    """The declaration of a catalogue backbone, or :data:`FACTORY_INFO` for a user's factory;
    an unknown name fails listing the valid ones."""
    return FACTORY_INFO if is_factory(name) else BACKBONE_INFO.get(name)


def is_reference_backbone(name: object) -> bool:
    """Is ``name`` a structure-agnostic reference (its declaration says ``reference``)?"""
    return isinstance(name, str) and name in BACKBONE_INFO and BACKBONE_INFO.get(name).reference


def reference_backbone(dataset: str) -> str:
    """The structure-agnostic reference of ``dataset``'s task."""
    return TASKS.get(DATASETS.get(dataset).task).reference


def all_backbones() -> list[str]:
    """Every declared backbone, in the catalogue's order: the valid values of ``backbone``."""
    return BACKBONE_INFO.names()


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


@dataclass(frozen=True)
class Readers:
    """The backbones that read a config field (:func:`readers` makes one): the ``names`` given,
    or, without names, every declared backbone whose capabilities match ``capabilities`` (none:
    every declared backbone); with ``factories``, every user's factory too. Decided when asked
    (``in``, iteration: the declared ones now, then :data:`ANY_FACTORY`)."""

    names: tuple[str, ...] = ()
    capabilities: tuple[tuple[str, Any], ...] = ()
    factories: bool = False

    def __contains__(self, backbone: object) -> bool:
        if is_factory(backbone):
            return self.factories
        if not isinstance(backbone, str) or backbone not in BACKBONE_INFO:
            return False
        if self.names:
            return backbone in self.names
        info = BACKBONE_INFO.get(backbone)
        return all(getattr(info, key) == value for key, value in self.capabilities)

    def __iter__(self) -> Iterator[str]:
        yield from (n for n in BACKBONE_INFO if n in self)
        if self.factories:
            yield ANY_FACTORY


def readers(*names: str, factories: bool = False, **capabilities: Any) -> Readers:
    """The readers of a field read by some backbones only: those ``names``, or those whose
    declaration has every capability given (``readers(packed=True)``); ``factories``: users'
    factories read it too."""
    unknown = sorted(set(capabilities) - set(BackboneInfo.__dataclass_fields__))
    check(not unknown, f"readers: {', '.join(unknown)} is no capability of a backbone")
    return Readers(names, tuple(capabilities.items()), factories)
