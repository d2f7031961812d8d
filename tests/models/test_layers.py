"""The fast input side (sparse features, per-pack dropout) and batched orthogonalisation."""

import numpy as np
import pytest
import torch

from orthotune.core import OrthoSettings
from orthotune.models import BACKBONES, adjacency, node_features
from orthotune.models._dropout import DROPOUT_STREAM_OFFSET, dropout, dropout_streams
from orthotune.models._layers import NARROW_BELOW, PackedLinear, effective_weights
from orthotune.models._packing import NODE_MAJOR_WIDTH, block_adjacency, block_diagonal, node_major, propagate
from orthotune.models._sparse import SparseFeatures, nonzero_dropout


def test_cora_features_are_kept_sparse_and_round_trip(cora):
    features = node_features(cora.x)
    assert isinstance(features, SparseFeatures) and features.density < 0.05
    torch.testing.assert_close(features.matrix(features.values).to_dense(), cora.x)
    torch.testing.assert_close(features.transposed(features.values).to_dense(), cora.x.T)
    dense = torch.randn(50, 8)
    assert node_features(dense) is dense


@pytest.mark.parametrize("name", ["gcn", "jknet", "gcnii"])
def test_sparse_input_and_cached_adjacency_match_the_dense_model(cora, name):
    settings = [OrthoSettings(T=2, beta=0.3), OrthoSettings(T=5, beta=0.7)]
    model = BACKBONES.get(name)(cora.x.shape[1], 16, 7, 3, dropout=0.0, ortho=settings,
                                seeds=(3, 4))
    dense = model.run(cora.x, cora.adj)
    dense_grads = torch.autograd.grad(dense.logits.square().sum() + dense.penalty.sum(), list(model.parameters()))
    fast = model.run(node_features(cora.x), *adjacency(cora.adj))
    fast_grads = torch.autograd.grad(fast.logits.square().sum() + fast.penalty.sum(), list(model.parameters()))
    torch.testing.assert_close(fast.logits, dense.logits, rtol=1e-4, atol=1e-5)
    for got, expected in zip(fast_grads, dense_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-5)


def test_each_pack_draws_its_own_input_dropout_mask(cora):
    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 2, dropout=0.5, seeds=(0, 1))
    with torch.no_grad():  # identical weights in both packs: only the masks (own streams) differ
        model.input.weight[1] = model.input.weight[0]
    features = node_features(cora.x)
    for x in (features, cora.x):
        h = model.embed(x)
        assert not torch.allclose(h[0], h[1])
    model.eval()
    h = model.embed(features)
    torch.testing.assert_close(h[0], h[1])


def test_dropout_keeps_one_minus_p_and_rescales():
    torch.manual_seed(0)
    x = torch.ones(200_000)
    dropped = dropout(x, 0.3, True)
    kept = dropped != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.01
    torch.testing.assert_close(dropped[kept], torch.full_like(dropped[kept], 1 / 0.7))
    assert dropout(x, 0.3, False) is x


