"""What a search changes in Ray Tune's start (``_startup``): the trial actors' runtime env and
the callback usage tag. That the trials then run on the workers Ray started with the job is
checked end to end by the throughput benchmark's breakdown (tests/bench)."""

import json
import subprocess
import sys

import pytest
from ray.tune import Callback
from ray.tune.execution import class_cache
from ray.tune.logger import LoggerCallback, TBXLoggerCallback

from orthotune.search._startup import callback_counts, callback_usage_by_name, trials_on_started_workers


class Watcher(Callback):
    pass


class Writer(LoggerCallback):
    pass


class WandbLoggerCallback(Callback):
    """Named as Ray's W&B integration: counted by its name, as Ray counts it."""


@pytest.mark.slow
def test_callback_counts_are_rays_own():
    from ray.air._internal.usage import _count_callbacks

    callbacks = [Watcher(), Watcher(), Writer(), TBXLoggerCallback(), WandbLoggerCallback(), object()]
    assert callback_counts(callbacks) == dict(_count_callbacks(callbacks))
    assert callback_counts(callbacks) == {"CustomCallback": 2, "CustomLoggerCallback": 1,
                                          "TBXLoggerCallback": 1, "WandbLoggerCallback": 1}
    assert callback_counts(None) == {} == dict(_count_callbacks(None))


@pytest.mark.slow  # a fresh interpreter (Ray Tune's import, seconds)
def test_tunes_callback_tag_is_recorded_without_importing_its_integrations():
    code = """
import json, sys
from ray.air._internal import usage
from ray._common.usage import usage_lib
from ray.tune import Callback
from orthotune.search._startup import callback_usage_by_name
original = usage.tag_callbacks
with callback_usage_by_name():
    usage.tag_callbacks([Callback(), Callback()])
print(json.dumps({"imported": sorted(m for m in ("wandb", "mlflow", "comet_ml", "aim") if m in sys.modules),
                  "tag": usage_lib._recorded_extra_usage_tags.get("air_callbacks"),
                  "restored": usage.tag_callbacks is original}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["imported"] == []
    assert json.loads(result["tag"]) == {"CustomCallback": 2}
    assert result["restored"]


def test_trial_actors_get_no_runtime_env_variable_of_tunes_inside():
    class Trainable:
        pass

    def env_vars() -> dict:
        options = class_cache._ActorClassCache().get(Trainable)._default_options
        return dict(options.get("runtime_env") or {}).get("env_vars") or {}

    assert "PL_DISABLE_FORK" in env_vars()  # Ray Tune's default, which sends trials to new workers
    with trials_on_started_workers():
        assert env_vars() == {}
    assert "PL_DISABLE_FORK" in env_vars()


def test_a_ray_without_the_tagging_hook_keeps_its_own(monkeypatch):
    from ray.air._internal import usage

    monkeypatch.delattr(usage, "record_extra_usage_tag")
    original = usage.tag_callbacks
    with callback_usage_by_name():
        assert usage.tag_callbacks is original


@pytest.mark.slow  # a real search on a new local Ray (about 15 s)
def test_a_search_without_trackers_never_imports_their_libraries(tmp_path, data_root):
    space = tmp_path / "grid.yaml"
    space.write_text(json.dumps({"datasets": ["cora"], "backbones": ["gcn"], "depths": [2], "original": True,
                                 "ortho": {"T": 2}, "train": {"epochs": 2, "patience": 2, "hidden": 16}}))
    code = f"""
import json, sys
from orthotune.cli import main
code = main(["launch", "--space", {str(space)!r}, "--store", {str(tmp_path / "store")!r}, "--name", "grid",
             "--searcher", "grid", "--scheduler", "fifo", "--data-root", {str(data_root.path)!r}])
print(json.dumps({{"code": code, "imported": sorted(m for m in ("wandb", "mlflow") if m in sys.modules)}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"code": 0, "imported": []}, out.stderr[-2000:]
