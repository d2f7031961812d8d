"""Which config fields a backbone reads, checked against what training does with them.

A config field read by some backbones only declares them (``option(..., backbones=...)``); a
winner's config (``best --json``/``--yaml``, ``train --json``, the report's winners table)
carries only the fields its backbone reads. Leaving out a field the backbone reads would make
a printed config rerun a different model, so: for each node backbone (and a user's factory),
every field declared as not read by it trains, at another value, exactly what the default
trains (or the value is refused: then only the default can occur); and each such field,
at the same value, changes what a backbone that reads it trains (so the check can fail).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from orthotune.core import ANY_FACTORY, ConfigError, TrainConfig, all_backbones, backbone_info, declared, reads
from orthotune.training import run_configs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))  # the test factories and treatments
FACTORY = "factories_for_tests:small_gcn"
NODE_BACKBONES = ["gcn", "jknet", "gcnii", "gat", "sage", "gin", "appnp", "sgc", "dagnn", "incepgcn", FACTORY]
#: Another valid value of each field that only some backbones read.
OTHER = {"input_T": 2, "layout": "standard", "conv_bias": False, "io_bias": False, "batch_norm": True,
         "feature_transform": False, "init": "fan_out", "jk": "max", "gcnii_variant": True, "self_loop": True,
         "directed": True,
         "weight_decay_io": 0.5, "weight_decay_output": 0.5, "input_dropout": 0.9, "alpha": 0.9, "theta": 2.0,
         "heads": 2, "aggr": "max", "K": 2, "batch_size": 4, "drop_edge": 0.5,
         "treatment": "treatments_for_tests:wrapped",
         # Ortho-GConv's values and switches: read by every backbone with an Ortho-GConv arm
         "T": 3, "beta": 0.5, "lam": 1e-3, "bound": "frobenius", "transform": "none", "hybrid": "reparam",
         "target": "ones", "target_trainable": False, "squared_norm": True, "centre_rows": True, "norm_groups": 2}
#: A backbone that reads each (node data and layouts: trained here); ``batch_size`` is the
#: graph backbones' and ``feature_transform`` false refuses the Ortho-GConv arm these train.
READER = {"input_T": "gcn", "layout": "gcn", "conv_bias": "sage", "io_bias": "appnp", "batch_norm": "gin",
          "jk": "jknet", "gcnii_variant": "gcnii", "self_loop": "jknet", "directed": FACTORY,
          "weight_decay_io": "gat", "weight_decay_output": "gcn", "input_dropout": "appnp", "alpha": "gcnii",
          "theta": "gcnii", "heads": "gat", "aggr": "sage", "K": "appnp", "drop_edge": "gcn", "treatment": "sgc",
          "init": "incepgcn"}
RESTRICTED = [f.name for f in declared(TrainConfig) if f.metadata["backbones"] is not None]


def config(backbone: str, **values) -> TrainConfig:
    return TrainConfig(dataset="texas", backbone=backbone, depth=2, hidden=8, epochs=3, patience=3, splits=(0,),
                       ortho=backbone_info(backbone).ortho_arm, **{"T": 2, **values})


def trained(config: TrainConfig) -> list[tuple]:
    (result,) = run_configs([config], torch.device("cpu"))
    return [(r.status, r.val_acc, r.test_acc, r.val_loss, r.best_epoch, r.epochs) for r in result.runs]


def test_every_restricted_field_names_known_backbones_and_has_a_value_to_try():
    known = {*all_backbones(), ANY_FACTORY}
    for f in declared(TrainConfig):
        assert f.metadata["backbones"] is None or set(f.metadata["backbones"]) <= known, f.name
    assert set(RESTRICTED) == set(OTHER)
    assert reads("alpha", "gcnii") and not reads("alpha", "gcn") and not reads("layout", FACTORY)
    assert reads("hidden", FACTORY) and reads("T", "gunet") and not reads("input_T", "gunet")
    assert reads("bound", FACTORY) and not reads("bound", "mlp") and not reads("T", "sum-mlp")


@pytest.mark.slow  # about 80 short trainings
@pytest.mark.parametrize("backbone", NODE_BACKBONES)
def test_a_field_the_backbone_does_not_read_changes_nothing_it_trains(backbone, data_root):
    baseline = trained(config(backbone))
    assert trained(config(backbone)) == baseline  # deterministic: a difference below means a read
    for name in RESTRICTED:
        if reads(name, backbone):
            continue
        try:
            other = config(backbone, **{name: OTHER[name]})
        except ConfigError:
            continue  # refused for this backbone: only the default can occur
        assert trained(other) == baseline, f"{backbone} reads {name}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(READER))
def test_each_such_field_changes_what_a_backbone_that_reads_it_trains(name, data_root):
    backbone = READER[name]
    assert reads(name, backbone)
    assert trained(config(backbone, **{name: OTHER[name]})) != trained(config(backbone)), name
