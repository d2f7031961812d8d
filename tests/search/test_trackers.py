"""MLflow and Weights & Biases through Ray Tune's logger callbacks (issue 25, item 6): asked for
with --mlflow URI / --wandb PROJECT, imported only then; a real search logs its trials to
MLflow's local file store and to W&B in offline mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orthotune.core import OrthotuneError
from orthotune.search import LaunchOptions
from orthotune.search._trackers import mlflow_uri
from orthotune.spaces import resolve_space

SPACE = {
    "name": "tracked", "datasets": ["cora"], "repeats": [0], "backbones": ["gcn"], "depths": [2],
    "original": True, "ortho": {"T": [2, 4], "beta": 1.0, "lam": 5.0e-4},
    "train": {"lr": [0.01, 0.05], "dropout": 0.0, "epochs": 8, "patience": 8, "hidden": 16},
    "asha": {"grace_period": 4, "reduction_factor": 2}, "samples": 2,
}
TRIALS = 2 * SPACE["samples"]  # two cells (the arms), two trials each


@pytest.mark.parametrize("tracker", ["mlflow", "wandb"])
@pytest.mark.parametrize("value", ["", "   ", 3])
def test_an_empty_tracker_value_is_refused(tracker, value):
    with pytest.raises(OrthotuneError, match=f"{tracker}=.* must be"):
        LaunchOptions(store="s", name="n", space=resolve_space("quick"), **{tracker: value})


def test_a_folder_becomes_an_absolute_file_uri(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert mlflow_uri("mlruns") == (tmp_path / "mlruns").as_uri()
    assert mlflow_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
    assert mlflow_uri("file:///x/mlruns") == "file:///x/mlruns"


@pytest.mark.slow
def test_nothing_is_imported_unless_asked():
    code = ("import sys\n"
            "from orthotune.cli import main\n"
            "from orthotune.search import LaunchOptions\n"
            "from orthotune.search._tuner import callbacks_of\n"
            "from orthotune.search._requeue import RetryLedger\n"
            "from orthotune.spaces import resolve_space\n"
            "from orthotune.store import Store\n"
            "o = LaunchOptions(store='s', name='n', space=resolve_space('quick'), tensorboard=False)\n"
            "from types import SimpleNamespace\n"
            "store = SimpleNamespace(fence=None)  # no store opened: callbacks_of reads only its fence here\n"
            "assert len(callbacks_of(o, store, False, 1, RetryLedger(2))) == 3\n"  # ledger, recorder, node watch only
            "print(sorted(m for m in ('mlflow', 'wandb') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_a_search_logs_each_trial_to_mlflow_and_to_wandb_offline(tmp_path, monkeypatch):
    import mlflow

    space = tmp_path / "tracked.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path / "wb"),
           "WANDB_SILENT": "true"}
    (tmp_path / "wb").mkdir()
    proc = subprocess.run([sys.executable, "-m", "orthotune.cli", "launch", "--space", str(space), "--store",
                           str(tmp_path / "store"), "--name", "tracked", "--progress", "off", "--seed", "0",
                           "--mlflow", str(tmp_path / "mlruns"), "--wandb", "orthotune-test"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=480)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    assert "Traceback" not in proc.stderr, proc.stderr
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # as the search set it for its file store
    client = mlflow.MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    experiment = client.get_experiment_by_name("tracked")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == TRIALS
    assert all(run.info.status == "FINISHED" for run in runs)
    for run in runs:
        assert {"lr", "ortho"} <= set(run.data.params)  # the searched values, as params
        assert 0.0 <= run.data.metrics["val_acc"] <= 1.0
        history = client.get_metric_history(run.info.run_id, "val_acc")
        assert len(history) >= 1
        assert run.data.tags["orthotune.search"] == "tracked"
    ortho = [r for r in runs if r.data.params["ortho"] == "True"]
    assert len(ortho) == SPACE["samples"] and all(r.data.params["T"] in ("2", "4") for r in ortho)

    offline = sorted((tmp_path / "wb" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(offline) == TRIALS
    for path in offline:
        run, config, history = wandb_run(path)
        assert (run.project, run.run_group) == ("orthotune-test", "tracked")
        assert json.loads(config["lr"]) in SPACE["train"]["lr"]
        objectives = [float(h["val_acc"]) for h in history if "val_acc" in h]
        assert objectives and all(0.0 <= v <= 1.0 for v in objectives)
        assert not {"history", "results", "member_val_acc"} & {k for h in history for k in h}  # not metrics
    assert not (tmp_path / "wandb").exists()  # all of it under WANDB_DIR


def wandb_run(path: Path):
    """The run record, the config and the history rows of an offline W&B run file. wandb
    0.31 reads these files only in its Go core, so this reads their format (LevelDB's log:
    a 7-byte header, 32 KiB blocks of chunks with a 7-byte header: CRC, length, kind; kinds
    1 full, 2 first, 3 middle, 4 last) into wandb's own protobuf records."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, chunk, records = 7, 32768, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        chunk += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunk)
            records.append(record)
            chunk = b""
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    config = {_key(item): item.value_json for r in records if r.WhichOneof("record_type") in ("run", "config")
              for item in (r.run.config.update if r.WhichOneof("record_type") == "run" else r.config.update)}
    history = [{_key(item): item.value_json for item in r.history.item} for r in records
               if r.WhichOneof("record_type") == "history"]
    return run, config, history


def _key(item) -> str:
    """An item's key: ``key``, or its ``nested_key`` parts (wandb writes either)."""
    return item.key or "/".join(item.nested_key)
