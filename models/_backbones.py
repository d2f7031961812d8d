"""Node-classification backbones (GCN, JKNet, GCNII) in original and Ortho-GConv form.

Every model is one family behind :class:`OrthoGNN`, as in PyG's ``basic_gnn``: an input
layer to ``hidden`` channels, ``depth`` hidden graph convolutions each with a
``hidden x hidden`` transformation ``W(l)`` (orthogonalised in the Ortho-GConv form; built
by the :meth:`OrthoGNN.init_conv` hook), and an output layer. ``layout`` says what the
input and output layers are (see :class:`OrthoGNN`). Propagation multiplies by the
symmetrically normalised adjacency with self-loops (``A_hat``), computed once by the data
module; passed as PyG's :class:`~torch_geometric.EdgeIndex` (see :func:`adjacency`) it is
a sparse matmul whose backward pass reuses a transposed layout cached once instead of
transposing the sparse matrix every epoch.

All models carry a leading *pack* dimension: ``packs`` independent models (own seeds,
own Ortho-GConv settings, own dropout masks, own BatchNorm statistics) trained as one.
Every parameter and buffer has the pack as its first dimension. Hidden states are
pack-major, ``[packs, N, hidden]``: each pack's transformation is one matrix of a
batched matmul, and propagation multiplies all packs at once by a block-diagonal
``A_hat`` (one copy per pack, built once per adjacency; as fast as one product over
``[N, packs * hidden]``, without the copies between layouts). Node features may be dense
``[N, in]`` or :class:`~models._layers.SparseFeatures` (the trainer passes sparse
bag-of-words features that way: the input projection is then one block-diagonal sparse
matmul for all packs and dropout masks the non-zeros). An epoch therefore issues the same
kernels whatever the pack size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric import EdgeIndex
from torch_geometric.nn.conv import SimpleConv
from torch_geometric.nn.models import JumpingKnowledge
from torch_geometric.typing import Adj, OptTensor
from torch_geometric.utils import to_edge_index

from orthotune.core import OrthoSettings, Registry, TrainConfig, check
from orthotune.models._layers import (
    PackedLinear,
    SparseFeatures,
    dropout,
    effective_weights,
    regularisation,
    share_targets,
)

#: The values of ``layout``.
LAYOUTS = ("linear", "official")


def adjacency(adj: Tensor) -> tuple[EdgeIndex, Tensor]:
    """A sparse CSR ``A_hat`` as a row-sorted ``EdgeIndex`` and its edge weights, the
    form :meth:`OrthoGNN.propagate` multiplies fastest (PyG caches its transpose)."""
    edge_index, edge_weight = to_edge_index(adj)
    size = (adj.shape[0], adj.shape[1])
    return EdgeIndex(edge_index, sparse_size=size, sort_order="row"), edge_weight


def block_diagonal(
    edge_index: EdgeIndex, edge_weight: OptTensor, copies: int
) -> tuple[EdgeIndex, OptTensor]:
    """``copies`` copies of a row-sorted ``N x N`` adjacency on the diagonal of one
    ``copies*N`` square adjacency: its product with ``[copies * N, d]`` states
    propagates every pack's ``[N, d]`` states at once."""
    nodes = edge_index.sparse_size(0)
    pairs = edge_index.as_tensor()
    offsets = torch.arange(copies, device=pairs.device).repeat_interleave(pairs.shape[1]) * nodes
    stacked = pairs.repeat(1, copies) + offsets
    size = (copies * nodes, copies * nodes)
    blocks = EdgeIndex(stacked, sparse_size=size, sort_order="row")
    return blocks, None if edge_weight is None else edge_weight.repeat(copies)


