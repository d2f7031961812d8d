"""A search's plan measured on this machine: each distinct cell shape trained for a few epochs
as one pack (``orthotune.training.measure_cell_cost``, what ``--gpus-per-trial auto``
measures too), cached by shape in orthotune's cache, then the arithmetic of ``_estimate``.

What is measured, and what is fitted:

- the cells of one dataset are measured one after another in this process: the dataset
  loads once, and one warm-up run (one epoch) per dataset stands for all its shapes;
- each shape is one timed run of ``1 + measure_epochs`` epochs (``measure_cell_cost``);
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
#: Bumped when what a cached measurement means changes: older entries are then measured again.
CACHE_FORMAT = 2
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
                note: Callable[[str], None] | None = None, every_depth: bool = False) -> PlanEstimate:
    """The plan of ``options``' search: every cell and arm with its budget and measured cost,
    on this machine's :class:`Resources` with ``resources`` replacing some (cpus, gpus, nodes,
    memory_bytes). ``remeasure``: ignore the cache; ``note``: told one line per shape measured
    now; ``every_depth``: measure each depth rather than fit the ones between two measured."""
    key = _plan_key(options, measure_epochs, every_depth)
    kept = None if remeasure else _kept_plan(key)
    if kept is not None:
        machine, cells, start = kept
        here = Resources(**{**machine["resources"], "cpus": _cpus(), "memory_bytes": _total_memory()})
    else:
        machine, cells, start = _measure_plan(options, measure_epochs, remeasure, note, every_depth)
        here = Resources(**machine["resources"])
        if all(c.measured for c in cells):
            _write_json(_index_path(key), {"machine": machine, "start_s": start,
                                           "cells": [dataclasses.asdict(c) for c in cells],
                                           "shapes": _shape_stamps({s for c in cells for s in c.sources})})
    return PlanEstimate(options.space.name, options.scheduler, options.searcher, tuple(cells),
                        replace(here, **(resources or {})), options.cpus_per_trial, options.gpus_per_trial,
                        options.concurrency, start, {k: v for k, v in machine.items() if k != "resources"})


def _measure_plan(options: LaunchOptions, measure_epochs: int, remeasure: bool,
                  note: Callable[[str], None] | None, every_depth: bool
                  ) -> tuple[dict[str, Any], list[CellEstimate], float]:
    """Every cell's estimate, measuring the shapes not cached (torch and PyG load here)."""
    import torch

    from orthotune.search._inputs import check_inputs

    check_inputs(options, memory=False)  # the data must be there; what does not fit is listed, not refused
    here = this_machine()
    device = torch.device("cuda" if torch.cuda.is_available() and (options.gpus_per_trial or
                                                                   options.gpu_share == "auto") else "cpu")
    meter = _Meter(options, device, measure_epochs, remeasure, note)
    budgets = cell_trials(options)
    cells = [_Cell(options, cell, budgets.get(cell.key, 0), device, measure_epochs) for cell in options.space.cells()]
    fitted = {} if every_depth else _depth_fits(cells)
    estimates = {}
    for index, cell in enumerate(cells):  # the anchors (and cells not fitted) first, each measured or cached
        if index not in fitted:
            estimates[index] = cell.estimate(meter.cost(cell))
    for index, (low, high) in fitted.items():
        ends = (estimates[low], estimates[high])
        if all(e.measured for e in ends):
            estimates[index] = cells[index].fitted(cells[low], ends[0], cells[high], ends[1])
        else:  # an anchor did not train: this depth is measured on its own
            estimates[index] = cells[index].estimate(meter.cost(cells[index]))
    machine = {"date": date.today().isoformat(), "cpus": here.cpus, "gpus": here.gpus,
               "memory_bytes": here.memory_bytes, "device": _device_name(device), "torch": torch.__version__,
               "resources": dataclasses.asdict(here)}
    return machine, [estimates[i] for i in range(len(cells))], _start_seconds(remeasure)


