"""Training: datasets through PyG's and OGB's loaders, and the training loop for every task."""

from orthotune.training._base import GRAPH_WARM_UP
from orthotune.training._cost import CellCost, device_profile, measure_cell_cost, timed
from orthotune.training._data import DataRoot, check_dataset_files, is_prepared, load_dataset
from orthotune.training._memory import retain_freed_memory
from orthotune.training._node import choose_device, pack_key, train_node
from orthotune.training._node_data import NodeData, load_node_data, normalised_adjacency
from orthotune.training._options import TrainOptions
from orthotune.training._run import run_configs, task_data

__all__ = [
    "GRAPH_WARM_UP",
    "CellCost",
    "DataRoot",
    "NodeData",
    "TrainOptions",
    "check_dataset_files",
    "choose_device",
    "device_profile",
    "is_prepared",
    "load_dataset",
    "load_node_data",
    "measure_cell_cost",
    "normalised_adjacency",
    "pack_key",
    "retain_freed_memory",
    "run_configs",
    "task_data",
    "timed",
    "train_node",
]