def test_nonzero_dropout_draws_for_the_non_zeros_only_with_dense_dropouts_distribution(cora):
    """The unpacked backbones' input dropout: Cora's zeros stay zero, each non-zero is kept
    with probability 1 - p and rescaled, the draws differ between calls; mostly non-zero
    input takes the dense path, and eval or p = 0 returns the input itself."""
    torch.manual_seed(0)
    x = cora.x.to_dense() if cora.x.is_sparse else cora.x
    nonzero = x != 0
    first, second = nonzero_dropout(x, 0.4, True), nonzero_dropout(x, 0.4, True)
    assert first.shape == x.shape and not (first[~nonzero] != 0).any()
    kept = first[nonzero] != 0
    assert abs(kept.float().mean().item() - 0.6) < 0.01
    torch.testing.assert_close(first[nonzero][kept], x[nonzero][kept] / 0.6)
    assert not torch.equal(first, second)
    dense = torch.rand(300, 300) + 0.5
    assert abs((nonzero_dropout(dense, 0.4, True) != 0).float().mean().item() - 0.6) < 0.01
    assert nonzero_dropout(x, 0.4, False) is x and nonzero_dropout(x, 0.0, True) is x


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_masks_are_independent_of_position(p):
    """torch's generators (a GPU's streams, one-run models): both 15-bit halves of each random
    draw decide an element: even and odd positions
    (low and high halves) each keep ``1 - p``, and neighbours are uncorrelated."""
    torch.manual_seed(1)
    kept = (dropout(torch.ones(3, 100_001), p, True) != 0).float().flatten()  # odd count
    for half in (kept[0::2], kept[1::2]):
        assert abs(half.mean().item() - (1 - p)) < 0.006
    pairs = kept[0:-1:2] * kept[1::2]
    assert abs(pairs.mean().item() - (1 - p) ** 2) < 0.006


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_a_cpu_slot_keeps_one_minus_p_in_each_field_of_its_own_streams_draws(p):
    """On a CPU each slot's stream is numpy's SFC64: its 64-bit draws give four signed 16-bit
    fields, low first, each an element kept where it is at least ``round(p * 2**16) - 2**15``;
    every field keeps ``1 - p``, neighbours are uncorrelated, a slot's mask is its stream's alone."""
    cpu = torch.device("cpu")
    kept = dropout(torch.ones(3, 100_003), p, True, dropout_streams((0, 1, 2), cpu)) != 0  # not whole draws
    fields = np.random.SFC64((1 + DROPOUT_STREAM_OFFSET) % 2**64).random_raw(25_001).view(np.int16)
    assert torch.equal(kept[1], torch.from_numpy(fields[:100_003] >= round(p * 2**16) - 2**15))
    alone = dropout(torch.ones(1, 100_003), p, True, dropout_streams((1,), cpu)) != 0
    assert torch.equal(kept[1], alone[0]) and not torch.equal(kept[0], kept[1])
    flat = kept.float()
    for field in range(4):
        assert abs(flat[:, field::4].mean().item() - (1 - p)) < 0.006
    pairs = flat[:, 0:-1:2] * flat[:, 1::2]
    assert abs(pairs.mean().item() - (1 - p) ** 2) < 0.006
    almost_all = dropout(torch.ones(2, 9), 1 - 2**-18, True, dropout_streams((0, 1), cpu))
    assert torch.equal(almost_all, torch.zeros(2, 9))


@pytest.mark.parametrize("name", ["gcn", "jknet", "gcnii"])
@pytest.mark.parametrize("ortho", [False, True])
def test_no_parameter_is_shared_between_packs(name, ortho):
    settings = [OrthoSettings(T=t) for t in (1, 2, 3)] if ortho else None
    model = BACKBONES.get(name)(20, 8, 3, 4, ortho=settings, seeds=(0, 1, 2))
    for parameter_name, parameter in model.named_parameters():
        assert parameter.shape[0] == 3, parameter_name


def test_batched_newton_over_layers_equals_each_layer_alone():
    settings = [OrthoSettings(T=1, beta=0.2), OrthoSettings(T=6, beta=0.9)]
    model = BACKBONES.get("gcn")(20, 16, 3, 5, ortho=settings, seeds=(5, 6))
    batched = effective_weights(model.transforms)
    assert len(model.transforms) == 5  # depth 5: five hidden transforms
    for layer, weight in zip(model.transforms, batched, strict=True):
        torch.testing.assert_close(weight, layer.effective_weight(), rtol=1e-5, atol=1e-6)
    penalty = model.run(torch.randn(10, 20), torch.eye(10).to_sparse_csr()).penalty
    alone = sum(t.regularisation() for t in model.transforms) * model.lam
    torch.testing.assert_close(penalty, alone, rtol=1e-5, atol=1e-7)


def test_block_diagonal_adjacency_propagates_each_pack_alone(cora):
    edge_index, edge_weight = adjacency(cora.adj)
    blocks, weights = block_diagonal(edge_index, edge_weight, 3)
    states = torch.randn(3, cora.x.shape[0], 5)
    together = blocks.matmul(states.reshape(-1, 5), weights).view_as(states)
    for p in range(3):
        torch.testing.assert_close(together[p], cora.adj @ states[p])