class PackedBatchNorm(nn.Module):
    """``BatchNorm1d`` over the nodes for each pack slot of ``[packs, N, d]`` states.

    Statistics, running estimates and the affine parameters are per pack (``[packs, d]``),
    so a pack slot normalises exactly as a lone model's ``BatchNorm1d`` would; computed
    on the pack-major states directly (no copy to a node-major layout).
    """

    def __init__(self, packs: int, channels: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(packs, channels))
        self.bias = nn.Parameter(torch.zeros(packs, channels))
        self.register_buffer("running_mean", torch.zeros(packs, channels))
        self.register_buffer("running_var", torch.ones(packs, channels))

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)
        self.running_mean.zero_()
        self.running_var.fill_(1.0)

    def forward(self, x: Tensor) -> Tensor:
        if self.training:
            var, mean = torch.var_mean(x, dim=1, unbiased=False)
            with torch.no_grad():  # BatchNorm1d tracks the unbiased variance
                nodes = x.shape[1]
                self.running_mean.lerp_(mean, self.momentum)
                self.running_var.lerp_(var * (nodes / max(nodes - 1, 1)), self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        scale = self.weight * torch.rsqrt(var + self.eps)
        return torch.addcmul((self.bias - mean * scale).unsqueeze(1), x, scale.unsqueeze(1))


class Pass(NamedTuple):
    """One forward pass with what training and the steadiness metrics need; node-major
    views of the pack-major states."""

    logits: Tensor  # [N, packs, out]
    first: Tensor  # h(0): input of the first convolution, [N, packs, hidden]
    last: Tensor  # h(L): output of the last convolution, [N, packs, hidden]
    weights: list[Tensor]  # effective W(l) of each hidden convolution, [packs, hidden, hidden]
    penalty: Tensor  # per pack: lambda * sum_l ||W(l) W(l)^T - target(l)||_F


class OrthoGNN(nn.Module):
    """Base class: subclasses define :meth:`convolve` (one hidden layer) and may widen the
    head (:meth:`head_channels`, :meth:`readout`) or add modules (:meth:`init_extra`).

    How ``depth`` counts: it is always the number of *hidden* graph convolutions, each with
    its own ``hidden x hidden`` transformation ``W(l)`` (the ones Ortho-GConv
    orthogonalises and the steadiness metrics report). ``layout`` decides the rest:

    - ``linear``: input and output are linear projections (no propagation), so a model of
      depth ``L`` propagates ``L`` times.
    - ``official``: input and output are graph convolutions (``A_hat X W_in + b``,
      ``A_hat H W_out + b``), as in the authors' GCN and JKNet, so depth ``L`` propagates
      ``L + 2`` times and equals the authors' ``--layer L`` (JKNet: ``--nbaseblocklayer
      L``). Their GCNII, like GCNII itself, keeps linear input and output layers, so for
      GCNII both layouts are the same model (``propagations`` says which applies).

    Other switches: ``conv_bias`` adds a bias after each hidden propagation (as PyG's
    ``GCNConv``); ``io_bias=False`` drops the input and output layers' biases (the
    authors' JKNet has none); ``input_dropout`` is the dropout on the raw input features
    (None: ``dropout``; the authors' JKNet never drops them); ``batch_norm`` normalises
    each convolution's output before its activation, per pack slot (the hidden ones, and
    the input one in the ``official`` layout); ``feature_transform=False`` drops every
    ``W(l)`` (propagation only, the paper's Figure 1d), which leaves nothing to
    orthogonalise.
    """

    #: Whether the ``official`` layout makes input and output graph convolutions.
    official_graph_io: bool = True
    #: Whether the hidden convolutions can carry a bias.
    has_conv_bias: bool = True

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        depth: int,
        dropout: float = 0.5,
        ortho: Sequence[OrthoSettings] | None = None,
        seeds: Sequence[int] = (0,),
        *,
        layout: str = "linear",
        conv_bias: bool = True,
        batch_norm: bool = False,
        feature_transform: bool = True,
        input_dropout: float | None = None,
        io_bias: bool = True,
    ) -> None:
        super().__init__()
        check(isinstance(depth, int) and depth >= 2, f"depth={depth!r} must be an integer >= 2")
        check(0.0 <= dropout < 1.0, f"dropout={dropout!r} must lie in [0, 1)")
        check(input_dropout is None or 0.0 <= input_dropout < 1.0,
              f"input_dropout={input_dropout!r} must lie in [0, 1) or be None")
        check(hidden_channels >= 1, f"hidden={hidden_channels!r} must be >= 1")
        check(layout in LAYOUTS, f"layout={layout!r} must be one of {', '.join(LAYOUTS)}")
        check(feature_transform or ortho is None,
              "feature_transform=False leaves no transformation to orthogonalise; use the original arm")
        self.depth, self.dropout, self.seeds = depth, dropout, tuple(seeds)
        self.input_dropout = dropout if input_dropout is None else input_dropout
        self.packs = len(self.seeds)
        self.in_channels, self.hidden_channels = in_channels, hidden_channels
        self.out_channels = out_channels
        self.layout, self.feature_transform = layout, feature_transform
        self.graph_io = layout == "official" and self.official_graph_io
        self.ortho = tuple(ortho) if ortho is not None else None
        self.register_buffer(
            "lam", torch.tensor([s.lam for s in self.ortho] if self.ortho else [0.0] * self.packs)
        )
        # the authors orthogonalise the input projection once at initialisation (input_T)
        # official layout: the input/output biases are added after propagation (below)
        linear_bias = io_bias and not self.graph_io
        self.input = PackedLinear(in_channels, hidden_channels, self.packs, bias=linear_bias,
                                  init_ortho=self.ortho)
        self.transforms = nn.ModuleList(
            self.init_conv(hidden_channels, hidden_channels) for _ in range(depth if feature_transform else 0)
        )
        self.conv_biases = nn.ParameterList(
            nn.Parameter(torch.zeros(self.packs, hidden_channels))
            for _ in range(depth if conv_bias and self.has_conv_bias else 0)
        )
        norms = depth + int(self.graph_io) if batch_norm else 0
        self.norms = nn.ModuleList(PackedBatchNorm(self.packs, hidden_channels) for _ in range(norms))
        self.init_extra()
        self.output = PackedLinear(self.head_channels(), out_channels, self.packs, bias=linear_bias)
        # official layout: biases after the input and output propagations (names start
        # with input/output, so the trainer's io weight decay group finds them)
        graph_bias = io_bias and self.graph_io
        self.input_bias = nn.Parameter(torch.zeros(self.packs, hidden_channels)) if graph_bias else None
        self.output_bias = nn.Parameter(torch.zeros(self.packs, out_channels)) if graph_bias else None
        share_targets(self.ortho_layers())
        self.propagation = SimpleConv(aggr="sum")
        self._blocks: tuple[EdgeIndex, OptTensor, EdgeIndex, OptTensor] | None = None
        self.reset_parameters()

    # --- construction hooks -------------------------------------------------------------

    def init_conv(self, in_channels: int, out_channels: int) -> PackedLinear:
        """One hidden convolution's transformation ``W(l)`` (Ortho-GConv when ``ortho``);
        its bias, if any, is added after propagation (:attr:`conv_biases`)."""
        return PackedLinear(in_channels, out_channels, self.packs, bias=False, ortho=self.ortho)

    def init_extra(self) -> None:
        """Subclasses add their own modules here (before the output layer is sized)."""

    def head_channels(self) -> int:
        return self.hidden_channels

    def ortho_layers(self) -> list[PackedLinear]:
        """Every transformation whose Newton iteration runs in each forward pass (batched
        into one iteration by :func:`effective_weights`)."""
        return list(self.transforms)

    @property
    def propagations(self) -> int:
        """How many times one forward pass multiplies by ``A_hat``."""
        return self.depth + 2 * int(self.graph_io)

    def reset_parameters(self) -> None:
        """Re-initialise every pack from its own seed (so a pack equals a lone model)."""
        generators = [torch.Generator().manual_seed(seed) for seed in self.seeds]
        self.input.reset_parameters(generators)
        for transform in self.transforms:
            transform.reset_parameters(generators)
        self.output.reset_parameters(generators)
        self.reset_extra(generators)
        for bias in (*self.conv_biases, self.input_bias, self.output_bias):
            if bias is not None:
                nn.init.zeros_(bias)
        for norm in self.norms:
            norm.reset_parameters()

    def reset_extra(self, generators: Sequence[torch.Generator]) -> None:
        """Re-initialise what :meth:`init_extra` added, from the packs' generators."""

    def io_parameters(self) -> list[nn.Parameter]:
        """The input and output layers' parameters (their own weight decay,
        ``weight_decay_io``); everything else belongs to the convolutions."""
        return [p for name, p in self.named_parameters() if name.startswith(("input", "output"))]

    # --- forward ---------------------------------------------------------------------------

    def embed(self, x: Tensor | SparseFeatures) -> Tensor:
        """Input dropout (``input_dropout``) and the input projection, ``[packs, N, hidden]``;
        each pack draws its own dropout mask, as it would trained alone."""
        if isinstance(x, SparseFeatures):
            values = x.values.expand(self.packs, -1)
            return self.input.sparse(x, dropout(values, self.input_dropout, self.training))
        if self.training and self.input_dropout > 0 and self.packs > 1:
            x = x.unsqueeze(0).expand(self.packs, -1, -1)
        return self.input(dropout(x, self.input_dropout, self.training))

    def first_layer(self, x: Tensor | SparseFeatures, edge_index: Adj, edge_weight: OptTensor) -> Tensor:
        """``h(0)``: the activated input layer (a graph convolution in the official layout)."""
        h = self.embed(x)
        if self.graph_io:
            h = self.propagate(h, edge_index, edge_weight)
            if self.input_bias is not None:
                h = h + self.input_bias.unsqueeze(1)
            if self.norms:
                h = self.norms[-1](h)
        return F.relu(h)

    def head(self, h: Tensor, edge_index: Adj, edge_weight: OptTensor) -> Tensor:
        """Logits ``[packs, N, out]`` from the dropped-out readout ``h``."""
        logits = self.output(h)
        if self.graph_io:
            logits = self.propagate(logits, edge_index, edge_weight)
            if self.output_bias is not None:
                logits = logits + self.output_bias.unsqueeze(1)
        return logits

    def propagate(self, h: Tensor, edge_index: Adj, edge_weight: OptTensor) -> Tensor:
        """``A_hat h`` for ``[packs, N, d]`` states, one sparse product for all packs."""
        if isinstance(edge_index, EdgeIndex):  # SimpleConv would scatter edge by edge
            if self.packs == 1:
                return edge_index.matmul(h[0], edge_weight).unsqueeze(0)
            blocks, weight = self._block_adjacency(edge_index, edge_weight)
            return blocks.matmul(h.reshape(-1, h.shape[-1]), weight).view_as(h)
        flat = h.transpose(0, 1).reshape(h.shape[1], -1)  # [N, packs * d]
        out = self.propagation(flat, edge_index, edge_weight)
        return out.view(h.shape[1], self.packs, -1).transpose(0, 1).contiguous()

    def _block_adjacency(self, edge_index: EdgeIndex, edge_weight: OptTensor) -> tuple[EdgeIndex, OptTensor]:
        """``A_hat`` once per pack on the diagonal, kept while the same adjacency is used."""
        cached = self._blocks
        if cached is None or cached[0] is not edge_index or cached[1] is not edge_weight:
            blocks = block_diagonal(edge_index, edge_weight, self.packs)
            self._blocks = cached = (edge_index, edge_weight, *blocks)
        return cached[2], cached[3]

    def transform(self, layer: int, h: Tensor, weight: Tensor | None) -> Tensor:
        """``h W(l)`` (``h`` itself without feature transformations)."""
        return h if weight is None else self.transforms[layer].apply_weight(h, weight)

    def finish_conv(self, layer: int, z: Tensor) -> Tensor:
        """Bias, BatchNorm and ReLU after hidden convolution ``layer``'s propagation."""
        if self.conv_biases:
            z = z + self.conv_biases[layer].unsqueeze(1)
        if self.norms:
            z = self.norms[layer](z)
        return F.relu(z)

    def convolve(
        self, layer: int, h: Tensor, h0: Tensor, weights: Sequence[Tensor | None], edge_index: Adj,
        edge_weight: OptTensor,
    ) -> Tensor:
        """Hidden convolution ``layer`` (0-based) of ``h``; ``weights`` are all layers'
        effective weights from :meth:`effective_weights`."""
        raise NotImplementedError

    def readout(self, states: list[Tensor]) -> Tensor:
        """What the head sees from ``[h(0), ..., h(L)]``."""
        return states[-1]

    def effective_weights(self) -> list[Tensor | None]:
        """One effective weight per transformation of :meth:`ortho_layers` (None for every
        hidden layer without feature transformations), Newton iterations batched."""
        layers = self.ortho_layers()
        return effective_weights(layers) if layers else [None] * self.depth

    def run(
        self, x: Tensor | SparseFeatures, edge_index: Adj, edge_weight: OptTensor = None
    ) -> Pass:
        weights = self.effective_weights()
        h = self.first_layer(x, edge_index, edge_weight)
        states = [h]
        for layer in range(self.depth):
            h = self.convolve(layer, h, states[0], weights, edge_index, edge_weight)
            states.append(h)
        head = dropout(self.readout(states), self.dropout, self.training)
        logits = self.head(head, edge_index, edge_weight)
        layers = self.ortho_layers()
        penalty = regularisation(layers, weights) if layers else self.lam.new_zeros(self.packs)
        hidden = [w for w in weights[: self.depth] if w is not None]
        return Pass(logits.transpose(0, 1), states[0].transpose(0, 1), h.transpose(0, 1), hidden,
                    self.lam * penalty)

    def forward(self, x: Tensor | SparseFeatures, edge_index: Adj, edge_weight: OptTensor = None) -> Tensor:
        return self.run(x, edge_index, edge_weight).logits

    def __repr__(self) -> str:
        form = "ortho" if self.ortho else "original"
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
            f"hidden={self.hidden_channels}, depth={self.depth}, layout={self.layout}, "
            f"propagations={self.propagations}, packs={self.packs}, {form})"
        )


