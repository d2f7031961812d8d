"""SGC and DAGNN (issue 50): one model per run, no Ortho-GConv arm, ``depth`` propagations; each
computes its paper's formula."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import to_dense_adj

from orthotune.core import BACKBONE_INFO, ConfigError, TrainConfig, reads
from orthotune.models import build_module_model, is_module_backbone

FEATURES, CLASSES, NODES = 12, 3, 9


def config(backbone: str, **values) -> TrainConfig:
    return TrainConfig(dataset="cora", backbone=backbone, ortho=False, depth=3, hidden=8, dropout=0.0, **values)


def graph() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Features, edges (no self-loops) and GCN's dense ``A_hat`` of a small random graph."""
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(NODES, FEATURES, generator=generator)
    edges = torch.randint(0, NODES, (2, 20), generator=generator)
    edges = torch.cat([edges, edges.flip(0)], dim=1)
    edges = edges[:, edges[0] != edges[1]].unique(dim=1)
    index, weight = gcn_norm(edges, None, NODES, add_self_loops=True)
    return x, edges, to_dense_adj(index, edge_attr=weight, max_num_nodes=NODES)[0].T


@pytest.mark.parametrize("backbone", ["sgc", "dagnn"])
def test_declared_as_one_model_per_run_without_an_ortho_arm_or_layouts(backbone):
    info = BACKBONE_INFO.get(backbone)
    assert (info.task, info.packed, info.ortho_arm, info.layouts) == ("node", False, False, False)
    assert is_module_backbone(backbone) and not reads("layout", backbone) and reads("drop_edge", backbone)
    with pytest.raises(ConfigError, match="has no Ortho-GConv arm"):
        TrainConfig(dataset="cora", backbone=backbone, ortho=True)


def test_sgc_is_one_linear_layer_on_a_hat_to_the_depth():
    x, edges, a_hat = graph()
    model = build_module_model(config("sgc"), FEATURES, CLASSES, seed=0).eval()
    lin = model.output_layer
    expected = torch.linalg.matrix_power(a_hat, 3) @ x @ lin.weight.T + lin.bias
    with torch.no_grad():
        assert torch.allclose(model(x, edges), expected, atol=1e-5)


def test_dagnn_weighs_each_propagated_state_by_its_retention_score():
    x, edges, a_hat = graph()
    model = build_module_model(config("dagnn"), FEATURES, CLASSES, seed=0).eval()
    body = model.body
    with torch.no_grad():
        z = body.mlp(x)
        states = [torch.linalg.matrix_power(a_hat, k) @ z for k in range(4)]
        retention = body.aggregate.retention
        expected = sum(torch.sigmoid(h @ retention.weight.T + retention.bias) * h for h in states)
        assert torch.allclose(model(x, edges), expected, atol=1e-5)
    assert [lin.weight.shape for lin in body.mlp.lins] == [(8, FEATURES), (CLASSES, 8)]
