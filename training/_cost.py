"""A cell's measured cost: seconds per epoch, device busy share and memory of one pack.

:func:`measure_cell_cost` trains a pack of copies of one config through
:func:`~._run.run_configs` (the entry point every trial uses) and measures what deciding a
trial's share of a GPU needs (``orthotune.search.gpu_share``). :func:`device_profile`
is the profiler measurement it shares with ``bench/gpu.py``.

Status: the CPU path is tested here; the CUDA path (``torch.profiler`` kernel time and host
launch calls, peak allocated memory, the process's device memory) ran on an H100 under torch
2.11 on 2026-11-27 (``bench/gpu.py``'s per-epoch figures; docs/benchmarks.md).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from orthotune.core import TrainConfig, check
from orthotune.training._options import TrainOptions
from orthotune.training._run import run_configs

#: Epochs between host checks while measuring (a trial's default report cadence).
SYNC_EVERY = 10


class DeviceProfile(NamedTuple):
    """What :func:`device_profile` measured of one call."""

    ops: int  # CUDA kernels on a GPU, aten operators on a CPU
    busy_s: float  # seconds the GPU spent in kernels (0.0 on a CPU)
    wall_s: float  # wall seconds of the call, the device synchronised at both ends
    launches: int = 0  # the host's launch calls on a GPU (a kernel's, a graph's, a copy's)


#: CUDA runtime and driver calls through which the host starts device work: what a CUDA graph
#: replaces by one ``cudaGraphLaunch``.
LAUNCH_CALLS = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                          "cudaGraphLaunch", "cudaMemcpyAsync", "cudaMemsetAsync"})


def synchronise(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    """(wall seconds, result) of ``fn``, the device's queue drained before and after."""
    synchronise(device)
    start = time.perf_counter()
    out = fn()
    synchronise(device)
    return time.perf_counter() - start, out


def device_profile(fn: Callable[[], Any], device: torch.device) -> DeviceProfile:
    """Kernels (or aten operators), GPU busy seconds and wall seconds of ``fn`` under
    ``torch.profiler``.

    Busy seconds are the summed durations of the CUDA events (kernels, copies, memsets) on
    one stream, so they never overlap; the wall time includes the profiler's own host
    overhead, so busy / wall under-states the busy share of an unprofiled run (compare
    busy seconds with an unprofiled wall time, as :func:`measure_cell_cost` does).
    ``launches`` counts the host's launch calls (:data:`LAUNCH_CALLS`): what a CUDA graph
    replaces by one. Ran on an H100 under torch 2.11; the attributes read exist in 2.13 too.
    """
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        wall, _ = timed(fn, device)
    events = prof.events()
    if cuda:
        kernels = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
        launches = sum(1 for e in events if e.name in LAUNCH_CALLS)
        return DeviceProfile(len(kernels), sum(_device_us(e) for e in kernels) / 1e6, wall, launches)
    return DeviceProfile(sum(1 for e in events if e.name.startswith("aten::")), 0.0, wall)


def _device_us(event: Any) -> float:
    """One device event's duration in microseconds: ``self_device_time_total`` (its name
    since torch 2.4; ``self_cuda_time_total`` is deprecated and never read, so no warning),
    else the event's own time range, which is the same number for a kernel."""
    value = getattr(event, "self_device_time_total", 0) or 0
    return float(value or event.time_range.elapsed_us())


