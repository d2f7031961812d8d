"""Host memory per trial: a trial large enough to oversubscribe a node asks Ray for its memory.

Ray runs as many trials at once as a node has CPUs for, whatever they hold: two 64-layer
IncepGCN trials (about 11 GiB each, measured) on a 2-CPU node with 24 GiB ran together and
swapped. Ray's own remedy is a per-trial ``memory`` request (a logical resource, like
``CPU``): a node starts a trial only where the requests of the trials it runs leave room.

What a trial asks (:class:`TrialResources`, Tune's per-trial resources, a callable of the
trial's config):

- its estimate (:func:`trial_memory_bytes`): one pack's runs whole, the runs of its other
  packs by their parameters, as the CPU trainer packs them;
- only where a node full of such trials would not fit the node's memory. Smaller trials ask
  nothing, as before, so their workers are reused across cells (Ray reuses a worker only
  for a trial with the same request);
- at most the largest node's memory: a larger request would leave the trial waiting for a
  node that never comes, so it runs alone there instead (launch's check refuses a config
  whose one repeat does not fit the machine at all).

Trials with GPUs ask nothing: their memory is the GPU's, which their shares decide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from orthotune.core import DATASETS, TrainConfig, memory_estimate
from orthotune.search._cell_key import member_configs
from orthotune.search._memory_rule import asks_memory
from orthotune.training import TrainOptions, runs_per_cpu_pack

#: Requests round up to this, so trials of one cell (whose searched widths differ a little)
#: mostly ask the same amount and share workers.
REQUEST_GRAIN = 256 * 2**20


def trial_memory_bytes(configs: Sequence[TrainConfig], options: TrainOptions) -> int:
    """Estimated peak bytes of one CPU trial training ``configs`` (every repeat of each): as
    :func:`pack_memory_bytes` of their largest member, for all their runs."""
    largest = max(configs, key=lambda config: memory_estimate(config).total)
    return pack_memory_bytes(largest, sum(len(config.runs()) for config in configs), options)


def pack_memory_bytes(config: TrainConfig, runs: int, options: TrainOptions, on_gpu: bool = False) -> int:
    """Estimated peak bytes of ``runs`` runs of ``config`` trained in one call: as many whole
    (``core.memory_estimate``) as the trainer puts in one pack (all on a GPU; on a CPU
    ``training.runs_per_cpu_pack``; graph classification one at a time), the others by their
    parameters (with gradients and Adam's moments): packs train one after another."""
    estimate = memory_estimate(config)
    if on_gpu:
        together = runs
    elif DATASETS.get(config.dataset).task == "graph":
        together = 1
    else:
        together = runs_per_cpu_pack(config, runs, options)
    return int(together * estimate.total + (runs - together) * estimate.parameters)


@dataclass(frozen=True)
class NodeMemory:
    """The node a large trial needs: its ``memory`` resource (bytes) and how many trials its
    CPUs run at once."""

    memory: float
    trials: int


def cluster_node(cpus_per_trial: float) -> NodeMemory | None:
    """:func:`largest_node` of the Ray this process is connected to; None where there is none
    or it does not say (then no trial asks for memory, as before)."""
    import ray

    if not ray.is_initialized():
        return None
    try:
        return largest_node(ray.nodes(), cpus_per_trial)
    except Exception:  # noqa: BLE001 - a cluster that cannot list its nodes schedules by CPUs alone
        return None


def largest_node(nodes: Sequence[Mapping[str, Any]], cpus_per_trial: float) -> NodeMemory | None:
    """The alive node with the most ``memory`` resource, from ``ray.nodes()``' entries; None
    where no node declares any."""
    alive = [node.get("Resources", {}) for node in nodes if node.get("Alive", True)]
    alive = [resources for resources in alive if resources.get("memory")]
    if not alive:
        return None
    best = max(alive, key=lambda resources: resources["memory"])
    return NodeMemory(float(best["memory"]), max(1, int(best.get("CPU", 1) // cpus_per_trial)))


@dataclass(frozen=True)
class TrialResources:
    """Tune's resources for a trial's config: ``base`` (the fixed ``{cpu, gpu}`` or the GPU
    shares' callable) plus, for a CPU trial that a node full of its like would not fit, its
    ``memory``."""

    base: Mapping[str, float] | Callable[[Mapping[str, Any]], Mapping[str, float]]
    node: NodeMemory | None
    options: TrainOptions
    concurrency: int | None = None  # most trials at once (None: as many as a node's CPUs run)

    def __call__(self, config: Mapping[str, Any]) -> dict[str, float]:
        resources = dict(self.base(config) if callable(self.base) else self.base)
        request = 0 if resources.get("gpu") else self.memory_request(config)
        return {**resources, "memory": float(request)} if request else resources

    def memory_request(self, config: Mapping[str, Any]) -> int:
        """Bytes the trial of ``config`` asks for, 0 for none."""
        if self.node is None:
            return 0
        try:
            configs = [TrainConfig.from_dict(dict(values)) for values in member_configs(dict(config))]
            estimate = trial_memory_bytes(configs, self.options)
        except Exception:  # noqa: BLE001 - such a config fails in its trial, stored with its reason
            return 0
        if not asks_memory(estimate, self.node.memory, min(self.node.trials, self.concurrency or self.node.trials)):
            return 0
        return int(min(math.ceil(estimate / REQUEST_GRAIN) * REQUEST_GRAIN, self.node.memory))
