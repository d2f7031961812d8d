"""Each pack slot draws its dropout masks from its own stream: with dropout on, a run trained
in a pack (beside others, or after a compaction) equals the run trained alone."""

import math

import pytest
import torch
from trained import per_config

from orthotune.core import TrainConfig
from orthotune.models import build_node_model
from orthotune.training import TrainOptions, train_node

CPU = torch.device("cpu")


def _config(**values) -> TrainConfig:
    return TrainConfig(**{"dataset": "cora", "depth": 2, "dropout": 0.5, "epochs": 12, "patience": 12, **values})


def _same(packed, alone) -> None:
    assert (packed.status, packed.best_epoch, packed.epochs) == (alone.status, alone.best_epoch, alone.epochs)
    assert math.isclose(packed.val_acc, alone.val_acc, abs_tol=1e-6)
    assert math.isclose(packed.test_acc, alone.test_acc, abs_tol=1e-6)
    assert math.isclose(packed.m_sig, alone.m_sig, rel_tol=1e-3)


@pytest.mark.slow
def test_with_dropout_a_packed_run_equals_the_run_alone_whatever_its_neighbours(cora):
    configs = [_config(seeds=(s,), lr=lr) for s, lr in ((0, 0.01), (1, 0.005), (2, 0.02))]
    packed = train_node(configs, cora, CPU)
    for config, result in per_config(configs, packed):
        alone = train_node(config, cora, CPU)[0].runs[0]
        _same(result.runs[0], alone)
    # a pack split in two by a capacity of two slots: the third run trains in a pack of one
    split = train_node(configs, cora, CPU, options=TrainOptions(max_pack=2))
    for first, second in zip(packed, split, strict=True):
        _same(first.runs[0], second.runs[0])


@pytest.mark.slow
def test_a_compacted_pack_keeps_each_runs_stream(cora):
    """The first run stops after 4 epochs and the pack compacts (below 90% active); the others go on with the
    streams they had, so they equal their runs alone."""
    configs = [_config(seeds=(0,), epochs=4, patience=4), _config(seeds=(1,)), _config(seeds=(2,), lr=0.005)]
    packed = train_node(configs, cora, CPU, options=TrainOptions(compact_below=0.9))
    for config, result in per_config(configs, packed):
        _same(result.runs[0], train_node(config, cora, CPU)[0].runs[0])


def test_slots_with_one_seed_draw_one_mask_and_other_seeds_other_masks(cora):
    config = _config()
    model = build_node_model(config, cora.x.shape[1], 7, (0, 0, 1), None)
    h = torch.ones(3, 50, 8)
    dropped = model.drop(h, 0.5)
    assert torch.equal(dropped[0], dropped[1])
    assert not torch.equal(dropped[0], dropped[2])
    model.eval()
    assert model.drop(h, 0.5) is h
