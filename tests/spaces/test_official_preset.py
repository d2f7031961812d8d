"""The `official` and `official-semi` presets against the authors' scripts.

Every row of :data:`EXPECTED` is transcribed by hand from one script of KaiGuo20/Ortho-GConv
(named beside it) over its entry point's argparse defaults (:data:`FULL_PY` for
full-supervised.py, :data:`TRAIN_PY` for train.py), mapped to our fields as the presets'
headers say; a preset value that drifts from its script fails here.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from orthotune.core import PROFILES, OrthoSettings, TrainConfig
from orthotune.spaces import PRESETS, parse_space, resolve_space
from orthotune.training import run_configs

NAMES = ("official", "official-semi")
ORTHO_FIELDS = {f.name for f in dataclasses.fields(OrthoSettings)}
WEBKB = dict(directed=True)

# full-supervised.py's defaults (--lr, --hidden, --dropout, --epochs, --patience,
# --weight_decay, --gama, --T1, --T2, --group2, --weight_beta; 5 splits)
FULL_PY = dict(setting="full", lr=0.01, hidden=64, dropout=0.5, epochs=1500, patience=200, weight_decay=0.0,
               weight_decay_io=None, lam=1e-4, input_T=2, T=2, norm_groups=2, beta=0.1, target_trainable=True,
               selection="val_loss", splits=(0, 1, 2, 3, 4), directed=False, io_bias=True, input_dropout=None)
# train.py's defaults (--wd1 -> weight_decay, --wd2 -> weight_decay_io for GCN/GCNII, whose
# optimiser never holds the target; --get loss; 10 runs -> seeds 0-9)
TRAIN_PY = dict(setting="semi", lr=0.01, hidden=64, dropout=0.6, epochs=1500, patience=1500, weight_decay=0.0,
                weight_decay_io=5e-4, lam=1e-4, input_T=2, T=2, norm_groups=2, beta=0.1, target_trainable=False,
                selection="val_loss", seeds=tuple(range(10)), directed=False, io_bias=True, input_dropout=None)
# JKNet in train.py: one Adam group with --weight_decay (default 5e-3); the target trains
TRAIN_PY_JKNET = {**TRAIN_PY, "weight_decay": 5e-3, "weight_decay_io": None, "target_trainable": True}
# --type densegcn --nhiddenlayer 1 --aggrmethod concat; no hidden bias; --withbn/--withloop off;
# JKNet_Model (both entry points): ingc/outgc are GraphConvolutionBS without bias, and the
# raw features reach ingc undropped (its dropout follows each convolution)
JKNET = dict(jk="cat", conv_bias=False, batch_norm=False, self_loop=False, io_bias=False, input_dropout=0.0)
# GCNII's --alpha and --lamda (theta) defaults differ per entry point; --variant off
FULL_PY_GCNII = {**FULL_PY, "alpha": 0.5, "theta": 0.5, "gcnii_variant": False}
TRAIN_PY_GCNII = {**TRAIN_PY, "alpha": 0.1, "theta": 0.5, "gcnii_variant": False}


def layer(count: int) -> int:
    """The authors' ``--layer L`` (GCN; JKNet's ``--nbaseblocklayer L``): L hidden convolutions
    between graph-convolution input and output layers, so depth (graph convolutions) L + 2."""
    return count + 2


def full(**values):
    return {**FULL_PY, **values}


def full_jknet(**values):
    return {**FULL_PY, **JKNET, **values}


def full_gcnii(**values):
    return {**FULL_PY_GCNII, **values}


def semi(**values):
    return {**TRAIN_PY, **values}


def semi_jknet(**values):
    return {**TRAIN_PY_JKNET, **JKNET, **values}


def semi_gcnii(**values):
    return {**TRAIN_PY_GCNII, **values}


EXPECTED: dict[tuple[str, str, str], dict] = {
    # script/full-supervised/*_Ortho-GCN.sh
    ("cora", "full", "gcn"): full(  # cora_Ortho-GCN.sh
        depth=layer(2), weight_decay=1e-4, input_T=1, T=1, norm_groups=1, beta=0.2, conv_bias=False),
    ("citeseer", "full", "gcn"): full(  # citeseer_Ortho-GCN.sh
        depth=layer(2), weight_decay=1e-4, input_T=1, T=1, norm_groups=1, beta=0.1, conv_bias=False),
    ("pubmed", "full", "gcn"): full(  # pubmed_Ortho-GCN.sh
        depth=layer(2), weight_decay=5e-6, input_T=2, T=2, norm_groups=1, beta=0.5, conv_bias=False),
    ("cornell", "full", "gcn"): full(  # corn_Ortho-GCN.sh
        depth=layer(4), weight_decay=1e-3, input_T=2, T=4, norm_groups=1, beta=0.2, patience=20, conv_bias=False,
        **WEBKB),
    ("texas", "full", "gcn"): full(  # texa_Ortho-GCN.sh
        depth=layer(2), weight_decay=1e-3, input_T=1, T=1, norm_groups=1, beta=0.5, conv_bias=False, **WEBKB),
    ("wisconsin", "full", "gcn"): full(  # wisc_Ortho-GCN.sh
        depth=layer(2), weight_decay=1e-3, input_T=1, T=1, norm_groups=1, beta=0.5, conv_bias=False, **WEBKB),
    # script/full-supervised/*_Ortho-JKNet.sh (--nbaseblocklayer 8 --hidden 128)
    ("cora", "full", "jknet"): full_jknet(  # cora_Ortho-JKNet.sh
        depth=layer(8), hidden=128, epochs=100, lr=0.008, weight_decay=5e-4, patience=400, dropout=0.8, input_T=2, T=4,
        norm_groups=2, beta=0.2),
    ("citeseer", "full", "jknet"): full_jknet(  # citeseer_Ortho-JKNet.sh
        depth=layer(8), hidden=128, epochs=400, lr=0.004, weight_decay=5e-5, patience=400, dropout=0.3, input_T=4, T=4,
        norm_groups=1, beta=0.4, self_loop=True),
    ("pubmed", "full", "jknet"): full_jknet(  # pubmed_Ortho-JKNet.sh
        depth=layer(8), hidden=128, epochs=400, lr=0.005, weight_decay=1e-4, patience=400, dropout=0.8, input_T=4, T=4,
        norm_groups=1, beta=0.6, self_loop=True, batch_norm=True),
    ("cornell", "full", "jknet"): full_jknet(  # corn_Ortho-JKNet.sh
        depth=layer(8), hidden=128, epochs=400, lr=0.005, weight_decay=1e-4, patience=400, dropout=0.8, input_T=2, T=4,
        norm_groups=1, beta=1.0, self_loop=True, **WEBKB),
    ("texas", "full", "jknet"): full_jknet(  # texa_Ortho-JKNet.sh
        depth=layer(8), hidden=128, epochs=40, lr=0.005, weight_decay=1e-4, patience=20, dropout=0.8, input_T=2, T=2,
        norm_groups=1, beta=0.1, self_loop=True, batch_norm=True, **WEBKB),
    ("wisconsin", "full", "jknet"): full_jknet(  # wisc_Ortho-JKNet.sh
        depth=layer(8), hidden=128, epochs=400, lr=0.005, weight_decay=1e-4, patience=400, dropout=0.8, input_T=1, T=1,
        norm_groups=1, beta=0.5, self_loop=True, **WEBKB),
    # script/full-supervised/*_Ortho-GCNII.sh (no texa_Ortho-GCNII.sh exists)
    ("cora", "full", "gcnii"): full_gcnii(  # cora_Ortho-GCNII.sh
        depth=4, weight_decay=1e-4, input_T=1, T=4, norm_groups=1, beta=0.9, alpha=0.2, gcnii_variant=True),
    ("citeseer", "full", "gcnii"): full_gcnii(  # citeseer_Ortho-GCNII.sh
        depth=2, weight_decay=5e-6, input_T=2, T=2, norm_groups=1, beta=0.5),
    ("pubmed", "full", "gcnii"): full_gcnii(  # pubmed_Ortho-GCNII.sh
        depth=2, weight_decay=5e-6, input_T=2, T=4, norm_groups=1, beta=0.5, alpha=0.3),
    ("cornell", "full", "gcnii"): full_gcnii(  # corn_Ortho-GCNII.sh (its --data is cora)
        depth=2, weight_decay=1e-4, input_T=1, T=2, norm_groups=1, beta=0.1, alpha=0.2, **WEBKB),
    ("wisconsin", "full", "gcnii"): full_gcnii(  # wisc_Ortho-GCNII.sh
        depth=4, weight_decay=5e-4, input_T=1, T=4, norm_groups=1, beta=0.2, theta=1.0, **WEBKB),
    # script/semi-supervised/*_Ortho-GCN.sh
    ("cora", "semi", "gcn"): semi(  # cora_Ortho-GCN.sh
        depth=layer(2), input_T=4, T=4, norm_groups=1, beta=0.5, patience=200, weight_decay=1e-4, lam=5e-4,
        conv_bias=False),
    ("citeseer", "semi", "gcn"): semi(  # citeseer_Ortho-GCN.sh
        depth=layer(2), input_T=4, T=4, norm_groups=1, beta=0.5, patience=200, conv_bias=False),
    ("pubmed", "semi", "gcn"): semi(  # pubmed_Ortho-GCN.sh
        depth=layer(2), input_T=1, T=4, norm_groups=1, beta=0.5, patience=200, conv_bias=False),
    # script/semi-supervised/*_Ortho-JKNet.sh (--nbaseblocklayer 8 --hidden 128)
    ("cora", "semi", "jknet"): semi_jknet(  # cora_Ortho-JKNet.sh
        depth=layer(8), hidden=128, epochs=400, lr=0.001, weight_decay=5e-4, patience=400, dropout=0.8, input_T=2, T=4,
        norm_groups=1, beta=0.2),
    ("citeseer", "semi", "jknet"): semi_jknet(  # citeseer_Ortho-JKNet.sh
        depth=layer(8), hidden=128, epochs=400, lr=0.006, weight_decay=1e-3, patience=400, dropout=0.8, input_T=4, T=2,
        norm_groups=1, beta=0.4, self_loop=True),
    ("pubmed", "semi", "jknet"): semi_jknet(  # pubmed_Ortho-JKNet.sh
        depth=layer(8), hidden=128, epochs=400, lr=0.001, weight_decay=5e-3, patience=400, dropout=0.8, input_T=2, T=4,
        norm_groups=2, beta=0.4),
    # script/semi-supervised/*_Ortho-GCNII.sh
    ("cora", "semi", "gcnii"): semi_gcnii(  # cora_Ortho-GCNII.sh
        depth=64, input_T=2, T=5, norm_groups=2, beta=0.4, patience=200),
    ("citeseer", "semi", "gcnii"): dict(  # citeseer_Ortho-GCNII.sh: no --Ortho, the plain GCNII
        {k: v for k, v in TRAIN_PY_GCNII.items() if k not in ORTHO_FIELDS}, ortho=False, depth=32, hidden=256,
        theta=0.6, dropout=0.7, patience=200, weight_decay=0.01, selection="val_acc"),
    ("pubmed", "semi", "gcnii"): semi_gcnii(  # pubmed_Ortho-GCNII.sh
        depth=16, hidden=256, input_T=2, T=4, norm_groups=1, beta=0.4, patience=200, theta=0.4, dropout=0.5,
        selection="val_acc"),
}


def cell_configs(space) -> dict[tuple[str, str, str], list[TrainConfig]]:
    """Every config of every cell, keyed by (dataset, setting, backbone)."""
    found: dict[tuple[str, str, str], list[TrainConfig]] = {}
    for cell in space.arm_cells():
        for point in cell.grid():
            config = TrainConfig.from_dict(point)
            found.setdefault((config.dataset, config.setting, config.backbone), []).append(config)
    return found


@pytest.fixture(scope="module")
def configs() -> dict[tuple[str, str, str], list[TrainConfig]]:
    found: dict[tuple[str, str, str], list[TrainConfig]] = {}
    for name in NAMES:
        for key, mine in cell_configs(resolve_space(name)).items():
            assert key not in found, f"{key} is in both presets"
            found[key] = mine
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_preset_loads_validates_and_fixes_one_config_per_cell(name):
    space = resolve_space(name)
    assert space.name == name and space.samples == 1 and parse_space(space.to_dict()) == space
    text = PRESETS.get(name).read_text()
    assert "Budget:" in text and f"orthotune plan --space {name}" in text and "Not expressible" in text
    for cell in space.arm_cells():
        assert not any(d.searched() for d in [*cell.train.values(), *(cell.ortho or {}).values()]), cell.name
        assert len(cell.grid()) == 1, cell.name
        assert cell.train["variant"].values == ("official",)
    # no ASHA cut before the longest cell's last epoch
    assert space.grace_period >= space.max_epochs()


@pytest.mark.slow
def test_every_cell_is_one_script_of_the_table(configs):
    assert set(configs) == set(EXPECTED)
    assert all(len(mine) == 1 for mine in configs.values())


@pytest.mark.slow
@pytest.mark.parametrize("key", list(EXPECTED), ids=lambda key: "-".join(key))
def test_cell_has_its_scripts_values_and_the_official_switches(configs, key):
    (config,) = configs[key]
    expected = EXPECTED[key]
    arm_ortho = expected.get("ortho", True)
    # the profile's switches (input_T is per script), the ortho ones only in the ortho arm
    profile = {k: v for k, v in PROFILES["official"].items() if k != "input_T" and (arm_ortho or k not in ORTHO_FIELDS)}
    want = {**profile, **expected, "ortho": arm_ortho, "variant": "official"}
    got = {k: getattr(config, k) for k in want}
    assert got == want, {k: (got[k], v) for k, v in want.items() if got[k] != v}


def smoke_configs() -> list[TrainConfig]:
    """One cheap config of each backbone and setting (Cora), shortened to 2 epochs, 1 repeat."""
    configs = []
    for name in NAMES:
        for cell in resolve_space(name).with_datasets(["cora"]).arm_cells():
            point = {**cell.grid()[0], "epochs": 2, "splits": [0], "seeds": [0]}
            configs.append(TrainConfig.from_dict(point))
    return configs


@pytest.mark.slow
@pytest.mark.parametrize("config", smoke_configs(), ids=lambda c: f"{c.setting}-{c.backbone}-{c.depth}")
def test_official_config_builds_and_trains_on_real_data(config):
    (result,) = run_configs([config], torch.device("cpu"))
    assert result.status == "completed", result.reason
    (run,) = result.runs
    assert run.epochs == 2 and 1 <= run.best_epoch <= 2
    assert 0.0 <= run.test_acc <= 1.0 and math.isfinite(run.val_acc)


@pytest.mark.parametrize("setting", ["full", "semi"])
def test_official_jknet_model_has_no_io_bias_and_keeps_its_input_features(configs, setting):
    """The preset's JKNet builds the authors' JKNet_Model on these points: no bias on the
    input/output graph convolutions, and the raw features reach the input layer undropped."""
    from orthotune.models import build_node_model

    (config,) = configs[("cora", setting, "jknet")]
    model = build_node_model(config, 32, 7, seeds=(0,), ortho=[config.ortho_settings()])
    names = [name for name, _ in model.named_parameters()]
    assert not [n for n in names if n.startswith(("input", "output")) and "bias" in n], names
    model.train()
    x = torch.rand(5, 32)
    assert torch.equal(model.embed(x), model.input(x))  # no mask on the features