def test_block_adjacency_propagates_and_back_propagates_as_pyg_does(cora):
    """The CSR pair (int32 indices) and its own backward equal PyG's product both ways."""
    edge_index, edge_weight = adjacency(cora.adj)
    blocks = block_adjacency(edge_index, edge_weight, 3)
    assert blocks.matrix.crow_indices().dtype == torch.int32
    states = torch.randn(3, cora.x.shape[0], 5, requires_grad=True)
    ours = propagate(blocks, states)
    grad = torch.randn_like(ours)
    (ours_grad,) = torch.autograd.grad(ours, states, grad)
    pyg_blocks, weights = block_diagonal(edge_index, edge_weight, 3)
    theirs = pyg_blocks.matmul(states.reshape(-1, 5), weights).view_as(states)
    (theirs_grad,) = torch.autograd.grad(theirs, states, grad)
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(ours_grad, theirs_grad)


def test_packed_propagation_reuses_its_block_adjacency(cora):
    """Wide states multiply the block diagonal (2 copies), narrow ones (the 7 logits) one ``A_hat``."""
    model = BACKBONES.get("gcn")(cora.x.shape[1], 64, 7, 2, dropout=0.0, seeds=(0, 1), layout="standard")
    adj = adjacency(cora.adj)
    first = model.run(node_features(cora.x), *adj).logits
    blocks = {copies: cached[2] for copies, cached in model._blocks.items()}
    second = model.run(node_features(cora.x), *adj).logits
    assert set(blocks) == {1, 2} and all(model._blocks[copies][2] is kept for copies, kept in blocks.items())
    torch.testing.assert_close(first, second)


def test_the_transposed_adjacency_lists_rows_in_order_whatever_the_pack(cora):
    """The backward pass's sums run over each column's rows in ascending order, so a slot of a pack sums
    as it does alone (PyG's unstable sort gave a pack of 4 another order than a lone run)."""
    edge_index, edge_weight = adjacency(cora.adj)
    lone = block_adjacency(edge_index, edge_weight, 1).transposed
    packed = block_adjacency(edge_index, edge_weight, 4).transposed
    torch.testing.assert_close(lone.to_dense(), cora.adj.to_dense().T, rtol=0, atol=0)
    rows = lone.col_indices().long()
    drops = ((rows[1:] < rows[:-1]).nonzero().flatten() + 1).tolist()
    assert drops and set(drops) <= set(lone.crow_indices()[1:-1].tolist())  # only where a column starts
    count = rows.shape[0]
    nodes = cora.x.shape[0]
    for slot in range(4):
        block = slice(slot * count, (slot + 1) * count)
        assert torch.equal(packed.col_indices()[block].long() - slot * nodes, rows)
        assert torch.equal(packed.values()[block], lone.values())


@pytest.mark.parametrize("width", [3, 7, 32, 33, 64])
def test_narrow_states_propagate_node_major_to_the_bit(cora, width):
    """Up to NODE_MAJOR_WIDTH columns, ``OrthoGNN.propagate`` multiplies one ``A_hat`` by node-major
    states: the block product's values and gradients, bit for bit."""
    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 2, dropout=0.0, seeds=(0, 1, 2))
    edge_index, edge_weight = adjacency(cora.adj)
    states = torch.randn(3, cora.x.shape[0], width, requires_grad=True)
    ours = model.propagate(states, edge_index, edge_weight)
    grad = torch.randn_like(ours)
    (ours_grad,) = torch.autograd.grad(ours, states, grad)
    blocks = propagate(block_adjacency(edge_index, edge_weight, 3), states)
    (blocks_grad,) = torch.autograd.grad(blocks, states, grad)
    assert torch.equal(ours, blocks) and torch.equal(ours_grad, blocks_grad)
    assert set(model._blocks) == ({1} if node_major(states) else {3})
    assert node_major(states) == (width <= NODE_MAJOR_WIDTH)


@pytest.mark.parametrize("packs", [1, 3])
def test_sparse_input_projection_gives_each_pack_its_own_values(packs):
    """Pack ``p`` multiplies its own values (its own dropout mask) by its own weight, in
    the forward and the backward pass (one block-diagonal sparse product for all)."""
    torch.manual_seed(0)
    dense = torch.randn(30, 20) * (torch.rand(30, 20) < 0.1)
    features = SparseFeatures.from_dense(dense)
    values = torch.randn(packs, features.values.numel())
    layer = PackedLinear(20, 5, packs)
    grad = torch.randn(packs, 30, 5)
    out = layer.sparse(features, values)
    (got,) = torch.autograd.grad(out, layer.weight, grad)
    for p in range(packs):
        x = features.matrix(values[p]).to_dense()
        torch.testing.assert_close(out[p], x @ layer.weight[p].T + layer.bias[p], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got[p], grad[p].T @ x, rtol=1e-5, atol=1e-5)
    assert features.blocks(packs) is features.blocks(packs)  # the layout is built once


