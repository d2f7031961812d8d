import pytest
import torch

from orthotune.core import ConfigError, OrthoSettings, TrainConfig
from orthotune.models import (
    BACKBONES,
    adjacency,
    build_node_model,
    layer_gradient_norms,
    node_features,
    signal_magnification,
)
from orthotune.models._backbones import PackedBatchNorm


@pytest.mark.parametrize("name", ["gcn", "jknet", "gcnii"])
@pytest.mark.parametrize("depth", [2, 4, 8])
@pytest.mark.parametrize("ortho", [False, True])
def test_backbone_forward_backward_on_cora(cora, name, depth, ortho):
    settings = [OrthoSettings(T=4, beta=0.4)] if ortho else None
    model = BACKBONES.get(name)(cora.x.shape[1], 16, cora.num_classes, depth, ortho=settings)
    out = model.run(cora.x, cora.adj)
    assert out.logits.shape == (cora.num_nodes, 1, cora.num_classes)
    loss = out.logits.logsumexp(-1).mean() + out.penalty.sum()
    loss.backward()
    for transform in model.transforms:
        assert transform.weight.grad is not None and torch.isfinite(transform.weight.grad).all()
        if ortho:
            assert transform.c.grad is not None


def test_packed_model_matches_lone_models(cora):
    """Pack p of a packed model computes exactly what a lone model with seed p does."""
    settings = [OrthoSettings(T=2, beta=0.3), OrthoSettings(T=5, beta=0.7)]
    packed = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 4, dropout=0.0, ortho=settings, seeds=(3, 4))
    both = packed(cora.x, cora.adj)
    for p, (setting, seed) in enumerate(zip(settings, (3, 4))):
        lone = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 4, dropout=0.0, ortho=[setting], seeds=(seed,))
        torch.testing.assert_close(both[:, p], lone(cora.x, cora.adj)[:, 0], rtol=1e-4, atol=1e-5)


def test_metrics_shapes(cora):
    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 4, seeds=(0, 1))
    out = model.run(cora.x, cora.adj)
    assert signal_magnification(out.first, out.last).shape == (2,)
    assert layer_gradient_norms(out.logits.sum(), out.weights).shape == (2, 4)


def test_unknown_backbone_lists_valid_names():
    with pytest.raises(ValueError, match="valid: gcn, jknet, gcnii"):
        BACKBONES.get("gat")


# --- switches (issue 13, item 2) -------------------------------------------------------

SWITCHES = [
    ("gcn", {"layout": "official", "batch_norm": True}),
    ("gcn", {"conv_bias": False}),
    ("jknet", {"self_loop": True, "batch_norm": True}),
    ("jknet", {"jk": "max", "layout": "official"}),
    ("gcnii", {"variant": True}),
    ("gcnii", {"batch_norm": True, "layout": "official"}),
]