class GCN(OrthoGNN):
    """Kipf & Welling: ``H(l) = ReLU(A_hat H(l-1) W(l) + b(l))``."""

    def convolve(self, layer, h, h0, weights, edge_index, edge_weight):
        h = dropout(h, self.dropout, self.training)
        z = self.propagate(self.transform(layer, h, weights[layer]), edge_index, edge_weight)
        return self.finish_conv(layer, z)


class JKNet(GCN):
    """Xu et al. 2018 as the authors' dense block: GCN layers whose outputs *and the block
    input* ``h(0)`` are aggregated by PyG's :class:`JumpingKnowledge` (``cat``: the head
    sees ``hidden * (depth + 1)`` channels; ``max``: element-wise maximum) before the head.

    ``self_loop`` adds the authors' separate self-loop weight to every hidden convolution,
    ``H(l) = ReLU(A_hat H(l-1) W(l) + H(l-1) W_self(l) + b(l))`` (``W_self`` is a plain,
    never orthogonalised transformation, as theirs).
    """

    def __init__(self, *args, jk: str = "cat", self_loop: bool = False, **kwargs) -> None:
        check(jk in ("cat", "max"), f"jk={jk!r} must be one of 'cat', 'max'")
        self.jk, self.self_loop = jk, self_loop
        super().__init__(*args, **kwargs)

    def init_extra(self) -> None:
        self.jumping = JumpingKnowledge(self.jk)
        count = self.depth if self.self_loop else 0
        self.self_loops = nn.ModuleList(
            PackedLinear(self.hidden_channels, self.hidden_channels, self.packs, bias=False)
            for _ in range(count)
        )

    def reset_extra(self, generators):
        for layer in self.self_loops:
            layer.reset_parameters(generators)

    def head_channels(self) -> int:
        return self.hidden_channels * (self.depth + 1 if self.jk == "cat" else 1)

    def convolve(self, layer, h, h0, weights, edge_index, edge_weight):
        h = dropout(h, self.dropout, self.training)
        z = self.propagate(self.transform(layer, h, weights[layer]), edge_index, edge_weight)
        if self.self_loops:
            z = z + self.self_loops[layer](h)
        return self.finish_conv(layer, z)

    def readout(self, states):
        return self.jumping(states)


