"""The sparse input side (``models._sparse``): the transpose's layout, and the one-run models'
CSR input layer, which computes that layout once per model instead of every backward pass."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import orthotune.models._sparse as sparse
from orthotune.core import TrainConfig
from orthotune.models import build_module_model
from orthotune.models._sparse import SparseInputLinear, csr_dropout, transposed_layout


def _random_csr(rows: int = 50, columns: int = 30, density: float = 0.1, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    dense = torch.rand(rows, columns, generator=generator)
    dense[torch.rand(rows, columns, generator=generator) > density] = 0.0
    return dense.to_sparse_csr()


@pytest.mark.parametrize("index", [torch.int64, torch.int32])
def test_the_transposed_layout_is_torchs_own_transpose(index):
    x = _random_csr()
    crow, col = x.crow_indices().to(index), x.col_indices().to(index)
    crow_t, col_t, order_t = transposed_layout(crow, col, x.shape[1])
    expected = x.to_dense().t().to_sparse_csr()
    assert crow_t.dtype == col_t.dtype == index
    assert torch.equal(crow_t.long(), expected.crow_indices())
    assert torch.equal(col_t.long(), expected.col_indices())
    assert torch.equal(x.values()[order_t], expected.values())


def test_the_csr_input_layer_gives_dense_linears_output_and_gradients():
    x = _random_csr()
    layer = torch.nn.Linear(30, 8)
    csr_layer = SparseInputLinear(layer)
    assert csr_layer.weight is layer.weight and csr_layer.bias is layer.bias  # the same parameters
    out = csr_layer(x)
    grads = torch.autograd.grad(out.square().sum(), [layer.weight, layer.bias])
    dense_out = F.linear(x.to_dense(), layer.weight, layer.bias)
    dense_grads = torch.autograd.grad(dense_out.square().sum(), [layer.weight, layer.bias])
    torch.testing.assert_close(out, dense_out)
    for got, expected in zip(grads, dense_grads, strict=True):
        torch.testing.assert_close(got, expected)
    torch.testing.assert_close(csr_layer(x.to_dense()), dense_out)  # dense input: F.linear
    no_bias = SparseInputLinear(torch.nn.Linear(30, 8, bias=False))
    torch.testing.assert_close(no_bias(x), x.to_dense() @ no_bias.weight.t())


def test_the_transposes_layout_is_computed_once_per_pattern(monkeypatch):
    """Every epoch's dropped-out CSR shares the features' index tensors: one layout for all of
    them; a matrix with another pattern gets its own."""
    calls = []
    original = sparse.transposed_layout
    monkeypatch.setattr(sparse, "transposed_layout", lambda *args: calls.append(1) or original(*args))
    x, other = _random_csr(seed=0), _random_csr(seed=1)
    layer = SparseInputLinear(torch.nn.Linear(30, 4))
    for _ in range(3):
        layer(csr_dropout(x, 0.5, True)).sum().backward()
    assert len(calls) == 1
    out = layer(other)
    torch.autograd.grad(out.sum(), layer.weight)
    assert len(calls) == 2
    expected = torch.autograd.grad(F.linear(other.to_dense(), layer.weight, layer.bias).sum(), layer.weight)[0]
    torch.testing.assert_close(torch.autograd.grad(layer(other).sum(), layer.weight)[0], expected)


@pytest.mark.parametrize("backbone", ["mlp", "appnp", "dagnn", "gat", "sage", "gin"])
def test_one_run_models_read_features_through_the_csr_layer_with_their_own_initialisation(backbone):
    """The swap keeps the layer's parameters (so a seed draws the same weights), its place
    among the input parameters (weight decay ``weight_decay_io``) and its reset."""
    config = TrainConfig(dataset="cora", backbone=backbone, ortho=False, depth=2, hidden=16)
    model = build_module_model(config, 40, 3, seed=7)
    layers = [m for m in model.modules() if isinstance(m, SparseInputLinear)]
    assert len(layers) == 1
    assert [id(p) for p in model.input_parameters()] == [id(p) for p in layers[0].parameters()]
    again = build_module_model(config, 40, 3, seed=7)
    torch.testing.assert_close(dict(again.named_parameters()), dict(model.named_parameters()))
    before = layers[0].weight.detach().clone()
    layers[0].reset_parameters()
    assert not torch.equal(layers[0].weight, before)
