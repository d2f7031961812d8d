"""The input side of every node backbone: sparse node features and the products that read them.

Bag-of-words features such as Cora's are about 1% non-zero, so the input projection runs as
sparse matmuls and dropout masks only the stored values: dropping a zero leaves it zero, so
masking the non-zeros draws the dropped-out ``X`` with exactly the distribution of dense
dropout. :class:`SparseFeatures` keeps the CSR layout of ``X`` and of its transpose (built
once), so no backward pass transposes ``X``:

- packed models: every pack slot draws its own mask, and all slots' products run as one
  block-diagonal sparse matmul (:class:`_PackedSparseMatmul`), so the kernels per epoch do
  not grow with the pack;
- one model per run (PyG's models, the MLP reference): the input layer is a
  :class:`SparseInputLinear`, whose backward multiplies by the transpose's layout of the
  trainer's :class:`SparseFeatures`, shared by the runs of a call; ``F.linear`` on a CSR
  input sorts ``X``'s non-zeros into its transpose every backward pass (on PubMed 56% of an
  MLP's epoch).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from orthotune.models._dropout import dropout
from orthotune.models._packing import sparse_product, transposed_layout

#: Node features at most this dense are kept sparse (above it dense matmuls are faster).
SPARSE_MAX_DENSITY = 0.1
#: Block-diagonal layouts (pack counts) one :class:`SparseFeatures` keeps.
BLOCK_LAYOUTS_KEPT = 2


def nonzero_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """:func:`dropout` of a dense ``x`` that draws only for its non-zeros where it is mostly
    zeros (at most :data:`SPARSE_MAX_DENSITY`): a dropped zero stays zero, so the result has
    exactly dense dropout's distribution, and bag-of-words features (Cora's 1.3% non-zero)
    take about a hundredth of the draws. The input dropout of the unpacked backbones (PyG's,
    a user's, the MLP reference), whose first layer reads ``x`` dense."""
    if not training or p == 0.0:
        return x
    flat = x.reshape(-1)
    support = flat.nonzero().squeeze(1)
    if support.numel() > SPARSE_MAX_DENSITY * flat.numel():
        return dropout(x, p, training)
    return torch.zeros_like(flat).index_put_((support,), dropout(flat[support], p, training)).view_as(x)


def csr_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """:func:`nonzero_dropout` of a sparse CSR ``x``: its stored values drawn in their row-major order, the
    draws ``nonzero_dropout`` makes for the same ``x`` dense (where that is at most 10% non-zero)."""
    if not training or p == 0.0:
        return x
    return _csr(x.crow_indices(), x.col_indices(), dropout(x.values(), p, training), x.shape)


@dataclass(frozen=True)
class SparseFeatures:
    """Node features ``[N, in]`` as CSR (``crow``, ``col``, ``values``) plus the CSR
    layout of the transpose (``crow_t``, ``col_t``; ``order_t`` maps values into it), so
    the backward pass of the input projection needs no per-epoch transposition."""

    crow: Tensor
    col: Tensor
    values: Tensor
    crow_t: Tensor
    col_t: Tensor
    order_t: Tensor
    shape: tuple[int, int]
    #: Block-diagonal layouts per pack count (see :meth:`blocks`), built on first use.
    _blocks: dict[int, _BlockLayout] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_dense(cls, x: Tensor) -> SparseFeatures:
        return cls.from_csr(_quietly(x.to_sparse_csr))

    @classmethod
    def from_csr(cls, x: Tensor) -> SparseFeatures:
        """A CSR matrix's pattern and values, sharing its index tensors, with its transpose's layout."""
        crow, col = x.crow_indices(), x.col_indices()
        return cls(crow, col, x.values(), *transposed_layout(crow, col, x.shape[1]), tuple(x.shape))

    def shares_pattern(self, x: Tensor) -> bool:
        """Is CSR ``x`` this pattern: the same index tensors (held here, so their memory is not
        another tensor's) and shape?"""
        return (x.crow_indices().data_ptr(), x.col_indices().data_ptr(), tuple(x.shape)) == \
            (self.crow.data_ptr(), self.col.data_ptr(), self.shape)

    @property
    def density(self) -> float:
        return self.values.numel() / max(self.shape[0] * self.shape[1], 1)

    def matrix(self, values: Tensor) -> Tensor:
        """The ``[N, in]`` CSR matrix with this pattern and ``values``."""
        return _csr(self.crow, self.col, values, self.shape)

    def transposed(self, values: Tensor) -> Tensor:
        """The ``[in, N]`` CSR transpose of :meth:`matrix` ``(values)``."""
        return _csr(self.crow_t, self.col_t, values.index_select(-1, self.order_t), self.shape[::-1])

    def blocks(self, packs: int) -> _BlockLayout:
        """The layout of ``packs`` copies of ``X`` on the diagonal of one ``[packs*N,
        packs*in]`` matrix (and of its transpose), built once per pack count: one sparse
        product with it applies every pack's own (dropped-out) copy of ``X`` at once.
        The last :data:`BLOCK_LAYOUTS_KEPT` pack counts are kept (a compacted pack shrinks;
        its old layouts would only hold memory)."""
        layout = self._blocks.pop(packs, None)
        if layout is None:
            layout = _BlockLayout(
                _block_diagonal_csr(self.crow, self.col, self.shape, packs),
                _block_diagonal_csr(self.crow_t, self.col_t, self.shape[::-1], packs),
                tuple(packs * n for n in self.shape),
            )
        self._blocks[packs] = layout  # most recently used last
        while len(self._blocks) > BLOCK_LAYOUTS_KEPT:
            self._blocks.pop(next(iter(self._blocks)))
        return layout

    def to(self, device: torch.device) -> SparseFeatures:
        moved = {k: getattr(self, k).to(device) for k in
                 ("crow", "col", "values", "crow_t", "col_t", "order_t")}
        return replace(self, **moved)


class _BlockLayout(NamedTuple):
    """CSR indices (``crow``, ``col``) of a block-diagonal matrix and of its transpose."""

    forward: tuple[Tensor, Tensor]
    backward: tuple[Tensor, Tensor]
    shape: tuple[int, int]


def _block_diagonal_csr(crow: Tensor, col: Tensor, shape: Sequence[int], copies: int) -> tuple[Tensor, Tensor]:
    """``crow``/``col`` of ``copies`` copies of one CSR pattern on a diagonal; values
    ``[copies, nnz]`` flattened pack-major fill it in order.

    The indices are int32 where they fit (CSR products take either): they grow with the
    pack, and int64 would hold twice the memory of the dropped-out values themselves.
    """
    nnz = col.numel()
    fits = copies * max(nnz, *shape) < torch.iinfo(torch.int32).max
    blocks = torch.arange(copies, device=col.device).unsqueeze(1)
    rows = (crow[:-1].unsqueeze(0) + blocks * nnz).flatten()
    block_crow = torch.cat([rows, rows.new_full((1,), copies * nnz)])
    block_col = (col.unsqueeze(0) + blocks * shape[1]).flatten()
    index = torch.int32 if fits else torch.int64
    return block_crow.to(index), block_col.to(index)


def node_features(x: Tensor, max_density: float = SPARSE_MAX_DENSITY) -> Tensor | SparseFeatures:
    """``x`` as :class:`SparseFeatures` when it is sparse enough to profit, else as is."""
    nonzero = int(torch.count_nonzero(x))
    return SparseFeatures.from_dense(x) if nonzero <= max_density * x.numel() else x


def _csr(crow: Tensor, col: Tensor, values: Tensor, shape: Sequence[int]) -> Tensor:
    return _quietly(torch.sparse_csr_tensor, crow, col, values, tuple(shape),
                    check_invariants=False)


def _quietly(fn, *args, **kwargs):
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on first construction
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kwargs)