class GCNII(OrthoGNN):
    """Chen et al. 2020: initial residual ``alpha`` and identity mapping ``beta_l``.

    ``H(l) = ReLU(((1-alpha) A_hat H(l-1) + alpha H(0)) ((1-beta_l) I + beta_l W(l)))``
    with ``beta_l = log(theta / l + 1)`` (``theta`` is GCNII's ``lambda``).

    ``variant`` (GCNII*, as PyG's ``GCN2Conv(shared_weights=False)`` and the GCNII paper)
    gives the two terms their own transformations:
    ``H(l) = ReLU((1-alpha) A_hat H(l-1) ((1-beta_l) I + beta_l W1(l)) +
    alpha H(0) ((1-beta_l) I + beta_l W2(l)))``; both are orthogonalised in the Ortho-GConv
    form. (The authors' code concatenates the two terms into one ``2d x d`` weight, which
    their orthogonalisation cannot take: it mixes a non-square weight with ``I``.)
    No bias on the convolutions (as ``GCN2Conv`` and the authors' code).
    """

    official_graph_io = False
    has_conv_bias = False

    def __init__(self, *args, alpha: float = 0.1, theta: float = 0.5, variant: bool = False,
                 **kwargs) -> None:
        check(0.0 <= alpha <= 1.0, f"alpha={alpha!r} must lie in [0, 1]")
        check(theta > 0.0, f"theta={theta!r} must be > 0")
        self.alpha, self.theta, self.variant = alpha, theta, variant
        super().__init__(*args, **kwargs)

    def init_extra(self) -> None:
        count = self.depth if self.variant and self.feature_transform else 0
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
        h = dropout(h, self.dropout, self.training)
        propagated = (1 - self.alpha) * self.propagate(h, edge_index, edge_weight)
        initial = self.alpha * h0
        transform = self.transforms[layer] if self.transforms else None
        if not self.variant:
            return self.finish_conv(layer, self.identity_map(layer, propagated + initial, transform,
                                                             weights[layer]))
        second = self.initial_transforms[layer] if self.initial_transforms else None
        second_weight = weights[self.depth + layer] if self.initial_transforms else None
        z = (self.identity_map(layer, propagated, transform, weights[layer])
             + self.identity_map(layer, initial, second, second_weight))
        return self.finish_conv(layer, z)