class _Cell:
    """One cell and arm as planned: its first config (the searcher's first proposal), budget
    and shape."""

    def __init__(self, options: LaunchOptions, cell: Any, trials: int, device: Any, epochs: int) -> None:
        from orthotune.search._gpu_share import cell_config

        self.key, self.config = cell.key, TrainConfig.from_dict(cell_config(cell))
        self.shape = _shape(self.config, options, device, epochs)
        self.group = _depth_free_shape(self.config, options, device, epochs)
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
                            peak_bytes=peak, cached=cached, sources=(self.shape,))

    def fitted(self, low: _Cell, at_low: CellEstimate, high: _Cell, at_high: CellEstimate) -> CellEstimate:
        """The estimate at this depth on the line through the same shape's two measured depths."""
        share = (self.config.depth - low.config.depth) / (high.config.depth - low.config.depth)

        def line(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + share * (b - a)

        return CellEstimate(**self.common, seconds_per_epoch=line(at_low.seconds_per_epoch, at_high.seconds_per_epoch),
                            setup_s=line(at_low.setup_s, at_high.setup_s),
                            peak_bytes=line(at_low.peak_bytes, at_high.peak_bytes),
                            cached=at_low.cached and at_high.cached, fitted=True,
                            sources=at_low.sources + at_high.sources)


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
    """Measures shapes in this process: one warm-up per dataset, one timed run per shape,
    each shape measured once (cached)."""

    def __init__(self, options: LaunchOptions, device: Any, epochs: int, remeasure: bool,
                 note: Callable[[str], None] | None) -> None:
        self.options, self.device, self.epochs, self.remeasure, self.note = options, device, epochs, remeasure, note
        self.warm: set[tuple[str, str | None]] = set()

    def cost(self, cell: _Cell) -> tuple[Any, bool] | str:
        """``(cost, cached)`` of the cell's shape, or why it was not measured."""
        available = available_memory()
        if available is not None and cell.estimate_bytes > available:  # training it here would run out of memory
            return (f"not measured: one repeat needs about {cell.estimate_bytes / 2**30:.1f} GiB (estimated), "
                    f"more than the {available / 2**30:.1f} GiB available here")
        cost = None if self.remeasure else _cached_cost(cell.shape)
        if cost is not None:
            return cost, True
        if self.note is not None:
            self.note(f"measuring {cell.key} ({self.epochs} epochs of a pack of {cell.common['repeats']} repeats "
                      f"x {self.options.configs_per_trial})")
        data = (cell.config.dataset, cell.config.setting)
        try:
            cost = _measure(cell.config, self.options, self.device, self.epochs, warm_up=data not in self.warm)
        except Exception as error:  # noqa: BLE001 - the cell's trials would raise it too: they fail and are stored
            first = (str(error).strip().splitlines() or [""])[0]
            return f"not measured: training it raised {type(error).__name__}: {first}"
        self.warm.add(data)
        _save_cost(cell.shape, cost)
        return cost, False


def _measure(config: TrainConfig, options: LaunchOptions, device: Any, epochs: int, warm_up: bool = True) -> Any:
    """One pack of ``config`` trained as a trial trains it (its threads, its report cadence).
    Graph classification trains its repeats one after another: one is measured and scaled."""
    import torch

    from orthotune.training import CellCost, TrainOptions, measure_cell_cost, retain_freed_memory

    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, int(options.cpus_per_trial)))
    retain_freed_memory()  # as a trial's worker does
    scale = 1
    if DATASETS.get(config.dataset).task == "graph" and len(config.runs()) > 1:
        scale = len(config.runs())
        config = TrainConfig.from_dict({**config.to_dict(), "splits": config.splits[:1], "seeds": config.seeds[:1]})
    try:
        train_options = TrainOptions(report_every=options.report_every, grad_norms_every=options.report_every)
        cost = measure_cell_cost(config, device, options.data_root, options.configs_per_trial, epochs,
                                 train_options, options.download, warm_up=warm_up)
    finally:
        torch.set_num_threads(threads)
    if scale == 1:
        return cost
    return CellCost.from_dict({**cost.to_dict(), "runs": cost.runs * scale,
                               "seconds_per_epoch": cost.seconds_per_epoch * scale,
                               "setup_seconds": (cost.setup_seconds or 0.0) * scale})


def _shape(config: TrainConfig, options: LaunchOptions, device: Any, epochs: int) -> str:
    """What a cell's cost depends on, as a digest: its pack key (dataset, backbone, depth,
    arm, width, switches), T, the repeats, the pack and threads, the device and the versions.
    Learning rates, decays, seeds and the like do not change an epoch's cost."""
    from orthotune.training import pack_key

    parts = [repr(pack_key(config)), config.T, config.input_T, config.batch_size, len(config.runs()),
             options.configs_per_trial, max(1, int(options.cpus_per_trial)), options.report_every, epochs,
             _device_name(device), _torch_version(), __version__, CACHE_FORMAT]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _depth_free_shape(config: TrainConfig, options: LaunchOptions, device: Any, epochs: int) -> str | None:
    """The shape of ``config`` at the space's first depth: equal for cells that differ only in
    depth (None where that depth is not valid for it)."""
    try:
        at = TrainConfig.from_dict({**config.to_dict(), "depth": min(options.space.depths)})
    except ValueError:
        return None
    return _shape(at, options, device, epochs)


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


def _plan_key(options: LaunchOptions, measure_epochs: int, every_depth: bool) -> str:
    """A whole plan's key: the space and every option but the store and the search's name, the
    measurement's epochs and fits, the versions, this host and the GPUs it may see."""
    fields = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name not in ("store", "name")}
    parts = [repr(fields), measure_epochs, every_depth, _torch_version(), __version__, CACHE_FORMAT, sys.prefix,
             platform.node(), os.environ.get("CUDA_VISIBLE_DEVICES")]
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


def _start_seconds(remeasure: bool) -> float:
    """A search's fixed start on this machine: the driver's imports, Ray's start and
    shutdown, and a worker's imports (taken as the driver's), measured once in a fresh
    interpreter and cached per environment (``plan-start`` in orthotune's cache); 0.0 where
    the probe fails."""
    key = hashlib.sha256(json.dumps([sys.prefix, _torch_version(), __version__, CACHE_FORMAT]).encode())
    path = plan_cache() / "plan-start" / f"{key.hexdigest()[:16]}.json"
    if not remeasure and path.is_file():
        try:
            return float(json.loads(path.read_text())["start_s"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    try:
        out = subprocess.run([sys.executable, "-c", START_PROBE], capture_output=True, text=True, timeout=300,
                             check=True)
        parts = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return 0.0
    start = 2 * parts["imports_s"] + parts["ray_start_s"] + parts["ray_shutdown_s"]
    _write_json(path, {"start_s": start, **parts})
    return start
