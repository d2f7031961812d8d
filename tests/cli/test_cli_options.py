"""The command line itself: fast startup, options derived from the config declarations,
--version, the default store, exit codes and one-line usage errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from orthotune import __version__
from orthotune.cli import build_parser, main
from orthotune.cli.jobs import auth_headers, driver_arguments
from orthotune.cli.train import config_from_args
from orthotune.core import TrainConfig, declared

HEAVY = ("torch", "torch_geometric", "ray", "pandas", "matplotlib", "scipy", "optuna")


def imported_after(*argv: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run the CLI in a fresh interpreter; return the process and which heavy modules it loaded."""
    code = ("import json, sys\nfrom orthotune.cli import main\ntry:\n    code = main(sys.argv[1:])\n"
            "except SystemExit as e:\n    code = e.code\n"
            f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)\n"
            "sys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env)
    return proc, set(json.loads(proc.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["train", "--help"], ["status", "--help"],
                                  ["best", "--help"], ["logs", "--help"], ["launch", "--help"]])
@pytest.mark.slow
def test_help_imports_no_heavy_library(argv):
    proc, heavy = imported_after(*argv)
    assert proc.returncode == 0, proc.stderr
    assert heavy == set(), f"`orthotune {' '.join(argv)}` imported {heavy}"


@pytest.mark.slow
def test_status_imports_neither_torch_nor_ray(tmp_path):
    from orthotune.store import Store

    Store.open(str(tmp_path / "s"), create=True).save_search_meta("one", {"options": {}, "state": "finished"})
    proc, heavy = imported_after("status", "--store", str(tmp_path / "s"))
    assert proc.returncode == 0 and "one" in proc.stdout, proc.stderr
    assert not heavy & {"torch", "torch_geometric", "ray", "matplotlib", "optuna"}, heavy


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"orthotune {__version__}"


def test_top_level_help_documents_exit_codes_and_the_store(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for text in ("0    success", "1    a run failed", "2    bad input", "130  interrupted", "ORTHOTUNE_STORE",
                 "./runs/store", "launch", "status", "best", "report", "train", "logs"):
        assert text in out, text
    assert "one module per subcommand" not in out  # a description for users, not the docstring


def test_every_train_option_has_help_default_and_choices():
    parser = build_parser("train")
    train = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith("train"))
    actions = {a.dest: a for a in train._actions}
    for f in declared(TrainConfig):
        action = actions[f.name]
        assert action.help and f.metadata["doc"] in action.help.replace("%%", "%"), f.name
        assert "default:" in action.help, f.name
        rule = f.metadata["rule"]
        for choice in rule.choices or ():
            assert str(choice) in action.help and str(choice) in (action.metavar or ""), (f.name, choice)
    assert "cora" in actions["dataset"].help and "gcnii" in actions["backbone"].help
    assert "full 64" in actions["hidden"].help and "dd 128" in actions["hidden"].help


def test_train_options_build_the_config():
    args = build_parser("train").parse_args(
        ["train", "--dataset", "cora", "--T", "3", "--weight-decay-io", "0.001", "--no-conv-bias", "--profile",
         "paper", "--split", "0", "1", "--bound", "covariance", "--device", "cpu"])
    config = config_from_args(args)
    assert (config.T, config.weight_decay_io, config.conv_bias, config.splits) == (3, 0.001, False, (0, 1))
    assert config.variant == "paper" and config.hybrid == "init"
    assert config.bound == "covariance"  # the explicit option wins over the profile's frobenius


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--dataset", "cora", "--beta", "abc"], "argument --beta: invalid float value: 'abc'"),
        (["train", "--dataset", "cora", "--bound", "spectral"], "bound='spectral' must be one of"),
        (["nosuch"], "invalid choice: 'nosuch'"),
        ([], "the following arguments are required: COMMAND"),
        (["train", "--config", "x.yaml", "--T", "2"], "--config is exclusive with the config options; also given: --T"),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_line_with_exit_2(argv, message):
    proc = subprocess.run([sys.executable, "-m", "orthotune.cli", *argv], capture_output=True, text=True)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_store_defaults_to_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ORTHOTUNE_STORE", str(tmp_path / "nothing-here"))
    assert main(["status"]) == 2
    assert str(tmp_path / "nothing-here") in capsys.readouterr().err
    monkeypatch.delenv("ORTHOTUNE_STORE")
    args = build_parser("best").parse_args(["best"])
    assert args.store == "runs/store"


def test_driver_arguments_drop_submit_and_point_at_the_staged_space():
    argv = ["--submit", "--address", "http://h:8265", "--space", "/home/me/s.yaml", "--store=/data/store",
            "--address=http://h:8265", "--samples", "2"]
    assert driver_arguments(argv, "/home/me/s.yaml", "space-s.yaml") == [
        "launch", "--space", "space-s.yaml", "--store=/data/store", "--samples", "2", "--address", "auto"]
    assert driver_arguments(["--space", "quick", "--submit"], None, None) == [
        "launch", "--space", "quick", "--address", "auto"]


def test_auth_token_is_found_where_ray_looks(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    assert auth_headers() == {}
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("from-file\n")
    assert auth_headers() == {"Authorization": "Bearer from-file"}
    monkeypatch.setenv("RAY_AUTH_TOKEN", "from-env")
    assert auth_headers() == {"Authorization": "Bearer from-env"}


def test_staged_package_has_every_layer_in_the_installed_layout():
    """What a Ray job gets: one ``orthotune`` tree that imports from its own folder."""
    from orthotune.cli.jobs import SUBPACKAGES, staged_package

    code = ("import importlib.util, orthotune; print(orthotune.__file__); "
            f"print(*[importlib.util.find_spec('orthotune.' + n).origin for n in {SUBPACKAGES!r}], sep='\\n')")
    with staged_package() as folder:
        assert (folder / "orthotune" / "spaces" / "presets" / "quick.yaml").is_file()
        assert not list(folder.rglob("__pycache__"))
        out = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        origins = out.stdout.split()
        assert len(origins) == 1 + len(SUBPACKAGES)
        assert all(o.startswith(str(folder / "orthotune")) for o in origins), origins


def test_options_are_never_abbreviated():
    """`launch --sub` must not mean --submit: the job's driver would get it and submit again."""
    with pytest.raises(SystemExit) as stop:
        build_parser("best").parse_args(["best", "--jso"])
    assert stop.value.code == 2


@pytest.mark.parametrize("chosen", [None, "ACTIVE"])
def test_openmp_threads_wait_passively_unless_the_user_chose(chosen, monkeypatch, tmp_path, capsys):
    # spinning OpenMP threads on shared cores made a `train` epoch up to 28x slower
    if chosen is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", chosen)
    main(["status", "--store", str(tmp_path / "store")])
    assert os.environ["OMP_WAIT_POLICY"] == (chosen or "PASSIVE")
