"""The ground floor: errors, registries, the catalogue of names and defaults, the config
type and the result types. Imports nothing of orthotune's other layers, and no torch."""

from orthotune.core._catalogue import (
    DATASET_DEFAULTS,
    DATASETS,
    REPEATS,
    SETTING_DEFAULTS,
    SETTINGS,
    TASKS,
    DatasetInfo,
    TaskInfo,
    defaults_for,
)
from orthotune.core._config import PROFILES, OrthoSettings, TrainConfig, profile_values
from orthotune.core._errors import ConfigError, OrthotuneError, check
from orthotune.core._fields import Group, Rule, by_group, column_name, declared
from orthotune.core._registry import Registry
from orthotune.core._results import (
    ConfigResult,
    EpochCallback,
    EpochReport,
    EpochValues,
    RunResult,
    Status,
    mean,
    mean_or_zero,
    std,
)

__all__ = [
    "DATASETS",
    "DATASET_DEFAULTS",
    "PROFILES",
    "REPEATS",
    "SETTINGS",
    "SETTING_DEFAULTS",
    "TASKS",
    "ConfigError",
    "ConfigResult",
    "DatasetInfo",
    "EpochCallback",
    "EpochReport",
    "EpochValues",
    "Group",
    "OrthoSettings",
    "OrthotuneError",
    "Registry",
    "Rule",
    "RunResult",
    "Status",
    "TaskInfo",
    "TrainConfig",
    "by_group",
    "check",
    "column_name",
    "declared",
    "defaults_for",
    "mean",
    "mean_or_zero",
    "profile_values",
    "std",
]
