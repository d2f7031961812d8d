import json
import subprocess
import sys

import pytest

from orthotune.cli import main


def test_train_json_has_the_documented_keys(capsys):
    assert main(["train", "--dataset", "cora", "--depth", "2", "--epochs", "5", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    for key in ("val_acc", "test_acc", "best_epoch", "epochs", "m_sig", "grad_norms",
                "seconds_per_epoch"):
        assert key in summary


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dataset", "foo"], "unknown dataset 'foo'"),
        (["--dataset", "cora", "--backbone", "gat"], "unknown backbone 'gat'"),
        (["--dataset", "cora", "--setting", "official"], "setting 'official'"),
        (["--dataset", "cora", "--beta", "2"], "beta=2.0 must be a number in [0, 1]"),
        (["--dataset", "cora", "--data-root", "/nonexistent/orthotune"], "is not a directory"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "orthotune.cli", "train", "--epochs", "1", *args],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
