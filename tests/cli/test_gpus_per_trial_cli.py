"""``--gpus-per-trial``: a number or ``auto``; anything else is one line, nothing written."""

import pytest

from orthotune.cli import main


def _exit_code(args: list[str]) -> int:
    """main's code, or the parser's (usage errors exit from argparse, as one line)."""
    try:
        return main(args)
    except SystemExit as stop:
        return stop.code


@pytest.mark.parametrize(
    "value, message",
    [
        ("abc", "argument --gpus-per-trial: 'abc' must be a number of GPUs or 'auto'"),
        ("Auto", "argument --gpus-per-trial: 'Auto' must be a number of GPUs or 'auto'"),
        ("-1", "gpus_per_trial=-1.0 must be >= 0"),
    ],
)
def test_bad_gpus_per_trial_is_one_line(tmp_path, capsys, value, message):
    store = tmp_path / "store"
    assert _exit_code(["launch", "--store", str(store), "--space", "quick", "--gpus-per-trial", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not store.exists()


def test_auto_parses_into_launch_options(tmp_path, capsys):
    # the options are built (auto accepted) and the next check, the data root, refuses
    store = tmp_path / "store"
    args = ["launch", "--store", str(store), "--space", "quick", "--gpus-per-trial", "auto",
            "--data-root", "no-such-data-root"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "data root 'no-such-data-root' is not a directory" in err[0], err
    assert not store.exists()