def test_a_slots_sparse_input_gradient_has_the_same_bits_in_any_pack():
    """The weight gradient of the block-diagonal product: a slot packed with others gets
    exactly what it gets alone (on a CPU the rows of each block sum alone)."""
    torch.manual_seed(1)
    dense = torch.rand(300, 40) * (torch.rand(300, 40) < 0.1)
    features = SparseFeatures.from_dense(dense)
    values = torch.randn(3, features.values.numel())
    grad = torch.randn(3, 300, 16)

    def weight_gradient(slots: list[int]) -> torch.Tensor:
        layer = PackedLinear(40, 16, len(slots), bias=False)
        (got,) = torch.autograd.grad(layer.sparse(features, values[slots]), layer.weight, grad[slots])
        return got

    packed = weight_gradient([0, 1, 2])
    for slot in range(3):
        assert torch.equal(packed[slot], weight_gradient([slot])[0])


def test_only_the_last_block_layouts_are_kept():
    features = SparseFeatures.from_dense(torch.eye(4))
    first = features.blocks(8)
    features.blocks(4), features.blocks(2)  # a pack compacted twice
    assert sorted(features._blocks) == [2, 4]
    assert features.blocks(4) is features.blocks(4) and features.blocks(8) is not first


@pytest.mark.parametrize(("name", "layout", "hidden"), [("gcn", "standard", 16), ("gcn", "linear", 64),
                                                         ("gcn", "linear", 128), ("jknet", "linear", 64)])
@pytest.mark.slow
@pytest.mark.parametrize("sparse_input", [False, True])
def test_a_packed_slot_equals_the_lone_model_to_the_bit(cora, name, layout, hidden, sparse_input):
    """Logits and every parameter's gradient of pack slots 0 and 2 of 3, as the same seeds' lone models
    give them: no sum of a slot's runs in an order that depends on the pack (hidden 128: the input
    product 128 columns wide; ``sparse_input``: the input weight held as the
    trainer holds it for sparse features, ``in_major``)."""
    x, adj = node_features(cora.x), adjacency(cora.adj)

    def logits_and_grads(seeds):
        model = BACKBONES.get(name)(cora.x.shape[1], hidden, 7, 3, dropout=0.5, seeds=seeds, layout=layout,
                                    sparse_input=sparse_input)
        logits = model.run(x, *adj).logits
        return logits, torch.autograd.grad(logits.square().sum(), list(model.parameters()))

    packed, packed_grads = logits_and_grads((0, 1, 2))
    for slot in (0, 2):
        lone, lone_grads = logits_and_grads((slot,))
        assert torch.equal(packed[:, slot], lone[:, 0])
        assert all(torch.equal(p[slot : slot + 1], g) for p, g in zip(packed_grads, lone_grads, strict=True))


@pytest.mark.parametrize("out", [3, 7, 15, 16])
@pytest.mark.parametrize("bias", [True, False])
def test_a_narrow_layer_takes_its_weight_gradient_in_the_weights_layout(out, bias):
    """Under 16 outputs on a CPU the weight gradient is ``G^T x``: the forward and the input
    gradient are autograd's bits, the weight and bias gradients its values."""
    torch.manual_seed(2)
    layer = PackedLinear(24, out, 3, bias=bias)
    x = torch.randn(3, 50, 24, requires_grad=True)
    grad = torch.randn(3, 50, out)
    y = layer(x)
    narrow = type(y.grad_fn).__name__ == "_NarrowOutputBackward"
    assert narrow == (out < NARROW_BELOW)
    inputs = [x, layer.weight] + ([layer.bias] if bias else [])
    got = torch.autograd.grad(y, inputs, grad)
    plain = torch.bmm(x, layer.weight.mT) if not bias else torch.baddbmm(layer.bias.unsqueeze(1), x, layer.weight.mT)
    expected = torch.autograd.grad(plain, inputs, grad)
    assert torch.equal(y, plain) and torch.equal(got[0], expected[0])
    for a, b in zip(got[1:], expected[1:], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        assert layer(x).grad_fn is None and torch.equal(layer(x), plain)
