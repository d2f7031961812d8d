"""Graph U-Nets on real PROTEINS batches: forms, determinism, gPool/gUnpool, Ortho-GConv."""

import math

import pytest
import torch
from torch_geometric.loader import DataLoader
from torch_geometric.utils import degree

from orthotune.core import OrthoSettings
from orthotune.models import GRAPH_BACKBONES
from orthotune.models._graph_unet import GraphUNet, augment_adjacency, pool_ratios, unpool
from orthotune.models._layers import PackedLinear
from orthotune.models._ortho import distance_to_orthogonality, newton_orthogonalise


@pytest.fixture(scope="module")
def batch(data_root):
    from orthotune.training._data import load_dataset

    return next(iter(DataLoader(load_dataset("proteins", None, data_root), batch_size=32)))


def build(batch, ortho=None, seed=0, depth=3, hidden=32, **kwargs):
    return GraphUNet(batch.num_features, hidden, 2, depth, ortho=ortho, seed=seed, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("ortho", [None, OrthoSettings(T=4, beta=0.4)])
def test_forward_backward_on_proteins(batch, ortho):
    model = build(batch, ortho)
    out = model.run(batch.x, batch.edge_index, batch.batch)
    assert out.logits.shape == (batch.num_graphs, 2)
    assert out.first.shape == out.last.shape == (batch.num_nodes, 1, 32)
    assert len(out.weights) == len(model.transforms) == 2 * 3 + 1
    loss = torch.nn.functional.cross_entropy(out.logits, batch.y) + out.penalty.sum()
    loss.backward()
    for transform in model.transforms:
        assert torch.isfinite(transform.weight.grad).all() and transform.weight.grad.abs().sum() > 0
    assert (float(out.penalty) > 0) == (ortho is not None)


def test_registry_and_protocol_ratios():
    assert GRAPH_BACKBONES.get("gunet") is GraphUNet
    assert pool_ratios(3) == (0.9, 0.8, 0.7) and pool_ratios(5) == (0.9, 0.8, 0.7, 0.7, 0.7)
    with pytest.raises(ValueError, match="valid: gunet"):
        GRAPH_BACKBONES.get("gcn")


@pytest.mark.slow
def test_reset_parameters_is_deterministic_per_seed(batch):
    ortho = OrthoSettings(T=4, beta=0.4)
    first, again, other = build(batch, ortho, seed=3), build(batch, ortho, seed=3), build(batch, ortho, seed=4)
    for key, value in first.state_dict().items():
        torch.testing.assert_close(value, again.state_dict()[key])
    assert not torch.equal(first.transforms[0].weight, other.transforms[0].weight)
    assert not torch.equal(first.pools[0].select.weight, other.pools[0].select.weight)
    with torch.no_grad():
        for param in again.parameters():
            param.add_(1.0)
    again.reset_parameters()
    for key, value in first.state_dict().items():
        torch.testing.assert_close(value, again.state_dict()[key])


def test_ortho_form_orthogonalises_hidden_transformations_through_models_ortho(batch, monkeypatch):
    calls = []
    import orthotune.models._layers as layers

    original = layers.newton_orthogonalise

    def counting(q, steps, *args):
        calls.append(q.shape)
        return original(q, steps, *args)

    # the layers call the one orthogonalisation function through their module
    monkeypatch.setattr("orthotune.models._layers.newton_orthogonalise", counting)
    settings = OrthoSettings(T=10, beta=0.4)
    model = build(batch, settings, hidden=64)
    out = model.run(batch.x, batch.edge_index, batch.batch)
    assert calls == [(1, 64, 64)] * 7  # every hidden transformation, once per pass
    assert len(model.transforms) == 7 and all(isinstance(t, PackedLinear) and t.ortho == (settings,)
                                              for t in model.transforms)
    assert model.start.ortho is None  # the input projection is not square
    for transform, weight in zip(model.transforms, out.weights, strict=True):
        torch.testing.assert_close(weight, newton_orthogonalise(transform.weight, 10))
        # beta=0.4, T=10 is near-orthogonal (the doc's table); the raw hybrid Q is far from it
        singular = torch.linalg.svdvals(weight[0].detach())
        raw = torch.linalg.svdvals(transform.weight[0].detach())
        assert distance_to_orthogonality(weight[0].detach()) < 0.1 and 0.7 < singular.min() <= singular.max() < 1.05
        assert distance_to_orthogonality(transform.weight[0].detach()) > 0.2 and raw.min() / raw.max() < 0.3
    original_model = build(batch, None, hidden=64)
    calls.clear()
    original_model.run(batch.x, batch.edge_index, batch.batch)
    assert calls == []


def test_gpool_keeps_the_ratio_of_every_graph(batch):
    model = build(batch)
    h = torch.randn(batch.num_nodes, 32)
    augmented = augment_adjacency(batch.edge_index, batch.num_nodes)
    pooled, edge_index, _, pooled_batch, perm, _ = model.pools[0](h, augmented, None, batch.batch)
    sizes = degree(batch.batch, batch.num_graphs).long()
    kept = degree(pooled_batch, batch.num_graphs).long()
    assert kept.tolist() == [math.ceil(0.9 * int(n)) for n in sizes]
    assert (batch.batch[perm] == pooled_batch).all()  # nodes stay in their own graph
    assert edge_index.max() < pooled.shape[0]


def test_augmentation_connects_two_hop_neighbours():
    path = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    edges = set(map(tuple, augment_adjacency(path, 3).t().tolist()))
    assert edges == {(0, 1), (1, 0), (1, 2), (2, 1), (0, 2), (2, 0)}


def test_gunpool_restores_shapes(batch):
    h = torch.randn(5, 8)
    perm = torch.tensor([7, 0, 3, 9, 4])
    out = unpool(h, perm, 12)
    assert out.shape == (12, 8)
    torch.testing.assert_close(out[perm], h)
    rest = torch.ones(12, dtype=torch.bool)
    rest[perm] = False
    assert (out[rest] == 0).all()
