"""The backbone catalogue: each backbone one declaration, and what a config may do with a
backbone decided by the capabilities it declares, never by its name."""

from __future__ import annotations

import pytest

from orthotune.core import (
    ANY_FACTORY,
    BACKBONE_INFO,
    REFERENCE_BACKBONES,
    TASKS,
    BackboneInfo,
    ConfigError,
    TrainConfig,
    all_backbones,
    backbone_info,
    declared,
    is_reference_backbone,
    readers,
    reads,
)


@pytest.fixture
def declare(monkeypatch):
    """Declare a backbone in core's catalogue for this test only."""
    monkeypatch.setattr(BACKBONE_INFO, "_entries", dict(BACKBONE_INFO._entries))

    def add(info: BackboneInfo) -> BackboneInfo:
        BACKBONE_INFO.add(info.name, info)
        return info

    return add


def test_the_tasks_and_valid_names_derive_from_the_declarations():
    assert TASKS.get("node").backbones == ("gcn", "jknet", "gcnii", "gat", "sage", "gin", "appnp", "sgc", "dagnn",
                                             "incepgcn", "mlp")
    assert TASKS.get("graph").backbones == ("gunet", "sum-mlp")
    assert all_backbones() == [*TASKS.get("node").backbones, *TASKS.get("graph").backbones]
    assert (TASKS.get("node").reference, TASKS.get("graph").reference) == REFERENCE_BACKBONES == ("mlp", "sum-mlp")
    assert "H2GCN" in TASKS.get("node").reference_source and "Errica" in TASKS.get("graph").reference_source
    assert backbone_info("pkg.mod:make").name == ANY_FACTORY and backbone_info("GCN").name == "gcn"


def test_a_declaration_states_coherent_capabilities():
    with pytest.raises(ConfigError, match="conv_bias='sometimes' must be one of switch, fixed, none"):
        BackboneInfo("x", "node", "", conv_bias="sometimes")
    with pytest.raises(ConfigError, match="a structure-agnostic reference has no Ortho-GConv arm"):
        BackboneInfo("x", "node", "", reference=True)
    with pytest.raises(ConfigError, match="readers: wings is no capability of a backbone"):
        readers(wings=True)


def test_what_a_config_may_do_follows_the_declared_capabilities(declare):
    """A new declaration, no name anywhere else: its capabilities decide what is refused."""
    declare(BackboneInfo("stiff", "node", "a test's", conv_bias="fixed"))
    declare(BackboneInfo("blind", "node", "a test's", ortho_arm=False))
    with pytest.raises(ConfigError, match="conv_bias=False does not apply to stiff"):
        TrainConfig(dataset="cora", backbone="stiff", conv_bias=False)
    with pytest.raises(ConfigError, match="layout='official' applies to gcn, jknet, gcnii, incepgcn, not stiff"):
        TrainConfig(dataset="cora", backbone="stiff", layout="official")
    with pytest.raises(ConfigError, match="init='fan_out' applies to gcn, jknet, gcnii, incepgcn, not stiff"):
        TrainConfig(dataset="cora", backbone="stiff", init="fan_out")
    with pytest.raises(ConfigError, match="init='fan_out' applies to gcn, jknet, gcnii, incepgcn, not gunet"):
        TrainConfig(dataset="proteins", backbone="gunet", init="fan_out")
    with pytest.raises(ConfigError, match="init='kaiming' must be one of 'glorot', 'fan_out'"):
        TrainConfig(dataset="cora", init="kaiming")
    with pytest.raises(ConfigError, match="backbone 'blind' with ortho=True: blind has no Ortho-GConv arm; set"):
        TrainConfig(dataset="cora", backbone="blind")
    assert TrainConfig(dataset="cora", backbone="blind", ortho=False).backbone == "blind"
    assert not is_reference_backbone("blind") and is_reference_backbone("mlp") and not is_reference_backbone("x:y")
    with pytest.raises(ConfigError, match="mlp is the structure-agnostic reference .* and has no Ortho-GConv arm"):
        TrainConfig(dataset="cora", backbone="mlp")


def test_a_fields_readers_are_decided_when_asked(declare):
    """Readers by capability take in a backbone declared after the fields were; readers by
    name do not; users' factories read only where the field says so."""
    packed = readers(packed=True)
    assert list(packed) == ["gcn", "jknet", "gcnii", "incepgcn"]
    declare(BackboneInfo("wide", "node", "a test's", packed=True, conv_bias="switch"))
    assert list(packed) == ["gcn", "jknet", "gcnii", "incepgcn", "wide"] and "wide" in packed
    assert reads("input_T", "wide") and reads("conv_bias", "wide") and not reads("batch_norm", "wide")
    assert not reads("jk", "wide") and reads("jk", "jknet")
    assert list(readers("jknet", factories=True)) == ["jknet", ANY_FACTORY]
    assert "pkg.mod:make" in readers(ortho_arm=True, factories=True) and "pkg.mod:make" not in readers()
    assert "nonexistent" not in readers()


def test_a_backbone_without_an_ortho_arm_reads_no_ortho_gconv_field():
    """The printed config of the reference (``to_dict(read=True)``) lists no Ortho-GConv switch."""
    ortho_fields = {f.name for f in declared(TrainConfig) if f.name in {"T", "beta", "lam", "bound", "transform",
                                                                         "hybrid", "target", "target_trainable",
                                                                         "squared_norm", "centre_rows",
                                                                         "norm_groups", "input_T"}}
    assert len(ortho_fields) == 12
    shown = TrainConfig(dataset="cora", backbone="mlp", ortho=False).to_dict(read=True)
    assert not ortho_fields & set(shown) and {"hidden", "lr", "io_bias", "input_dropout"} <= set(shown)
    assert {"bound", "hybrid"} <= set(TrainConfig(dataset="cora", backbone="gat", ortho=False).to_dict(read=True))
    assert not ortho_fields & set(TrainConfig(dataset="proteins", backbone="sum-mlp", ortho=False).to_dict(read=True))