@pytest.mark.parametrize(("name", "switches"), SWITCHES)
def test_packed_model_with_switches_matches_lone_models(cora, name, switches):
    settings = [OrthoSettings(T=2, beta=0.3), OrthoSettings(T=5, beta=0.7)]
    packed = BACKBONES.get(name)(cora.x.shape[1], 16, 7, 3, dropout=0.0, ortho=settings, seeds=(3, 4),
                                 **switches)
    lone = [BACKBONES.get(name)(cora.x.shape[1], 16, 7, 3, dropout=0.0, ortho=[s], seeds=(seed,), **switches)
            for s, seed in zip(settings, (3, 4))]
    features, adj = node_features(cora.x), adjacency(cora.adj)  # the packed model's fast inputs
    for training in (True, False):  # BatchNorm: batch statistics, then the running ones
        for model in (packed, *lone):
            model.train(training)
        both = packed(features, *adj)
        for p, model in enumerate(lone):
            torch.testing.assert_close(both[:, p], model(cora.x, cora.adj)[:, 0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("name", "switches"), SWITCHES)
def test_every_parameter_and_buffer_is_split_by_pack(name, switches):
    model = BACKBONES.get(name)(20, 8, 3, 3, ortho=[OrthoSettings(T=t) for t in (1, 2, 3)],
                                seeds=(0, 1, 2), **switches)
    for key, value in model.state_dict().items():
        assert value.dim() >= 1 and value.shape[0] == 3, key


def test_packed_batch_norm_equals_batch_norm_per_pack():
    torch.manual_seed(0)
    x = torch.randn(3, 50, 4) * 3 + 1
    packed = PackedBatchNorm(3, 4)
    with torch.no_grad():
        packed.weight.uniform_(0.5, 1.5)
        packed.bias.normal_()
    alone = [torch.nn.BatchNorm1d(4) for _ in range(3)]
    for p, norm in enumerate(alone):
        norm.load_state_dict({"weight": packed.weight[p], "bias": packed.bias[p],
                              "running_mean": packed.running_mean[p], "running_var": packed.running_var[p],
                              "num_batches_tracked": torch.tensor(0)})
    for training in (True, True, False):
        packed.train(training)
        out = packed(x)
        for p, norm in enumerate(alone):
            norm.train(training)
            torch.testing.assert_close(out[p], norm(x[p]), rtol=1e-5, atol=1e-5)
    for p, norm in enumerate(alone):
        torch.testing.assert_close(packed.running_var[p], norm.running_var)


@pytest.mark.parametrize(("name", "layout", "propagations"), [
    ("gcn", "linear", 4), ("gcn", "official", 6), ("jknet", "official", 6), ("gcnii", "official", 4),
])
def test_depth_counts_hidden_convolutions_and_the_layout_adds_propagations(name, layout, propagations):
    model = BACKBONES.get(name)(20, 8, 3, 4, layout=layout)
    calls = []
    original = model.propagate
    model.propagate = lambda *args: calls.append(1) or original(*args)
    out = model.run(torch.randn(10, 20), torch.eye(10).to_sparse_csr())
    assert len(model.transforms) == 4 and len(out.weights) == 4
    assert model.propagations == len(calls) == propagations
    assert f"propagations={propagations}" in repr(model)


def test_official_layout_makes_input_and_output_graph_convolutions(cora):
    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 2, dropout=0.0, layout="official")
    out = model.run(cora.x, cora.adj)
    adj = cora.adj.to_dense()
    h0 = torch.relu(adj @ cora.x @ model.input.weight[0].T + model.input_bias[0])
    torch.testing.assert_close(out.first[:, 0], h0, rtol=1e-4, atol=1e-5)
    logits = adj @ out.last[:, 0] @ model.output.weight[0].T + model.output_bias[0]
    torch.testing.assert_close(out.logits[:, 0], logits, rtol=1e-4, atol=1e-5)


def test_jknet_concatenates_the_block_input_and_every_layer():
    model = BACKBONES.get("jknet")(20, 8, 3, 4, dropout=0.0)
    assert model.output.in_channels == 8 * 5
    seen = []
    original = model.output.forward
    model.output.forward = lambda h: seen.append(h) or original(h)
    out = model.run(torch.randn(10, 20), torch.eye(10).to_sparse_csr())
    torch.testing.assert_close(seen[0][..., :8], out.first.transpose(0, 1))
    torch.testing.assert_close(seen[0][..., -8:], out.last.transpose(0, 1))


def test_gcnii_star_orthogonalises_both_transformations(cora):
    settings = [OrthoSettings(T=3, beta=0.5, lam=1e-2)]
    model = BACKBONES.get("gcnii")(cora.x.shape[1], 16, 7, 3, ortho=settings, variant=True)
    assert len(model.ortho_layers()) == 6
    out = model.run(cora.x, cora.adj)
    assert len(out.weights) == 3
    alone = sum(layer.regularisation() for layer in model.ortho_layers()) * model.lam
    torch.testing.assert_close(out.penalty, alone, rtol=1e-5, atol=1e-7)
    out.logits.sum().backward()
    for layer in model.initial_transforms:
        assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0
    plain = BACKBONES.get("gcnii")(cora.x.shape[1], 16, 7, 3, ortho=settings)
    assert not torch.allclose(plain(cora.x, cora.adj), model(cora.x, cora.adj))


