"""The Ray Tune glue: the trainable, per-cell searchers and schedulers, the store recorder,
the progress display, the live views (TensorBoard, Optuna storage) and launch."""

from orthotune.search.tune._cells import CellScheduler, CellSearcher, cell_key, config_identity, space_cell_key
from orthotune.search.tune._launch import (
    SCHEDULERS,
    SEARCHERS,
    LaunchOptions,
    SearchOutcome,
    SearchPlan,
    launch,
    plan,
    prior_elapsed,
    resume,
)
from orthotune.search.tune._live import (
    NO_STORAGE,
    TensorBoardLogger,
    optuna_storage,
    optuna_storage_location,
    tensorboard_folder,
)
from orthotune.search.tune._packing import PackSearcher, PointSearcher, RungBoard, pack_points
from orthotune.search.tune._progress import SearchProgress, Snapshot, snapshot
from orthotune.search.tune._recorder import StoreRecorder, member_statuses, trial_statuses
from orthotune.search.tune._space import SearchSpace
from orthotune.search.tune._trainable import OBJECTIVE, TIME_ATTR, TrialContext, member_configs, train_trial

__all__ = [
    "NO_STORAGE",
    "OBJECTIVE",
    "SCHEDULERS",
    "SEARCHERS",
    "TIME_ATTR",
    "CellScheduler",
    "CellSearcher",
    "LaunchOptions",
    "PackSearcher",
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
    "pack_points",
    "plan",
    "prior_elapsed",
    "resume",
    "snapshot",
    "space_cell_key",
    "tensorboard_folder",
    "train_trial",
    "trial_statuses",
]
