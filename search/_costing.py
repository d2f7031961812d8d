"""A search's plan measured on this machine: each distinct cell shape trained for a few epochs
as one pack (``orthotune.training.measure_cell_cost``, what ``--gpus-per-trial auto``
measures too), cached by shape in orthotune's cache, then the arithmetic of ``_estimate``.

What is measured, and what is fitted:

- the cells of one dataset are measured one after another in a measuring process: the
  dataset loads once there, and one warm-up (one run, two epochs: its epoch's seconds decide how many are
  timed, below) per dataset stands for all its shapes;
- each shape is one timed run of ``1 + measure_epochs`` epochs (``measure_cell_cost``; fewer
  on a dataset whose one run's epoch is slow, ``ENOUGH_TIMED_S``) of its whole pack; on a
  graph of ``SCALE_FROM_NODES`` nodes or more (PubMed, ogbn-arxiv), of one run, its seconds
  per epoch and setup scaled by the pack's runs and its memory raised by the estimate of the
  runs added (there an epoch is its runs' work side by side; the scaling's error against whole
  packs is in ``docs/plan.md``; ``full_packs`` trains every pack whole);
- the shapes are measured in as many processes as the search runs trials at once on one node
  here (each with a trial's threads), so an epoch is timed beside as many others as the
  search's own epochs will be; a dataset loads once per process;
- the start probe (below) runs in its own interpreter while this process imports torch and
  builds the cells, and before the measuring processes start (their imports beside it would
  lengthen the start it measures, their timings beside its Ray too);
- cells that differ only in depth (one dataset, backbone, arm, width, ``T``, repeats and
  pack), where the space has three depths or more for them, are measured at the smallest
  and the largest depth, and the depths between are fitted linearly (seconds per epoch,
  setup, peak memory): a full-batch epoch is an input layer, ``depth - 2`` hidden layers
  alike and an output layer, so its cost is linear in depth (the fit's error, checked
  against measured depths, is in ``docs/plan.md``); ``every_depth`` measures each depth;
- a plan whose every cell was measured is kept whole too (``plan-index`` in the cache, keyed
  by the space, the options and the versions, and valid while the shapes it read are the
  ones cached): a second plan of the same search reads one file, without torch or the cells'
  configs.

Loads torch and PyG only to measure (or where a GPU may be used); the options and the space
were validated before (``_options``, the spaces layer), so bad input never waits for them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import date
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from orthotune import __version__
from orthotune.core import DATASETS, TrainConfig, available_memory, memory_estimate
from orthotune.search._budget import cell_trials
from orthotune.search._estimate import CellEstimate, PlanEstimate, Resources, expected_epochs
from orthotune.search._options import LaunchOptions

#: Epochs timed per shape (after the first epoch of the timed run).
MEASURE_EPOCHS = 3
#: A node-classification graph of at least this many nodes has its packs measured on one run,
#: the figures scaled by the pack's runs: there an epoch is its runs' work side by side, linear
#: in them (PubMed, ogbn-arxiv). On smaller graphs an epoch's fixed cost (the launches, the
#: optimiser's steps) weighs as much as the work, so a pack is trained whole (and cheaply). A
#: rule on the data, not on a timing, so a busy host does not change how a shape is measured.
SCALE_FROM_NODES = 10_000
#: Timed epochs enough where an epoch is slow: a shape whose dataset's one run takes longer
#: per epoch than this over ``measure_epochs`` is timed on fewer epochs (at least one).
ENOUGH_TIMED_S = 1.0
#: Bumped when what a cached measurement means changes: older entries are then measured again.
CACHE_FORMAT = 3
#: What the fixed start of a search is measured as, in a fresh interpreter (cached per
#: machine and version): the driver's imports, Ray's start and shutdown.
START_PROBE = r"""
import json, time
started = time.perf_counter()
import torch, torch_geometric, ray
import orthotune.search._tuner
imported = time.perf_counter()
from orthotune.search._local_ray import local_ray_options, loopback_ray
with loopback_ray():
    ray.init(**local_ray_options(), log_to_driver=False, logging_level="ERROR")
