import math

import pytest
import torch

from orthotune.core import BACKBONE_INFO, TASKS, ConfigError, OrthoSettings, TrainConfig
from orthotune.models import (
    BACKBONES,
    GRAPH_BACKBONES,
    MODULE_BACKBONES,
    adjacency,
    build_node_model,
    layer_gradient_norms,
    node_features,
    readout_width,
    signal_magnification,
)
from orthotune.models._packing import PackedBatchNorm


@pytest.mark.slow
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
    for p, (setting, seed) in enumerate(zip(settings, (3, 4), strict=True)):
        lone = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 4, dropout=0.0, ortho=[setting], seeds=(seed,))
        torch.testing.assert_close(both[:, p], lone(cora.x, cora.adj)[:, 0], rtol=1e-4, atol=1e-5)


def test_metrics_shapes(cora):
    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 4, seeds=(0, 1))
    out = model.run(cora.x, cora.adj)
    assert signal_magnification(out.first, out.last).shape == (2,)
    assert layer_gradient_norms(out.logits.sum(), out.weights).shape == (2, 4)


def test_unknown_backbone_lists_valid_names():
    with pytest.raises(ValueError, match="valid: gcn, jknet, gcnii"):
        BACKBONES.get("pna")


# --- switches (issue 13, item 2) -------------------------------------------------------

SWITCHES = [
    ("gcn", {"layout": "official", "batch_norm": True}),
    ("gcn", {"conv_bias": False}),
    ("jknet", {"self_loop": True, "batch_norm": True}),
    ("jknet", {"jk": "max", "layout": "official"}),
    ("gcnii", {"variant": True}),
    ("gcnii", {"batch_norm": True, "layout": "official"}),
    ("gcn", {"init": "fan_out", "layout": "standard"}),
    ("jknet", {"init": "fan_out", "self_loop": True}),
    ("incepgcn", {"init": "fan_out", "layout": "standard"}),
    ("gcn", {"self_loop": True, "layout": "standard", "init": "fan_out"}),
    ("gcn", {"self_loop": True, "batch_norm": True}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "switches"), SWITCHES)
def test_packed_model_with_switches_matches_lone_models(cora, name, switches):
    settings = [OrthoSettings(T=2, beta=0.3), OrthoSettings(T=5, beta=0.7)]
    packed = BACKBONES.get(name)(cora.x.shape[1], 16, 7, 3, dropout=0.0, ortho=settings, seeds=(3, 4),
                                 **switches)
    lone = [BACKBONES.get(name)(cora.x.shape[1], 16, 7, 3, dropout=0.0, ortho=[s], seeds=(seed,), **switches)
            for s, seed in zip(settings, (3, 4), strict=True)]
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


@pytest.mark.parametrize(("name", "layout", "hidden_layers"), [
    ("gcn", "linear", 4), ("gcn", "standard", 2), ("gcn", "official", 2),
    ("jknet", "linear", 4), ("jknet", "standard", 3), ("jknet", "official", 2),
    ("gcnii", "linear", 4), ("gcnii", "standard", 4), ("gcnii", "official", 4),
])
def test_depth_counts_every_graph_convolution_in_every_layout(name, layout, hidden_layers):
    """depth = propagations per forward pass (PyG's num_layers); the layout decides how many
    of them are hidden hidden x hidden convolutions (the Ortho-GConv ones)."""
    model = BACKBONES.get(name)(20, 8, 3, 4, layout=layout)
    calls = []
    original = model.propagate
    model.propagate = lambda *args: calls.append(1) or original(*args)
    out = model.run(torch.randn(10, 20), torch.eye(10).to_sparse_csr())
    assert len(model.transforms) == len(out.weights) == model.hidden_layers == hidden_layers
    assert model.propagations == len(calls) == model.depth == 4
    assert "propagations=4" in repr(model) and f"hidden_layers={hidden_layers}" in repr(model)


@pytest.mark.slow
def test_official_layout_makes_input_and_output_graph_convolutions(cora):
    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 3, dropout=0.0, layout="official")
    out = model.run(cora.x, cora.adj)
    adj = cora.adj.to_dense()
    h0 = torch.relu(adj @ cora.x @ model.input.weight[0].T + model.input_bias[0])
    torch.testing.assert_close(out.first[:, 0], h0, rtol=1e-4, atol=1e-5)
    logits = adj @ out.last[:, 0] @ model.output.weight[0].T + model.output_bias[0]
    torch.testing.assert_close(out.logits[:, 0], logits, rtol=1e-4, atol=1e-5)


