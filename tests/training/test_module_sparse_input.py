"""The unpacked models whose first layer is linear (the MLP reference, APPNP, DAGNN, PyG's
models in the linear layout) read bag-of-words features as sparse CSR: the same model, the
same dropout draws, another product.

Cora's features are 1.3% non-zero; a dense ``[2708, 1433]`` product per pass was most of the
MLP reference's epoch (``docs/benchmarks.md#make-demo``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from orthotune.core import ConfigError, TrainConfig
from orthotune.models import build_module_model
from orthotune.training import _node_data as node_data
from orthotune.training import train_node
from orthotune.training._modules import _Graph

sys.path.insert(0, str(Path(__file__).parents[1] / "models"))  # treatments_for_tests, a user's package
CPU = torch.device("cpu")
LINEAR_FIRST = ["mlp", "appnp", "dagnn", "gat", "sage", "gin"]  # PyG's three in the linear layout


def _dense(cora) -> torch.Tensor:
    return (cora.x.to_dense() if cora.x.is_sparse else cora.x).float()


def _edges(cora) -> torch.Tensor:
    return _Graph(cora, CPU).edge_index


@pytest.mark.slow
@pytest.mark.parametrize("backbone", LINEAR_FIRST)
def test_sparse_features_give_the_dense_models_logits_gradients_and_dropout(cora, backbone):
    """Same seed: the same dropout masks on the non-zeros (train mode) and the same logits
    and weight gradients, up to the products' summation order."""
    x, edges = _dense(cora), _edges(cora)
    config = TrainConfig(dataset="cora", backbone=backbone, ortho=False, depth=2, hidden=16, dropout=0.5)
    model = build_module_model(config, x.shape[1], cora.num_classes, seed=3)
    assert model.sparse_input
    sparse = x.to_sparse_csr()
    for training in (True, False):
        model.train(training)
        outputs = []
        for features in (x, sparse):
            torch.manual_seed(11)  # the input dropout's draws come from torch's default stream
            logits = model(features, edges)
            grads = torch.autograd.grad(logits.square().sum(), list(model.parameters()))
            outputs.append((logits.detach(), grads))
        (dense_logits, dense_grads), (sparse_logits, sparse_grads) = outputs
        torch.testing.assert_close(sparse_logits, dense_logits, rtol=1e-4, atol=1e-5)
        for got, expected in zip(sparse_grads, dense_grads, strict=True):
            torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("backbone", ["gat", "sage", "gin", "sgc"])
def test_models_that_read_dense_features_refuse_a_sparse_matrix_in_one_line(cora, backbone):
    """PyG's convolutions reading the features (the standard layout) and SGC's propagation."""
    x = _dense(cora)
    config = TrainConfig(dataset="cora", backbone=backbone, ortho=False, depth=2, hidden=16, layout="standard")
    model = build_module_model(config, x.shape[1], cora.num_classes, seed=0)
    assert not model.sparse_input
    assert _Graph(cora, CPU).inputs(model).layout == torch.strided
    with pytest.raises(ConfigError, match="reads dense features"):
        model(x.to_sparse_csr(), _edges(cora))


def test_the_trainer_hands_sparse_features_only_where_they_are_sparse(cora):
    graph = _Graph(cora, CPU)
    config = TrainConfig(dataset="cora", backbone="mlp", ortho=False)
    mlp = build_module_model(config, cora.x.shape[1], cora.num_classes, 0)
    assert graph.inputs(mlp).layout == torch.sparse_csr
    torch.testing.assert_close(graph.inputs(mlp).to_dense(), _dense(cora))
    assert node_data.input_features(torch.rand(40, 30) + 0.1, CPU).layout == torch.strided  # dense stays dense


def test_a_device_without_a_measured_crossover_keeps_the_features_dense(cora, monkeypatch):
    monkeypatch.delitem(node_data.SPARSE_CROSSOVER, "cpu")
    mlp = build_module_model(TrainConfig(dataset="cora", backbone="mlp", ortho=False), cora.x.shape[1], 7, 0)
    assert _Graph(cora, CPU).inputs(mlp).layout == torch.strided


def test_a_treated_model_reads_dense_features(cora):
    config = TrainConfig(dataset="cora", backbone="appnp", ortho=False,
                         treatment="treatments_for_tests:raising_for_gat")
    model = build_module_model(config, cora.x.shape[1], cora.num_classes, seed=0)
    assert not model.sparse_input  # the treatment handed the model back: what it did to it is not known


@pytest.mark.slow
@pytest.mark.parametrize("backbone", ["mlp", "dagnn", "gat"])
def test_training_on_sparse_features_selects_and_scores_as_on_dense_ones(cora, backbone, monkeypatch):
    """Through the trainer: the sparse path (Cora at the CPU's crossover) and the dense one
    (a crossover of zero density) give every repeat the same epoch and accuracies."""
    configs = [TrainConfig(dataset="cora", backbone=backbone, ortho=False, depth=2, hidden=16, epochs=30, patience=30,
                           splits=(0, 1), seeds=(5,))]

    def scores():
        runs = train_node(configs, cora, CPU)[0].runs
        return [(run.val_acc, run.test_acc, run.best_epoch) for run in runs], [run.m_sig for run in runs]

    sparse, sparse_m_sig = scores()
    monkeypatch.setitem(node_data.SPARSE_CROSSOVER, "cpu", 0.0)
    dense, dense_m_sig = scores()
    assert dense == sparse
    assert dense_m_sig == pytest.approx(sparse_m_sig, rel=1e-4)


def test_the_runs_of_one_call_share_the_features_transposed_layout(cora, monkeypatch):
    """The trainer's features compute the transpose once; no run's input layer computes it
    again, in any epoch's backward pass."""
    import orthotune.models._sparse as sparse

    calls = []
    original = sparse.transposed_layout
    monkeypatch.setattr(sparse, "transposed_layout", lambda *args: calls.append(1) or original(*args))
    config = TrainConfig(dataset="cora", backbone="mlp", ortho=False, depth=2, hidden=16, epochs=3, patience=3,
                         seeds=(0, 1, 2))
    (result,) = train_node([config], cora, CPU)
    assert len(result.runs) == 3 and all(run.best_epoch > 0 for run in result.runs)
    assert len(calls) == 1  # the features' own, built once for the call


@pytest.mark.slow
@pytest.mark.parametrize("backbone", ["mlp", "appnp"])
def test_a_runs_result_on_sparse_features_does_not_depend_on_the_runs_beside_it(cora, backbone):
    """The runs of one call share the features and their transpose's layout, nothing else: a
    repeat trained beside others equals it trained alone, to the bit."""
    def config(seeds, **values):
        return TrainConfig(dataset="cora", backbone=backbone, ortho=False, depth=2, hidden=16, dropout=0.5,
                           epochs=15, patience=15, seeds=seeds, **values)

    beside = train_node([config((0, 1)), config((2,), lr=0.05)], cora, CPU)[0].runs[1]
    alone = train_node([config((1,))], cora, CPU)[0].runs[0]
    assert (beside.val_acc, beside.test_acc, beside.val_loss, beside.best_epoch) == \
        (alone.val_acc, alone.test_acc, alone.val_loss, alone.best_epoch)