up = time.perf_counter()
ray.shutdown()
print(json.dumps({"imports_s": imported - started, "ray_start_s": up - imported,
                  "ray_shutdown_s": time.perf_counter() - up}))
"""


def this_machine() -> Resources:
    """This machine as one node: its CPUs (the ones this process may use), GPUs and memory."""
    import torch

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    gpu_memory = torch.cuda.get_device_properties(0).total_memory if gpus else None
    return Resources(cpus=float(cpus), gpus=gpus, nodes=1, memory_bytes=_total_memory(), gpu_memory_bytes=gpu_memory)


def _total_memory() -> int | None:
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().total)


def plan_search(options: LaunchOptions, resources: Mapping[str, Any] | None = None,
                measure_epochs: int = MEASURE_EPOCHS, remeasure: bool = False,
                note: Callable[[str], None] | None = None, every_depth: bool = False,
                full_packs: bool = False) -> PlanEstimate:
    """The plan of ``options``' search: every cell and arm with its budget and measured cost,
    on this machine's :class:`Resources` with ``resources`` replacing some (cpus, gpus, nodes,
    memory_bytes). ``remeasure``: ignore the cache; ``note``: told one line per shape measured
    now; ``every_depth``: measure each depth rather than fit the ones between two measured;
    ``full_packs``: train every pack whole rather than scale a costly one from one run."""
    key = _plan_key(options, measure_epochs, every_depth, full_packs)
    kept = None if remeasure else _kept_plan(key)
    if kept is not None:
        machine, cells, start = kept
        here = Resources(**{**machine["resources"], "cpus": _cpus(), "memory_bytes": _total_memory()})
    else:
        machine, cells, start = _measure_plan(options, _Method(measure_epochs, full_packs), remeasure, note,
                                              every_depth)
        here = Resources(**machine["resources"])
        if all(c.measured for c in cells):
            _write_json(_index_path(key), {"machine": machine, "start_s": start,
                                           "cells": [dataclasses.asdict(c) for c in cells],
                                           "shapes": _shape_stamps({s for c in cells for s in c.sources})})
    return PlanEstimate(options.space.name, options.scheduler, options.searcher, tuple(cells),
                        replace(here, **(resources or {})), options.cpus_per_trial, options.gpus_per_trial,
                        options.concurrency, start, {k: v for k, v in machine.items() if k != "resources"})


@dataclasses.dataclass(frozen=True)
class _Method:
    """How a shape is measured (a worker process gets it with each chunk)."""

    epochs: int = MEASURE_EPOCHS
    full_packs: bool = False
    device: str = "cpu"
    data_root: str | None = None
    download: bool = False
    pack: int = 1  # configs per trial
    threads: int = 1  # a trial's torch threads
    report_every: int = 10


def _measure_plan(options: LaunchOptions, method: _Method, remeasure: bool,
                  note: Callable[[str], None] | None, every_depth: bool
                  ) -> tuple[dict[str, Any], list[CellEstimate], float]:
    """Every cell's estimate, measuring the shapes not cached (torch and PyG load here)."""
    probe = _StartProbe(remeasure)  # a fresh interpreter's imports and Ray's start, while torch loads here
    import torch

    from orthotune.search._inputs import check_inputs

    check_inputs(options, memory=False)  # the data must be there; what does not fit is listed, not refused
    here = this_machine()
    device = torch.device("cuda" if torch.cuda.is_available() and (options.gpus_per_trial or
                                                                   options.gpu_share == "auto") else "cpu")
    method = replace(method, device=str(device), data_root=options.data_root, download=options.download,
                     pack=options.configs_per_trial, threads=max(1, int(options.cpus_per_trial)),
                     report_every=options.report_every)
    budgets = cell_trials(options)
    cells = [_Cell(options, cell, budgets.get(cell.key, 0), device, method) for cell in options.space.cells()]
    fitted = {} if every_depth else _depth_fits(cells)
    meter = _Meter(method, remeasure, note, _workers(options, here, device))
    anchors = [cells[i] for i in range(len(cells)) if i not in fitted]  # and the cells not fitted
    costs = meter.costs(anchors, probe)
    estimates = {i: cells[i].estimate(costs[cells[i].shape]) for i in range(len(cells)) if i not in fitted}
    again = [index for index, (low, high) in fitted.items()
             if not (estimates[low].measured and estimates[high].measured)]
    costs.update(meter.costs([cells[i] for i in again], probe))  # an anchor did not train: measured on its own
    for index, (low, high) in fitted.items():
        if index in again:
            estimates[index] = cells[index].estimate(costs[cells[index].shape])
        else:
            estimates[index] = cells[index].fitted(cells[low], estimates[low], cells[high], estimates[high])
    machine = {"date": date.today().isoformat(), "cpus": here.cpus, "gpus": here.gpus,
               "memory_bytes": here.memory_bytes, "device": _device_name(device), "torch": torch.__version__,
               "resources": dataclasses.asdict(here)}
    return machine, [estimates[i] for i in range(len(cells))], probe.seconds()


