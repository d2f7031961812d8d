"""What a search will cost, from each cell's measured cost: the arithmetic of ``orthotune plan``.

Light to import (no Ray, no torch): the measurements come from ``_costing`` (which trains a
pack of each distinct cell shape on this machine); this module turns them into expected
epochs per trial under the scheduler, seconds and core-hours per cell and arm, the wall time
on the resources given, and what does not fit a node.

The model, stated so a reader can check it:

- a trial costs ``setup_s + epochs x seconds_per_epoch`` of one pack (its repeats, or its
  trial group's configs, trained together), measured on this machine (``_costing``: one
  timed run per shape; a depth between two measured depths of the same shape on their line),
  plus the service's own cost (``_overhead``): ``per_trial_s`` once per Ray trial (a trial
  group pays it once) and ``per_report_s`` per report to Tune, a trial that trained ``e``
  epochs reporting ``ceil(e / report_every)`` times (the trainable's rule: the last epoch
  goes with the final report);
- under ASHA a trial trains to the first rung (``grace_period``), and at each rung continues
  with the probability Ray's rule gives it: a trial is stopped when its score is below the
  ``1 - 1/reduction_factor`` percentile of the scores recorded at that rung before it, so
  the first trial at a rung always continues and, with many trials, a share
  ``1/reduction_factor`` does (``_asha.asha_expected_epochs``, scores independent at each
  rung); a survivor of the last rung trains to the cap;
- patience can only shorten a trial: how early a trial's validation score stops improving is
  not known before it trains, so the expectation assumes no patience stop (an upper bound
  for cells whose trials stop on patience before their cap or their ASHA rung);
- trials start in the order the searcher hands them out (round robin over the cells), each
  on the first free slot (``cpus // cpus_per_trial`` per node, times ``nodes``): the wall
  time is that list schedule's end (on GPUs, at least their kernels' work: each trial's
  seconds times its measured busy share, over the GPUs; where trials ask Ray for a node's
  memory, ``alone``, at least their seconds one after another, over the nodes), plus the
  fixed start measured here (the driver's imports, Ray's start, a trial worker's start,
  Ray's shutdown: ``_start_probe``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Resources:
    """What the search runs on: ``nodes`` alike, each with ``cpus``, ``gpus`` and
    ``memory_bytes`` (GPU memory per GPU in ``gpu_memory_bytes`` where there is one)."""

    cpus: float
    gpus: int = 0
    nodes: int = 1
    memory_bytes: int | None = None
    gpu_memory_bytes: int | None = None

    def slots(self, cpus_per_trial: float, gpus_per_trial: float, concurrency: int | None) -> int:
        """Trials at once: what each node's CPUs (and GPUs) hold, times the nodes, capped by
        ``concurrency``."""
        per_node = int(self.cpus // cpus_per_trial)
        if gpus_per_trial:
            per_node = min(per_node, int(self.gpus // gpus_per_trial))
        fits = max(0, per_node) * self.nodes
        return max(1, min(fits, concurrency) if concurrency else fits)


@dataclass(frozen=True)
class CellEstimate:
    """One cell and arm of the plan: its budget, its measured cost and what it adds up to.

    ``seconds_per_epoch`` and ``setup_s`` are one pack's (its trial's) as measured on
    ``device``; ``peak_bytes`` what one trial's process held at its peak (resident memory on
    a CPU, device memory on a GPU); ``estimate_bytes``: the config's memory estimate (the
    repeats a pack holds), used where the cell was not measured; ``measured``: False when
    the cell was not trained (it does not fit: ``reason``); ``fitted``: its figures lie on
    the line through its shape's shallowest and deepest measured depths (``_costing``).
    """

    cell: str
    arm: str
    trials: int
    repeats: int
    epochs: int
    patience: int | None
    expected_epochs: float
    seconds_per_epoch: float | None
    setup_s: float | None
    peak_bytes: float | None
    device: str
    shape: str
    configs_per_trial: int = 1
    estimate_bytes: float | None = None
    measured: bool = True
    cached: bool = False
    reason: str | None = None
    fitted: bool = False  # on the line through the same shape's two measured depths
    scaled: bool = False  # one run of the pack measured, its figures scaled by the pack's runs
    sources: tuple[str, ...] = ()  # the shapes (cache entries) its figures come from
    expected_reports: float = 0.0  # reports to Tune per Ray trial (as ``expected_epochs``)
    service_s: float = 0.0  # the service's seconds per Ray trial (PlanEstimate.with_service)
    busy_share: float | None = None  # on a GPU: the share of a trial's wall its kernels keep the GPU busy
    trial_bytes: float | None = None  # one Ray trial's memory estimate, as the search weighs it (``_costing``)
    alone: bool = False  # its trials ask Ray for memory: no two run on a node at once (``search``)

    @property
    def trainer_s(self) -> float | None:
        """Expected seconds of one trial's (its pack's) training."""
        if self.seconds_per_epoch is None:
            return None
        return (self.setup_s or 0.0) + self.expected_epochs * self.seconds_per_epoch

    @property
    def trial_s(self) -> float | None:
        """Expected seconds of one Ray trial: its pack's training and the service's overhead."""
        return None if self.trainer_s is None else self.trainer_s + self.service_s

    @property
    def tune_trials(self) -> int:
        """Ray trials of this cell: its configs in groups of ``configs_per_trial``."""
        return math.ceil(self.trials / self.configs_per_trial)

    @property
    def seconds(self) -> float | None:
        """Expected seconds of all the cell's trials, one after another on one slot."""
        return None if self.trial_s is None else self.trial_s * self.tune_trials

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "trainer_s": self.trainer_s, "trial_s": self.trial_s, "seconds": self.seconds}


