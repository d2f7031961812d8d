"""The structure-agnostic references as backbones (issue 36): an MLP on the node features and
Errica et al.'s node features summed per graph then an MLP; neither reads an edge, neither has
an Ortho-GConv arm. And every WebKB default names its source."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.nn import global_add_pool

from orthotune.core import (
    BACKBONE_DEFAULTS,
    DATASETS,
    ConfigError,
    TrainConfig,
    default_source,
    defaults_for,
    reads,
)
from orthotune.models import GRAPH_BACKBONES, build_module_model


def test_the_mlp_never_reads_an_edge():
    config = TrainConfig(dataset="texas", backbone="mlp", depth=2, ortho=False, hidden=8, dropout=0.0)
    model = build_module_model(config, 5, 3, seed=0).eval()
    x = torch.randn(6, 5)
    path = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    assert model(x, path).shape == (6, 3)
    assert torch.equal(model(x, path), model(x, torch.empty(2, 0, dtype=torch.long)))
    assert len(model.body.mlp.lins) == 2  # depth 2: features -> hidden -> classes


def test_the_sum_of_features_mlp_reads_each_graphs_summed_features_only():
    model = GRAPH_BACKBONES.get("sum-mlp")(4, 8, 2, 2, dropout=0.0, seed=0).eval()
    x, batch = torch.randn(7, 4), torch.tensor([0, 0, 0, 1, 1, 1, 1])
    ring = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 0, 4, 5, 6]])
    out = model.run(x, ring, batch)
    assert torch.allclose(out.logits, model.mlp(global_add_pool(x, batch)))
    assert torch.equal(out.logits, model(x, torch.empty(2, 0, dtype=torch.long), batch))
    assert out.weights == [] and float(out.penalty) == 0.0


@pytest.mark.parametrize("dataset, backbone", [("cora", "mlp"), ("proteins", "sum-mlp")])
def test_no_ortho_gconv_arm(dataset, backbone):
    with pytest.raises(ConfigError, match="structure-agnostic reference .* no Ortho-GConv arm"):
        TrainConfig(dataset=dataset, backbone=backbone, ortho=True)
    assert TrainConfig(dataset=dataset, backbone=backbone, ortho=False).backbone == backbone


def test_the_mlp_reads_its_layers_values_and_not_the_graph_layers():
    assert all(reads(name, "mlp") for name in ("hidden", "lr", "dropout", "input_dropout", "io_bias"))
    assert not any(reads(name, "mlp") for name in ("layout", "alpha", "conv_bias", "batch_norm", "jk"))
    assert reads("batch_size", "sum-mlp") and not reads("batch_size", "mlp")


@pytest.mark.parametrize("dataset", ["cornell", "texas", "wisconsin"])
@pytest.mark.parametrize("backbone", ["gcn", "jknet", "gcnii"])
def test_every_webkb_default_names_its_source(dataset, backbone):
    own = BACKBONE_DEFAULTS[("full", dataset, backbone)]
    assert "KaiGuo20/Ortho-GConv" in own.source or "chennnM/GCNII" in own.source
    config = TrainConfig(dataset=dataset, backbone=backbone, ortho=False)
    assert all(getattr(config, name) == value for name, value in own.values.items())
    assert own.source in default_source(dataset, "full", backbone)


@pytest.mark.parametrize("backbone", ["mlp", "gat", "sage", "gin", "appnp"])
def test_where_no_source_gives_values_the_catalogue_says_so(backbone):
    assert default_source("texas", "full", backbone).startswith("no source gives")
    assert defaults_for("texas", "full", backbone) == defaults_for("texas", "full")


def test_other_datasets_keep_their_settings_defaults():
    for dataset in (d for d in DATASETS.names() if d not in ("cornell", "texas", "wisconsin")):
        info = DATASETS.get(dataset)
        for backbone in ("gcn", "jknet", "gcnii", "gunet"):
            assert defaults_for(dataset, info.default_setting, backbone) == defaults_for(dataset, info.default_setting)