def _workers(options: LaunchOptions, here: Resources, device: Any) -> int:
    """Processes measuring side by side: the trials the search runs at once on one node here
    (one on a GPU, whose sharing ``--gpus-per-trial auto`` decides)."""
    if device.type == "cuda":
        return 1
    return Resources(cpus=here.cpus, nodes=1).slots(options.cpus_per_trial, 0.0, options.concurrency)


class _Cell:
    """One cell and arm as planned: its first config (the searcher's first proposal), budget
    and shape."""

    def __init__(self, options: LaunchOptions, cell: Any, trials: int, device: Any, method: _Method) -> None:
        from orthotune.search._gpu_share import cell_config

        self.key, self.config = cell.key, TrainConfig.from_dict(cell_config(cell))
        self.shape = _shape(self.config, options, device, method)
        self.group = _depth_free_shape(self.config, options, device, method)
        self.estimate_bytes = float(memory_estimate(self.config).total)
        self.device = device
        self.common = {"cell": cell.key, "arm": cell.key.rsplit("/", 1)[-1], "trials": trials,
                       "repeats": len(self.config.runs()), "epochs": cell.max_epochs(),
                       "patience": self.config.patience, "device": device.type, "shape": self.shape[:12],
                       "configs_per_trial": options.configs_per_trial, "estimate_bytes": self.estimate_bytes,
                       "expected_epochs": expected_epochs(options.scheduler, trials, cell.max_epochs(),
                                                          options.space.grace_period,
                                                          options.space.reduction_factor, options.report_every)}

    def estimate(self, measured: tuple[Any, bool] | str) -> CellEstimate:
        """The estimate from ``(cost, cached)``, or the reason it was not measured."""
        if isinstance(measured, str):
            return CellEstimate(**self.common, seconds_per_epoch=None, setup_s=None, peak_bytes=None,
                                measured=False, reason=measured)
        cost, cached = measured
        peak = cost.trial_bytes if self.device.type == "cuda" else cost.host_peak_bytes
        return CellEstimate(**self.common, seconds_per_epoch=cost.seconds_per_epoch, setup_s=cost.setup_seconds,
                            peak_bytes=peak, cached=cached, sources=(self.shape,),
                            scaled=cost.measured_runs is not None and cost.measured_runs < cost.runs)

    def fitted(self, low: _Cell, at_low: CellEstimate, high: _Cell, at_high: CellEstimate) -> CellEstimate:
        """The estimate at this depth on the line through the same shape's two measured depths."""
        share = (self.config.depth - low.config.depth) / (high.config.depth - low.config.depth)

        def line(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + share * (b - a)

        return CellEstimate(**self.common, seconds_per_epoch=line(at_low.seconds_per_epoch, at_high.seconds_per_epoch),
                            setup_s=line(at_low.setup_s, at_high.setup_s),
                            peak_bytes=line(at_low.peak_bytes, at_high.peak_bytes),
                            cached=at_low.cached and at_high.cached, fitted=True,
                            scaled=at_low.scaled or at_high.scaled, sources=at_low.sources + at_high.sources)


def _depth_fits(cells: list[_Cell]) -> dict[int, tuple[int, int]]:
    """For each cell fitted from two others (by index): the shallowest and the deepest cell of
    its depth-free shape, where that shape comes at three depths or more."""
    groups: dict[str, dict[int, int]] = {}
    for index, cell in enumerate(cells):
        if cell.group is not None:
            groups.setdefault(cell.group, {}).setdefault(cell.config.depth, index)
    fits = {}
    for depths in groups.values():
        if len(depths) >= 3:
            low, high = depths[min(depths)], depths[max(depths)]
            for index in depths.values():
                if index not in (low, high):
                    fits[index] = (low, high)
    return fits


class _Meter:
    """Measures shapes, each once (then cached): in this process, or in ``workers`` processes
    side by side, each dataset's shapes dealt out among them (a dataset loads, and warms up,
    once per process)."""

    def __init__(self, method: _Method, remeasure: bool, note: Callable[[str], None] | None, workers: int) -> None:
        self.method, self.remeasure, self.note, self.workers = method, remeasure, note, workers
        self.warm: dict[tuple[str, str | None], float] = {}

    def costs(self, cells: list[_Cell], probe: _StartProbe) -> dict[str, tuple[Any, bool] | str]:
        """``(cost, cached)`` of each cell's shape, or why it was not measured, by shape."""
        found: dict[str, tuple[Any, bool] | str] = {}
        pending: dict[str, _Cell] = {}
        available = available_memory()
        for cell in cells:
            if available is not None and cell.estimate_bytes > available:  # training it here would run out of memory
                found[cell.shape] = (f"not measured: one repeat needs about {cell.estimate_bytes / 2**30:.1f} GiB "
                                     f"(estimated), more than the {available / 2**30:.1f} GiB available here")
            elif (cost := None if self.remeasure else _cached_cost(cell.shape)) is not None:
                found[cell.shape] = (cost, True)
            else:
                pending.setdefault(cell.shape, cell)
        if not pending:
            return found
        workers = max(1, min(self.workers, len(pending)))
        chunks = _chunks(list(pending.values()), workers)
        for label, chunk in chunks:
            if self.note is not None:
                self.note(f"measuring {len(chunk)} shape(s) of {label} ({self.method.epochs} epochs each"
                          + (f", {workers} processes side by side)" if workers > 1 else ")"))
        jobs = [[(cell.shape, cell.config.to_dict()) for cell in chunk] for _, chunk in chunks]
        results = self._in_processes(jobs, workers, probe) if workers > 1 else self._here(jobs, probe)
        from orthotune.training import CellCost

        for shape, result in results.items():
            if isinstance(result, str):
                found[shape] = result
            else:
                cost = CellCost.from_dict(result)
                _save_cost(shape, cost)
                found[shape] = (cost, False)
        return found

    def _here(self, jobs: list[list[tuple[str, dict[str, Any]]]], probe: _StartProbe) -> dict[str, Any]:
        probe.wait()
        results = {}
        for job in jobs:
            results.update(_measure_shapes(job, self.method, self.warm))
        return results

    def _in_processes(self, jobs: list[list[tuple[str, dict[str, Any]]]], workers: int,
                      probe: _StartProbe) -> dict[str, Any]:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        results: dict[str, Any] = {}
        probe.wait()  # its interpreter alone: processes importing beside it would lengthen the start it measures
        context = multiprocessing.get_context("spawn")  # a fork would copy this process's torch threads
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                 initargs=(self.method.threads,)) as pool:
            futures = {pool.submit(_measure_shapes, job, self.method): job for job in jobs}
            for future, job in futures.items():
                try:
                    results.update(future.result())
                except BrokenProcessPool as error:  # a process died (killed for memory): its shapes stay unmeasured
                    results.update({shape: f"not measured: the measuring process died ({error})"
                                    for shape, _ in job if shape not in results})
        return results


