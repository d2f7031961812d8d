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


def test_train_json_carries_each_repeats_accuracies_and_their_mean(capsys):
    assert main(["train", "--dataset", "cora", "--depth", "2", "--epochs", "5", "--seed", "0", "1", "2",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert len(summary["test_accs"]) == len(summary["val_accs"]) == 3
    assert summary["test_acc"] == pytest.approx(sum(summary["test_accs"]) / 3)
    assert summary["val_acc"] == pytest.approx(sum(summary["val_accs"]) / 3)


def test_train_keeps_freed_memory_for_reuse_as_a_trials_worker_does(capsys, monkeypatch):
    import orthotune.training as training

    calls = []
    monkeypatch.setattr(training, "retain_freed_memory", lambda: calls.append("retained") or True)
    assert main(["train", "--dataset", "cora", "--depth", "2", "--epochs", "2", "--split", "0"]) == 0
    assert calls == ["retained"]


def test_a_backbone_without_an_ortho_arm_trains_its_original_and_prints_what_it_reads(capsys):
    """No --no-ortho needed: the reference has no Ortho-GConv arm, so `train` takes the original;
    its printed config carries only the fields it reads (no Ortho-GConv switch)."""
    assert main(["train", "--dataset", "cora", "--backbone", "mlp", "--epochs", "2", "--split", "0", "--json"]) == 0
    config = json.loads(capsys.readouterr().out)["config"]
    assert (config["backbone"], config["ortho"]) == ("mlp", False)
    assert not {"T", "beta", "lam", "bound", "transform", "hybrid", "target", "target_trainable", "squared_norm",
                "centre_rows", "norm_groups", "input_T", "layout", "conv_bias", "directed"} & set(config)
    assert {"hidden", "lr", "weight_decay", "dropout", "io_bias", "input_dropout"} <= set(config)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dataset", "foo"], "unknown dataset 'foo'"),
        (["--dataset", "cora", "--backbone", "pna"], "unknown backbone 'pna'"),
        (["--dataset", "cora", "--setting", "official"], "setting 'official'"),
        (["--dataset", "cora", "--beta", "2"], "beta=2.0 must be a number in [0, 1]"),
        (["--dataset", "cora", "--backbone", "mlp", "--ortho"], "and has no Ortho-GConv arm; set ortho false"),
        (["--dataset", "cora", "--data-root", "/nonexistent/orthotune"], "is not a directory"),
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_line_and_nonzero(args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "orthotune.cli", "train", "--epochs", "1", *args],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_train_says_when_it_prepares_a_dataset_and_shows_progress(capsys, tmp_path, monkeypatch):
    """A fresh cache: one line says the dataset is processed into it (once); then a line every
    tenth of the epochs, at the trainer's sync cadence (25), over the repeats; stdout keeps
    the JSON result alone."""
    from orthotune.training._run import task_data

    monkeypatch.setenv("ORTHOTUNE_CACHE", str(tmp_path / "cache"))
    task_data.cache_clear()  # another test of this process may hold texas in memory (one CLI run: one process)
    args = ["train", "--dataset", "texas", "--depth", "2", "--split", "0", "1", "2", "--epochs", "50",
            "--patience", "50", "--json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["epochs"] == [50, 50, 50]
    err = captured.err.splitlines()
    preparing = [line for line in err if line.startswith("preparing texas for the first time")]
    assert len(preparing) == 1 and str(tmp_path / "cache") in preparing[0]
    progress = [line for line in err if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in progress] == ["epoch 25/50", "epoch 50/50"]
    assert all("3 of 3 repeats training" in line and "best val_acc" in line for line in progress)
    assert main(args) == 0  # prepared now: read from the cache without a word
    assert not [line for line in capsys.readouterr().err.splitlines() if line.startswith("preparing")]


@pytest.mark.slow
def test_progress_counts_the_repeats_early_stopping_ended(capsys, tmp_path):
    """patience 5: repeats whose validation stalls stop before the cap; the last line says how
    many still train."""
    assert main(["train", "--dataset", "texas", "--depth", "2", "--split", "0", "1", "2", "--epochs", "100",
                 "--patience", "5", "--lr", "0.5", "--json"]) == 0
    captured = capsys.readouterr()
    epochs = json.loads(captured.out)["epochs"]
    progress = [line for line in captured.err.splitlines() if line.startswith("epoch ")]
    last = progress[-1]
    at = int(last.split()[1].split("/")[0])
    assert at < 100  # every repeat stopped early: the trainer ended at its next sync
    assert f"{sum(1 for e in epochs if e >= at)} of 3 repeats training" in last
    assert max(epochs) < at and "0 of 3 repeats training" in last


def test_plain_progress_speaks_at_least_every_few_seconds():
    """Between tenths of a long run (150 epochs of 1500 may take minutes) a line still comes
    every ``every_s`` seconds: with 0 s, one per report; with an hour, only at the tenths."""
    import io

    from orthotune.cli.train import TrainProgress
    from orthotune.core import EpochReport, RunResult, TrainConfig

    config = TrainConfig(dataset="cora", depth=2, epochs=1500)
    reports = [EpochReport(e, [[0.1]], [[0.5]], [[0.5]], [0.5], [True], [[RunResult(0, 0, epochs=e)]])
               for e in (25, 50, 75, 175)]
    for every_s, expected in ((0.0, [25, 50, 75, 175]), (3600.0, [25, 175])):
        out = io.StringIO()
        progress = TrainProgress(config, out, every_s=every_s)
        for report in reports:
            progress(report)
        assert [int(line.split()[1].split("/")[0]) for line in out.getvalue().splitlines()] == expected
