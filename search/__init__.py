"""Data, training and the Parquet store.

The Ray Tune search itself (``launch``, ``resume``, ``LaunchOptions``) lives in
``search._launch`` and is reached through ``orthotune launch``: it builds on ``spaces``,
which builds on this package's config type, so it is not re-exported here.
"""

from search._config import DATASET_DEFAULTS, SETTING_DEFAULTS, TrainConfig
from search._data import DATASETS, DataRoot, NodeData, load_dataset, load_node_data
from search._graph import Fold, GraphData, load_graph_data, make_folds, train_graph
from search._run import TASKS, Task, run_configs, task_data
from search._store import EPOCHS_SCHEMA, TRIALS_SCHEMA, Store
from search._train import ConfigResult, EpochReport, RunResult, choose_device, train_node

__all__ = [
    "DATASETS",
    "EPOCHS_SCHEMA",
    "DATASET_DEFAULTS",
    "SETTING_DEFAULTS",
    "TASKS",
    "TRIALS_SCHEMA",
    "ConfigResult",
    "DataRoot",
    "EpochReport",
    "Fold",
    "GraphData",
    "NodeData",
    "RunResult",
    "Store",
    "Task",
    "TrainConfig",
    "choose_device",
    "load_dataset",
    "load_graph_data",
    "load_node_data",
    "make_folds",
    "run_configs",
    "task_data",
    "train_graph",
    "train_node",
]
