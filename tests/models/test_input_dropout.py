"""``input_dropout`` (dropout on the raw input features) and ``io_bias`` (input/output biases).

The authors' JKNet never drops out its input features and has no bias on its input/output
layers; these two fields let a config say so. Their defaults (``None``: the features take
``dropout``; ``True``: biases) are the behaviour from before the fields existed.
"""

from __future__ import annotations

import math

import pytest
import torch
from trained import per_config

from orthotune.core import ConfigError, OrthoSettings, TrainConfig
from orthotune.models import BACKBONES, adjacency, build_node_model, node_features
from orthotune.models._sparse import SparseFeatures
from orthotune.training import pack_key, train_node

CPU = torch.device("cpu")
NAMES = ["gcn", "jknet", "gcnii"]


def _model(cora, name: str, seeds=(0,), **switches):
    ortho = [OrthoSettings(T=2, beta=0.4) for _ in seeds]
    return BACKBONES.get(name)(cora.x.shape[1], 16, cora.num_classes, 4, ortho=ortho, seeds=seeds, **switches)


# --- the config fields ---------------------------------------------------------------------


def test_defaults_are_the_old_behaviour():
    config = TrainConfig(dataset="cora")
    assert config.input_dropout is None and config.io_bias is True
    model = build_node_model(TrainConfig(dataset="cora", backbone="jknet", depth=2, dropout=0.3), 8, 3, (0,), None)
    assert model.input_dropout == 0.3  # null input_dropout: the features take dropout
    assert model.input.bias is not None and model.output.bias is not None


@pytest.mark.parametrize(("values", "message"), [
    ({"input_dropout": 1.0}, "input_dropout=1.0 must be a number in [0, 1)"),
    ({"input_dropout": -0.1}, "input_dropout=-0.1 must be a number in [0, 1)"),
    ({"io_bias": "no"}, "io_bias='no' must be true or false"),
    ({"dataset": "proteins", "input_dropout": 0.0}, "input_dropout=0.0 applies to node backbones only"),
    ({"dataset": "proteins", "io_bias": False}, "io_bias=False applies to node backbones only"),
])
def test_invalid_values_are_refused_in_one_line(values, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        TrainConfig.from_dict({"dataset": "cora", **values})


def test_input_dropout_is_part_of_the_pack_key_and_io_bias_too():
    base = TrainConfig(dataset="cora", depth=2, dropout=0.5)
    assert pack_key(base) == pack_key(TrainConfig(dataset="cora", depth=2, dropout=0.5, input_dropout=None))
    assert pack_key(base) != pack_key(TrainConfig(dataset="cora", depth=2, dropout=0.5, input_dropout=0.0))
    assert pack_key(base) != pack_key(TrainConfig(dataset="cora", depth=2, dropout=0.5, io_bias=False))


def test_configs_with_different_input_dropout_are_not_packed(cora):
    configs = [TrainConfig(dataset="cora", depth=2, epochs=1, input_dropout=d) for d in (0.0, 0.5)]
    with pytest.raises(Exception, match="must share"):
        train_node(configs, cora, CPU)


# --- the model ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("sparse", [False, True])
def test_zero_input_dropout_keeps_every_feature_while_the_layers_drop(cora, name, sparse):
    """Training mode, dropout 0.5: the input projection sees the features unmasked (dense and
    sparse paths, in a pack of 2), while the hidden layers still drop (two passes differ)."""
    features = node_features(cora.x) if sparse else cora.x
    assert isinstance(features, SparseFeatures) == sparse
    model = _model(cora, name, seeds=(0, 1), dropout=0.5, input_dropout=0.0).train()
    torch.testing.assert_close(model.embed(features), model.eval().embed(features))
    model.train()
    edges = adjacency(cora.adj)
    assert not torch.equal(model(features, *edges), model(features, *edges))


@pytest.mark.parametrize("sparse", [False, True])
def test_input_dropout_alone_masks_the_features(cora, sparse):
    """dropout 0 with input_dropout 0.5: only the features are dropped (training differs
    from evaluation, by the embedding)."""
    features = node_features(cora.x) if sparse else cora.x
    model = _model(cora, "gcn", seeds=(0, 1), dropout=0.0, input_dropout=0.5).train()
    torch.manual_seed(0)
    dropped = model.embed(features)
    assert not torch.allclose(dropped, model.eval().embed(features))


@pytest.mark.parametrize("sparse", [False, True])
def test_packed_slots_with_zero_input_dropout_equal_lone_models(cora, sparse):
    """With input_dropout 0, each pack slot's embedding in training mode is its lone model's
    (dropout 0.5 elsewhere: the input path draws no mask, so the pack cannot matter)."""
    features = node_features(cora.x) if sparse else cora.x
    packed = _model(cora, "jknet", seeds=(3, 4), dropout=0.5, input_dropout=0.0).train()
    both = packed.embed(features)
    for p, seed in enumerate((3, 4)):
        lone = _model(cora, "jknet", seeds=(seed,), dropout=0.5, input_dropout=0.0).train()
        torch.testing.assert_close(both[p], lone.embed(features)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layout", ["linear", "official"])
def test_io_bias_false_removes_the_input_and_output_biases(cora, name, layout):
    switches = {} if name == "gcnii" else {"conv_bias": False}
    with_bias = _model(cora, name, layout=layout, **switches)
    model = _model(cora, name, layout=layout, io_bias=False, **switches)
    io_names = [n for n, _ in model.named_parameters() if n.startswith(("input", "output"))]
    assert io_names and not [n for n in io_names if "bias" in n], io_names
    assert len(list(with_bias.named_parameters())) - len(list(model.named_parameters())) == 2
    assert len(model.io_parameters()) == len(with_bias.io_parameters()) - 2
    # no bias anywhere and ReLU: zero features give exactly zero logits (with io biases set
    # to one, they do not)
    zeros = torch.zeros(5, cora.x.shape[1])
    edges = adjacency(torch.eye(5).to_sparse_csr())
    assert torch.equal(model(zeros, *edges), torch.zeros(5, 1, cora.num_classes))
    with torch.no_grad():
        for name_, parameter in with_bias.named_parameters():
            if name_.startswith(("input", "output")) and "bias" in name_:
                parameter.fill_(1.0)
    assert with_bias(zeros, *edges).abs().sum() > 0


def test_io_bias_false_pack_trains_equal_to_each_config_alone(cora):
    """A pack of two official-JKNet-like configs (no io bias, undropped input, per-config lr)
    trains each exactly as alone."""
    common = dict(dataset="cora", backbone="jknet", depth=2, hidden=16, layout="official", conv_bias=False,
                  io_bias=False, dropout=0.0, input_dropout=0.0, epochs=6)
    configs = [TrainConfig(lr=0.01, seeds=(0,), **common), TrainConfig(lr=0.05, seeds=(1,), T=3, **common)]
    packed = train_node(configs, cora, CPU)
    for config, result in per_config(configs, packed):
        (alone,) = train_node(config, cora, CPU)[0].runs
        (run,) = result.runs
        assert (run.status, run.best_epoch, run.epochs) == (alone.status, alone.best_epoch, alone.epochs)
        assert math.isclose(run.val_acc, alone.val_acc, abs_tol=1e-6)
        assert math.isclose(run.m_sig, alone.m_sig, rel_tol=1e-3)
