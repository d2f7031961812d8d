"""Node-classification backbones (GCN, JKNet, GCNII, IncepGCN) in original and Ortho-GConv form: the
subclasses of :class:`~models._gnn.OrthoGNN` (each defines its hidden convolution and takes
its own arguments from a config, :meth:`~models._gnn.OrthoGNN.config_arguments`), their
registry (:func:`register_backbone`: one entry per backbone, which every layer sees), and
the one place a config becomes a model (:func:`build_node_model`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch_geometric.nn.models import JumpingKnowledge

from orthotune.core import BACKBONE_INFO, OrthoSettings, Registry, TrainConfig, check, reads
from orthotune.models._gnn import Layout, OrthoGNN
from orthotune.models._layers import PackedLinear
from orthotune.models._rules import check_rules

BACKBONES: Registry[type[OrthoGNN]] = Registry("backbone")


def register_backbone(model: type[OrthoGNN]) -> type[OrthoGNN]:
    """Make ``model`` a backbone, in one place: buildable by its declared name
    (:func:`build_node_model`), and known to every layer (configs, the CLI's choices, the space
    parser, which fields it reads) through its declaration ``model.info``, which joins
    ``core.BACKBONE_INFO`` unless the catalogue declares it already (orthotune's own backbones:
    configs are checked before torch loads). Its own config arguments come from
    ``model.config_arguments``."""
    info = model.info
    if info.name not in BACKBONE_INFO:
        BACKBONE_INFO.add(info.name, info)
    check(BACKBONE_INFO.get(info.name) == info,
          f"backbone {info.name!r}: {model.__name__}'s declaration differs from the catalogue's")
    BACKBONES.add(info.name, model)
    return model


@register_backbone
class GCN(OrthoGNN):
    """Kipf & Welling: ``H(l) = ReLU(A_hat H(l-1) W(l) + b(l))``.

    ``self_loop`` adds the DropEdge authors' separate self-loop weight (their ``--withloop``) to
    every graph convolution, ``A_hat H W + H W_self + b`` (``W_self`` a plain, never
    orthogonalised transformation, as theirs), input and output layers included where
    :attr:`end_loops` says so.
    """

    info = BACKBONE_INFO.get("gcn")
    #: Whether ``self_loop`` also reaches graph-convolution input and output layers (their
    #: ``GraphConvolutionBS`` has it on every layer); False keeps it on the hidden ones.
    end_loops: ClassVar[bool] = True

    def __init__(self, *args, self_loop: bool = False, **kwargs) -> None:
        self.self_loop = self_loop
        super().__init__(*args, **kwargs)

    @classmethod
    def config_arguments(cls, config: TrainConfig) -> dict[str, Any]:
        arguments = super().config_arguments(config)
        return {**arguments, "self_loop": config.self_loop} if reads("self_loop", cls.info.name) else arguments

    def init_extra(self) -> None:
        count = self.hidden_layers if self.self_loop else 0
        self.self_loops = nn.ModuleList(
            PackedLinear(self.hidden_channels, self.hidden_channels, self.packs, bias=False)
            for _ in range(count)
        )
        if self.self_loop and self.end_loops:  # named input_*/output_*: their weight decay groups
            if self.graph_input:
                self.input_loop = PackedLinear(self.in_channels, self.hidden_channels, self.packs, bias=False,
                                               in_major=self.sparse_input)
            if self.graph_output:
                self.output_loop = PackedLinear(self.head_channels(), self.out_channels, self.packs, bias=False)

    def reset_extra(self, generators):
        # after every other layer's draw: a model without self-loops draws as before
        for layer in (*self.self_loops, self.input_loop, self.output_loop):
            if layer is not None:
                layer.reset_parameters(generators)

    def convolve(self, layer, h, h0, weights, edge_index, edge_weight):
        h = self.drop(h, self.dropout)
        z = self.propagate(self.transform(layer, h, weights[layer]), edge_index, edge_weight)
        if self.self_loops:
            z = z + self.self_loops[layer](h)
        return self.finish_conv(layer, z)


@register_backbone
class JKNet(GCN):
    """Xu et al. 2018: GCN layers whose outputs, the input layer's ``h(0)`` included, are
    aggregated by PyG's :class:`JumpingKnowledge` (``cat``: the head reads ``hidden x
    (hidden_layers + 1)`` channels; ``max``: the element-wise maximum).

    In the ``standard`` layout the input layer is the first graph convolution and the head
    is linear (PyG's ``GCN(num_layers=depth, jk=...)``: ``depth`` aggregated outputs); in
    ``official`` it is the authors' dense block (a graph-convolution input layer, ``depth -
    2`` hidden convolutions, a graph-convolution head); in ``linear`` the input layer is a
    linear projection.

    ``self_loop`` adds the authors' separate self-loop weight to every hidden convolution,
    ``H(l) = ReLU(A_hat H(l-1) W(l) + H(l-1) W_self(l) + b(l))`` (``W_self`` is a plain,
    never orthogonalised transformation, as theirs); not to its ends (:attr:`end_loops`).
    """

    info = BACKBONE_INFO.get("jknet")
    layouts = {**OrthoGNN.layouts, "standard": Layout(True, False)}
    end_loops = False

    def __init__(self, *args, jk: str = "cat", **kwargs) -> None:
        check_rules(jk=jk)
        self.jk = jk
        super().__init__(*args, **kwargs)

    @classmethod
    def config_arguments(cls, config: TrainConfig) -> dict[str, Any]:
        return {**super().config_arguments(config), "jk": config.jk}

    @classmethod
    def readout_channels(cls, hidden: int, hidden_layers: int, **switches: object) -> int:
        return hidden * (hidden_layers + 1) if switches.get("jk", "cat") == "cat" else hidden

    def head_channels(self) -> int:
        return self.readout_channels(self.hidden_channels, self.hidden_layers, jk=self.jk)

    def init_extra(self) -> None:
        self.jumping = JumpingKnowledge(self.jk)
        super().init_extra()

    def readout(self, states):
        return self.jumping(states)


@register_backbone
class GCNII(OrthoGNN):
    """Chen et al. 2020: initial residual ``alpha`` and identity mapping ``beta_l``.

    ``H(l) = ReLU(((1-alpha) A_hat H(l-1) + alpha H(0)) ((1-beta_l) I + beta_l W(l)))``
    with ``beta_l = log(theta / l + 1)`` (``theta`` is GCNII's ``lambda``). Linear input
    and output layers in every layout (the GCNII paper's and the authors' code alike).

    ``variant`` (GCNII*, as PyG's ``GCN2Conv(shared_weights=False)`` and the GCNII paper)
    gives the two terms their own transformations:
    ``H(l) = ReLU((1-alpha) A_hat H(l-1) ((1-beta_l) I + beta_l W1(l)) +
    alpha H(0) ((1-beta_l) I + beta_l W2(l)))``; both are orthogonalised in the Ortho-GConv
    form. (The authors' code concatenates the two terms into one ``2d x d`` weight, which
    their orthogonalisation cannot take: it mixes a non-square weight with ``I``.)
    No bias on the convolutions (as ``GCN2Conv`` and the authors' code). The input
    projection is an ``nn.Linear`` in the authors' code (``[out, in]``), so ``input_T``
    centres along its ``out`` axis.
    """

    info = BACKBONE_INFO.get("gcnii")
    layouts = dict.fromkeys(OrthoGNN.layouts, Layout(False, False))
    input_rows = "out"

    def __init__(self, *args, alpha: float = 0.1, theta: float = 0.5, variant: bool = False,
                 **kwargs) -> None:
        check(alpha is not None, "GCNII needs alpha (its initial-residual weight)")
        check_rules(alpha=alpha, theta=theta)
        self.alpha, self.theta, self.variant = alpha, theta, variant
        super().__init__(*args, **kwargs)

    @classmethod
    def config_arguments(cls, config: TrainConfig) -> dict[str, Any]:
        return {**super().config_arguments(config), "alpha": config.alpha, "theta": config.theta,
                "variant": config.gcnii_variant}

    def init_extra(self) -> None:
        count = self.hidden_layers if self.variant and self.feature_transform else 0
        self.initial_transforms = nn.ModuleList(
            self.init_conv(self.hidden_channels, self.hidden_channels) for _ in range(count)
        )

    def reset_extra(self, generators):
        for layer in self.initial_transforms:
            layer.reset_parameters(generators)

    def ortho_layers(self) -> list[PackedLinear]:
        return [*self.transforms, *self.initial_transforms]

    def identity_map(self, layer: int, h: Tensor, transform: PackedLinear | None,
                     weight: Tensor | None) -> Tensor:
        """``h ((1-beta_l) I + beta_l W)`` (``h`` itself without feature transformations)."""
        if weight is None:
            return h
        beta = math.log(self.theta / (layer + 1) + 1)
        return torch.lerp(h, transform.apply_weight(h, weight), beta)

    def convolve(self, layer, h, h0, weights, edge_index, edge_weight):
        h = self.drop(h, self.dropout)
        propagated = (1 - self.alpha) * self.propagate(h, edge_index, edge_weight)
        initial = self.alpha * h0
        transform = self.transforms[layer] if self.transforms else None
        if not self.variant:
            return self.finish_conv(layer, self.identity_map(layer, propagated + initial, transform,
                                                             weights[layer]))
        second = self.initial_transforms[layer] if self.initial_transforms else None
        second_weight = weights[self.hidden_layers + layer] if self.initial_transforms else None
        z = (self.identity_map(layer, propagated, transform, weights[layer])
             + self.identity_map(layer, initial, second, second_weight))
        return self.finish_conv(layer, z)


@register_backbone
class IncepGCN(GCN):
    """Rong et al. 2020 (DropEdge), their ``inceptiongcn`` with one block: after the input
    layer ``h(0)``, one inception block of ``branches`` parallel GCN branches, branch ``j``
    (``j = 1 .. branches``) being ``j`` stacked GCN convolutions of ``h(0)``; the head reads
    the concatenation ``[h(0), branch_1, ..., branch_branches]``, ``hidden x (branches + 1)``
    channels (their default aggregation ``concat``).

    ``depth`` is the DropEdge paper's layer count, the longest chain of graph convolutions
    (input layer, the deepest branch, output layer in ``standard``/``official``: the authors'
    ``--nbaseblocklayer L`` is ``depth = L + 2``); ``branches`` is what ``layout`` leaves of
    ``depth`` (:meth:`branches_of`). Every branch convolution is a hidden ``hidden x hidden``
    one (Ortho-GConv orthogonalises each), so ``hidden_layers`` is ``branches (branches + 1)
    / 2`` and a forward pass multiplies by ``A_hat`` that many times plus its ends
    (:attr:`propagations`). The hidden convolutions run branch after branch (branch ``j``'s
    are layers ``j (j - 1) / 2 .. j (j + 1) / 2 - 1``); the first of each reads ``h(0)``.
    """

    info = BACKBONE_INFO.get("incepgcn")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.branches = self.branches_of(self.depth, self.layout)
        firsts = [j * (j + 1) // 2 for j in range(self.branches)]
        self.branch_firsts = frozenset(firsts)
        self.branch_lasts = tuple(first + j for j, first in enumerate(firsts))

    @classmethod
    def branches_of(cls, depth: int, layout: str) -> int:
        """The block's branches: the graph convolutions of ``depth`` that are not its ends."""
        return super().hidden_layers_of(depth, layout)

    @classmethod
    def hidden_layers_of(cls, depth: int, layout: str) -> int:
        branches = cls.branches_of(depth, layout)
        return branches * (branches + 1) // 2

    @classmethod
    def readout_channels(cls, hidden: int, hidden_layers: int, **switches: object) -> int:
        branches = (math.isqrt(8 * hidden_layers + 1) - 1) // 2  # hidden_layers = b (b + 1) / 2
        return hidden * (branches + 1)

    def convolve(self, layer, h, h0, weights, edge_index, edge_weight):
        # a branch's first convolution reads the block's input h(0), the others their branch
        return super().convolve(layer, h0 if layer in self.branch_firsts else h, h0, weights, edge_index,
                                edge_weight)

    def readout(self, states):
        return torch.cat([states[0], *(states[last + 1] for last in self.branch_lasts)], dim=-1)


def build_node_model(
    config: TrainConfig,
    in_channels: int,
    num_classes: int,
    seeds: Sequence[int],
    ortho: Sequence[OrthoSettings] | None,
    sparse_input: bool = False,
) -> OrthoGNN:
    """The node model a config describes: one pack slot per entry of ``seeds`` (and of
    ``ortho``, one :class:`OrthoSettings` per slot, or None for the original arm);
    ``sparse_input``: it will read ``SparseFeatures`` (:class:`~models._gnn.OrthoGNN`).

    The one place that maps config fields to backbone arguments: those every packed backbone
    takes here, its own from the backbone (:meth:`~models._gnn.OrthoGNN.config_arguments`).
    """
    model = BACKBONES.get(config.backbone)
    return model(in_channels, config.hidden, num_classes, config.depth, config.dropout, ortho=ortho, seeds=seeds,
                 layout=config.layout, batch_norm=config.batch_norm, feature_transform=config.feature_transform,
                 input_dropout=config.input_dropout, io_bias=config.io_bias, init=config.init,
                 sparse_input=sparse_input, **model.config_arguments(config))


def readout_width(config: TrainConfig) -> int:
    """The widest hidden state one run of ``config`` holds per node: ``hidden``, or JKNet's
    concatenated aggregate (as the model sizes it), without building the model."""
    model = BACKBONES.get(config.backbone)
    hidden_layers = model.hidden_layers_of(config.depth, config.layout)
    return max(config.hidden, model.readout_channels(config.hidden, hidden_layers, **model.config_arguments(config)))
