"""Selection by the training pass's own validation loss (DropEdge's code, issue 50): the
weights after the step whose forward pass, dropout and DropEdge on, had the lowest loss."""

import math

import pytest
import torch
from trained import per_config

from orthotune.core import ConfigError, TrainConfig
from orthotune.spaces import parse_space
from orthotune.training import train_node

CPU = torch.device("cpu")


def _config(**values) -> TrainConfig:
    return TrainConfig(**{"dataset": "cora", "depth": 2, "dropout": 0.0, "lr": 0.1, "weight_decay": 0.0,
                          "epochs": 30, "patience": 30, "seeds": (0,), **values})


def _run(config, data):
    seen = []
    return train_node(config, data, CPU, seen.append)[0].runs[0], seen


@pytest.mark.parametrize("backbone", ["gcn", pytest.param("sage", marks=pytest.mark.slow)])
def test_without_dropout_the_pass_selects_the_step_after_the_evaluations_minimum(cora, backbone):
    """With nothing random in the pass, epoch e's training pass sees the weights that epoch e - 1's
    evaluation saw: its validation loss is that evaluation's, so the selection moves one step on."""
    by_eval, seen = _run(_config(backbone=backbone, selection="val_loss"), cora)
    by_pass, seen_pass = _run(_config(backbone=backbone, selection="train_pass_val_loss"), cora)
    assert 1 <= by_eval.best_epoch < 30  # the loss turns up inside the budget: the shift shows
    assert by_pass.best_epoch == by_eval.best_epoch + 1
    chosen = seen_pass[by_pass.best_epoch - 1]  # the report of the selected epoch: after its step
    assert (by_pass.val_acc, by_pass.test_acc, by_pass.val_loss) == (
        chosen.val_acc[0][0], chosen.test_acc[0][0], chosen.val_loss[0][0])
    assert [r.val_loss for r in seen] == [r.val_loss for r in seen_pass]  # selection changes nothing else


@pytest.mark.slow
def test_with_dropout_the_pass_is_not_the_evaluation(cora):
    """Dropout on: the training pass's loss is another, noisier curve, so the two rules part on
    some seed (a rule that read the evaluation's loss under the new name would select the same
    epoch, or the one after it, on every seed). Which seeds part depends on the draws."""
    noisy = dict(dropout=0.8, lr=0.01, epochs=60, patience=60, seeds=(0, 1, 2, 3))
    by_eval = train_node(_config(selection="val_loss", **noisy), cora, CPU)[0].runs
    by_pass = train_node(_config(selection="train_pass_val_loss", **noisy), cora, CPU)[0].runs
    parted = [p.best_epoch not in (e.best_epoch, e.best_epoch + 1) for e, p in zip(by_eval, by_pass)]
    assert any(parted), [(e.best_epoch, p.best_epoch) for e, p in zip(by_eval, by_pass)]


@pytest.mark.slow
def test_a_pack_with_the_pass_rule_beside_other_rules_equals_each_alone(cora):
    configs = [_config(selection="train_pass_val_loss", dropout=0.5, drop_edge=0.3, seeds=(0,)),
               _config(selection="val_loss", dropout=0.5, seeds=(1,)),
               _config(dropout=0.5, drop_edge=0.3, seeds=(2,))]
    packed = train_node(configs, cora, CPU)
    for config, result in per_config(configs, packed):
        alone = train_node(config, cora, CPU)[0].runs[0]
        run = result.runs[0]
        assert (run.best_epoch, run.epochs) == (alone.best_epoch, alone.epochs)
        assert math.isclose(run.test_acc, alone.test_acc, abs_tol=1e-6)


def test_graph_tasks_and_searches_refuse_the_pass_rule_in_one_line():
    with pytest.raises(ConfigError, match="applies to node tasks only"):
        TrainConfig(dataset="proteins", selection="train_pass_val_loss")
    space = {"datasets": ["cora"], "backbones": ["gcn"], "depths": [2],
             "train": {"selection": ["val_acc", "train_pass_val_loss"]}}
    with pytest.raises(ConfigError, match=r"train\.selection='train_pass_val_loss' cannot be searched") as error:
        parse_space(space)
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="cannot be searched"):
        parse_space({**space, "train": {}, "variants": [{"name": "dropedge", "selection": "train_pass_val_loss"}]})