def _pyg_edges(adj: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``A_hat`` as PyG's edge_index and edge weights (GCNConv(normalize=False) takes them)."""
    coo = adj.to_sparse_coo().coalesce()
    return coo.indices(), coo.values()


def _load_pyg_gcn(pyg, model) -> None:
    """Copy a one-slot standard-layout model's weights into PyG's GCN (same layer order)."""
    convs = list(pyg.convs)
    weights = [model.input.weight[0], *(t.weight[0] for t in model.transforms)]
    biases = [model.input_bias[0], *(b[0] for b in model.conv_biases)]
    if len(convs) > len(weights):  # plain GCN: the last convolution is the output layer
        weights.append(model.output.weight[0])
        biases.append(model.output_bias[0])
    for conv, weight, bias in zip(convs, weights, biases, strict=True):
        conv.lin.weight.data.copy_(weight)
        conv.bias.data.copy_(bias)


@pytest.mark.parametrize("depth", [2, 3, 5])
def test_standard_gcn_is_pygs_gcn(cora, depth):
    """Kipf & Welling's GCN: the standard layout at depth L has PyG GCN(num_layers=L)'s shapes,
    parameter count and outputs (depth 2: features -> hidden -> classes, no square weight)."""
    from torch_geometric.nn import GCN as PygGCN

    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, depth, dropout=0.0, layout="standard")
    pyg = PygGCN(cora.x.shape[1], 16, depth, 7, normalize=False)
    assert len(model.transforms) == depth - 2
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in pyg.parameters())
    shapes = [tuple(conv.lin.weight.shape) for conv in pyg.convs]
    ours = [tuple(model.input.weight.shape[1:]), *(tuple(t.weight.shape[1:]) for t in model.transforms),
            tuple(model.output.weight.shape[1:])]
    assert ours == shapes
    _load_pyg_gcn(pyg, model)
    model.eval(), pyg.eval()
    edge_index, edge_weight = _pyg_edges(cora.adj)
    expected = pyg(cora.x, edge_index, edge_weight=edge_weight)
    torch.testing.assert_close(model(cora.x, cora.adj)[:, 0], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("jk", ["cat", "max"])
@pytest.mark.parametrize("depth", [2, 4])
def test_standard_jknet_is_pygs_gcn_with_jumping_knowledge(cora, jk, depth):
    """Xu et al.'s JKNet: the standard layout at depth L is PyG's GCN(num_layers=L, jk=...):
    L graph convolutions (the first is the input layer), JumpingKnowledge over their L
    outputs, a linear head; same shapes, parameter count and outputs."""
    from torch_geometric.nn import GCN as PygGCN

    model = BACKBONES.get("jknet")(cora.x.shape[1], 16, 7, depth, dropout=0.0, layout="standard", jk=jk)
    pyg = PygGCN(cora.x.shape[1], 16, depth, 7, normalize=False, jk=jk)
    assert len(model.transforms) == depth - 1
    assert model.output.in_channels == pyg.lin.in_features == (16 * depth if jk == "cat" else 16)
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in pyg.parameters())
    _load_pyg_gcn(pyg, model)
    pyg.lin.weight.data.copy_(model.output.weight[0])
    pyg.lin.bias.data.copy_(model.output.bias[0])
    model.eval(), pyg.eval()
    edge_index, edge_weight = _pyg_edges(cora.adj)
    expected = pyg(cora.x, edge_index, edge_weight=edge_weight)
    torch.testing.assert_close(model(cora.x, cora.adj)[:, 0], expected, rtol=1e-4, atol=1e-5)


def test_readout_width_is_what_the_model_sizes():
    cases = [("jknet", "linear", "cat"), ("jknet", "standard", "cat"), ("jknet", "official", "cat"),
             ("jknet", "official", "max"), ("gcn", "standard", "cat")]
    for backbone, layout, jk in cases:
        config = TrainConfig(dataset="cora", backbone=backbone, depth=6, hidden=8, layout=layout, jk=jk)
        model = build_node_model(config, 20, 3, seeds=(0,), ortho=None)
        assert readout_width(config) == max(8, model.output.in_channels), (backbone, layout, jk)


