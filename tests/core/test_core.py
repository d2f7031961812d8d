"""The ground floor: config fields declared once, the catalogue, statuses and the helpers."""

from __future__ import annotations

import math

import pytest

from orthotune.core import (
    DATASETS,
    PROFILES,
    ConfigError,
    Group,
    OrthoSettings,
    Status,
    TrainConfig,
    by_group,
    declared,
    defaults_for,
    mean,
    std,
)


def test_every_field_declares_its_rule_doc_and_group():
    for field in declared(TrainConfig):
        assert field.metadata["doc"] and field.metadata["group"] in Group, field.name
        assert field.metadata["rule"].describe(), field.name


def test_ortho_fields_are_declared_once_and_shared():
    ortho = {f.name for f in declared(OrthoSettings)}
    assert ortho <= {f.name for f in declared(TrainConfig)}
    assert {"T", "beta", "lam", "bound", "transform", "hybrid", "target"} <= ortho
    config = TrainConfig(dataset="cora", T=3, bound="frobenius")
    assert config.ortho_settings() == OrthoSettings(T=3, bound="frobenius")
    assert TrainConfig(dataset="cora", ortho=False).ortho_settings() is None


@pytest.mark.parametrize(("values", "message"), [
    ({"beta": 2.0}, "beta=2.0 must be a number in [0, 1]"),
    ({"T": -1}, "T=-1 must be an integer in [0, 1000]"),
    ({"bound": "spectral"}, "bound='spectral' must be one of 'covariance', 'frobenius'"),
    ({"lr": 0}, "lr=0 must be a number > 0"),
    ({"dropout": 1.0}, "dropout=1.0 must be a number in [0, 1)"),
    ({"ortho": "yes"}, "ortho='yes' must be true or false"),
    ({"splits": []}, "splits=[] must be a non-empty list of integers"),
    ({"backbone": "gat"}, "unknown backbone 'gat'; valid: gcn, jknet, gcnii"),
    ({"backbone": "gunet"}, "does not apply to node-classification dataset cora"),
    ({"setting": "cv10"}, "setting 'cv10' is not available for cora"),
])
def test_a_broken_rule_names_the_value_and_the_rule(values, message):
    with pytest.raises(ConfigError) as error:
        TrainConfig(dataset="cora", **values)
    assert message in str(error.value)


def test_unknown_keys_and_profiles_are_rejected_listing_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown config key 'colour'; valid: .*batch_norm"):
        TrainConfig.from_dict({"dataset": "cora", "colour": 1})
    with pytest.raises(ConfigError, match="unknown profile 'fast'; valid: default, paper, official"):
        TrainConfig.from_dict({"dataset": "cora", "profile": "fast"})


def test_a_profile_expands_to_its_switches_and_labels_the_variant():
    config = TrainConfig.from_dict({"dataset": "cora", "profile": "official", "T": 2})
    assert config.variant == "official" and config.T == 2
    for key, value in PROFILES["official"].items():
        assert getattr(config, key) == value, key
    assert TrainConfig.from_dict({"dataset": "cora", "profile": "paper"}).bound == "frobenius"


def test_defaults_come_from_the_one_table():
    config = TrainConfig(dataset="proteins")
    for key, value in defaults_for("proteins", "cv10").items():
        assert getattr(config, key) == value, key
    assert TrainConfig(dataset="cora").epochs == defaults_for("cora", "full")["epochs"]
    assert DATASETS.get("Cora").name == "cora"


def test_groups_split_the_fields_without_overlap():
    groups = [{f.name for f in by_group(TrainConfig, g)} for g in Group]
    assert sum(len(g) for g in groups) == len(declared(TrainConfig))


def test_status_ranks_failure_over_stopping_over_completion():
    assert Status.worst(["completed", Status.STOPPED]) is Status.STOPPED
    assert Status.worst([Status.STOPPED, "failed"]) is Status.FAILED
    assert Status.worst([]) is Status.COMPLETED
    assert Status.FAILED == "failed" and {Status.FAILED: 1}["failed"] == 1


def test_mean_and_std_give_nan_rather_than_raising():
    assert math.isnan(std([0.5, math.nan])) and math.isnan(std([])) and math.isnan(mean([]))
    assert std([0.5, 0.7]) == pytest.approx(0.1) and std([0.5]) == 0.0