def _chunks(cells: list[_Cell], workers: int) -> list[tuple[str, list[_Cell]]]:
    """Each dataset's cells dealt round-robin into ``workers`` chunks, the largest datasets
    first (a process starts on the longest work while the others fill in around it)."""
    by_data: dict[tuple[str, str | None], list[_Cell]] = {}
    for cell in cells:
        by_data.setdefault((cell.config.dataset, cell.config.setting), []).append(cell)
    order = sorted(by_data, key=lambda data: -_data_size(data[0]))
    chunks = []
    for data in order:
        group = by_data[data]
        for start in range(min(workers, len(group))):
            chunks.append((data[0], group[start::workers]))
    return chunks


def _data_size(dataset: str) -> int:
    info = DATASETS.get(dataset)
    return info.nodes * max(1, info.features)


def _start_worker(threads: int) -> None:
    """A measuring process set up as a trial's worker: its threads, the allocator's policy, torch loaded."""
    import torch

    from orthotune.training import retain_freed_memory

    torch.set_num_threads(threads)
    retain_freed_memory()


#: Each dataset a measuring process has warmed up, with one run's seconds per epoch there.
_WARM: dict[tuple[str, str | None], float] = {}


def _measure_shapes(job: list[tuple[str, dict[str, Any]]], method: _Method,
                    warm: dict[tuple[str, str | None], float] | None = None) -> dict[str, dict[str, Any] | str]:
    """Each ``(shape, config)`` of ``job`` measured (its cost as a mapping), or why it was not;
    one warm-up per dataset not in ``warm`` (updated; default: this process's)."""
    import torch

    from orthotune.training import retain_freed_memory

    warm = _WARM if warm is None else warm
    threads = torch.get_num_threads()
    torch.set_num_threads(method.threads)
    retain_freed_memory()  # as a trial's worker does
    results: dict[str, dict[str, Any] | str] = {}
    try:
        for shape, values in job:
            config = TrainConfig.from_dict(values)
            data = (config.dataset, config.setting)
            try:
                if data not in warm:
                    warm[data] = _warm_up(config, method)
                one_run = not method.full_packs and DATASETS.get(config.dataset).nodes >= SCALE_FROM_NODES
                results[shape] = _measure(config, replace(method, epochs=_timed_epochs(warm[data], method)),
                                          one_run).to_dict()
            except Exception as error:  # noqa: BLE001 - the cell's trials would raise it too: they fail and are stored
                first = (str(error).strip().splitlines() or [""])[0]
                results[shape] = f"not measured: training it raised {type(error).__name__}: {first}"
    finally:
        torch.set_num_threads(threads)
    return results


