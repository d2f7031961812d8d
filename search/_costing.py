"""A search's plan measured on this machine: each distinct cell shape trained for a few epochs
as one pack (``orthotune.training.measure_cell_cost``, what ``--gpus-per-trial auto``
measures too), cached by shape in orthotune's cache, then the arithmetic of ``_estimate``.

Loads torch and PyG (the measurement trains); the options and the space were validated
before (``_options``, the spaces layer), so bad input never waits for these imports.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import torch

from orthotune import __version__
from orthotune.core import DATASETS, TrainConfig, available_memory, memory_estimate
from orthotune.search._budget import cell_trials
from orthotune.search._estimate import CellEstimate, PlanEstimate, Resources, expected_epochs
from orthotune.search._gpu_share import cell_config
from orthotune.search._inputs import check_inputs
from orthotune.search._options import LaunchOptions
from orthotune.training import CellCost, TrainOptions, cache_dir, measure_cell_cost, pack_key, retain_freed_memory

#: Epochs timed per shape (after a warm-up run and a one-epoch run).
MEASURE_EPOCHS = 5
#: Bumped when what a cached measurement means changes: older entries are then measured again.
CACHE_FORMAT = 1
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
                note: Callable[[str], None] | None = None) -> PlanEstimate:
    """The plan of ``options``' search: every cell and arm with its budget and measured cost,
    on this machine's :class:`Resources` with ``resources`` replacing some (cpus, gpus, nodes,
    memory_bytes). ``remeasure``: ignore the cache; ``note``: told one line per shape measured
    now."""
    check_inputs(options, memory=False)  # the data must be there; what does not fit is listed, not refused
    here = this_machine()
    resources = replace(here, **(resources or {}))
    device = torch.device("cuda" if torch.cuda.is_available() and (options.gpus_per_trial or
                                                                   options.gpu_share == "auto") else "cpu")
    budgets = cell_trials(options)
    cells = []
    for cell in options.space.cells():
        cells.append(_cell_estimate(options, cell, budgets.get(cell.key, 0), device, measure_epochs, remeasure,
                                    note))
    machine = {"date": date.today().isoformat(), "cpus": here.cpus, "gpus": here.gpus,
               "memory_bytes": here.memory_bytes, "device": _device_name(device), "torch": torch.__version__}
    start = _start_seconds(remeasure)
    return PlanEstimate(options.space.name, options.scheduler, options.searcher, tuple(cells), resources,
                        options.cpus_per_trial, options.gpus_per_trial, options.concurrency, start, machine)


def _cell_estimate(options: LaunchOptions, cell: Any, trials: int, device: torch.device, epochs: int,
                   remeasure: bool, note: Callable[[str], None] | None) -> CellEstimate:
    config = TrainConfig.from_dict(cell_config(cell))
    key = cell.key
    arm = key.rsplit("/", 1)[-1]
    repeats = len(config.runs())
    estimate = float(memory_estimate(config).total)
    shape = _shape(config, options, device, epochs)
    common = {"cell": key, "arm": arm, "trials": trials, "repeats": repeats, "epochs": cell.max_epochs(),
              "patience": config.patience, "device": device.type, "shape": shape[:12],
              "configs_per_trial": options.configs_per_trial, "estimate_bytes": estimate,
              "expected_epochs": expected_epochs(options.scheduler, trials, cell.max_epochs(),
                                                 options.space.grace_period, options.space.reduction_factor,
                                                 options.report_every)}
    available = available_memory()
    if available is not None and estimate > available:  # training it here would run out of memory
        return CellEstimate(**common, seconds_per_epoch=None, setup_s=None, peak_bytes=None, measured=False,
                            reason=f"not measured: one repeat needs about {estimate / 2**30:.1f} GiB (estimated), "
                                   f"more than the {available / 2**30:.1f} GiB available here")
    cost, cached = _cached_cost(shape, remeasure), True
    if cost is None:
        cached = False
        if note is not None:
            note(f"measuring {key} ({epochs} epochs of a pack of {repeats} repeats x {options.configs_per_trial})")
        try:
            cost = _measure(config, options, device, epochs)
        except Exception as error:  # noqa: BLE001 - the cell's trials would raise it too: they fail and are stored
            first = (str(error).strip().splitlines() or [""])[0]
            return CellEstimate(**common, seconds_per_epoch=None, setup_s=None, peak_bytes=None, measured=False,
                                reason=f"not measured: training it raised {type(error).__name__}: {first}")
        _save_cost(shape, cost)
    peak = cost.trial_bytes if device.type == "cuda" else cost.host_peak_bytes
    return CellEstimate(**common, seconds_per_epoch=cost.seconds_per_epoch, setup_s=cost.setup_seconds,
                        peak_bytes=peak, cached=cached)


def _measure(config: TrainConfig, options: LaunchOptions, device: torch.device, epochs: int) -> CellCost:
    """One pack of ``config`` trained as a trial trains it (its threads, its report cadence).
    Graph classification trains its repeats one after another: one is measured and scaled."""
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
                                 train_options, options.download)
    finally:
        torch.set_num_threads(threads)
    if scale == 1:
        return cost
    return CellCost.from_dict({**cost.to_dict(), "runs": cost.runs * scale,
                               "seconds_per_epoch": cost.seconds_per_epoch * scale,
                               "setup_seconds": (cost.setup_seconds or 0.0) * scale})


def _shape(config: TrainConfig, options: LaunchOptions, device: torch.device, epochs: int) -> str:
    """What a cell's cost depends on, as a digest: its pack key (dataset, backbone, depth,
    arm, width, switches), T, the repeats, the pack and threads, the device and the versions.
    Learning rates, decays, seeds and the like do not change an epoch's cost."""
    parts = [repr(pack_key(config)), config.T, config.input_T, config.batch_size, len(config.runs()),
             options.configs_per_trial, max(1, int(options.cpus_per_trial)), options.report_every, epochs,
             _device_name(device), torch.__version__, __version__, CACHE_FORMAT]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def cost_folder() -> Path:
    """Where measured shapes are kept: ``plan-costs`` in orthotune's cache (``ORTHOTUNE_CACHE``)."""
    return cache_dir() / "plan-costs"


def _cached_cost(shape: str, remeasure: bool) -> CellCost | None:
    path = cost_folder() / f"{shape}.json"
    if remeasure or not path.is_file():
        return None
    try:
        return CellCost.from_dict(json.loads(path.read_text())["cost"])
    except (OSError, ValueError, KeyError, TypeError):  # a damaged entry is measured again
        return None


def _save_cost(shape: str, cost: CellCost) -> None:
    _write_json(cost_folder() / f"{shape}.json", {"cost": cost.to_dict(), "measured_at": time.time()})


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
    key = hashlib.sha256(json.dumps([sys.prefix, torch.__version__, __version__, CACHE_FORMAT]).encode())
    path = cache_dir() / "plan-start" / f"{key.hexdigest()[:16]}.json"
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
