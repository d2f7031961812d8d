"""Configs with their own lr, weight decay, T, beta, lambda, seeds and stopping, packed."""

import math

import pytest
import torch
from trained import per_config

from orthotune.core import TrainConfig
from orthotune.training import pack_key, train_node

CPU = torch.device("cpu")


def _config(**values) -> TrainConfig:
    return TrainConfig(dataset="cora", depth=2, dropout=0.0, **values)


def _alone(config: TrainConfig, cora):
    return train_node(config, cora, CPU)[0].runs[0]


def _assert_same_run(packed, alone) -> None:
    assert (packed.status, packed.best_epoch, packed.epochs) == (
        alone.status, alone.best_epoch, alone.epochs)
    assert math.isclose(packed.val_acc, alone.val_acc, abs_tol=1e-6)
    assert math.isclose(packed.test_acc, alone.test_acc, abs_tol=1e-6)
    # M_sig of the validation-best weights fingerprints the whole trajectory; batched
    # kernels round differently from a lone model's (1.3e-4 after 28 epochs at lr 0.05)
    assert math.isclose(packed.m_sig, alone.m_sig, rel_tol=1e-3)


def test_configs_differing_in_lr_and_ortho_settings_share_a_pack_key():
    a = _config(lr=0.01, weight_decay=5e-4, T=2, beta=0.3, lam=1e-4, seeds=(0,))
    b = _config(lr=0.05, weight_decay=0.0, T=5, beta=0.8, lam=1e-3, seeds=(1,), epochs=7)
    assert pack_key(a) == pack_key(b)
    assert pack_key(a) != pack_key(_config(hidden=32))


@pytest.mark.slow
def test_pack_with_per_config_lr_wd_T_beta_lambda_equals_each_config_alone(cora):
    # rates up to 0.01: at 0.02-0.05 (beta 0.8, no weight decay) 20 epochs grow the batched
    # kernels' rounding into a few flipped test nodes for some seeds (seeds 0-5 measured)
    configs = [
        _config(lr=0.01, weight_decay=5e-4, T=2, beta=0.3, lam=1e-4, seeds=(0,), epochs=20),
        _config(lr=0.005, weight_decay=0.0, T=5, beta=0.8, lam=1e-3, seeds=(1,), epochs=20),
        _config(lr=0.002, weight_decay=1e-3, T=3, beta=0.5, lam=5e-4, seeds=(2,), epochs=14),
    ]
    packed = train_node(configs, cora, CPU)
    for config, result in per_config(configs, packed):
        _assert_same_run(result.runs[0], _alone(config, cora))
    # the learning rate really is per config: the second config at the first's rate differs
    slower = _alone(_config(lr=0.01, weight_decay=0.0, T=5, beta=0.8, lam=1e-3, seeds=(1,),
                            epochs=20), cora)
    assert not math.isclose(slower.m_sig, packed[1].runs[0].m_sig, rel_tol=1e-2)


@pytest.mark.slow
def test_early_stopping_decides_per_config_inside_a_pack(cora):
    early = _config(lr=0.05, patience=3, epochs=40, seeds=(0,))
    late = _config(lr=0.01, patience=40, epochs=30, seeds=(1,), T=3)
    seen = []
    packed = train_node([early, late], cora, CPU, seen.append)
    stopped, continued = packed[0].runs[0], packed[1].runs[0]
    assert stopped.epochs == stopped.best_epoch + early.patience  # stopped by its patience
    assert stopped.epochs < continued.epochs == late.epochs
    assert [r.epoch for r in seen] == list(range(1, late.epochs + 1))
    assert seen[stopped.epochs - 2].active == [True, True]
    assert all(r.active == [False, True] for r in seen[stopped.epochs - 1:-1])
    assert all(r.best_val[0] == pytest.approx(stopped.val_acc) for r in seen[stopped.epochs - 1:])
    _assert_same_run(stopped, _alone(early, cora))
    _assert_same_run(continued, _alone(late, cora))
