"""The GPU switches on the command line: ``--tf32/--no-tf32``, ``--deterministic/--no-deterministic``
and ``--cuda-graph/--no-cuda-graph`` on ``launch``, ``plan``, ``slurm`` and ``train``; a flag given
wins over the space file's ``execution`` section; a bad value is one line, exit code 2."""

import argparse

import pytest
import yaml

import orthotune.training
from orthotune.cli import build_parser, main
from orthotune.cli.launch import search_options
from orthotune.training import EXECUTION_SWITCHES, TrainOptions

FLAGS = ("--tf32", "--deterministic", "--cuda-graph")
DEFAULTS = {name: getattr(TrainOptions(), name) for name in EXECUTION_SWITCHES}


@pytest.fixture
def space_file(tmp_path):
    path = tmp_path / "switched.yaml"
    path.write_text(yaml.safe_dump({"datasets": ["cora"], "backbones": ["gcn"], "depths": [2], "repeats": [0],
                                    "train": {"epochs": 10}, "asha": {"grace_period": 5},
                                    "execution": {"tf32": False, "deterministic": True}}))
    return str(path)


def parsed(command: str, *words: str) -> argparse.Namespace:
    return build_parser(command).parse_args([command, *words])


@pytest.mark.parametrize("command", ["launch", "plan", "slurm", "train"])
def test_each_command_offers_both_forms_of_every_switch_and_none_when_not_given(command):
    text = build_parser(command)._subparsers._group_actions[0].choices[command].format_help()
    assert "GPU execution" in text
    for flag in FLAGS:
        assert flag in text and f"--no-{flag[2:]}" in text, (command, flag)
    base = ["--dataset", "cora"] if command == "train" else ["--space", "quick"]
    given = parsed(command, *base, "--no-tf32", "--deterministic")
    assert (given.tf32, given.deterministic, given.cuda_graph) == (False, True, None)


def test_launch_a_flag_given_wins_over_the_space_file_which_wins_over_the_default(space_file):
    from_file = search_options(parsed("launch", "--space", space_file, "--store", "s"))
    assert from_file.execution() == {**DEFAULTS, "tf32": False, "deterministic": True}
    flagged = search_options(parsed("launch", "--space", space_file, "--store", "s", "--tf32", "--cuda-graph"))
    assert flagged.execution() == {"tf32": True, "deterministic": True, "cuda_graph": True}
    assert search_options(parsed("launch", "--space", "quick", "--store", "s")).execution() == DEFAULTS


def test_plan_measures_with_the_switches_given(space_file):
    from orthotune.cli.plan import PLANNED

    assert set(EXECUTION_SWITCHES) <= set(PLANNED)
    args = parsed("plan", "--space", space_file, "--no-deterministic")
    options = search_options(argparse.Namespace(**vars(args), store="s", name=None))
    assert options.execution() == {**DEFAULTS, "tf32": False, "deterministic": False}


def test_slurm_hands_its_driver_the_switches_given_and_only_those(space_file, tmp_path):
    from orthotune.cli.slurm import driver_arguments

    args = parsed("slurm", "--space", space_file, "--store", str(tmp_path / "s"), "--no-tf32", "--cuda-graph")
    words = driver_arguments(args, search_options(args), str(tmp_path / "s"), str(tmp_path))
    assert "--no-tf32" in words and "--cuda-graph" in words
    assert not {"--deterministic", "--no-deterministic", "--tf32", "--no-cuda-graph"} & set(words)


@pytest.mark.parametrize("command, base", [("launch", ["--space", "quick"]), ("plan", ["--space", "quick"]),
                                           ("train", ["--dataset", "cora"])])
@pytest.mark.parametrize("bad", [["--tf32=no"], ["--no-cuda-graph=true"], ["--deterministic", "false"]])
def test_a_switch_given_a_value_is_one_line_and_exit_code_2(command, base, bad, capsys):
    with pytest.raises(SystemExit) as stop:
        main([command, *base, *bad])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "error:" in err and "Traceback" not in err, err


def test_train_trains_with_the_switches_given(monkeypatch, capsys):
    real, seen = orthotune.training.run_configs, []

    def recording(configs, device, root, progress, options, *rest):
        seen.append(options)
        return real(configs, device, root, progress, options, *rest)

    monkeypatch.setattr(orthotune.training, "run_configs", recording)
    assert main(["train", "--dataset", "cora", "--epochs", "2", "--split", "0", "--no-tf32", "--deterministic",
                 "--json"]) == 0
    assert (seen[0].tf32, seen[0].deterministic, seen[0].cuda_graph) == (False, True, DEFAULTS["cuda_graph"])
    assert main(["train", "--dataset", "cora", "--epochs", "2", "--split", "0", "--json"]) == 0
    assert {name: getattr(seen[1], name) for name in EXECUTION_SWITCHES} == DEFAULTS