def test_model_arguments_follow_the_config_rules():
    """The models take their choice lists and ranges from the config's declarations."""
    for kwargs, message in [({"layout": "dense"}, "layout='dense' must be one of 'linear', 'standard', 'official'"),
                            ({"dropout": 1.0}, r"dropout=1.0 must be a number in \[0, 1\)"),
                            ({"jk": "lstm"}, "jk='lstm' must be one of 'cat', 'max'")]:
        with pytest.raises(ConfigError, match=message):
            BACKBONES.get("jknet")(20, 8, 3, 4, **kwargs)
    with pytest.raises(ConfigError, match=r"depth=1 must be an integer in \[2, 1024\]"):
        BACKBONES.get("gcn")(20, 8, 3, 1)


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
    assert (model.jk, len(model.self_loops), model.graph_input, model.graph_output) == ("max", 2, True, True)
    assert len(model.conv_biases) == 0 and len(model.norms) == 3
    config = TrainConfig(dataset="cora", backbone="gcnii", depth=3, hidden=8, gcnii_variant=True,
                         alpha=0.2, theta=1.5, feature_transform=True)
    model = build_node_model(config, 20, 3, seeds=(0,), ortho=[config.ortho_settings()])
    assert (model.variant, model.alpha, model.theta, len(model.initial_transforms)) == (True, 0.2, 1.5, 3)
    config = TrainConfig(dataset="cora", depth=2, hidden=8, feature_transform=False, ortho=False)
    assert len(build_node_model(config, 20, 3, seeds=(0,), ortho=None).transforms) == 0


def test_gcn_self_loop_is_the_dropedge_authors_withloop_on_every_graph_convolution(cora):
    """``self_loop`` on GCN: ``A_hat H W + H W_self + b`` at the input, hidden and output graph
    convolutions (their ``GraphConvolutionBS(withloop=True)``); JKNet keeps it on its hidden ones."""
    features, adj = node_features(cora.x), adjacency(cora.adj)
    model = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 3, dropout=0.0, layout="standard", self_loop=True,
                                 seeds=(5,)).eval()
    a_hat, x = cora.adj.to_dense(), cora.x

    def conv(h, layer, loop, bias):
        return a_hat @ (h @ layer.weight[0].T) + h @ loop.weight[0].T + bias[0]

    h0 = torch.relu(conv(x, model.input, model.input_loop, model.input_bias))
    h1 = torch.relu(conv(h0, model.transforms[0], model.self_loops[0], model.conv_biases[0]))
    expected = conv(h1, model.output, model.output_loop, model.output_bias)
    torch.testing.assert_close(model(features, *adj)[:, 0], expected, rtol=1e-4, atol=1e-5)
    assert {id(model.input_loop.weight)} <= {id(p) for p in model.input_parameters()}
    assert {id(model.output_loop.weight)} <= {id(p) for p in model.output_parameters()}
    # the self-loop weights are drawn after every other layer: the rest starts as without them
    plain = BACKBONES.get("gcn")(cora.x.shape[1], 16, 7, 3, layout="standard", seeds=(5,))
    looped = dict(model.named_parameters())
    assert all(torch.equal(value, looped[name]) for name, value in plain.named_parameters())
    assert plain.input_loop is None and plain.output_loop is None and len(plain.self_loops) == 0
    jknet = BACKBONES.get("jknet")(cora.x.shape[1], 16, 7, 4, layout="official", self_loop=True)
    assert (len(jknet.self_loops), jknet.input_loop, jknet.output_loop) == (2, None, None)


def test_every_declared_backbone_has_its_model_under_that_declaration():
    """core's catalogue and models' registries agree: a packed backbone's class carries the
    catalogue's own declaration; PyG's models and the node reference are module builders; the
    graph task's backbones are graph models."""
    for name in BACKBONE_INFO:
        info = BACKBONE_INFO.get(name)
        if info.packed:
            assert BACKBONES.get(name).info is info, name
        else:
            assert name in (MODULE_BACKBONES if info.task == "node" else GRAPH_BACKBONES), name
    assert set(BACKBONES) == {n for n in BACKBONE_INFO if BACKBONE_INFO.get(n).packed}
    assert set(TASKS.get("graph").backbones) == set(GRAPH_BACKBONES)