class _PackedSparseMatmul(torch.autograd.Function):
    """``Y[p] = X_p W_p`` for sparse ``X_p`` sharing one pattern (values ``[P, nnz]``)
    and ``W`` ``[P, in, out]``; the gradient flows to ``W`` only.

    All packs run as one sparse product whatever ``P``: the ``X_p`` lie on the diagonal of
    one ``[P*N, P*in]`` CSR matrix (layout cached by :meth:`SparseFeatures.blocks`), and
    the weights stacked as ``[P*in, out]`` give ``Y`` pack-major, ``[P*N, out]``. The
    backward pass multiplies the transposed block layout by the output gradient. The
    work equals one product per pack; the kernel count does not grow with ``P``.
    """

    @staticmethod
    def forward(ctx, features: SparseFeatures, values: Tensor, weight: Tensor) -> Tensor:
        packs, rows = values.shape[0], features.shape[0]
        layout = features.blocks(packs)
        ctx.features, ctx.layout = features, layout
        ctx.save_for_backward(values)
        matrix = _csr(*layout.forward, values.reshape(-1), layout.shape)
        product = sparse_product(matrix, weight.reshape(-1, weight.shape[-1]))
        return product.view(packs, rows, -1)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (values,) = ctx.saved_tensors
        features: SparseFeatures = ctx.features
        layout: _BlockLayout = ctx.layout
        packs, channels = values.shape[0], features.shape[1]
        # index_select, not values[:, order_t]: the same gather 2.7x faster (PubMed, 5 slots: 12.5 against 33 ms)
        transposed_values = values.index_select(1, features.order_t).reshape(-1)
        matrix = _csr(*layout.backward, transposed_values, layout.shape[::-1])
        grad_weight = sparse_product(matrix, grad.reshape(-1, grad.shape[-1]))
        return None, None, grad_weight.view(packs, channels, -1)


