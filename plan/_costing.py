"""A search's plan measured on this machine: each distinct cell shape trained for a few epochs
as one pack (``orthotune.training.measure_cell_cost``, what ``--gpus-per-trial auto``
measures too), cached by shape in orthotune's cache, then the arithmetic of ``_estimate``.

What is measured, and what is fitted:

- the cells of one dataset are measured one after another in a measuring stream: the
  dataset loads once there, and one warm-up (one run, two epochs: its epoch's seconds decide
  how many are timed, below) per dataset stands for all its shapes;
- each shape is one timed run of ``1 + measure_epochs`` epochs (``measure_cell_cost``; fewer
  where they would take long, ``ENOUGH_TIMED_S``) of its whole pack; on a
  graph of ``SCALE_FROM_NODES`` nodes or more (PubMed, ogbn-arxiv), of one run, its seconds
  per epoch and setup scaled by the pack's runs and its memory raised by the estimate of the
  runs added (there an epoch is its runs' work side by side; the scaling's error against whole
  packs is in ``docs/plan.md``; ``full_packs`` trains every pack whole);
- the shapes are measured in as many streams as the search runs trials at once on one node
  here (each with a trial's threads): this process and measuring processes beside it, each
  taking the next chunk of shapes when done with one, so an epoch is timed beside as many
  others as the search's own epochs will be; a dataset loads once per stream;
- the search's start (``_start_probe``) is measured, on a CPU with two streams or more, by
  the first measuring process before anything else (a fresh interpreter: its imports are what
  is timed), while this process imports torch, builds the cells and measures shapes; with one
  stream, in an interpreter of its own before the shapes (nothing beside it);
- cells that differ only in depth (one dataset, backbone, arm, width, ``T``, repeats and
  pack), where the space has three depths or more for them, are measured at the smallest
  and the largest depth, and the depths between are fitted linearly (seconds per epoch,
  setup, peak memory): a full-batch epoch is an input layer, ``depth - 2`` hidden layers
  alike and an output layer, so its cost is linear in depth (in the hidden convolutions
  where they grow otherwise: IncepGCN's branches; the fit's error, checked
  against measured depths, is in ``docs/plan.md``); ``every_depth`` measures each depth;
- a plan whose every cell was measured is kept whole too (``plan-index`` in the cache, keyed
  by the space, the options and the versions, and valid while the shapes it read are the
  ones cached): a second plan of the same search reads it and the measured start, without
  torch or the cells' configs (the start comes from its own cache, so one measured again
  reaches every kept plan);
- the service's own overhead per Ray trial and per report (``_overhead``) is added to every
  trial: read from a file given, or kept for this environment, or (``measure_service``)
  measured here after the shapes; where none is, the plan says so.

Loads torch and PyG only to measure (or where a GPU may be used); the options and the space
were validated before (``_options``, the spaces layer), so bad input never waits for them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import date
from typing import Any

from orthotune import __version__
from orthotune.core import TrainConfig, backbone_info, memory_estimate
from orthotune.plan._asha import expected_epochs
from orthotune.plan._cache import (
    CACHE_FORMAT,
    StartProbe,
    index_path,
    kept_plan,
    shape_stamps,
    torch_version,
    trainer_digest,
    write_json,
)
from orthotune.plan._estimate import CellEstimate, PlanEstimate, Resources
from orthotune.plan._machine import (
    cpus,
    device_name,
    measuring_device,
    peak_bytes,
    streams,
    this_machine,
    total_memory,
    wants_gpu,
)
from orthotune.plan._measuring import MEASURE_EPOCHS, Method
from orthotune.plan._meter import Meter
from orthotune.plan._overhead import service_overhead
from orthotune.search import SCHEDULERS, LaunchOptions, cell_trials
from orthotune.spaces import default_config


def plan_search(options: LaunchOptions, resources: Mapping[str, Any] | None = None,
                measure_epochs: int = MEASURE_EPOCHS, remeasure: bool = False,
                note: Callable[[str], None] | None = None, every_depth: bool = False,
                full_packs: bool = False, service_file: str | None = None,
                measure_service: bool = False) -> PlanEstimate:
    """The plan of ``options``' search: every cell and arm with its budget and measured cost,
    on this machine's :class:`Resources` with ``resources`` replacing some (cpus, gpus, nodes,
    memory_bytes). ``remeasure``: ignore the cache; ``note``: told one line per shape measured
    now; ``every_depth``: measure each depth rather than fit the ones between two measured;
    ``full_packs``: train every pack whole rather than scale a costly one from one run;
    ``service_file``: the service's overhead from this file (``bench/service_overhead.py``'s
    JSON), else the one kept for this environment, else (``measure_service``) measured here."""
    key = _plan_key(options, measure_epochs, every_depth, full_packs)
    kept = None if remeasure else kept_plan(key)
    if kept is not None:
        machine, cells = kept
        start = StartProbe(remeasure=False).seconds()  # its own cache; measured now (torch not loaded here) if absent
        here = Resources(**{**machine["resources"], "cpus": cpus(), "memory_bytes": total_memory()})
    else:
        machine, cells, start = _measure_plan(options, Method(measure_epochs, full_packs), remeasure, note,
                                              every_depth)
        here = Resources(**machine["resources"])
        if all(c.measured for c in cells):
            write_json(index_path(key), {"machine": machine, "cells": [dataclasses.asdict(c) for c in cells],
                                           "shapes": shape_stamps({s for c in cells for s in c.sources})})
    planned = PlanEstimate(options.space.name, options.scheduler, options.searcher, tuple(cells),
                           replace(here, **(resources or {})), options.cpus_per_trial, options.gpus_per_trial,
                           options.concurrency, start, {k: v for k, v in machine.items() if k != "resources"})
    planned = _alone(planned, options)
    service = service_overhead(service_file, measure_service, remeasure, options.data_root, note)
    if isinstance(service, str):
        return planned.without_service(service)
    about = {"source": service.source, "measured": service.measured}
    return planned.with_service(service.per_trial_s, service.per_report_s, about)


def _measure_plan(options: LaunchOptions, method: Method, remeasure: bool,
                  note: Callable[[str], None] | None, every_depth: bool
                  ) -> tuple[dict[str, Any], list[CellEstimate], float]:
    """Every cell's estimate, measuring the shapes not cached (torch and PyG load here)."""
    method = replace(method, data_root=options.data_root, download=options.download, pack=options.configs_per_trial,
                     threads=max(1, int(options.cpus_per_trial)), report_every=options.report_every,
                     execution=tuple(options.execution().items()))
    # without a GPU option the plan measures on the CPU and its streams are known before torch
    # loads: the measuring processes start now, the first measuring the search's start first
    gpu = wants_gpu(options.gpus_per_trial, options.gpu_share)
    workers = 1 if gpu else streams(Resources(cpus=cpus()), options.cpus_per_trial, options.concurrency)
    probe = StartProbe(remeasure, here=workers == 1)  # else measured by the first measuring process
    meter = Meter(method, remeasure, note, workers)
    try:  # the measuring processes end whatever happens below
        if workers > 1:
            meter.open(probe)  # while torch loads here and the cells are built
        import torch

        from orthotune.search import check_inputs

        check_inputs(options, memory=False)  # the data must be there; what does not fit is listed, not refused
        here = this_machine()
        device = measuring_device(gpu)
        if gpu:  # a GPU option: one stream on a GPU, else as many as the search's trials at once here
            meter.method = method = replace(method, device=str(device))
            meter.workers = streams(here, options.cpus_per_trial, options.concurrency, device)
        budgets = cell_trials(options)
        cells = [_Cell(options, cell, budgets.get(cell.key, 0), device, method) for cell in options.space.cells()]
        fitted = {} if every_depth else _depth_fits(cells)
        anchors = [cells[i] for i in range(len(cells)) if i not in fitted]  # and the cells not fitted
        costs = meter.costs(anchors, probe)
        estimates = {i: cells[i].estimate(costs[cells[i].shape]) for i in range(len(cells)) if i not in fitted}
        again = [index for index, (low, high) in fitted.items()
                 if not (estimates[low].measured and estimates[high].measured)]
        costs.update(meter.costs([cells[i] for i in again], probe))  # an anchor did not train: measured on its own
        probe.wait()  # a measuring process may still be measuring it (every shape was cached)
    finally:
        meter.close()
    for index, (low, high) in fitted.items():
        if index in again:
            estimates[index] = cells[index].estimate(costs[cells[index].shape])
        else:
            estimates[index] = cells[index].fitted(cells[low], estimates[low], cells[high], estimates[high])
    machine = {"date": date.today().isoformat(), "cpus": here.cpus, "gpus": here.gpus,
               "memory_bytes": here.memory_bytes, "device": device_name(device), "torch": torch.__version__,
               "resources": dataclasses.asdict(here)}
    return machine, [estimates[i] for i in range(len(cells))], probe.seconds()