def test_each_backbone_takes_its_own_arguments_from_a_config():
    """No name-keyed table: each class says which config fields become its arguments, and the
    base passes ``conv_bias`` only where the declaration says the bias is a switch."""
    config = TrainConfig(dataset="cora", depth=4, hidden=8, jk="max", self_loop=True, conv_bias=False, alpha=0.2,
                         theta=1.5, gcnii_variant=True)
    arguments = {name: BACKBONES.get(name).config_arguments(config) for name in BACKBONES}
    assert arguments == {"gcn": {"conv_bias": False, "self_loop": True},
                         "jknet": {"conv_bias": False, "jk": "max", "self_loop": True},
                         "gcnii": {"alpha": 0.2, "theta": 1.5, "variant": True}, "incepgcn": {"conv_bias": False}}
    gcnii = BACKBONES.get("gcnii")(20, 8, 3, 3, conv_bias=True)
    assert BACKBONE_INFO.get("gcnii").conv_bias == "none" and len(gcnii.conv_biases) == 0


def test_gradient_norms_of_a_layer_without_gradient_are_zeros_on_its_device():
    used = torch.randn(2, 3, 3, device="meta", requires_grad=True)
    unused = torch.randn(2, 3, 3, device="meta", requires_grad=True)
    norms = layer_gradient_norms((used * 2).sum(), [used, unused])
    assert norms.shape == (2, 2) and norms.device.type == "meta"
    used, unused = torch.ones(2, 3, 3, requires_grad=True), torch.ones(2, 3, 3, requires_grad=True)
    norms = layer_gradient_norms((used * 2).sum(), [used, unused])
    torch.testing.assert_close(norms, torch.tensor([[6.0, 0.0], [6.0, 0.0]]))


@pytest.mark.parametrize("layout", ["linear", "standard", "official"])
def test_io_parameters_are_the_input_and_output_layers(layout):
    model = BACKBONES.get("jknet")(20, 8, 3, 3, ortho=[OrthoSettings()], layout=layout, self_loop=True,
                                   batch_norm=True)
    inputs, outputs = {id(p) for p in model.input_parameters()}, {id(p) for p in model.output_parameters()}
    expected_in, expected_out = set(map(id, model.input.parameters())), set(map(id, model.output.parameters()))
    expected_in |= {id(model.input_bias)} if model.graph_input else set()
    expected_out |= {id(model.output_bias)} if model.graph_output else set()
    assert (inputs, outputs) == (expected_in, expected_out)
    io = {id(p) for p in model.io_parameters()}
    assert io == inputs | outputs
    convolutions = [p for p in model.parameters() if id(p) not in io]
    assert any(p is model.transforms[0].weight for p in convolutions)


def test_fan_out_init_draws_weights_and_biases_as_the_authors_layers():
    """``init="fan_out"``: every plain weight uniform in +-1/sqrt(out) and every bias in
    +-1/sqrt(its width), each slot its own draw; ``glorot`` keeps the biases at zero."""
    fan_out = BACKBONES.get("gcn")(20, 8, 3, 3, layout="standard", seeds=(0, 1), init="fan_out")
    for layer in (fan_out.input, *fan_out.transforms, fan_out.output):
        bound = 1 / math.sqrt(layer.out_channels)
        assert 0.8 * bound < layer.weight.abs().max() <= bound
        assert not torch.equal(layer.weight[0], layer.weight[1])
    biases = [*fan_out.conv_biases, fan_out.input_bias, fan_out.output_bias]
    assert len(biases) == 3
    for bias in biases:
        assert 0 < bias.abs().max() <= 1 / math.sqrt(bias.shape[-1]) and not torch.equal(bias[0], bias[1])
    linear = BACKBONES.get("gcn")(20, 8, 3, 3, layout="linear", seeds=(0,), init="fan_out")
    assert linear.output.bias.abs().max() > 0  # a linear layer's own bias too
    glorot = BACKBONES.get("gcn")(20, 8, 3, 3, layout="standard", seeds=(0, 1))
    assert all(not bias.any() for bias in (*glorot.conv_biases, glorot.input_bias, glorot.output_bias))
    # the Ortho-GConv arm's square weights keep their own (hybrid) initialisation
    ortho = BACKBONES.get("gcn")(20, 8, 3, 3, ortho=[OrthoSettings(beta=0.0)], init="fan_out")
    assert all(torch.equal(t.weight[0], torch.eye(8)) for t in ortho.transforms)
    config = TrainConfig(dataset="cora", backbone="incepgcn", depth=4, hidden=8, init="fan_out", ortho=False)
    model = build_node_model(config, 20, 3, seeds=(0,), ortho=None)
    assert model.init == "fan_out" and all(t.init == "fan_out" for t in model.transforms)
