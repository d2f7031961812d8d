"""The ground floor: config fields declared once, the catalogue, statuses and the helpers."""

from __future__ import annotations

import math

import pytest

from orthotune.core import (
    ARMS,
    DATASETS,
    OBJECTIVE,
    PROFILES,
    RESULT_COLUMNS,
    Cell,
    CellRole,
    ConfigError,
    ConfigResult,
    EpochRow,
    Group,
    OrthoSettings,
    OrthotuneError,
    RunResult,
    Status,
    Summary,
    TrainConfig,
    arm_of,
    by_group,
    cell_coordinates,
    cell_source,
    check_memory,
    declared,
    defaults_for,
    mean,
    measures,
    std,
)
from orthotune.core._config import MAX_DEPTH, MAX_HIDDEN
from orthotune.core._memory import memory_estimate


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
    ({"backbone": "pna"}, "unknown backbone 'pna'; valid: gcn, jknet, gcnii"),
    ({"backbone": "gunet"}, "does not apply to node-classification dataset cora"),
    ({"setting": "cv10"}, "setting 'cv10' is not available for cora"),
    ({"depth": 10000}, "depth=10000 must be an integer in [2, 1024]"),
    ({"hidden": 10**6}, "hidden=1000000 must be an integer in [1, 4096]"),
    ({"backbone": 5}, "backbone=5 must be a string"),
    ({"lr": float("inf")}, "lr=inf must be a number > 0"),
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


def test_a_cell_is_read_from_declared_config_fields_and_names_every_cell_field():
    """Each coordinate reads a config field (its store column); the config's cell fields and
    the variant label are each read by one."""
    fields = {f.name: f for f in declared(TrainConfig)}
    sources = [cell_source(f.name) for f in cell_coordinates()]
    named_by = [f.metadata["named_by"] for f in cell_coordinates() if f.metadata["named_by"]]
    assert all(s in fields for s in sources + named_by) and len(set(sources + named_by)) == len(sources + named_by)
    assert {f.name for f in by_group(TrainConfig, Group.CELL)} | {"variant"} == set(sources + named_by)
    assert all(f.metadata["doc"] for f in cell_coordinates())
    assert [f.name for f in cell_coordinates(CellRole.ARM)] == ["arm"]


def test_the_arms_are_declared_once_and_a_config_names_its_own():
    assert [(a.name, a.key, a.ortho) for a in ARMS] == [("original", "original", False), ("Ortho-GConv", "ortho", True)]
    assert arm_of(True) is ARMS[1] and arm_of(False) is arm_of(None) is ARMS[0]
    config = TrainConfig(dataset="cora", depth=4, ortho=False, variant="official")
    cell = Cell.of(config.to_dict())
    assert (cell.dataset, cell.setting, cell.backbone, cell.depth, cell.variant, cell.arm) == \
        ("cora", "full", "gcn", 4, "official", ARMS[0])
    assert cell.key == "cora/gcn/4/official/original"


def test_every_result_value_declares_its_kind_and_doc_and_every_column_reads_one():
    for owner in (RunResult, ConfigResult, EpochRow):
        assert all(f.metadata["kind"] and f.metadata["doc"] for f in measures(owner).values()), owner
    assert OBJECTIVE in measures(RunResult) and OBJECTIVE in measures(EpochRow)
    names = [c.name for c in RESULT_COLUMNS]
    assert len(set(names)) == len(names) and all(c.kind and c.doc for c in RESULT_COLUMNS)
    (objective,) = [c for c in RESULT_COLUMNS if c.name == OBJECTIVE]
    assert objective.summary is Summary.MEAN and objective.kind == "float"


def test_an_epoch_row_travels_as_a_plain_list_and_reads_rows_of_earlier_versions():
    row = EpochRow(0, 1, 3, 0.5, 0.25, 0.125, 0.75, [1.0, 2.0])
    assert row.to_list() == [0, 1, 3, 0.5, 0.25, 0.125, 0.75, [1.0, 2.0]]
    assert EpochRow.from_list(row.to_list()) == row
    assert row.values() == {"train_loss": 0.5, "val_acc": 0.25, "test_acc": 0.125, "val_loss": 0.75,
                            "grad_norms": [1.0, 2.0]}
    assert list(row.scalars()) == ["train_loss", "val_acc", "test_acc", "val_loss"]
    # without the validation loss and the gradient norms, or with them not measured
    for old in ([0, 1, 3, 0.5, 0.25, 0.125], [0.0, 1.0, 3.0, 0.5, 0.25, 0.125, float("nan"), []]):
        assert EpochRow.from_list(old) == EpochRow(0, 1, 3, 0.5, 0.25, 0.125, None, None)


def test_status_ranks_failure_over_stopping_over_completion():
    assert Status.worst(["completed", Status.STOPPED]) is Status.STOPPED
    assert Status.worst([Status.STOPPED, "failed"]) is Status.FAILED
    assert Status.worst([]) is Status.COMPLETED
    assert Status.FAILED == "failed" and {Status.FAILED: 1}["failed"] == 1