class _Cell:
    """One cell and arm as planned: its first config (the searcher's first proposal), budget
    and shape."""

    def __init__(self, options: LaunchOptions, cell: Any, trials: int, device: Any, method: Method) -> None:
        from orthotune.search import pack_memory_bytes  # it loads torch, as this cell's measuring does

        self.key, self.config = cell.key, TrainConfig.from_dict(default_config(cell))
        self.shape = _shape(self.config, options, device, method)
        self.group = _depth_free_shape(self.config, options, device, method)
        self.estimate_bytes = float(memory_estimate(self.config).total)
        runs = len(self.config.runs()) * options.configs_per_trial  # a trial group's configs share one pack
        trial_bytes = pack_memory_bytes(self.config, runs, method.train_options(), device.type == "cuda")
        self.device = device
        rungs = SCHEDULERS.get(options.scheduler).stops_at_rungs
        self.common = {"cell": cell.key, "arm": cell.key.rsplit("/", 1)[-1], "trials": trials,
                       "repeats": len(self.config.runs()), "epochs": cell.max_epochs(),
                       "patience": self.config.patience, "device": device.type, "shape": self.shape[:12],
                       "configs_per_trial": options.configs_per_trial, "estimate_bytes": self.estimate_bytes,
                       "trial_bytes": float(trial_bytes),
                       "expected_epochs": expected_epochs(rungs, trials, cell.max_epochs(), options.space.grace_period,
                                                          options.space.reduction_factor, options.report_every),
                       "expected_reports": expected_epochs(rungs, trials, cell.max_epochs(),
                                                           options.space.grace_period, options.space.reduction_factor,
                                                           options.report_every, count_reports=True)}

    def estimate(self, measured: tuple[Any, bool] | str) -> CellEstimate:
        """The estimate from ``(cost, cached)``, or the reason it was not measured."""
        if isinstance(measured, str):
            return CellEstimate(**self.common, seconds_per_epoch=None, setup_s=None, peak_bytes=None,
                                measured=False, reason=measured)
        cost, cached = measured
        peak = peak_bytes(cost, self.device)
        return CellEstimate(**self.common, seconds_per_epoch=cost.seconds_per_epoch, setup_s=cost.setup_seconds,
                            peak_bytes=peak, cached=cached, sources=(self.shape,), busy_share=cost.busy_share,
                            scaled=cost.measured_runs is not None and cost.measured_runs < cost.runs)

    def fitted(self, low: _Cell, at_low: CellEstimate, high: _Cell, at_high: CellEstimate) -> CellEstimate:
        """The estimate at this depth on the line through the same shape's two measured depths,
        in hidden convolutions (``BackboneInfo.hidden_convolutions``: the depth of a chain,
        IncepGCN's branches' sum), what an epoch's cost grows with."""
        layers = backbone_info(self.config.backbone).hidden_convolutions
        at, ends = layers(self.config.depth), (layers(low.config.depth), layers(high.config.depth))
        share = (at - ends[0]) / (ends[1] - ends[0])

        def line(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a + share * (b - a)

        return CellEstimate(**self.common, seconds_per_epoch=line(at_low.seconds_per_epoch, at_high.seconds_per_epoch),
                            setup_s=line(at_low.setup_s, at_high.setup_s),
                            peak_bytes=line(at_low.peak_bytes, at_high.peak_bytes),
                            cached=at_low.cached and at_high.cached, fitted=True,
                            scaled=at_low.scaled or at_high.scaled, sources=at_low.sources + at_high.sources,
                            busy_share=line(at_low.busy_share, at_high.busy_share))


#: The share of a node's memory Ray offers trials as its ``memory`` resource by default: the
#: rest is its object store's (``ray_constants.DEFAULT_OBJECT_STORE_MEMORY_PROPORTION``, 0.3;
#: Ray is not imported here, so a kept plan is read without it).
RAY_MEMORY_SHARE = 0.7


def _alone(planned: PlanEstimate, options: LaunchOptions) -> PlanEstimate:
    """The plan with the cells whose trials ask Ray for memory marked ``alone``, as the search
    decides it (``search.asks_memory``), this plan's node standing for Ray's: its ``memory``
    resource (:data:`RAY_MEMORY_SHARE` of the node's memory), and the trials its CPUs run at
    once. GPU trials ask for none."""
    from orthotune.search import asks_memory

    memory = (planned.resources.memory_bytes or 0) * RAY_MEMORY_SHARE
    if not memory or wants_gpu(options.gpus_per_trial, options.gpu_share):
        return planned
    at_once = replace(planned.resources, nodes=1).slots(options.cpus_per_trial, 0.0, options.concurrency)
    cells = tuple(replace(c, alone=c.trial_bytes is not None and asks_memory(c.trial_bytes, memory, at_once))
                  for c in planned.cells)
    return replace(planned, cells=cells)


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


def _shape(config: TrainConfig, options: LaunchOptions, device: Any, method: Method) -> str:
    """What a cell's cost depends on, as a digest: its pack key (dataset, backbone, depth,
    arm, width, switches), T, the repeats, the pack and threads, the GPU switches (TF32 and the
    rest), the device, the versions and the trainer's source. Learning rates, decays, seeds and
    the like do not change an epoch's cost."""
    from orthotune.training import pack_key

    parts = [repr(pack_key(config)), config.T, config.input_T, config.batch_size, len(config.runs()),
             options.configs_per_trial, max(1, int(options.cpus_per_trial)), options.report_every, method.epochs,
             method.full_packs, sorted(options.execution().items()), device_name(device), torch_version(),
             __version__, CACHE_FORMAT, trainer_digest()]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def _depth_free_shape(config: TrainConfig, options: LaunchOptions, device: Any, method: Method) -> str | None:
    """The shape of ``config`` at the space's first depth: equal for cells that differ only in
    depth (None where that depth is not valid for it)."""
    try:
        at = TrainConfig.from_dict({**config.to_dict(), "depth": min(options.space.depths)})
    except ValueError:
        return None
    return _shape(at, options, device, method)


#: Bumped when a kept plan's cells gain a field (2: ``expected_reports``, 3: ``busy_share``, 4:
#: ``trial_bytes``); the shapes stay kept.
KEPT_PLAN_FORMAT = 4


def _plan_key(options: LaunchOptions, measure_epochs: int, every_depth: bool, full_packs: bool) -> str:
    """A whole plan's key: the space and every option but the store and the search's name, the
    measurement's epochs and fits, the versions and the trainer's source, this host and the GPUs it
    may see."""
    fields = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name not in ("store", "name")}
    parts = [repr(fields), measure_epochs, every_depth, full_packs, torch_version(), __version__, CACHE_FORMAT,
             trainer_digest(), sys.prefix, platform.node(), os.environ.get("CUDA_VISIBLE_DEVICES"), KEPT_PLAN_FORMAT]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