BACKBONES: Registry[type[OrthoGNN]] = Registry("backbone")
BACKBONES.add("gcn", GCN)
BACKBONES.add("jknet", JKNet)
BACKBONES.add("gcnii", GCNII)


def build_node_model(
    config: TrainConfig,
    in_channels: int,
    num_classes: int,
    seeds: Sequence[int],
    ortho: Sequence[OrthoSettings] | None,
) -> OrthoGNN:
    """The node model a config describes: one pack slot per entry of ``seeds`` (and of
    ``ortho``, one :class:`OrthoSettings` per slot, or None for the original arm).

    The one place that maps config fields to backbone arguments.
    """
    common = dict(layout=config.layout, batch_norm=config.batch_norm,
                  feature_transform=config.feature_transform, input_dropout=config.input_dropout,
                  io_bias=config.io_bias)
    extra = {
        "gcn": dict(conv_bias=config.conv_bias),
        "jknet": dict(conv_bias=config.conv_bias, jk=config.jk, self_loop=config.self_loop),
        "gcnii": dict(alpha=config.alpha, theta=config.theta, variant=config.gcnii_variant),
    }
    return BACKBONES.get(config.backbone)(
        in_channels, config.hidden, num_classes, config.depth, config.dropout,
        ortho=ortho, seeds=seeds, **common, **extra.get(config.backbone, {}),
    )