def test_mean_and_std_give_nan_rather_than_raising():
    assert math.isnan(std([0.5, math.nan])) and math.isnan(std([])) and math.isnan(mean([]))
    # the sample std (ddof = 1), as the papers' mean +- std; undefined for one repeat
    assert std([0.5, 0.7]) == pytest.approx(0.1414213562) and math.isnan(std([0.5]))


def test_the_static_caps_are_16_times_the_papers_largest_models():
    assert (MAX_DEPTH, MAX_HIDDEN) == (16 * 64, 16 * 256)
    TrainConfig(dataset="cora", depth=MAX_DEPTH, hidden=MAX_HIDDEN)  # the caps themselves are valid


def test_unknown_keys_of_mixed_types_and_unhashable_profiles_are_one_line_errors():
    with pytest.raises(ConfigError, match="unknown config key 1"):
        TrainConfig.from_dict({"dataset": "cora", 1: 2, "colour": 3})
    with pytest.raises(ConfigError, match=r"unknown profile \['x'\]"):
        TrainConfig.from_dict({"dataset": "cora", "profile": ["x"]})


def test_memory_estimate_grows_with_depth_width_and_newton_steps():
    small = memory_estimate(TrainConfig(dataset="cora", depth=2, hidden=64))
    # peak resident sizes measured above the process's baseline (GiB; CPU, Cora, one split,
    # 2 epochs): the estimate is near them and not above, so no config that runs is refused
    assert small.total < 2**30
    measured = {(64, 256, False): 1.04, (64, 256, True): 1.69, (16, 2048, False): 3.9, (16, 2048, True): 8.5}
    for (depth, hidden, ortho), gib in measured.items():
        estimate = memory_estimate(TrainConfig(dataset="cora", depth=depth, hidden=hidden, ortho=ortho)).total
        assert 0.6 * gib < estimate / 2**30 <= 1.1 * gib, (depth, hidden, ortho, estimate / 2**30)
    deeper = memory_estimate(TrainConfig(dataset="cora", depth=4, hidden=64))
    more_t = memory_estimate(TrainConfig(dataset="cora", depth=2, hidden=64, T=8))
    assert deeper.total > small.total and more_t.parameters > small.parameters
    assert memory_estimate(TrainConfig(dataset="cora", depth=2, hidden=64, ortho=False)).parameters < small.parameters
    graphs = memory_estimate(TrainConfig(dataset="dd", depth=3))
    assert graphs.nodes == DATASETS.get("dd").nodes * 32  # a mini-batch of graphs


def test_memory_estimate_counts_every_branch_of_an_inception_block():
    # IncepGCN's branches hold 1 .. depth - 2 convolutions each: (depth - 2)(depth - 1) / 2 in
    # all. Peak resident sizes above a 2-layer GCN's (GiB; CPU, Cora semi, hidden 128, one seed,
    # 2 epochs; 2026-11-29); counted as a chain of depth, the 32-layer one was put at 0.3 GiB
    measured = {16: 0.86, 32: 3.14}
    for depth, gib in measured.items():
        estimate = memory_estimate(TrainConfig(dataset="cora", backbone="incepgcn", depth=depth, hidden=128,
                                               ortho=False))
        assert estimate.layers == (depth - 2) * (depth - 1) // 2
        assert 0.6 * gib < estimate.total / 2**30 <= 1.25 * gib, (depth, estimate.total / 2**30)
    chain = memory_estimate(TrainConfig(dataset="cora", backbone="jknet", depth=32, hidden=128, ortho=False))
    assert chain.layers == 32 and chain.total < memory_estimate(
        TrainConfig(dataset="cora", backbone="incepgcn", depth=32, hidden=128, ortho=False)).total / 10


def test_check_memory_states_the_estimate_and_the_limit_in_one_line():
    config = TrainConfig(dataset="pubmed", depth=1024, hidden=4096)
    check_memory(TrainConfig(dataset="cora"), available=2**30)
    with pytest.raises(OrthotuneError) as error:
        check_memory(config, available=8 * 2**30)
    message = str(error.value)
    assert "depth=1024 hidden=4096 on pubmed needs about" in message and "more than the 8.0 GiB" in message
    assert "19717 nodes x 4096 x 1026 layers" in message and "\n" not in message


def test_an_error_becomes_one_line_by_one_rule():
    from orthotune.core import one_line

    assert one_line(ValueError("bad\n\n  value  \nhere")) == "bad; value; here"
    assert one_line(ValueError("bad"), typed=True) == "ValueError: bad"
    assert one_line(RuntimeError("")) == "RuntimeError" and one_line(RuntimeError(""), typed=True) == "RuntimeError"
    assert one_line("plain\ntext") == "plain; text"
    assert one_line(ValueError("x" * 900), typed=True, limit=500) == ("ValueError: " + "x" * 900)[:500]

    class TaskError(Exception):  # as Ray's task errors carry the error raised in the task
        def __init__(self, cause: BaseException) -> None:
            super().__init__("Traceback (most recent call last):\n  File ...\nOSError: disk")
            self.cause = cause

    assert one_line(TaskError(OSError("disk full")), typed=True) == "OSError: disk full"
    wrapped = RuntimeError("Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'cell'")
    assert one_line(wrapped, typed=True, limit=500) == "KeyError: 'cell'"
