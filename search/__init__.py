"""Data, training and Ray Tune searches."""

from search._config import SETTING_DEFAULTS, TrainConfig
from search._data import DATASETS, DataRoot, NodeData, load_dataset, load_node_data
from search._run import TASKS, Task, run_configs, task_data
from search._train import ConfigResult, EpochReport, RunResult, choose_device, train_node

__all__ = [
    "DATASETS",
    "SETTING_DEFAULTS",
    "TASKS",
    "ConfigResult",
    "DataRoot",
    "EpochReport",
    "NodeData",
    "RunResult",
    "Task",
    "TrainConfig",
    "choose_device",
    "load_dataset",
    "load_node_data",
    "run_configs",
    "task_data",
    "train_node",
]