def _one_run(config: TrainConfig) -> TrainConfig:
    """``config`` with its first repeat only."""
    if len(config.runs()) == 1:
        return config
    return TrainConfig.from_dict({**config.to_dict(), "splits": config.splits[:1], "seeds": config.seeds[:1]})


def _warm_up(config: TrainConfig, method: _Method) -> float:
    """One run of ``config`` trained a few epochs (the dataset loads, the allocator and the
    kernels settle): its seconds per epoch."""
    from orthotune.training import TrainOptions, measure_cell_cost

    options = TrainOptions(report_every=method.report_every, grad_norms_every=method.report_every)
    return measure_cell_cost(_one_run(config), method.device, method.data_root, 1, 1, options, method.download,
                             warm_up=True).seconds_per_epoch


def _timed_epochs(epoch_s: float, method: _Method) -> int:
    """Epochs timed per shape of a dataset whose one run takes ``epoch_s`` per epoch: the
    method's, fewer where they would take more than ``ENOUGH_TIMED_S`` (at least one)."""
    return max(1, min(method.epochs, int(ENOUGH_TIMED_S / max(epoch_s, 1e-9))))


def _measure(config: TrainConfig, method: _Method, one_run: bool = False) -> Any:
    """One pack of ``config`` trained as a trial trains it (its threads, its report cadence),
    or (``one_run``) one run of it, its figures scaled by the pack's runs. Graph
    classification trains its repeats one after another: one is measured and scaled."""
    from orthotune.training import CellCost, TrainOptions, measure_cell_cost

    options = TrainOptions(report_every=method.report_every, grad_norms_every=method.report_every)
    repeats, one = len(config.runs()), _one_run(config)
    if DATASETS.get(config.dataset).task == "graph":  # a pack of configs, its repeats in turn
        cost = measure_cell_cost(one, method.device, method.data_root, method.pack, method.epochs, options,
                                 method.download, warm_up=False)
        return _scaled(cost, repeats, cost.runs * repeats, 0.0)
    runs = repeats * method.pack
    if not one_run or runs == 1:
        return measure_cell_cost(config, method.device, method.data_root, method.pack, method.epochs, options,
                                 method.download, warm_up=False)
    cost = measure_cell_cost(one, method.device, method.data_root, 1, method.epochs, options, method.download,
                             warm_up=False)
    return CellCost.from_dict({**_scaled(cost, runs, runs, float(memory_estimate(one).total)).to_dict(),
                               "pack": method.pack, "measured_runs": 1})