@dataclass(frozen=True)
class PlanEstimate:
    """A search's plan: the cells, the resources and the totals (:meth:`totals`)."""

    space: str
    scheduler: str
    searcher: str
    cells: tuple[CellEstimate, ...]
    resources: Resources
    cpus_per_trial: float
    gpus_per_trial: float
    concurrency: int | None
    start_s: float = 0.0  # the fixed start a search pays here (imports, Ray, a worker), measured
    measured_here: dict[str, Any] = field(default_factory=dict)  # machine: cpus, memory, gpu, date
    # the service's overhead included (per_trial_s, per_report_s, source, measured), or why not
    service: dict[str, Any] = field(default_factory=lambda: {"included": False, "note": "not asked for"})

    def with_service(self, per_trial_s: float, per_report_s: float, about: dict[str, Any]) -> PlanEstimate:
        """The plan with the service's overhead in every Ray trial: ``per_trial_s`` once (a
        trial group pays it once) and ``per_report_s`` per expected report."""
        cells = tuple(replace(c, service_s=per_trial_s + c.expected_reports * per_report_s) for c in self.cells)
        return replace(self, cells=cells, service={"included": True, **about, "per_trial_s": per_trial_s,
                                                   "per_report_s": per_report_s})

    def without_service(self, why: str) -> PlanEstimate:
        return replace(self, service={"included": False, "note": why})

    @property
    def slots(self) -> int:
        return self.resources.slots(self.cpus_per_trial, self.gpus_per_trial, self.concurrency)

    @property
    def on_gpu(self) -> bool:
        return any(c.device.startswith("cuda") for c in self.cells)

    def does_not_fit(self) -> list[str]:
        """One line per cell whose one trial needs more memory than a node has."""
        gpu = self.gpus_per_trial > 0 or self.on_gpu
        limit, where = (self.resources.gpu_memory_bytes, "a GPU") if gpu else (self.resources.memory_bytes, "a node")
        lines = []
        for cell in self.cells:
            need = cell.peak_bytes if cell.peak_bytes is not None else cell.estimate_bytes
            if limit and need is not None and need > limit:
                how = "measured peak" if cell.peak_bytes is not None else "estimated"
                lines.append(f"{cell.cell}: one trial needs {gib(need)} ({how}), more than the {gib(limit)} "
                             f"{where} has")
            elif cell.reason:
                lines.append(f"{cell.cell}: {cell.reason}")
        return lines

    def trial_times(self) -> list[float]:
        """Each Ray trial's expected seconds, in the order the searcher hands them out (round
        robin over the cells, each cell until its budget is spent)."""
        queues = [[c.trial_s] * c.tune_trials for c in self.cells if c.trial_s is not None]
        order = []
        for turn in range(max((len(q) for q in queues), default=0)):
            order += [q[turn] for q in queues if turn < len(q)]
        return order

    def wall_s(self) -> float | None:
        """The expected wall time: the trials list-scheduled on the slots (or the GPUs' work), plus the start."""
        if any(c.trial_s is None for c in self.cells):
            return None
        return self.start_s + max(list_schedule(self.trial_times(), self.slots), self.gpu_work_s() or 0.0,
                                  self.alone_s())

    def alone_s(self) -> float:
        """The trials that ask Ray for memory, one after another on each node (the others may
        run beside them): a bound on the wall."""
        return sum(c.seconds or 0.0 for c in self.cells if c.alone) / max(1, self.resources.nodes)

    def gpu_work_s(self) -> float | None:
        """The GPUs' own work, each trial's seconds times its busy share, over the GPUs: a bound on
        the wall however many share one (None where a busy share was not measured)."""
        gpus, cells = self.resources.gpus * self.resources.nodes, self.cells
        if not (self.on_gpu and gpus) or any(c.busy_share is None or c.trial_s is None for c in cells):
            return None
        return sum(c.trial_s * c.tune_trials * c.busy_share for c in cells) / gpus

    def totals(self) -> dict[str, Any]:
        """Trials, core-seconds (GPU-seconds where measured on a GPU) and the wall time."""
        known = [c for c in self.cells if c.seconds is not None]
        busy = sum(c.seconds for c in known)
        complete = len(known) == len(self.cells)
        gpu, service = self.on_gpu, sum(c.service_s * c.tune_trials for c in known)
        return {
            "trials": sum(c.trials for c in self.cells),
            "tune_trials": sum(c.tune_trials for c in self.cells),
            "service_s": service if self.service["included"] else None,
            "service_share": service / busy if self.service["included"] and busy else None,
            "cells": len(self.cells),
            "core_s": busy * self.cpus_per_trial if complete else None,
            "gpu_s": busy * max(self.gpus_per_trial, 1.0 if gpu else 0.0) if complete and gpu else None,
            "wall_s": self.wall_s(),
            "slots": self.slots,
            "gpu_work_s": self.gpu_work_s(),
            "alone_s": self.alone_s(),
            "start_s": self.start_s,
            "does_not_fit": self.does_not_fit(),
        }

    def total_line(self) -> str:
        """The one line ``launch`` prints before its first trial."""
        t = self.totals()
        where = resources_text(self.resources)
        wall = "unknown (a cell was not measured)" if t["wall_s"] is None else hours(t["wall_s"])
        core = "unknown" if t["core_s"] is None else f"{t['core_s'] / 3600:.2f} core-hours"
        gpu = f"{t['gpu_s'] / 3600:.2f} GPU-hours" if t["gpu_s"] is not None else "GPU-hours not measured here"
        misfit = f"; {len(t['does_not_fit'])} cell(s) do not fit" if t["does_not_fit"] else ""
        share = "" if t["service_share"] is None else f" ({100 * t['service_share']:.1f}%)"
        service = f"the service's overhead included{share}" if self.service["included"] else \
            "the service's overhead not included"
        return (f"plan: {t['trials']} trials over {t['cells']} cells and arms, {core}, {gpu}, {service}; about "
                f"{wall} on {where} ({t['slots']} trials at once){misfit}")

    def table(self) -> str:
        """The per-cell table, the totals and what does not fit, as ``orthotune plan`` prints."""
        header = ("cell", "trials", "repeats", "epochs", "patience", "s/epoch", "setup s", "exp. epochs",
                  "service s", "trial s", "peak MiB", "cell core-h", "from")
        rows = [header]
        for c in self.cells:
            rows.append((c.cell, str(c.trials), str(c.repeats), str(c.epochs), "-" if c.patience is None
                         else str(c.patience), _num(c.seconds_per_epoch, 4), _num(c.setup_s, 2),
                         f"{c.expected_epochs:.1f}", f"{c.service_s:.2f}", _num(c.trial_s, 1),
                         "-" if c.peak_bytes is None else f"{c.peak_bytes / 2**20:.0f}",
                         "-" if c.seconds is None else f"{c.seconds * self.cpus_per_trial / 3600:.3f}",
                         _source(c)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = ["  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths)))
                 for r in rows]
        t = self.totals()
        lines += ["", self.total_line()]
        lines.append(f"  start (imports, Ray, a worker; measured here): {t['start_s']:.1f} s; "
                     f"measured on {self.measured_here.get('device', '?')}: "
                     f"{sum(1 for c in self.cells if c.measured and not c.cached and not c.fitted)} shape(s) "
                     f"measured now, {sum(1 for c in self.cells if c.cached and not c.fitted)} cell(s) from the "
                     f"cache, {sum(1 for c in self.cells if c.fitted)} fitted linearly in depth, "
                     f"{sum(1 for c in self.cells if c.scaled)} scaled from one run of the pack (source '+x')")
        lines.append(f"  {self.service_line()}")
        for line in t["does_not_fit"]:
            lines.append(f"  does not fit: {line}")
        lines += [f"  runs alone: {line}" for line in self.runs_alone()]
        return "\n".join(lines)

    def runs_alone(self) -> list[str]:
        """One line per cell whose trials ask Ray for their memory."""
        return [f"{c.cell}: one trial needs about {gib(c.trial_bytes or 0.0)} (estimated), so it asks Ray for its "
                f"memory and no two run on a node at once" for c in self.cells if c.alone]

    def service_line(self) -> str:
        """The service's overhead: its figures, where they come from and its share, or why not."""
        if not self.service["included"]:
            return f"the service's overhead (Ray Tune per trial and per report) not included: {self.service['note']}"
        t, s = self.totals(), self.service
        when = s.get("measured", {}).get("date", "date unknown")
        source = {"measured here": "measured here now", "cache": "measured here before"}.get(
            s.get("source", "?"), f"from {s.get('source', '?')}, measured")
        share = "" if t["service_share"] is None else f": {t['service_s']:.1f} s, {100 * t['service_share']:.1f}% of " \
                                                      f"the trials' time"
        return (f"the service's overhead included: {s['per_trial_s']:.3f} s per Ray trial + {s['per_report_s']:.4f} s "
                f"per report ({source} {when}){share}")

    def capped(self, trials: int) -> PlanEstimate:
        """The same plan with every cell and arm stopped at ``trials`` (an adaptive budget
        whose every pair stops at its first look)."""
        return replace(self, cells=tuple(replace(c, trials=min(c.trials, trials)) for c in self.cells))

    def range_line(self, first_look: int, how: str) -> str:
        """An adaptive budget's range (``how``: its rule and looks, in words): from every pair
        stopping at its first look to none stopping (this plan's totals)."""
        low, high = self.capped(first_look).totals(), self.totals()
        core = ("" if low["core_s"] is None or high["core_s"] is None
                else f", {low['core_s'] / 3600:.2f} to {high['core_s'] / 3600:.2f} core-hours")
        wall = ("" if low["wall_s"] is None or high["wall_s"] is None
                else f", about {hours(low['wall_s'])} to {hours(high['wall_s'])}")
        return (f"adaptive budget ({how}): {low['trials']} to {high['trials']} trials{core}{wall}: from every pair "
                f"stopping at its first look to none stopping")

    def to_dict(self) -> dict[str, Any]:
        return {"space": self.space, "scheduler": self.scheduler, "searcher": self.searcher,
                "resources": asdict(self.resources), "cpus_per_trial": self.cpus_per_trial,
                "gpus_per_trial": self.gpus_per_trial, "concurrency": self.concurrency,
                "machine": self.measured_here, "cells": [c.to_dict() for c in self.cells],
                "service_overhead": self.service, "totals": self.totals()}


def list_schedule(durations: Sequence[float], slots: int) -> float:
    """When the last of ``durations`` ends, each started in order on the first free slot."""
    free = [0.0] * max(1, slots)
    for seconds in durations:
        heapq.heappush(free, heapq.heappop(free) + seconds)
    return max(free)


def gib(count: float) -> str:
    return f"{count / 2**30:.1f} GiB"


def hours(seconds: float) -> str:
    """``3.2 h`` from an hour on, else minutes or seconds."""
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min" if seconds >= 60 \
        else f"{seconds:.0f} s"


def resources_text(resources: Resources) -> str:
    node = f"{resources.cpus:g} CPU" + (f", {resources.gpus} GPU" if resources.gpus else "")
    if resources.memory_bytes:
        node += f", {gib(resources.memory_bytes)}"
    return f"{resources.nodes} node(s) of {node}" if resources.nodes != 1 else node


def _source(cell: CellEstimate) -> str:
    """Where a cell's figures come from: measured now, the cache, a fit in depth, or nothing."""
    if not cell.measured:
        return "-"
    source = "fit" if cell.fitted else "cache" if cell.cached else "measured"
    return f"{source}+x" if cell.scaled else source


def _num(value: float | None, places: int) -> str:
    return "-" if value is None else f"{value:.{places}f}"
