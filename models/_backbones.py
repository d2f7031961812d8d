"""Node-classification backbones (GCN, JKNet, GCNII) in original and Ortho-GConv form.

Every model is one family behind :class:`OrthoGNN`, as in PyG's ``basic_gnn``: an input
projection to ``hidden`` channels, ``depth`` graph convolutions each with a
``hidden x hidden`` transformation ``W(l)`` (orthogonalised in the Ortho-GConv form), and
an output projection. This is the authors' layout (``--layer L`` hidden convolutions plus
an input and an output layer), so every depth >= 2 has ``depth`` orthogonalisable
transformations. Propagation is PyG's ``SimpleConv`` over the symmetrically normalised
adjacency with self-loops (``A_hat``), computed once by the data module; passed as
PyG's :class:`~torch_geometric.EdgeIndex` (see :func:`adjacency`) it is a sparse matmul
whose backward pass reuses a transposed layout cached once instead of transposing the
sparse matrix every epoch.

All models carry a leading *pack* dimension: ``packs`` independent models (own seeds,
own Ortho-GConv settings, own dropout masks) trained as one. Hidden states are
pack-major, ``[packs, N, hidden]``: each pack's transformation is one matrix of a
batched matmul, and propagation multiplies all packs at once by a block-diagonal
``A_hat`` (one copy per pack, built once per adjacency; as fast as one product over
``[N, packs * hidden]``, without the copies between layouts). Node features may be dense
``[N, in]`` or :class:`~models._layers.SparseFeatures` (the trainer passes sparse
bag-of-words features that way: the input projection is then a sparse matmul and
dropout masks the non-zeros).
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
from torch_geometric.typing import Adj, OptTensor
from torch_geometric.utils import to_edge_index

from orthotune.core import OrthoSettings, Registry, TrainConfig, check
from orthotune.models._layers import (
    PackedLinear,
    SparseFeatures,
    dropout,
    effective_weights,
    regularisation,
)


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


class Pass(NamedTuple):
    """One forward pass with what training and the steadiness metrics need; node-major
    views of the pack-major states."""

    logits: Tensor  # [N, packs, out]
    first: Tensor  # h(0): input of the first convolution, [N, packs, hidden]
    last: Tensor  # h(L): output of the last convolution, [N, packs, hidden]
    weights: list[Tensor]  # effective W(l), each [packs, hidden, hidden]
    penalty: Tensor  # per pack: lambda * sum_l ||W(l) W(l)^T - c(l) I||_F


class OrthoGNN(nn.Module):
    """Base class: subclasses define :meth:`convolve` (one layer) and may widen the head."""

    conv_bias: bool = True

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        depth: int,
        dropout: float = 0.5,
        ortho: Sequence[OrthoSettings] | None = None,
        seeds: Sequence[int] = (0,),
    ) -> None:
        super().__init__()
        check(isinstance(depth, int) and depth >= 2, f"depth={depth!r} must be an integer >= 2")
        check(0.0 <= dropout < 1.0, f"dropout={dropout!r} must lie in [0, 1)")
        check(hidden_channels >= 1, f"hidden={hidden_channels!r} must be >= 1")
        self.depth, self.dropout, self.seeds = depth, dropout, tuple(seeds)
        self.packs = len(self.seeds)
        self.in_channels, self.hidden_channels = in_channels, hidden_channels
        self.out_channels = out_channels
        self.ortho = tuple(ortho) if ortho is not None else None
        self.register_buffer(
            "lam", torch.tensor([s.lam for s in self.ortho] if self.ortho else [0.0] * self.packs)
        )
        self.input = PackedLinear(in_channels, hidden_channels, self.packs)
        self.transforms = nn.ModuleList(
            PackedLinear(hidden_channels, hidden_channels, self.packs, self.conv_bias, self.ortho)
            for _ in range(depth)
        )
        self.output = PackedLinear(self.head_channels(), out_channels, self.packs)
        self.propagation = SimpleConv(aggr="sum")
        self._blocks: tuple[EdgeIndex, OptTensor, EdgeIndex, OptTensor] | None = None
        self.reset_parameters()

    def head_channels(self) -> int:
        return self.hidden_channels

    def reset_parameters(self) -> None:
        """Re-initialise every pack from its own seed (so a pack equals a lone model)."""
        generators = [torch.Generator().manual_seed(seed) for seed in self.seeds]
        self.input.reset_parameters(generators)
        for transform in self.transforms:
            transform.reset_parameters(generators)
        self.output.reset_parameters(generators)

    def embed(self, x: Tensor | SparseFeatures) -> Tensor:
        """Dropout and the input projection, ``[packs, N, hidden]``; each pack draws its
        own dropout mask, as it would trained alone."""
        if isinstance(x, SparseFeatures):
            values = x.values.expand(self.packs, -1)
            return self.input.sparse(x, dropout(values, self.dropout, self.training))
        if self.training and self.dropout > 0 and self.packs > 1:
            x = x.unsqueeze(0).expand(self.packs, -1, -1)
        return self.input(dropout(x, self.dropout, self.training))

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

    def convolve(
        self, layer: int, h: Tensor, h0: Tensor, weight: Tensor, edge_index: Adj,
        edge_weight: OptTensor,
    ) -> Tensor:
        raise NotImplementedError

    def readout(self, states: list[Tensor]) -> Tensor:
        return states[-1]

    def run(
        self, x: Tensor | SparseFeatures, edge_index: Adj, edge_weight: OptTensor = None
    ) -> Pass:
        weights = effective_weights(self.transforms)
        h = F.relu(self.embed(x))
        first, states = h, []
        for layer, weight in enumerate(weights):
            h = self.convolve(layer, h, first, weight, edge_index, edge_weight)
            states.append(h)
        head = dropout(self.readout(states), self.dropout, self.training)
        penalty = regularisation(self.transforms, weights)
        logits = self.output(head)
        return Pass(logits.transpose(0, 1), first.transpose(0, 1), h.transpose(0, 1), weights,
                    self.lam * penalty)

    def forward(self, x: Tensor | SparseFeatures, edge_index: Adj, edge_weight: OptTensor = None) -> Tensor:
        return self.run(x, edge_index, edge_weight).logits

    def __repr__(self) -> str:
        form = "ortho" if self.ortho else "original"
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
            f"hidden={self.hidden_channels}, depth={self.depth}, packs={self.packs}, {form})"
        )


class GCN(OrthoGNN):
    """Kipf & Welling: ``H(l) = ReLU(A_hat H(l-1) W(l))``."""

    def convolve(self, layer, h, h0, weight, edge_index, edge_weight):
        h = dropout(h, self.dropout, self.training)
        transformed = self.transforms[layer].apply_weight(h, weight)
        return F.relu(self.propagate(transformed, edge_index, edge_weight))


class JKNet(GCN):
    """GCN layers whose outputs are all aggregated (jumping knowledge) before the head."""

    def __init__(self, *args, jk: str = "cat", **kwargs) -> None:
        check(jk in ("cat", "max"), f"jk={jk!r} must be one of 'cat', 'max'")
        self.jk = jk
        super().__init__(*args, **kwargs)

    def head_channels(self) -> int:
        return self.hidden_channels * (self.depth if self.jk == "cat" else 1)

    def readout(self, states):
        if self.jk == "cat":
            return torch.cat(states, dim=-1)
        return torch.stack(states, dim=-1).amax(dim=-1)


class GCNII(OrthoGNN):
    """Chen et al. 2020: initial residual ``alpha`` and identity mapping ``theta_l``.

    ``H(l) = ReLU(((1-alpha) A_hat H(l-1) + alpha H(0)) ((1-theta_l) I + theta_l W(l)))``
    with ``theta_l = log(lambda_gcnii / l + 1)``.
    """

    conv_bias = False

    def __init__(self, *args, alpha: float = 0.1, theta: float = 0.5, **kwargs) -> None:
        check(0.0 <= alpha <= 1.0, f"alpha={alpha!r} must lie in [0, 1]")
        check(theta > 0.0, f"theta={theta!r} must be > 0")
        self.alpha, self.theta = alpha, theta
        super().__init__(*args, **kwargs)

    def convolve(self, layer, h, h0, weight, edge_index, edge_weight):
        h = dropout(h, self.dropout, self.training)
        support = (1 - self.alpha) * self.propagate(h, edge_index, edge_weight)
        support = support + self.alpha * h0
        beta = math.log(self.theta / (layer + 1) + 1)
        mapped = self.transforms[layer].apply_weight(support, weight)
        return F.relu((1 - beta) * support + beta * mapped)


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
    extra = {"gcnii": dict(alpha=config.alpha, theta=config.theta), "jknet": dict(jk=config.jk)}
    return BACKBONES.get(config.backbone)(
        in_channels, config.hidden, num_classes, config.depth, config.dropout,
        ortho=ortho, seeds=seeds, **extra.get(config.backbone, {}),
    )