class _CsrLinear(torch.autograd.Function):
    """``X W^T + b`` for a CSR ``X`` (data: no gradient), the weight's gradient through the
    transpose's layout its :class:`SparseFeatures` holds."""

    @staticmethod
    def forward(ctx, x: Tensor, features: SparseFeatures, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.features, ctx.has_bias = features, bias is not None
        ctx.save_for_backward(x.values())
        out = sparse_product(x, weight.t())
        return out if bias is None else out + bias

    @staticmethod
    def backward(ctx, grad: Tensor):
        (values,) = ctx.saved_tensors
        grad_weight = sparse_product(ctx.features.transposed(values), grad).t()
        return None, None, grad_weight, grad.sum(0) if ctx.has_bias else None


class SparseInputLinear(nn.Module):
    """A one-run model's input layer that reads CSR features as fast as dense ones read theirs:
    ``weight`` and ``bias`` are the replaced layer's own parameters (so its initialisation and
    any parametrization stay), dense inputs go through ``F.linear``."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.weight, self.bias = layer.weight, layer.bias
        self.in_channels, self.out_channels = layer.weight.shape[1], layer.weight.shape[0]
        self._layer = [layer]  # a list: not a child (its parameters are these)
        self._features: SparseFeatures | None = None  # the pattern read, with its transpose's layout

    def forward(self, x: Tensor) -> Tensor:
        if x.layout != torch.sparse_csr:
            return F.linear(x, self.weight, self.bias)
        return _CsrLinear.apply(x, self.features(x), self.weight, self.bias)

    def reset_parameters(self) -> None:
        self._layer[0].reset_parameters()

    def features(self, x: Tensor) -> SparseFeatures:
        """``x``'s pattern with its transpose's layout, computed once: every epoch's dropped-out
        CSR shares the features' index tensors (``csr_dropout``)."""
        if self._features is None or not self._features.shares_pattern(x):
            self._features = SparseFeatures.from_csr(x)
        return self._features

    def remember(self, features: SparseFeatures) -> None:
        """Read ``features``' pattern through its layout (a trainer hands the one it built, so
        the runs of one call share one transpose)."""
        self._features = features

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, bias={self.bias is not None}"
