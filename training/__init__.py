"""Training: datasets through PyG's and OGB's loaders, and the training loop for every task."""

from orthotune.training._cost import CellCost, DeviceProfile, device_profile, measure_cell_cost, timed
from orthotune.training._data import (
    LOADERS,
    NO_DATA_ROOT,
    DataRoot,
    NodeData,
    check_dataset_files,
    load_dataset,
    load_node_data,
    missing_files,
    normalised_adjacency,
    required_files,
)
from orthotune.training._graph import Fold, GraphData, load_graph_data, make_folds, train_graph
from orthotune.training._loop import TrainingLoop, TrainOptions, execution
from orthotune.training._memory import capacity, pack_capacity, retain_freed_memory
from orthotune.training._node import accuracy, choose_device, pack_key, train_node
from orthotune.training._run import TRAINERS, Trainer, run_configs, task_data

__all__ = [
    "LOADERS",
    "NO_DATA_ROOT",
    "TRAINERS",
    "CellCost",
    "DataRoot",
    "DeviceProfile",
    "Fold",
    "GraphData",
    "NodeData",
    "Trainer",
    "TrainingLoop",
    "accuracy",
    "capacity",
    "check_dataset_files",
    "device_profile",
    "execution",
    "TrainOptions",
    "choose_device",
    "load_dataset",
    "load_graph_data",
    "load_node_data",
    "make_folds",
    "measure_cell_cost",
    "missing_files",
    "normalised_adjacency",
    "pack_capacity",
    "pack_key",
    "required_files",
    "retain_freed_memory",
    "run_configs",
    "task_data",
    "timed",
    "train_graph",
    "train_node",
]