def _scaled(cost: Any, factor: int, runs: int, bytes_per_run: float) -> Any:
    """``cost`` of ``cost.runs`` runs as ``runs`` (``factor`` times its work): seconds scaled,
    the process's peak memory raised by ``bytes_per_run`` (estimated) for each run added."""
    from orthotune.training import CellCost

    if factor == 1:
        return cost
    peak = None if cost.host_peak_bytes is None else cost.host_peak_bytes + (runs - cost.runs) * bytes_per_run
    return CellCost.from_dict({**cost.to_dict(), "runs": runs, "seconds_per_epoch": cost.seconds_per_epoch * factor,
                               "setup_seconds": (cost.setup_seconds or 0.0) * factor, "host_peak_bytes": peak,
                               "measured_runs": cost.measured_runs or cost.runs})


def _shape(config: TrainConfig, options: LaunchOptions, device: Any, method: _Method) -> str:
    """What a cell's cost depends on, as a digest: its pack key (dataset, backbone, depth,
    arm, width, switches), T, the repeats, the pack and threads, the device and the versions.
    Learning rates, decays, seeds and the like do not change an epoch's cost."""
    from orthotune.training import pack_key

    parts = [repr(pack_key(config)), config.T, config.input_T, config.batch_size, len(config.runs()),
             options.configs_per_trial, max(1, int(options.cpus_per_trial)), options.report_every, method.epochs,
             method.full_packs, _device_name(device), _torch_version(), __version__, CACHE_FORMAT]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _depth_free_shape(config: TrainConfig, options: LaunchOptions, device: Any, method: _Method) -> str | None:
    """The shape of ``config`` at the space's first depth: equal for cells that differ only in
    depth (None where that depth is not valid for it)."""
    try:
        at = TrainConfig.from_dict({**config.to_dict(), "depth": min(options.space.depths)})
    except ValueError:
        return None
    return _shape(at, options, device, method)


def _device_name(device: Any) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def _torch_version() -> str:
    """torch's version as installed (read without importing torch)."""
    try:
        return version("torch")
    except PackageNotFoundError:
        return "none"


