"""GPU shares per cell (``--gpus-per-trial auto``): trials take fractions of a GPU, so
several packs share one GPU when one pack cannot keep it busy.

Before the Tuner starts, one Ray task per cell (1 GPU, 1 CPU, a fresh worker each) trains
a pack of that cell's default config, as large as a trial's, and measures its cost
(:func:`orthotune.training.measure_cell_cost`). The driver turns each cost into
the cell's share of a GPU (:func:`gpu_share`), and every trial asks Ray for
``{cpu: cpus_per_trial, gpu: its cell's share}`` (:class:`GpuShares`, Tune's per-trial
resources). The measurements and shares go to the search's record
(:func:`gpu_share_record`).

Status: the decision, the plumbing into Tune, and the no-GPU refusal are tested on a CPU;
the measurement on a GPU (busy share, memory) is code that has not run on one yet.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orthotune.core import REASON_LIMIT, OrthotuneError, TrainConfig, check, one_line
from orthotune.search._cell_key import cell_key
from orthotune.search._options import LaunchOptions
from orthotune.spaces import default_config
from orthotune.training import (
    CellCost,
    DataRoot,
    TrainOptions,
    choose_device,
    measure_cell_cost,
    retain_freed_memory,
)

log = logging.getLogger(__name__)

#: Most trials one GPU is shared by: the smallest share is 1/16. Each trial is a process
#: with its own CUDA context (hundreds of MB) and its own copy of the dataset, and the
#: GPU time-slices between processes, so beyond a few packs the overheads win.
MAX_TRIALS_PER_GPU = 16
#: Share of a GPU's memory the packs sharing it may fill (as ``TrainOptions.memory_fraction``).
MEMORY_FRACTION = 0.8
#: Epochs each cell's measurement trains (after a warm-up and a one-epoch run).
SHARE_MEASURE_EPOCHS = 10
#: Ray resource amounts are fixed-point with 4 decimals: shares round down to them, so k
#: shares of 1/k never add up to more than one GPU.
_RESOLUTION = 10_000


def gpu_share(cost: CellCost, gpu_memory_bytes: int, cpus_per_gpu: float, cpus_per_trial: float = 1.0,
              memory_fraction: float = MEMORY_FRACTION, max_trials: int = MAX_TRIALS_PER_GPU) -> float:
    """The fraction of one GPU a trial of the measured cell asks for: ``1/k`` for ``k``
    trials per GPU.

    The rule: a pack that keeps the GPU busy a share ``s`` of its wall time leaves the GPU
    idle ``1 - s`` of it (the host's Python, kernel launches, syncs). ``k = floor(1/s)``
    such packs together ask for at most the whole GPU, so sharing fills the idle time
    without making each pack wait for the others much (without MPS the GPU time-slices
    between processes: one process's kernels run in another's gaps). So a pack busy more
    than half the time (``s > 1/2``, ``k = 1``) keeps a whole GPU. ``k`` is then capped:

    - memory: ``k`` trials must fit ``memory_fraction`` of the GPU's memory, each with its
      pack's peak and its process's own memory (CUDA context, dataset, cache:
      ``CellCost.trial_bytes``), since the GPU's memory is not shared out by Ray;
    - CPUs: each trial holds ``cpus_per_trial`` CPUs on the GPU's node, so no more than
      ``cpus_per_gpu / cpus_per_trial`` trials per GPU can run at once anyway;
    - ``max_trials`` (16): never below 1/16 of a GPU.

    A cost without a busy share (measured on a CPU) keeps a whole GPU: there is nothing to
    decide from.
    """
    check(gpu_memory_bytes > 0, f"gpu_memory_bytes={gpu_memory_bytes!r} must be > 0")
    check(cpus_per_gpu > 0, f"cpus_per_gpu={cpus_per_gpu!r} must be > 0")
    check(cpus_per_trial > 0, f"cpus_per_trial={cpus_per_trial!r} must be > 0")
    if cost.busy_share is None:
        return 1.0
    k = math.floor(1.0 / cost.busy_share) if cost.busy_share > 0 else max_trials
    k = min(k, max_trials, math.floor(cpus_per_gpu / cpus_per_trial + 1e-9))
    if cost.trial_bytes:
        k = min(k, math.floor(gpu_memory_bytes * memory_fraction / cost.trial_bytes))
    k = max(1, k)
    return math.floor(_RESOLUTION / k) / _RESOLUTION


@dataclass(frozen=True)
class GpuShares:
    """Each cell's share of a GPU, with the costs it was decided from; called with a
    trial's config it is that trial's resources (``tune.with_resources`` takes such a
    callable). A trial group uses its first member's cell; a cell that was not measured
    (an explicit grid point outside the space) keeps a whole GPU."""

    cpus_per_trial: float
    shares: Mapping[str, float]
    costs: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # cell -> CellCost.to_dict() or {"error"}

    def share(self, config: Mapping[str, Any]) -> float:
        members = config.get("group")
        return self.shares.get(cell_key(members[0] if members else config), 1.0)

    def __call__(self, config: Mapping[str, Any]) -> dict[str, float]:
        return {"cpu": self.cpus_per_trial, "gpu": self.share(config)}

    def fits(self, gpus: float) -> int:
        """Most trials ``gpus`` GPUs hold at once (all of the cell with the smallest share)."""
        smallest = min(self.shares.values(), default=1.0)
        return max(1, int(gpus * _RESOLUTION) // max(1, round(smallest * _RESOLUTION)))

    def record(self) -> dict[str, Any]:
        """The search record's entry: each cell's share and measured cost."""
        return {cell: {"share": share, **self.costs.get(cell, {})} for cell, share in self.shares.items()}

    def describe(self) -> list[str]:
        """One line per cell, as logged."""
        lines = []
        for cell, share in self.shares.items():
            cost = self.costs.get(cell, {})
            if "error" in cost:
                lines.append(f"{cell}: 1 GPU per trial (measurement failed: {cost['error']})")
                continue
            busy = cost.get("busy_share")
            memory = cost.get("peak_bytes_per_run")
            lines.append(f"{cell}: {share:g} GPU per trial (pack of {cost.get('runs')} runs: "
                         f"{cost.get('seconds_per_epoch', 0.0) * 1e3:.1f} ms/epoch, GPU busy "
                         + ("n/a" if busy is None else f"{busy:.0%}")
                         + ("" if memory is None else f", {memory / 2**20:.1f} MiB/run") + ")")
        return lines


def decide_shares(costs: Mapping[str, CellCost | dict[str, Any]], gpu_memory_bytes: int, cpus_per_gpu: float,
                  cpus_per_trial: float) -> GpuShares:
    """Each cell's share from its cost; a cell whose measurement failed (``{"error": ...}``)
    keeps a whole GPU."""
    shares, records = {}, {}
    for cell, cost in costs.items():
        if isinstance(cost, dict):
            shares[cell], records[cell] = 1.0, dict(cost)
            continue
        shares[cell] = gpu_share(cost, gpu_memory_bytes, cpus_per_gpu, cpus_per_trial)
        records[cell] = cost.to_dict()
    return GpuShares(cpus_per_trial, shares, records)


# -- on the cluster ------------------------------------------------------------------------

def measure_task(config: dict[str, Any], data_root: str | None, pack: int, epochs: int, sync_every: int,
                 download: bool = False, execution: dict[str, bool] | None = None) -> dict[str, Any]:
    """A cell's cost, measured in a Ray task holding one GPU (CUDA path unmeasured here) with
    the search's GPU switches (``execution``: ``LaunchOptions.execution``)."""
    import torch

    torch.set_num_threads(1)
    retain_freed_memory()  # as a trial's worker does
    options = TrainOptions(**(execution or {}), sync_every=sync_every)
    return measure_cell_cost(TrainConfig.from_dict(config), choose_device(None), data_root, pack, epochs,
                             options, download).to_dict()


def measure_shares(options: LaunchOptions, data_root: str | None, epochs: int = SHARE_MEASURE_EPOCHS) -> GpuShares:
    """Measure every cell of the search on the cluster's GPUs and decide their shares.

    Ray must be initialised. Raises a one-line :class:`OrthotuneError` where the cluster has
    no GPU. A cell whose measurement raises keeps a whole GPU (logged and recorded).
    """
    import ray

    gpus = ray.cluster_resources().get("GPU", 0)
    if not gpus:
        raise OrthotuneError("gpus_per_trial='auto' needs GPUs, but the Ray cluster has none; give a number "
                             "(0 for CPU trials)")
    cells = {cell.key: default_config(cell) for cell in options.space.cells()}
    task = ray.remote(num_gpus=1, num_cpus=1, max_calls=1)(measure_task)  # a fresh process per cell
    pending = {cell: task.remote(config, data_root, options.configs_per_trial, epochs, options.report_every,
                                 options.download, options.execution())
               for cell, config in cells.items()}
    costs: dict[str, CellCost | dict[str, Any]] = {}
    for cell, ref in pending.items():
        try:
            costs[cell] = CellCost.from_dict(ray.get(ref))
        except Exception as error:  # noqa: BLE001  (a failed measurement only costs that cell its sharing)
            costs[cell] = {"error": one_line(error, typed=True, limit=REASON_LIMIT)}
    shares = decide_shares(costs, _gpu_memory(costs), _cpus_per_gpu(), options.cpus_per_trial)
    for line in shares.describe():
        log.warning("GPU share: %s", line)
    return shares


def _gpu_memory(costs: Mapping[str, CellCost | dict[str, Any]]) -> int:
    """The smallest GPU any cell was measured on (a trial may land on any of them)."""
    sizes = [c.device_bytes for c in costs.values() if isinstance(c, CellCost) and c.device_bytes]
    return min(sizes, default=1)


def _cpus_per_gpu() -> float:
    """The fewest CPUs per GPU on any live node with GPUs (each trial there needs its CPUs)."""
    import ray

    ratios = [node["Resources"].get("CPU", 0) / node["Resources"]["GPU"] for node in ray.nodes()
              if node.get("Alive") and node.get("Resources", {}).get("GPU")]
    return max(min(ratios, default=1.0), 1e-9)


# -- one driver session --------------------------------------------------------------------

#: The shares decided in this driver session, per (store, search): set by
#: :func:`session_fits` (``_start_ray``), read by :func:`trial_resources` (``_trainable``).
_SESSIONS: dict[tuple[str, str], GpuShares] = {}


def session_fits(options: LaunchOptions, fits: int) -> int:
    """With ``gpu_share='auto'``: measure and decide every cell's share (once per session:
    each launch or resume measures again) and return how many trials fit at once (``fits``
    from the CPUs, capped by the GPUs); else ``fits`` unchanged."""
    key = (options.store, options.name)
    _SESSIONS.pop(key, None)
    if options.gpu_share != "auto":
        return fits
    import ray

    # the workers read the data root as an absolute path, as the trials do
    shares = measure_shares(options, str(DataRoot.resolve(options.data_root, options.download).path))
    _SESSIONS[key] = shares
    return min(fits, shares.fits(ray.cluster_resources().get("GPU", 0)))


def trial_resources(options: LaunchOptions) -> dict[str, float] | GpuShares:
    """Tune's resources per trial: the fixed ``{cpu, gpu}``, or with ``gpu_share='auto'``
    the session's :class:`GpuShares` (a callable of the trial's config)."""
    if options.gpu_share != "auto":
        return {"cpu": options.cpus_per_trial, "gpu": options.gpus_per_trial}
    shares = _SESSIONS.get((options.store, options.name))
    if shares is None:
        raise OrthotuneError(f"search {options.name!r}: gpus_per_trial='auto' but no GPU shares were measured "
                             f"in this session (the cluster must be started first)")
    return shares


def gpu_share_record(options: LaunchOptions) -> dict[str, Any]:
    """The search record's key for this session's shares: ``{"gpu_shares": {cell: {share,
    measured cost}}}``, or nothing with fixed GPUs per trial."""
    shares = _SESSIONS.get((options.store, options.name))
    return {"gpu_shares": shares.record()} if shares is not None else {}
