"""The node trainer's Ortho-GConv work per epoch: computed once where it can be, with the
same results to the bit as computing it everywhere."""

import math

import pytest
import torch

import orthotune.models._layers as layers
from orthotune.core import TrainConfig
from orthotune.training import train_node
from orthotune.training._node import _NodePack

CPU = torch.device("cpu")
EPOCHS = 12


def _config(**values) -> TrainConfig:
    return TrainConfig(dataset="cora", depth=4, epochs=EPOCHS, patience=EPOCHS, **values)


def _train(config: TrainConfig, cora):
    """The result and every epoch's training loss, validation loss and accuracies."""
    seen = []
    result = train_node(config, cora, CPU, seen.append)[0]
    history = [(v.train_loss, v.val_loss, v.val_acc, v.test_acc) for report in seen for v in report.history]
    return result, history


def _counting(monkeypatch, name: str) -> list[int]:
    """Count the calls of ``orthotune.models._layers.<name>`` (the layers call it there)."""
    calls = [0]
    original = getattr(layers, name)

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(layers, name, counted)
    return calls


@pytest.mark.parametrize("extra", [{}, {"T": 3, "lam": 1e-2, "target": "ones"}])
def test_weights_computed_ahead_change_no_bit_of_training(cora, monkeypatch, extra):
    config = _config(seeds=(0, 1), **extra)
    ahead, ahead_history = _train(config, cora)
    # the reference: every forward pass orthogonalises its own weights
    monkeypatch.setattr(_NodePack, "_weights_ahead", lambda self: None)
    alone, alone_history = _train(config, cora)
    assert ahead_history == alone_history
    assert len(ahead_history) == EPOCHS
    for a, b in zip(ahead.runs, alone.runs):
        assert (a.val_acc, a.test_acc, a.val_loss, a.best_epoch, a.m_sig, a.grad_norms) == (
            b.val_acc, b.test_acc, b.val_loss, b.best_epoch, b.m_sig, b.grad_norms)


def test_the_newton_iteration_runs_once_per_epoch(cora, monkeypatch):
    newton = _counting(monkeypatch, "newton_orthogonalise")
    result = train_node(_config(), cora, CPU)[0]
    assert result.runs[0].epochs == EPOCHS
    # the first training step's, one per evaluation (shared with the next step), and the
    # steadiness metrics' one; computing it in every pass would be 2 * EPOCHS + 1
    assert newton[0] == EPOCHS + 2


def test_evaluation_skips_the_regulariser(cora, monkeypatch):
    penalty = _counting(monkeypatch, "orthogonality_penalty")
    train_node(_config(), cora, CPU)
    assert penalty[0] == EPOCHS + 1  # the training steps' and the steadiness metrics' pass


def test_a_changed_parameter_is_orthogonalised_again(cora):
    from orthotune.training._loop import runs_of
    from orthotune.training._node import _NodeTask

    pack = _NodePack(_NodeTask(cora, CPU), runs_of([_config()]), [0])
    pack._evaluate()
    first = pack.ahead.weights[0]
    with torch.no_grad():
        pack.model.transforms[0].weight.mul_(0.5)  # as an optimiser step would
    assert pack._weights_ahead() is None
    pack._evaluate()
    assert pack._weights_ahead()[0] is not first
    assert pack._weights_ahead() is None  # used once


def test_the_regulariser_still_trains_with_weights_computed_ahead(cora):
    """lam reaches the loss: a larger lam changes the trajectory."""
    small = train_node(_config(lam=0.0), cora, CPU)[0].runs[0]
    large = train_node(_config(lam=1.0), cora, CPU)[0].runs[0]
    assert not math.isclose(small.m_sig, large.m_sig, rel_tol=1e-6)
