"""IncepGCN (issue 50; Rong et al., ICLR 2020, the DropEdge paper): one inception block of GCN
branches of depth 1 .. branches reading ``h(0)``, concatenated with it; ``depth`` is the longest
chain of graph convolutions, every branch convolution a hidden one with an Ortho-GConv arm."""

from __future__ import annotations

import pytest
import torch

from orthotune.core import BACKBONE_INFO, ConfigError, OrthoSettings, TrainConfig, reads
from orthotune.models import BACKBONES, build_node_model, is_module_backbone, readout_width
from orthotune.training import train_node

CPU = torch.device("cpu")


def incep(depth: int, layout: str = "standard", **kwargs):
    return BACKBONES.get("incepgcn")(20, 8, 3, depth, layout=layout, **kwargs)


def counted_run(model, x, adj):
    """The pass and how many times it multiplied by ``A_hat``."""
    calls = []
    original = model.propagate
    model.propagate = lambda *args: calls.append(1) or original(*args)
    return model.run(x, adj), len(calls)


def test_declared_as_a_packed_backbone_with_an_ortho_arm_that_reads_edges_and_layouts():
    info = BACKBONE_INFO.get("incepgcn")
    assert (info.task, info.packed, info.ortho_arm, info.layouts, info.conv_bias) == ("node", True, True, True,
                                                                                       "switch")
    assert "DropEdge" in info.source and "Rong" in info.source
    assert not is_module_backbone("incepgcn")
    for field in ("drop_edge", "layout", "batch_norm", "conv_bias", "T", "input_T"):
        assert reads(field, "incepgcn"), field
    assert not reads("jk", "incepgcn") and not reads("alpha", "incepgcn")


@pytest.mark.parametrize(("depth", "layout", "branches"), [
    (2, "standard", 0), (3, "standard", 1), (4, "standard", 2), (8, "official", 6), (64, "standard", 62),
    (2, "linear", 2), (5, "linear", 5),
])
def test_depth_is_the_longest_chain_and_each_branch_adds_its_depth_in_convolutions(depth, layout, branches):
    """The authors' --nbaseblocklayer L is depth L + 2 (graph input and output layers); the block
    holds branches (branches + 1) / 2 hidden convolutions, each multiplying by A_hat once."""
    model = incep(depth, layout)
    ends = 0 if layout == "linear" else 2
    assert model.branches == branches and depth == branches + ends
    assert model.hidden_layers == len(model.transforms) == branches * (branches + 1) // 2
    assert model.propagations == model.hidden_layers + ends
    assert model.output.in_channels == 8 * (branches + 1)
    assert len(model.branch_lasts) == branches
    if depth <= 8:
        out, calls = counted_run(model, torch.randn(10, 20), torch.eye(10).to_sparse_csr())
        assert calls == model.propagations and len(out.weights) == model.hidden_layers
    assert f"depth={depth}" in repr(model) and f"propagations={model.propagations}" in repr(model)