def _cpus() -> float:
    return float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def plan_cache() -> Path:
    """orthotune's cache (``ORTHOTUNE_CACHE`` or ``~/.cache/orthotune``), the folder of
    ``orthotune.training.cache_dir()``, resolved here without importing torch (a test holds the
    two equal)."""
    if os.environ.get("ORTHOTUNE_CACHE"):
        return Path(os.environ["ORTHOTUNE_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "orthotune"


def cost_folder() -> Path:
    """Where measured shapes are kept: ``plan-costs`` in orthotune's cache (``ORTHOTUNE_CACHE``)."""
    return plan_cache() / "plan-costs"


def _cached_cost(shape: str) -> Any:
    from orthotune.training import CellCost

    path = cost_folder() / f"{shape}.json"
    if not path.is_file():
        return None
    try:
        return CellCost.from_dict(json.loads(path.read_text())["cost"])
    except (OSError, ValueError, KeyError, TypeError):  # a damaged entry is measured again
        return None


def _save_cost(shape: str, cost: Any) -> None:
    _write_json(cost_folder() / f"{shape}.json", {"cost": cost.to_dict(), "measured_at": time.time()})


def _shape_stamps(shapes: set[str]) -> dict[str, float | None]:
    """When each shape's cached measurement was made (None where it is missing or damaged)."""
    stamps = {}
    for shape in sorted(shapes):
        try:
            stamps[shape] = float(json.loads((cost_folder() / f"{shape}.json").read_text())["measured_at"])
        except (OSError, ValueError, KeyError, TypeError):
            stamps[shape] = None
    return stamps


def _plan_key(options: LaunchOptions, measure_epochs: int, every_depth: bool, full_packs: bool) -> str:
    """A whole plan's key: the space and every option but the store and the search's name, the
    measurement's epochs and fits, the versions, this host and the GPUs it may see."""
    fields = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name not in ("store", "name")}
    parts = [repr(fields), measure_epochs, every_depth, full_packs, _torch_version(), __version__, CACHE_FORMAT,
             sys.prefix, platform.node(), os.environ.get("CUDA_VISIBLE_DEVICES")]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _index_path(key: str) -> Path:
    return plan_cache() / "plan-index" / f"{key[:32]}.json"


def _kept_plan(key: str) -> tuple[dict[str, Any], list[CellEstimate], float] | None:
    """A whole plan kept under ``key``, if every shape it read is still the one cached."""
    try:
        kept = json.loads(_index_path(key).read_text())
        if _shape_stamps(set(kept["shapes"])) != kept["shapes"]:  # a shape measured again since
            return None
        cells = [CellEstimate(**{**c, "cached": True, "sources": tuple(c["sources"])}) for c in kept["cells"]]
        return kept["machine"], cells, float(kept["start_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_json(path: Path, values: dict[str, Any]) -> None:
    """Written whole or not at all (a plan killed mid-write leaves no half entry)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(values))
    partial.replace(path)


class _StartProbe:
    """A search's fixed start on this machine: the driver's imports, Ray's start and
    shutdown, and a worker's imports (taken as the driver's), measured once in a fresh
    interpreter started at once (it runs while the plan loads torch) and cached per
    environment (``plan-start`` in orthotune's cache); 0.0 where the probe fails."""

    def __init__(self, remeasure: bool) -> None:
        key = hashlib.sha256(json.dumps([sys.prefix, _torch_version(), __version__, CACHE_FORMAT]).encode())
        self.path = plan_cache() / "plan-start" / f"{key.hexdigest()[:16]}.json"
        self.start_s: float | None = None if remeasure else self._cached()
        self.process: subprocess.Popen[str] | None = None
        if self.start_s is None:
            try:
                self.process = subprocess.Popen([sys.executable, "-c", START_PROBE], stdout=subprocess.PIPE,
                                                stderr=subprocess.DEVNULL, text=True)
            except OSError:
                self.start_s = 0.0

    def _cached(self) -> float | None:
        try:
            return float(json.loads(self.path.read_text())["start_s"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def wait(self) -> None:
        """Until the probe has finished (measurements are not timed beside its Ray)."""
        if self.start_s is not None or self.process is None:
            return
        try:
            out, _ = self.process.communicate(timeout=300)
            parts = json.loads(out.strip().splitlines()[-1]) if self.process.returncode == 0 else None
        except (subprocess.SubprocessError, ValueError, IndexError):
            self.process.kill()
            parts = None
        if parts is None:
            self.start_s = 0.0
            return
        self.start_s = 2 * parts["imports_s"] + parts["ray_start_s"] + parts["ray_shutdown_s"]
        _write_json(self.path, {"start_s": self.start_s, **parts})

    def seconds(self) -> float:
        self.wait()
        return self.start_s or 0.0
