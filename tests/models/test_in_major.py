"""An input layer that reads sparse features holds its weight in the sparse product's layout
(``PackedLinear(in_major=True)``): the same model, the same bits, no transposed copies."""

import pytest
import torch

from orthotune.core import OrthoSettings, TrainConfig
from orthotune.models import adjacency, build_node_model, node_features
from orthotune.models._layers import PackedLinear
from orthotune.models._sparse import SparseFeatures


def _generators(seeds):
    return [torch.Generator().manual_seed(seed) for seed in seeds]


@pytest.mark.parametrize("init", ["glorot", "fan_out"])
@pytest.mark.parametrize("input_T", [0, 3])
def test_an_in_major_weight_starts_with_the_values_of_the_usual_one(init, input_T):
    """Held as ``weight_t`` ``[packs, in, out]``; ``weight`` is its ``[packs, out, in]`` view, drawn to the bit
    as the usual layer draws it (with the authors' one-off orthogonalisation too)."""
    settings = [OrthoSettings(input_T=input_T), OrthoSettings(input_T=input_T)] if input_T else None
    usual = PackedLinear(40, 16, 2, init_ortho=settings)
    in_major = PackedLinear(40, 16, 2, init_ortho=settings, in_major=True)
    for layer in (usual, in_major):
        layer.init = init
        layer.reset_parameters(_generators((5, 6)))
    assert in_major.weight_t.shape == (2, 40, 16) and in_major.weight_t.is_contiguous()
    assert "weight" not in dict(in_major.named_parameters())
    assert in_major.weight.shape == usual.weight.shape
    assert torch.equal(in_major.weight, usual.weight) and torch.equal(in_major.bias, usual.bias)
    assert in_major.weight.data_ptr() == in_major.weight_t.data_ptr()  # a view, not a copy
    with torch.no_grad():  # a write through the view reaches the parameter
        in_major.weight[1] = in_major.weight[0]
    assert torch.equal(in_major.weight_t[1], in_major.weight_t[0])


def test_an_ortho_gconv_transformation_is_never_in_major():
    with pytest.raises(ValueError, match=r"held as \[packs, out, in\]"):
        PackedLinear(16, 16, 1, ortho=[OrthoSettings()], in_major=True)


def test_the_in_major_sparse_product_has_the_usual_bits_forward_and_backward():
    """No transposed copy of the weight forward, none of its gradient backward, the same bits."""
    torch.manual_seed(0)
    features = SparseFeatures.from_dense(torch.rand(60, 40) * (torch.rand(60, 40) < 0.1))
    values = torch.randn(3, features.values.numel())
    grad = torch.randn(3, 60, 16)
    usual, in_major = PackedLinear(40, 16, 3), PackedLinear(40, 16, 3, in_major=True)
    for layer in (usual, in_major):
        layer.reset_parameters(_generators((0, 1, 2)))
    out = usual.sparse(features, values)
    out_in_major = in_major.sparse(features, values)
    assert torch.equal(out, out_in_major)
    out.backward(grad)
    out_in_major.backward(grad)
    assert in_major.weight_t.grad.shape == (3, 40, 16) and in_major.weight_t.grad.is_contiguous()
    assert torch.equal(in_major.weight_t.grad.mT, usual.weight.grad)
    assert torch.equal(in_major.bias.grad, usual.bias.grad)
    dense = torch.randn(3, 60, 40)  # a dense input reads the view: the same values
    torch.testing.assert_close(in_major(dense), usual(dense))
    torch.testing.assert_close(in_major(dense[0]), usual(dense[0]))


@pytest.mark.parametrize(("backbone", "extra"), [("gcn", {}), ("gcn", {"layout": "standard", "self_loop": True}),
                                                  ("gcnii", {"alpha": 0.1, "theta": 0.5}), ("jknet", {})])
def test_a_model_built_for_sparse_input_trains_to_the_same_bits(cora, backbone, extra):
    """``build_node_model(..., sparse_input=True)``, as the node trainer builds it for sparse features:
    logits and every gradient as the usual model's (its input gradient read in the usual layout)."""
    config = TrainConfig(dataset="cora", backbone=backbone, depth=3, hidden=16, dropout=0.5, **extra)
    x, adj = node_features(cora.x), adjacency(cora.adj)
    assert isinstance(x, SparseFeatures)

    def logits_and_grads(sparse_input):
        model = build_node_model(config, cora.x.shape[1], 7, (0, 1), None, sparse_input=sparse_input)
        logits = model.run(x, *adj).logits
        names = [name for name, _ in model.named_parameters()]
        grads = torch.autograd.grad(logits.square().sum(), list(model.parameters()))
        return logits, {name.replace("weight_t", "weight"): g.mT if name.endswith("weight_t") else g
                        for name, g in zip(names, grads, strict=True)}

    usual, usual_grads = logits_and_grads(False)
    fast, fast_grads = logits_and_grads(True)
    assert torch.equal(usual, fast)
    assert usual_grads.keys() == fast_grads.keys()
    assert all(torch.equal(usual_grads[name], fast_grads[name]) for name in usual_grads)
    in_major = build_node_model(config, cora.x.shape[1], 7, (0, 1), None, sparse_input=True)
    loops = [in_major.input, *([in_major.input_loop] if in_major.input_loop is not None else [])]
    assert all(layer.in_major for layer in loops) and not in_major.output.in_major
    assert extra.get("self_loop") is None or in_major.input_loop is not None

