"""The node trainer's Ortho-GConv work per epoch: computed once where it can be, with the
same results to the bit as computing it everywhere."""

import math

import pytest
import torch

import orthotune.models._layers as layers
from orthotune.core import TrainConfig
from orthotune.training import TrainOptions, train_node
from orthotune.training._node import _NodePack

CPU = torch.device("cpu")
EPOCHS = 12


def _config(**values) -> TrainConfig:
    return TrainConfig(dataset="cora", depth=4, epochs=EPOCHS, patience=EPOCHS, **values)


def _train(config: TrainConfig, cora, options: TrainOptions | None = None):
    """The result and every epoch's losses, accuracies and recorded gradient norms."""
    seen = []
    result = train_node(config, cora, CPU, seen.append, options or TrainOptions())[0]
    history = [(v.train_loss, v.val_loss, v.val_acc, v.test_acc, v.grad_norms)
               for report in seen for v in report.history]
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


@pytest.mark.slow
@pytest.mark.parametrize("extra", [{}, {"T": 3, "lam": 1e-2, "target": "ones"}])
def test_weights_computed_ahead_change_no_bit_of_training(cora, monkeypatch, extra):
    config = _config(seeds=(0, 1), **extra)
    options = TrainOptions(grad_norms_every=3)  # dL/dW(l) read through the weights computed ahead
    ahead, ahead_history = _train(config, cora, options)
    # the reference: every forward pass orthogonalises its own weights
    monkeypatch.setattr(_NodePack, "_weights_ahead", lambda self: None)
    alone, alone_history = _train(config, cora, options)
    assert ahead_history == alone_history
    assert len(ahead_history) == EPOCHS and sum(bool(h[-1][0][0]) for h in ahead_history) == EPOCHS // 3
    assert len(ahead.runs) == len(config.runs()) == 2
    for a, b in zip(ahead.runs, alone.runs, strict=True):
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
    pack.evaluate()
    first = pack.ahead.weights[0]
    with torch.no_grad():
        pack.model.transforms[0].weight.mul_(0.5)  # as an optimiser step would
    assert pack._weights_ahead() is None
    pack.evaluate()
    assert pack._weights_ahead()[0] is not first
    assert pack._weights_ahead() is None  # used once


@pytest.mark.slow
def test_the_regulariser_still_trains_with_weights_computed_ahead(cora):
    """lam reaches the loss: a larger lam changes the trajectory."""
    small = train_node(_config(lam=0.0), cora, CPU)[0].runs[0]
    large = train_node(_config(lam=1.0), cora, CPU)[0].runs[0]
    assert not math.isclose(small.m_sig, large.m_sig, rel_tol=1e-6)


def test_selected_state_holds_what_training_changes_not_settings(cora):
    """T, beta and lambda are settings: a model built for a run has its own, so a pack
    neither keeps nor copies them each epoch, and a compacted pack keeps each run's."""
    from orthotune.training._loop import runs_of
    from orthotune.training._node import _NodeTask

    configs = [_config(T=2, beta=0.3, lam=1e-3, seeds=(0,)), _config(T=5, beta=0.7, lam=1e-2, seeds=(1,))]
    pack = _NodePack(_NodeTask(cora, CPU), runs_of(configs), [0, 1])
    assert not [k for k in pack.best if k.rsplit(".", 1)[-1] in ("steps", "betas", "lam")]
    assert any(k.endswith(".c") for k in pack.best)  # the trainable target is state
    pack.drop([1])
    layer = pack.model.transforms[0]
    assert layer.steps.tolist() == [5] and layer.betas.tolist() == [0.7]
    assert pack.model.lam.tolist() == pytest.approx([1e-2])


@pytest.mark.slow
def test_fused_adam_steps_as_torchs_per_parameter_form(cora, monkeypatch):
    """The pack's Adam runs torch's fused kernel on the CPU: the same update as its plain
    per-parameter form, up to rounding."""
    config = _config(seeds=(0,), lr=0.02)
    fused, _ = _train(config, cora)
    original = torch.optim.Adam.__init__
    kinds = []

    def per_parameter(self, *args, **kwargs):
        kinds.append(kwargs.get("fused"))
        original(self, *args, **{**kwargs, "fused": False, "foreach": False})

    monkeypatch.setattr(torch.optim.Adam, "__init__", per_parameter)
    default, _ = _train(config, cora)
    assert kinds and all(kinds)  # the pack asked for the fused kernel
    a, b = fused.runs[0], default.runs[0]
    assert (a.best_epoch, a.epochs) == (b.best_epoch, b.epochs)
    assert math.isclose(a.m_sig, b.m_sig, rel_tol=1e-5)
    assert math.isclose(a.val_loss, b.val_loss, rel_tol=1e-5)
