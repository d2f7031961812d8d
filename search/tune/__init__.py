"""The Ray Tune glue: the trainable, searchers, schedulers, the store recorder and launch."""

from orthotune.search.tune._launch import (
    SCHEDULERS,
    SEARCHERS,
    LaunchOptions,
    SearchOutcome,
    launch,
    resume,
)
from orthotune.search.tune._packing import PackSearcher, PointSearcher, RungBoard, pack_points
from orthotune.search.tune._progress import ProgressLine
from orthotune.search.tune._recorder import StoreRecorder, member_statuses, trial_statuses
from orthotune.search.tune._space import SearchSpace
from orthotune.search.tune._trainable import OBJECTIVE, TIME_ATTR, TrialContext, member_configs, train_trial

__all__ = [
    "OBJECTIVE",
    "SCHEDULERS",
    "SEARCHERS",
    "TIME_ATTR",
    "LaunchOptions",
    "PackSearcher",
    "PointSearcher",
    "ProgressLine",
    "RungBoard",
    "SearchOutcome",
    "SearchSpace",
    "StoreRecorder",
    "TrialContext",
    "launch",
    "member_configs",
    "member_statuses",
    "pack_points",
    "resume",
    "train_trial",
    "trial_statuses",
]
