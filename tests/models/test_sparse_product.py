"""models._packing.sparse_product: every CSR product of the packed models (the input layer's, forward
and ``X^T G``; ``A_hat``'s, forward and backward), on a CPU a weighted ``embedding_bag``."""

from __future__ import annotations

import pytest
import torch

from orthotune.models._packing import adjacency, block_adjacency, propagate, sparse_product


def _csr(rows: int, cols: int, density: float, index: torch.dtype, dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    dense = torch.randn(rows, cols, generator=generator, dtype=dtype)
    dense *= torch.rand(rows, cols, generator=generator) < density
    dense[1] = 0  # rows without a non-zero (isolated nodes, all-zero feature rows) give zeros
    dense[-1] = 0
    matrix = dense.to_sparse_csr()
    return torch.sparse_csr_tensor(matrix.crow_indices().to(index), matrix.col_indices().to(index),
                                   matrix.values(), matrix.shape, check_invariants=True)


@pytest.mark.parametrize("index", [torch.int32, torch.int64])
@pytest.mark.parametrize("columns", [1, 7, 64, 130])
def test_a_product_has_the_sum_kernels_bits_in_float32(index, columns):
    """The bits ``torch.sparse.mm(..., "sum")`` gives (each row summed over its non-zeros in their
    stored order), so every result computed before on that kernel keeps its bits."""
    matrix = _csr(90, 70, 0.1, index, torch.float32, seed=columns)
    dense = torch.randn(70, columns, generator=torch.Generator().manual_seed(1))
    product = sparse_product(matrix, dense)
    assert product.shape == (90, columns) and product.dtype == torch.float32
    assert torch.equal(product, torch.sparse.mm(matrix, dense, "sum"))
    assert torch.equal(product[1], torch.zeros(columns)) and torch.equal(product[-1], torch.zeros(columns))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_product_is_the_dense_product(dtype):
    matrix = _csr(40, 55, 0.2, torch.int64, dtype, seed=3)
    dense = torch.randn(55, 9, dtype=dtype, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(sparse_product(matrix, dense), matrix.to_dense() @ dense)


def test_a_transposed_dense_operand_gives_the_contiguous_ones_bits():
    """A gradient handed over transposed is read as its values, not its memory."""
    matrix = _csr(30, 20, 0.3, torch.int32, torch.float32, seed=5)
    dense = torch.randn(8, 20, generator=torch.Generator().manual_seed(6))
    assert torch.equal(sparse_product(matrix, dense.t()), sparse_product(matrix, dense.t().contiguous()))


def test_a_matrix_without_non_zeros_gives_zeros():
    empty = torch.sparse_csr_tensor(torch.zeros(6, dtype=torch.int64), torch.zeros(0, dtype=torch.int64),
                                    torch.zeros(0), (5, 4))
    assert torch.equal(sparse_product(empty, torch.randn(4, 3)), torch.zeros(5, 3))


def test_a_gradient_flows_through_the_block_products(cora):
    """The trainer's products run inside autograd functions; the dense operand's gradient is
    ``A^T g`` as autograd computes it for the dense product."""
    edge_index, weight = adjacency(cora.adj)
    blocks = block_adjacency(edge_index, weight, 2)
    h = torch.randn(2, cora.adj.shape[0], 5, requires_grad=True, generator=torch.Generator().manual_seed(7))
    grad = torch.randn(2, cora.adj.shape[0], 5, generator=torch.Generator().manual_seed(8))
    (propagated_grad,) = torch.autograd.grad(propagate(blocks, h), h, grad)
    dense = cora.adj.to_dense()
    torch.testing.assert_close(propagate(blocks, h), dense @ h)
    torch.testing.assert_close(propagated_grad, dense.t() @ grad)
