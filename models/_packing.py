"""What packing needs around :class:`~models._layers.PackedLinear`: ``A_hat`` in the form the
packed models multiply fastest, one copy of it per pack on a block diagonal, and BatchNorm
per pack slot.

A pack holds ``packs`` independent models trained as one (see :class:`~models._gnn.OrthoGNN`):
propagation multiplies all packs' ``[N, hidden]`` states at once by a block-diagonal
``A_hat``, and each pack slot normalises its own states.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric import EdgeIndex
from torch_geometric.typing import OptTensor
from torch_geometric.utils import to_edge_index


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


def transposed_layout(crow: Tensor, col: Tensor, columns: int) -> tuple[Tensor, Tensor, Tensor]:
    """The CSR layout of the transpose of a CSR pattern with ``columns`` columns: its
    ``crow_t`` and ``col_t``, and ``order_t``, which maps the pattern's values into it."""
    rows = torch.repeat_interleave(torch.arange(crow.numel() - 1, device=col.device), crow.diff())
    order_t = torch.sort(col, stable=True).indices  # column-major, rows ascending
    counts = torch.bincount(col, minlength=columns)
    crow_t = torch.cat([counts.new_zeros(1), counts.cumsum(0)]).to(crow.dtype)
    return crow_t, rows[order_t].to(col.dtype), order_t


class BlockAdjacency(NamedTuple):
    """A block-diagonal ``A_hat`` as torch CSR matrices: itself and its transpose (the
    backward pass's), built once; indices int32 where they fit. Within each row of either,
    columns ascend, so a slot's sums run in the same order whatever the pack."""

    matrix: Tensor
    transposed: Tensor


def block_adjacency(edge_index: EdgeIndex, edge_weight: OptTensor, copies: int) -> BlockAdjacency:
    """:func:`block_diagonal` as the CSR pair :func:`propagate` multiplies by."""
    blocks, weight = block_diagonal(edge_index, edge_weight, copies)
    if weight is None:
        weight = torch.ones(blocks.shape[1], device=blocks.device)
    size = blocks.get_sparse_size()
    narrow = torch.int32 if max(blocks.shape[1], *size) < torch.iinfo(torch.int32).max else torch.int64

    def csr(pointers: Tensor, indices: Tensor, perm: OptTensor, shape: tuple[int, int]) -> Tensor:
        values = weight if perm is None else weight[perm]
        return torch.sparse_csr_tensor(pointers.to(narrow), indices.to(narrow), values, shape, check_invariants=False)

    (rowptr, col), row_perm = blocks.get_csr()
    # the transpose by a stable sort: PyG's get_csc sorts unstably, so the order of a column's rows
    # (the backward pass's sums) depended on the pack size, and a packed slot's gradients could
    # differ in their last bits from the same run's alone
    colptr, row, col_perm = transposed_layout(rowptr, col, size[1])
    transposed = csr(colptr, row, col_perm if row_perm is None else row_perm[col_perm], tuple(size[::-1]))
    return BlockAdjacency(csr(rowptr, col, row_perm, tuple(size)), transposed)


def sparse_product(matrix: Tensor, dense: Tensor) -> Tensor:
    """``matrix @ dense`` for a CSR ``matrix``; on a GPU cuSPARSE.

    On a CPU a weighted ``embedding_bag``: row ``i`` is the sum of ``dense``'s rows at row
    ``i``'s column indices, each times its value, in their stored order. That is what
    ``torch.sparse.mm(matrix, dense, "sum")`` computes (PyG's forward), with its float32 bits,
    through FBGEMM's gathering kernels on x86: one thread, Cora's block-diagonal input product
    (24 slots, 64 columns) 8.1 against 31.6 ms, its ``A_hat`` 6.0 against 15.9 ms at
    ``[24 * 2708, 64]`` and 6.2 against 10.1 ms node-major at ``[2708, 1536]``, PubMed's 5.6
    against 14.4 ms at ``[3 * 19717, 64]`` (the plain ``torch.sparse.mm``, which zero-fills and
    copies a transposed result, took 47.8 ms on the input product).
    """
    dense = dense.contiguous()  # a transposed weight or gradient, read as its values either way
    if dense.device.type == "cpu":
        return F.embedding_bag(matrix.col_indices(), dense, matrix.crow_indices(), mode="sum",
                               per_sample_weights=matrix.values(), include_last_offset=True)
    return matrix @ dense


#: States at most this wide propagate node-major on a CPU: one ``A_hat`` times ``[N, packs * d]``
#: rather than the block diagonal times ``[packs * N, d]``. Each row's sum runs over the same
#: neighbours in the same order either way (the same bits); the wide rows read whole cache lines
#: where narrow ones read a few floats of each. Forward and backward on a CPU, one thread, ms
#: (block / node-major, the layout copies included): Cora x64 at 7 columns 37.3 / 16.6, 32
#: columns 44.9 / 41.1, 40 columns 47.7 / 53.8; PubMed x5 at 3 columns 12.0 / 9.9, 32 columns
#: 29.0 / 25.8, 64 columns 38.5 / 54.3 (``torch.sparse.mm``'s "sum" kernel; with the embedding bag,
#: one product without the copies, Cora x24 at 7 columns 2.3 / 0.25, at 64 columns 6.0 / 6.2).
NODE_MAJOR_WIDTH = 32


def node_major(h: Tensor) -> bool:
    """Whether ``[packs, N, d]`` states propagate node-major (:data:`NODE_MAJOR_WIDTH`)."""
    return h.device.type == "cpu" and h.shape[-1] <= NODE_MAJOR_WIDTH  # any pack size: the same kernels


class _Propagate(torch.autograd.Function):
    """``A h`` with the backward ``A^T g`` through the same kernel (PyG's backward takes the
    plain product and re-gathers the values every step)."""

    @staticmethod
    def forward(ctx, adjacency: BlockAdjacency, h: Tensor) -> Tensor:
        ctx.adjacency = adjacency
        return sparse_product(adjacency.matrix, h)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return None, sparse_product(ctx.adjacency.transposed, grad)


def propagate(adjacency: BlockAdjacency, h: Tensor) -> Tensor:
    """``A_hat`` times every slot's ``[N, d]`` states, ``h`` ``[packs, N, d]`` pack-major."""
    return _Propagate.apply(adjacency, h.reshape(-1, h.shape[-1])).view_as(h)


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
