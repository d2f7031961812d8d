"""The trackers researchers already use: MLflow (``--mlflow URI``) and Weights & Biases
(``--wandb PROJECT``), through Ray Tune's own logger callbacks
(``ray.air.integrations.mlflow.MLflowLoggerCallback``,
``ray.air.integrations.wandb.WandbLoggerCallback``). Each is optional (the extras ``mlflow``
and ``wandb``) and imported only when asked for.

One tracker run per Tune trial, in an experiment (MLflow) or group (W&B) named after the
search: its params are the trial's searched values, its metrics what the trial reports
(``val_acc``, the objective; ``epoch``; ``rung_score``), step by step. The Parquet store
stays the record; these are views.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orthotune.core import OrthotuneError

if TYPE_CHECKING:
    from orthotune.search._options import LaunchOptions

#: ``{launch option: the module it needs}``; the extra of the same name installs it.
TRACKERS = {"mlflow": "mlflow", "wandb": "wandb"}
#: Seconds a trial's W&B logging actor gets to exit on its own (its run file flushed).
WANDB_EXIT_S = 30.0
#: Report keys that are not metrics (per-epoch history, per-member lists, the final results):
#: W&B would log them as tables or histograms; MLflow keeps only numbers on its own.
NOT_METRICS = ["history", "member_val_acc", "results", "runs", "final", "timings"]
#: MLflow 3 refuses its file store ("maintenance mode") unless this is true; a user who gives
#: ``--mlflow FOLDER`` asks for that store, so it is set (a value the user set wins).
FILE_STORE_SWITCH = "MLFLOW_ALLOW_FILE_STORE"


def check_trackers(options: LaunchOptions) -> None:
    """A tracker asked for whose package is missing: one line naming the extra, before any work."""
    for option, module in TRACKERS.items():
        if getattr(options, option) is not None and importlib.util.find_spec(module) is None:
            raise OrthotuneError(f"--{option} needs the {module} package, which is not installed: "
                                 f"pip install 'orthotune[{option}]'")


def tracker_callbacks(options: LaunchOptions) -> list[Any]:
    """Ray Tune's logger callbacks for the trackers ``options`` asks for (none: an empty list)."""
    callbacks: list[Any] = []
    if options.mlflow is not None:
        from ray.air.integrations.mlflow import MLflowLoggerCallback

        uri = mlflow_uri(options.mlflow)
        if uri.startswith("file:"):  # a folder asked for: MLflow 3 keeps its file store behind this switch
            os.environ.setdefault(FILE_STORE_SWITCH, "true")
        callbacks.append(MLflowLoggerCallback(
            tracking_uri=uri, experiment_name=options.name, save_artifact=False,
            tags={"orthotune.search": options.name, "orthotune.store": options.store}))
    if options.wandb is not None:
        from ray.air.integrations.wandb import WandbLoggerCallback

        # the logging actor works in the trial's scratch folder, deleted when the search ends:
        # W&B's local files (all of them, offline) go to $WANDB_DIR or the launch's folder
        class WandbLogger(WandbLoggerCallback):
            def _cleanup_logging_actor(self, trial: Any) -> None:
                # Ray kills a trial's logging actor as soon as its wandb.finish() returns, while
                # W&B's core process may still be writing the run file (it dies with the actor):
                # an offline run file was left with its header only. Ending the actor's process
                # normally runs W&B's exit handler, which waits for the core; then Ray's kill.
                import ray

                ended = self._trial_logging_actors[trial].__ray_terminate__.remote()
                ray.wait([ended], timeout=WANDB_EXIT_S)
                super()._cleanup_logging_actor(trial)

            def __del__(self) -> None:
                # Ray's __del__ asks its module whether Ray still runs: at interpreter exit that
                # module is gone (an AttributeError printed as a traceback); its actors went with Ray
                try:
                    super().__del__()
                except AttributeError:
                    pass

        callbacks.append(WandbLogger(project=options.wandb, group=options.name, excludes=NOT_METRICS,
                                     dir=str(Path(os.environ.get("WANDB_DIR") or ".").resolve())))
    return callbacks


def mlflow_uri(uri: str) -> str:
    """A tracking URI as MLflow takes it: a plain folder becomes an absolute ``file:`` URI (the
    callback runs in the driver, whose working folder a relative path would silently follow)."""
    if "://" in uri or uri.startswith(("file:", "databricks")):
        return uri
    return Path(uri).expanduser().resolve().as_uri()
