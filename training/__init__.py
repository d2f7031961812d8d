"""Training: datasets through PyG's and OGB's loaders, and the training loop for every task.

:class:`TrainOptions` and its GPU switches (:data:`EXECUTION_SWITCHES`) load at once and are
light, so the layers above read the switches' names, defaults and docs before torch loads (the
CLI's flags, a space's ``execution`` section); everything else loads on first use (PEP 562,
:data:`LAZY`) and imports torch and PyG.
"""

from orthotune.core import lazy_attributes
from orthotune.training._options import EXECUTION_SWITCHES, TrainOptions

__all__ = [
    "EXECUTION_SWITCHES",
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
    "locality_order",
    "measure_cell_cost",
    "normalised_adjacency",
    "pack_key",
    "retain_freed_memory",
    "run_configs",
    "runs_per_cpu_pack",
    "task_data",
    "timed",
    "train_node",
]

#: The names of ``__all__`` not imported above, by the module each is loaded from on first use.
LAZY = {
    "GRAPH_WARM_UP": "_base",
    **dict.fromkeys(("CellCost", "device_profile", "measure_cell_cost", "timed"), "_cost"),
    **dict.fromkeys(("DataRoot", "check_dataset_files", "is_prepared", "load_dataset"), "_data"),
    "retain_freed_memory": "_memory",
    **dict.fromkeys(("choose_device", "pack_key", "runs_per_cpu_pack", "train_node"), "_node"),
    **dict.fromkeys(("NodeData", "load_node_data", "locality_order", "normalised_adjacency"), "_node_data"),
    **dict.fromkeys(("run_configs", "task_data"), "_run"),
}

__getattr__ = lazy_attributes(__name__, LAZY)
