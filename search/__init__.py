"""The Ray Tune glue: the trainable, per-cell searchers and schedulers, the store recorder,
the progress display, the live views (TensorBoard, Optuna storage) and launch.

The options (registries, ``LaunchOptions``, constants) load at once and are light; the rest
imports Ray, torch and PyG, so it loads on first use (PEP 562), which keeps ``orthotune
launch --help`` instant.
"""

from importlib import import_module
from typing import Any

from orthotune.search._algorithms import SCHEDULERS, SEARCHERS, shuffled_grid
from orthotune.search._objective import OBJECTIVE, RUNG_SCORE, TIME_ATTR, rung_score
from orthotune.search._options import GPU_SHARES, MODES, NO_STORAGE, SECTIONS, LaunchOptions, SearchOutcome
from orthotune.search._space import Space, cell_key

#: Heavy names -> the private module that defines them (loaded on first access).
_LAZY = {
    **dict.fromkeys(("CellScheduler", "CellSearcher", "config_identity"), "_cells"),
    **dict.fromkeys(("TUNE_SETTINGS", "SearchPlan", "launch", "outcome_from_store", "plan", "prior_elapsed", "resume",
                     "stop_on_signals", "stored_options", "tune_settings"), "_launch"),
    **dict.fromkeys(("StoredTrial", "config_canon", "objective_curves", "replay_rungs", "stored_trials"), "_replay"),
    **dict.fromkeys(("TensorBoardLogger", "optuna_storage", "optuna_storage_location", "tensorboard_folder"),
                    "_live"),
    **dict.fromkeys(("GpuShares", "MAX_TRIALS_PER_GPU", "cell_config", "decide_shares", "gpu_share",
                     "gpu_share_record", "measure_shares", "session_fits", "trial_resources"), "_gpu_share"),
    **dict.fromkeys(("GroupSearcher", "PointSearcher", "RungBoard", "group_points"), "_grouping"),
    **dict.fromkeys(("LOOPBACK", "local_ray_options", "loopback_ray", "starts_local_ray"), "_local_ray"),
    **dict.fromkeys(("SearchProgress", "Snapshot", "snapshot"), "_progress"),
    **dict.fromkeys(("StoreRecorder", "member_statuses", "trial_statuses"), "_recorder"),
    **dict.fromkeys(("TrialContext", "error_line", "failed_results", "member_configs", "train_trial"),
                    "_trainable"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


__all__ = [
    "GPU_SHARES",
    "MAX_TRIALS_PER_GPU",
    "MODES",
    "NO_STORAGE",
    "OBJECTIVE",
    "RUNG_SCORE",
    "SCHEDULERS",
    "SEARCHERS",
    "SECTIONS",
    "TIME_ATTR",
    "TUNE_SETTINGS",
    "CellScheduler",
    "CellSearcher",
    "GpuShares",
    "LOOPBACK",
    "LaunchOptions",
    "GroupSearcher",
    "PointSearcher",
    "RungBoard",
    "SearchOutcome",
    "SearchPlan",
    "SearchProgress",
    "StoredTrial",
    "Space",
    "Snapshot",
    "StoreRecorder",
    "TensorBoardLogger",
    "TrialContext",
    "cell_config",
    "cell_key",
    "config_canon",
    "config_identity",
    "decide_shares",
    "error_line",
    "failed_results",
    "gpu_share",
    "gpu_share_record",
    "launch",
    "local_ray_options",
    "loopback_ray",
    "member_configs",
    "measure_shares",
    "member_statuses",
    "objective_curves",
    "outcome_from_store",
    "optuna_storage",
    "optuna_storage_location",
    "group_points",
    "plan",
    "prior_elapsed",
    "replay_rungs",
    "resume",
    "rung_score",
    "shuffled_grid",
    "snapshot",
    "session_fits",
    "stored_options",
    "starts_local_ray",
    "stop_on_signals",
    "stored_trials",
    "tensorboard_folder",
    "train_trial",
    "trial_resources",
    "trial_statuses",
    "tune_settings",
]
