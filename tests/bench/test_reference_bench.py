"""The reference suite's rows (bench/reference.py): every row is a valid config, and the
``orthotune train`` command it prints trains exactly that config (the figures are the
benchmark's job, not the test's)."""

import argparse
import importlib.util
import shlex
import sys
from pathlib import Path

from orthotune.cli import train as train_cli
from orthotune.core import TrainConfig

ROOT = Path(__file__).resolve().parents[2]


def reference_module():
    spec = importlib.util.spec_from_file_location("reference_bench", ROOT / "bench" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations there
    spec.loader.exec_module(module)
    return module


def every_row(reference):
    args = argparse.Namespace(only=reference.GROUPS, datasets=None, layers=list(reference.LAYERS), backbones=None,
                              arms=["original", "ortho"])
    return list(reference.rows(args))


def test_every_rows_printed_command_trains_that_rows_config():
    reference = reference_module()
    rows = every_row(reference)
    assert {row.group for row in rows} == set(reference.GROUPS)
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    for row in rows:
        config = TrainConfig.from_dict(row.values)
        argv = shlex.split(reference.command(row.values))[2:]  # after "orthotune train"
        assert train_cli.config_from_args(parser.parse_args(argv)) == config, row.label


def test_dropedges_semi_rows_take_each_datasets_own_script_and_number():
    reference = reference_module()
    semi = {(row.values["dataset"], row.values.get("drop_edge", 0.0)): row for row in every_row(reference)
            if row.group == "dropedge" and row.values["setting"] == "semi"}
    assert set(semi) == {("cora", 0.0), ("cora", 0.6), ("citeseer", 0.0), ("citeseer", 0.8)}
    assert (semi["citeseer", 0.8].published, semi["citeseer", 0.0].published) == (72.30, 70.80)
    assert (semi["cora", 0.6].published, semi["cora", 0.0].published) == (82.80, 81.10)
    citeseer = TrainConfig.from_dict(semi["citeseer", 0.8].values)
    assert (citeseer.lr, citeseer.weight_decay, citeseer.dropout, citeseer.hidden) == (0.01, 5e-4, 0.3, 128)
    assert TrainConfig.from_dict(semi["cora", 0.6].values).lr == 0.007


def test_dropedges_pubmed_gcn_rows_are_their_withloop_script_on_the_random_walk_operator():
    reference = reference_module()
    rows = {row.values.get("drop_edge", 0.0): row for row in every_row(reference)
            if row.group == "dropedge" and row.values["dataset"] == "pubmed"}
    assert {rate: row.published for rate, row in rows.items()} == {0.0: 79.00, 0.3: 79.60}
    for row in rows.values():
        config = TrainConfig.from_dict(row.values)
        assert (config.setting, config.backbone, config.depth, config.layout, config.self_loop) == (
            "semi-rw", "gcn", 2, "standard", True)
        assert (config.lr, config.weight_decay, config.dropout, config.seeds) == (0.003, 5e-3, 0.5, tuple(range(10)))
        assert "--self-loop" in shlex.split(reference.command(row.values))


def test_incepgcn_semi_rows_are_their_two_branch_scripts_both_arms():
    reference = reference_module()
    rows = {(row.values["dataset"], row.values["drop_edge"]): row for row in every_row(reference)
            if row.group == "incepgcn-semi"}
    assert set(rows) == {("citeseer", 0.0), ("citeseer", 0.95), ("pubmed", 0.0), ("pubmed", 0.2)}
    assert [rows[key].published for key in sorted(rows)] == [69.30, 72.70, 77.70, 79.50]
    for row in rows.values():
        config = TrainConfig.from_dict(row.values)
        assert (config.backbone, config.depth, config.setting, config.ortho) == ("incepgcn", 4, "semi", False)