def test_without_feature_transformations_layers_only_propagate(cora):
    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 3, dropout=0.0, feature_transform=False,
                                 conv_bias=False, seeds=(0, 1))
    assert len(model.transforms) == 0
    out = model.run(cora.x, cora.adj)
    adj = cora.adj.to_dense()
    expected = out.first[:, 0]
    for _ in range(3):
        expected = torch.relu(adj @ expected)
    torch.testing.assert_close(out.last[:, 0], expected, rtol=1e-4, atol=1e-5)
    assert out.weights == [] and torch.equal(out.penalty, torch.zeros(2))
    assert layer_gradient_norms(out.logits.sum(), out.weights, packs=2).shape == (2, 0)
    with pytest.raises(ConfigError, match="feature_transform"):
        BACKBONES.get("gcn")(20, 8, 3, 2, feature_transform=False, ortho=[OrthoSettings()])


def test_a_depth_64_propagation_only_model_runs(cora):
    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 64, feature_transform=False)
    out = model.run(node_features(cora.x), *adjacency(cora.adj))
    assert torch.isfinite(out.logits).all()


def test_build_node_model_maps_every_backbone_switch():
    config = TrainConfig(dataset="cora", backbone="jknet", depth=4, hidden=8, jk="max", self_loop=True,
                         layout="official", conv_bias=False, batch_norm=True, ortho=False)
    model = build_node_model(config, 20, 3, seeds=(0, 1), ortho=None)
    assert isinstance(model, BACKBONES.get("jknet")) and model.packs == 2
    assert (model.jk, len(model.self_loops), model.graph_io) == ("max", 4, True)
    assert len(model.conv_biases) == 0 and len(model.norms) == 5
    config = TrainConfig(dataset="cora", backbone="gcnii", depth=3, hidden=8, gcnii_variant=True,
                         alpha=0.2, theta=1.5, feature_transform=True)
    model = build_node_model(config, 20, 3, seeds=(0,), ortho=[config.ortho_settings()])
    assert (model.variant, model.alpha, model.theta, len(model.initial_transforms)) == (True, 0.2, 1.5, 3)
    config = TrainConfig(dataset="cora", depth=2, hidden=8, feature_transform=False, ortho=False)
    assert len(build_node_model(config, 20, 3, seeds=(0,), ortho=None).transforms) == 0


def test_gradient_norms_of_a_layer_without_gradient_are_zeros_on_its_device():
    used = torch.randn(2, 3, 3, device="meta", requires_grad=True)
    unused = torch.randn(2, 3, 3, device="meta", requires_grad=True)
    norms = layer_gradient_norms((used * 2).sum(), [used, unused])
    assert norms.shape == (2, 2) and norms.device.type == "meta"
    used, unused = torch.ones(2, 3, 3, requires_grad=True), torch.ones(2, 3, 3, requires_grad=True)
    norms = layer_gradient_norms((used * 2).sum(), [used, unused])
    torch.testing.assert_close(norms, torch.tensor([[6.0, 0.0], [6.0, 0.0]]))


@pytest.mark.parametrize("layout", ["linear", "official"])
def test_io_parameters_are_the_input_and_output_layers(layout):
    model = BACKBONES.get("jknet")(20, 8, 3, 3, ortho=[OrthoSettings()], layout=layout, self_loop=True,
                                   batch_norm=True)
    io = {id(p) for p in model.io_parameters()}
    expected = {*map(id, model.input.parameters()), *map(id, model.output.parameters())}
    if layout == "official":
        expected |= {id(model.input_bias), id(model.output_bias)}
    assert io == expected
    convolutions = [p for p in model.parameters() if id(p) not in io]
    assert any(p is model.transforms[0].weight for p in convolutions)
