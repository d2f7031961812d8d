"""The machine a plan is measured on: where a CPU plan and a GPU plan differ, and the home
of a new device's cost model.

Everything the plan asks of the hardware goes through here: how many CPUs this process may
use, the GPUs and their memory, the host's memory, the device the shapes are measured on,
its name (part of every measured shape's key) and how many measuring streams run side by
side on it (as many as the search's trials at once on one node: an epoch is timed beside as
many others as the search's own epochs will be). Reading the CPUs and memory imports
nothing heavy; the GPUs load torch.
"""

from __future__ import annotations

import os
from typing import Any

from orthotune.plan._estimate import Resources


def cpus() -> float:
    """The CPUs this process may use (its affinity where the OS tells it)."""
    return float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def total_memory() -> int | None:
    """The host's memory in bytes (None without psutil)."""
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().total)


def this_machine() -> Resources:
    """This machine as one node: its CPUs, GPUs and memory (loads torch for the GPUs)."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    gpu_memory = torch.cuda.get_device_properties(0).total_memory if gpus else None
    return Resources(cpus=cpus(), gpus=gpus, nodes=1, memory_bytes=total_memory(), gpu_memory_bytes=gpu_memory)


def wants_gpu(gpus_per_trial: float, gpu_share: Any) -> bool:
    """Whether a search's options ask for a GPU: without one the plan measures on the CPU, and
    its streams are known before torch loads."""
    return bool(gpus_per_trial or gpu_share == "auto")


def measuring_device(gpu: bool) -> Any:
    """The device the shapes are measured on: a GPU where one is asked for and present."""
    import torch

    return torch.device("cuda" if gpu and torch.cuda.is_available() else "cpu")


def device_name(device: Any) -> str:
    """A device's name as a measured shape's key holds it (``cpu``, or the GPU's model)."""
    if device.type != "cuda":
        return "cpu"
    import torch

    return torch.cuda.get_device_name(device)


def streams(here: Resources, cpus_per_trial: float, concurrency: int | None, device: Any = None) -> int:
    """Processes measuring side by side: the trials the search runs at once on one node here
    (one on a GPU, whose sharing ``--gpus-per-trial auto`` decides; ``device`` None: the CPU)."""
    if device is not None and device.type == "cuda":
        return 1
    return Resources(cpus=here.cpus, nodes=1).slots(cpus_per_trial, 0.0, concurrency)


def peak_bytes(cost: Any, device: Any) -> float | None:
    """What bounds a trial's memory on ``device``, of a measured cell cost: the GPU's memory
    the trial held on a GPU, the host process's resident peak on a CPU."""
    return cost.trial_bytes if device.type == "cuda" else cost.host_peak_bytes
