"""What a search needs beyond valid options, checked before the store is touched and Ray
starts (the options and the space were validated when they were made: ``_options`` and the
spaces layer do that without Ray or torch). The data root's checks are training's, so this
module loads torch and PyG."""

from __future__ import annotations

from orthotune.core import check_memory
from orthotune.search._guards import node_wait_s, refuse_password_in_url
from orthotune.search._options import LaunchOptions
from orthotune.search._trackers import check_trackers
from orthotune.training import DataRoot, check_dataset_files


def check_inputs(options: LaunchOptions, memory: bool = True) -> None:
    """What a search needs beyond valid values, checked before the store is touched and Ray
    starts: every dataset of every cell has its files in the data root (fetched first with
    ``download``), and on a local Ray each cell's largest config fits this machine's memory
    (a cluster's workers have memory of their own; ``memory=False``: not checked, as
    ``orthotune plan`` lists what does not fit instead)."""
    node_wait_s()  # a bad $ORTHOTUNE_NODE_WAIT_S fails here, not once Ray runs
    check_trackers(options)
    refuse_password_in_url(options.optuna_storage, "--optuna-storage")
    root = DataRoot.resolve(options.data_root, options.download)
    configs = options.space.largest_configs()
    if options.address is None and memory:
        for config in configs:
            check_memory(config)
    for dataset, setting in dict.fromkeys((config.dataset, config.setting) for config in configs):
        check_dataset_files(dataset, setting, root)


def data_root(option: str | None, download: bool = False) -> str:
    """The data root the workers read (absolute)."""
    return str(DataRoot.resolve(option, download).path)