def test_each_branch_stacks_gcn_convolutions_of_the_block_input_and_the_head_reads_their_concatenation():
    generator = torch.Generator().manual_seed(0)
    nodes = 9
    x = torch.rand(nodes, 20, generator=generator)
    a = (torch.rand(nodes, nodes, generator=generator) < 0.3).float()
    a = ((a + a.T) > 0).float().fill_diagonal_(1.0)
    degree = a.sum(1).rsqrt()
    a_hat = degree[:, None] * a * degree[None, :]
    model = incep(5, dropout=0.0)
    for bias in model.conv_biases:  # non-zero biases: the check sees them added after propagation
        torch.nn.init.normal_(bias, generator=generator)
    seen = []
    original = model.output.forward
    model.output.forward = lambda h: seen.append(h) or original(h)
    with torch.no_grad():
        out = model.run(x, a_hat.to_sparse_csr())
        h0 = out.first[:, 0]
        parts, layer = [h0], 0
        for depth in (1, 2, 3):
            h = h0
            for _ in range(depth):
                weight = model.transforms[layer].weight[0].T  # stored [out, in]
                h = torch.relu(a_hat @ (h @ weight) + model.conv_biases[layer][0])
                layer += 1
            parts.append(h)
    torch.testing.assert_close(seen[0][0], torch.cat(parts, dim=-1), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.last[:, 0], parts[-1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("depth", [3, 5])
@pytest.mark.parametrize("ortho", [False, True])
def test_forward_backward_on_cora(cora, depth, ortho):
    settings = [OrthoSettings(T=4, beta=0.4)] if ortho else None
    model = BACKBONES.get("incepgcn")(cora.x.shape[1], 16, cora.num_classes, depth, ortho=settings,
                                      layout="standard")
    out = model.run(cora.x, cora.adj)
    assert out.logits.shape == (cora.num_nodes, 1, cora.num_classes) and torch.isfinite(out.logits).all()
    (out.logits.logsumexp(-1).mean() + out.penalty.sum()).backward()
    assert len(model.transforms) == (depth - 2) * (depth - 1) // 2
    for transform in model.transforms:  # every branch convolution is trained (and orthogonalised)
        assert transform.weight.grad is not None and transform.weight.grad.abs().sum() > 0
        if ortho:
            assert transform.c.grad is not None
    assert (out.penalty > 0).all() if ortho else (out.penalty == 0).all()


def test_a_packed_model_matches_lone_models(cora):
    settings = [OrthoSettings(T=2, beta=0.3), OrthoSettings(T=5, beta=0.7)]
    make = BACKBONES.get("incepgcn")
    packed = make(cora.x.shape[1], 16, 7, 4, dropout=0.0, ortho=settings, seeds=(3, 4), layout="standard")
    both = packed(cora.x, cora.adj)
    for p, (setting, seed) in enumerate(zip(settings, (3, 4), strict=True)):
        lone = make(cora.x.shape[1], 16, 7, 4, dropout=0.0, ortho=[setting], seeds=(seed,), layout="standard")
        torch.testing.assert_close(both[:, p], lone(cora.x, cora.adj)[:, 0], rtol=1e-4, atol=1e-5)


def test_a_config_builds_it_and_the_readout_width_is_what_the_model_sizes():
    for layout in ("linear", "standard", "official"):
        config = TrainConfig(dataset="cora", backbone="incepgcn", depth=6, hidden=8, layout=layout,
                             conv_bias=False, batch_norm=True, ortho=False)
        model = build_node_model(config, 20, 3, seeds=(0, 1), ortho=None)
        assert type(model) is BACKBONES.get("incepgcn") and model.packs == 2
        assert readout_width(config) == model.output.in_channels == 8 * (model.branches + 1)
        assert len(model.conv_biases) == 0 and len(model.norms) == model.hidden_layers + int(model.graph_input)


@pytest.mark.slow
def test_trains_on_cora_through_train_node_with_drop_edge(data_root):
    from orthotune.training import load_node_data

    data = load_node_data("cora", "semi", data_root)
    for ortho in (False, True):
        config = TrainConfig(dataset="cora", setting="semi", backbone="incepgcn", depth=4, hidden=16,
                             layout="standard", epochs=4, patience=4, seeds=(0, 1), ortho=ortho, drop_edge=0.3)
        (result,) = train_node(config, data, CPU)
        assert [(r.status, r.epochs) for r in result.runs] == [("completed", 4)] * 2, ortho
        assert all(0.0 <= r.val_acc <= 1.0 and r.val_loss == r.val_loss for r in result.runs)


def test_unknown_names_still_list_every_valid_backbone():
    with pytest.raises(ValueError, match="valid: gcn, jknet, gcnii, incepgcn"):
        BACKBONES.get("inception")
    with pytest.raises(ConfigError, match=r"unknown backbone 'inception'; valid: .*dagnn, incepgcn, mlp"):
        TrainConfig(dataset="cora", backbone="inception")


def test_the_standard_form_is_the_authors_semi_supervised_cora_script():
    """cora_IncepGCN.sh (DropEdge/DropEdge, semi-supervised): --nbaseblocklayer 62 --hidden 128
    --lr 0.004 --weight_decay 5e-05 --dropout 0.3 --sampling_percent 0.4 --epoch 400
    --early_stopping 400; at depth 64 (62 branches) it is a valid config of the catalogue."""
    from orthotune.core import STANDARD_FORMS, standard_form

    assert STANDARD_FORMS[("semi", "incepgcn")].backbone == "incepgcn"
    values = standard_form("semi", "incepgcn", "cora")
    config = TrainConfig(dataset="cora", setting="semi", backbone="incepgcn", depth=64, ortho=False, **values)
    assert (config.layout, config.hidden, config.lr, config.weight_decay, config.dropout, config.input_dropout,
            config.drop_edge, config.epochs, config.patience, config.selection) == (
        "standard", 128, 0.004, 5e-5, 0.3, 0.0, 0.6, 400, 400, "train_pass_val_loss")  # their early stop's rule
    assert BACKBONES.get("incepgcn").branches_of(config.depth, config.layout) == 62
