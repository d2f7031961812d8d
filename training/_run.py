"""One entry point to train configs of any task: load the data once per process, dispatch.

Node classification (``train_node``) and graph classification register a :class:`Trainer`
here; the CLI, the Ray trainable and the benchmarks call :func:`run_configs` and never
branch on the task themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch

from orthotune.core import DATASETS, ConfigResult, EpochCallback, Registry, TrainConfig, check
from orthotune.training._data import DataRoot
from orthotune.training._given import RandomSplit
from orthotune.training._graph import load_graph_data, train_graph
from orthotune.training._node import train_node
from orthotune.training._node_data import load_node_data, with_random_split
from orthotune.training._options import DEFAULT_OPTIONS, TrainOptions


@dataclass(frozen=True)
class Trainer:
    """How one kind of dataset is loaded (once per process) and trained."""

    load: Callable[[str, str, DataRoot, bool], Any]  # (dataset, setting, root, directed)
    train: Callable[..., list[ConfigResult]]  # (configs, data, device, on_epoch, options)


TRAINERS: Registry[Trainer] = Registry("trainer")
TRAINERS.add("node", Trainer(load_node_data, train_node))
TRAINERS.add("graph", Trainer(load_graph_data, train_graph))


@lru_cache(maxsize=8)
def task_data(dataset: str, setting: str, data_root: str | None, device: str, directed: bool = False,
              download: bool = False) -> Any:
    """The dataset ready on ``device``, loaded once per process (Ray workers are reused);
    ``download``: the loader may fetch missing raw files into the data root."""
    task = TRAINERS.get(DATASETS.get(dataset).task)
    data = task.load(dataset, setting, DataRoot.resolve(data_root, download), directed)
    return data.to(torch.device(device))


def run_configs(
    configs: Sequence[TrainConfig],
    device: torch.device,
    data_root: str | None = None,
    on_epoch: EpochCallback | None = None,
    options: TrainOptions = DEFAULT_OPTIONS,
    download: bool = False,
) -> list[ConfigResult]:
    """Train configs that share a pack key as packed models on ``device``.

    ``options`` say how (precision, determinism, pack size), never what a config means.
    """
    first = configs[0]
    task = TRAINERS.get(DATASETS.get(first.dataset).task)
    data = task_data(first.dataset, first.setting, data_root, str(device), first.directed, download)
    # the random setting's split rule is the data's: one per call (the callback's indices are
    # the call's configs, so a call is never split up here)
    rules = {RandomSplit.of(config) for config in configs}
    check(len(rules) == 1, f"configs trained together must share their split_* fields; got {len(rules)} rules")
    return task.train(list(configs), with_random_split(data, first), device, on_epoch, options)
