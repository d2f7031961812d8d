"""The ground floor: errors, registries, the catalogue of names and defaults, the config
type and the result types. Imports nothing of orthotune's other layers, and no torch."""

from orthotune.core._catalogue import (
    DATASETS,
    SETTINGS,
    DatasetInfo,
    all_backbones,
    backbone_name,
    defaults_for,
    is_dynamic,
    is_factory,
)
from orthotune.core._config import PROFILES, SPLIT_FIELDS, OrthoSettings, TrainConfig, check_memory, profile_values
from orthotune.core._errors import ConfigError, OrthotuneError, SearchCrashed, SearchInterrupted, check
from orthotune.core._fields import Group, by_group, column_name, declared
from orthotune.core._registry import Registry
from orthotune.core._results import (
    ConfigResult,
    EpochCallback,
    EpochReport,
    EpochValues,
    RunResult,
    SearchState,
    Status,
    mean,
    mean_or_zero,
    std,
)
from orthotune.core._standard import STANDARD_FORMS, StandardForm, standard_form

__all__ = [
    "DATASETS",
    "PROFILES",
    "SETTINGS",
    "SPLIT_FIELDS",
    "STANDARD_FORMS",
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
    "RunResult",
    "SearchCrashed",
    "SearchInterrupted",
    "SearchState",
    "StandardForm",
    "Status",
    "TrainConfig",
    "all_backbones",
    "backbone_name",
    "by_group",
    "check",
    "check_memory",
    "column_name",
    "declared",
    "defaults_for",
    "is_dynamic",
    "is_factory",
    "mean",
    "mean_or_zero",
    "profile_values",
    "standard_form",
    "std",
]
