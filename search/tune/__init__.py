"""The Ray Tune glue: the trainable, per-cell searchers and schedulers, the store recorder,
the progress display, the live views (TensorBoard, Optuna storage) and launch.

The options (registries, ``LaunchOptions``, constants) load at once and are light; the rest
imports Ray, torch and PyG, so it loads on first use (PEP 562), which keeps ``orthotune
launch --help`` instant.
"""

from importlib import import_module
from typing import Any

from orthotune.search.tune._options import (
    MODES,
    NO_STORAGE,
    OBJECTIVE,
    SCHEDULERS,
    SEARCHERS,
    TIME_ATTR,
    LaunchOptions,
    SearchOutcome,
)
from orthotune.search.tune._space import SearchSpace

#: Heavy names -> the private module that defines them (loaded on first access).
_LAZY = {
    **dict.fromkeys(("CellScheduler", "CellSearcher", "cell_key", "config_identity", "space_cell_key"), "_cells"),
    **dict.fromkeys(("TUNE_SETTINGS", "SearchPlan", "launch", "plan", "prior_elapsed", "resume", "tune_settings"),
                    "_launch"),
    **dict.fromkeys(("TensorBoardLogger", "optuna_storage", "optuna_storage_location", "tensorboard_folder"),
                    "_live"),
    **dict.fromkeys(("GroupSearcher", "PointSearcher", "RungBoard", "group_points"), "_grouping"),
    **dict.fromkeys(("SearchProgress", "Snapshot", "snapshot"), "_progress"),
    **dict.fromkeys(("StoreRecorder", "member_statuses", "trial_statuses"), "_recorder"),
    **dict.fromkeys(("TrialContext", "member_configs", "train_trial"), "_trainable"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


__all__ = [
    "MODES",
    "NO_STORAGE",
    "OBJECTIVE",
    "SCHEDULERS",
    "SEARCHERS",
    "TIME_ATTR",
    "TUNE_SETTINGS",
    "CellScheduler",
    "CellSearcher",
    "LaunchOptions",
    "GroupSearcher",
    "PointSearcher",
    "RungBoard",
    "SearchOutcome",
    "SearchPlan",
    "SearchProgress",
    "SearchSpace",
    "Snapshot",
    "StoreRecorder",
    "TensorBoardLogger",
    "TrialContext",
    "cell_key",
    "config_identity",
    "launch",
    "member_configs",
    "member_statuses",
    "optuna_storage",
    "optuna_storage_location",
    "group_points",
    "plan",
    "prior_elapsed",
    "resume",
    "snapshot",
    "space_cell_key",
    "tensorboard_folder",
    "train_trial",
    "trial_statuses",
    "tune_settings",
]