@dataclass(frozen=True)
class CellCost:
    """One pack of a cell measured on one device.

    ``pack`` configs (``runs`` = configs x repeats) trained ``epochs`` epochs. On a CPU the
    device fields are None: ``busy_share`` (kernel time over wall time on a GPU),
    ``peak_bytes_per_run`` (the pack's peak allocated memory per run),
    ``process_bytes`` (the device memory the trial's process holds besides its pack: the
    CUDA context, the dataset, the allocator's cache; an upper bound if other processes
    use the device) and ``device_bytes`` (the device's total memory). On any device,
    ``setup_seconds`` is what one run of the pack pays besides its epochs (building the
    model, the final evaluation) and ``host_peak_bytes`` the measuring process's peak resident
    memory while the pack trained (what a trial's process holds; None where Linux's
    ``/proc/self/clear_refs`` cannot reset the peak).
    """

    device: str
    pack: int
    runs: int
    epochs: int
    seconds_per_epoch: float
    busy_share: float | None = None
    peak_bytes_per_run: float | None = None
    process_bytes: float | None = None
    device_bytes: int | None = None
    setup_seconds: float | None = None
    host_peak_bytes: float | None = None
    measured_runs: int | None = None  # runs actually trained where fewer, the figures scaled to ``runs``

    @property
    def trial_bytes(self) -> float | None:
        """Device memory one trial of this pack holds at its peak (None on a CPU)."""
        if self.peak_bytes_per_run is None:
            return None
        return self.peak_bytes_per_run * self.runs + (self.process_bytes or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> CellCost:
        return cls(**values)


def measure_cell_cost(config: TrainConfig, device: torch.device | str, data_root: str | None, pack: int,
                      epochs: int = 10, options: TrainOptions | None = None, download: bool = False,
                      warm_up: bool = True, profile: bool = True) -> CellCost:
    """Train ``pack`` copies of ``config`` (each with its repeats) as one pack on ``device``
    and measure its cost per epoch.

    Nothing stops early (patience = epochs). After a warm-up run of one epoch (``warm_up``;
    a caller measuring several configs of one dataset in one process warms up once), on a
    CPU one run of ``1 + epochs`` epochs is timed with a time stamp after each epoch: the
    stamps' span over its last ``epochs`` epochs over ``epochs`` is the cost of an epoch,
    and the run's wall time less ``1 + epochs`` such epochs is what every run pays once
    (the model's construction, the first epoch's extra, the final evaluation). On a GPU,
    where a stamp each epoch would drain the device's queue, runs of 1 and of ``1 + epochs``
    epochs are timed and their difference over ``epochs`` is the cost of an epoch. Where
    noise makes that cost negative, the longer run's mean over its epochs stands in (an
    upper bound). On a GPU the same two runs are profiled again for kernel time
    (busy share = kernel seconds per epoch over unprofiled wall seconds per epoch), and
    the longer timed run records the peak allocated memory; ``profile=False`` skips the
    profiled runs (``busy_share`` None: a caller that only needs time and memory, as
    ``orthotune plan`` does, spares two profiler sessions per cell). The CUDA path ran on
    an H100 under torch 2.11 inside ``orthotune plan``, which the lease's time limit cut off
    before it printed: its figures are not checked on a GPU yet. ``download``: the loader
    may fetch missing raw files into the data root (as ``run_configs``).
    """
    check(pack >= 1, f"pack={pack!r} must be an integer >= 1")
    check(epochs >= 1, f"epochs={epochs!r} must be an integer >= 1")
    device = torch.device(device)
    options = options or TrainOptions(sync_every=SYNC_EVERY)
    short, longer = _copies(config, pack, 1), _copies(config, pack, 1 + epochs)

    def train(configs: list[TrainConfig]) -> Any:
        return run_configs(configs, device, data_root, options=options, download=download)

    if warm_up:
        train(short)  # the dataset, the allocator, kernel selection
    cuda = device.type == "cuda"
    runs = pack * len(config.runs())
    if not cuda:
        return _cpu_cost(config, device, data_root, pack, epochs, options, download, runs)
    wall_1, _ = timed(lambda: train(short), device)
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    peak_reset = reset_peak_rss()
    wall_n, _ = timed(lambda: train(longer), device)
    host_peak = peak_rss() if peak_reset else None
    seconds = (wall_n - wall_1) / epochs
    if seconds <= 0:  # noise beat a few short epochs (a busy host): the whole run's mean bounds it
        seconds = wall_n / (1 + epochs)
    setup = max(0.0, wall_1 - seconds)
    peak = (torch.cuda.max_memory_allocated(device) - base) / runs
    share = None
    if profile:
        busy = (device_profile(lambda: train(longer), device).busy_s
                - device_profile(lambda: train(short), device).busy_s) / epochs
        share = min(1.0, max(0.0, busy / seconds)) if seconds > 0 else 1.0
    torch.cuda.empty_cache()  # what stays is the process's own: context, dataset, cache
    free, total = torch.cuda.mem_get_info(device)
    return CellCost(torch.cuda.get_device_name(device), pack, runs, epochs, seconds, share, peak,
                    float(total - free), int(total), setup, host_peak)


def _cpu_cost(config: TrainConfig, device: torch.device, data_root: str | None, pack: int, epochs: int,
              options: TrainOptions, download: bool, runs: int) -> CellCost:
    """One run of ``1 + epochs`` epochs with a time stamp after each (a report every epoch:
    a host look that a CPU pays in microseconds), its peak resident memory recorded."""
    stamps: list[float] = []
    every_epoch = dataclasses.replace(options, report_every=1)
    peak_reset = reset_peak_rss()
    start = time.perf_counter()
    run_configs(_copies(config, pack, 1 + epochs), device, data_root, lambda _: stamps.append(time.perf_counter()),
                every_epoch, download)
    wall = time.perf_counter() - start
    host_peak = peak_rss() if peak_reset else None
    seconds = (stamps[-1] - stamps[0]) / epochs if len(stamps) == 1 + epochs else 0.0
    if seconds <= 0:  # the stamps did not come (a trainer without reports): the run's mean bounds it
        seconds = wall / (1 + epochs)
    setup = max(0.0, wall - (1 + epochs) * seconds)
    return CellCost(str(device), pack, runs, epochs, seconds, setup_seconds=setup, host_peak_bytes=host_peak)


def reset_peak_rss() -> bool:
    """Reset this process's peak resident size (Linux: ``5`` to ``/proc/self/clear_refs``);
    False where that cannot be done."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def peak_rss() -> float | None:
    """This process's peak resident size in bytes since the last reset (``VmHWM``)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _copies(config: TrainConfig, count: int, epochs: int) -> list[TrainConfig]:
    """``count`` copies of ``config`` that train exactly ``epochs`` epochs."""
    once = TrainConfig.from_dict({**config.to_dict(), "epochs": epochs, "patience": epochs})
    return [once] * count
