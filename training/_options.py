"""How runs are executed: the options that never change what a config means, and the
precision and determinism switches they set while a trainer runs (:func:`execution`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from orthotune.core import ConfigError
from orthotune.training._memory import CPU_STATE_BYTES


@dataclass(frozen=True)
class TrainOptions:
    """How runs are executed; none of it changes what a config means.

    - ``tf32``: TF32 matrix products on GPUs that have them (Ampere and later): about
      10 mantissa bits instead of 23 inside products, several times the FP32 matmul
      throughput. ``False`` keeps strict FP32. No effect on the CPU.
    - ``deterministic``: ``torch.use_deterministic_algorithms(True)`` for exact reruns
      (on CUDA it sets ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` unless already set); slower
      scatter/sparse kernels on GPUs, no cost on the CPU.
    - ``max_pack``: most runs per batched model (the user's cap); ``None``: as many as
      the GPU's free memory holds (measured on a first epoch), or on a CPU as many as
      keep one packed hidden state within ``cpu_state_mib`` (larger states cost more per
      run there: see :data:`~._memory.CPU_STATE_BYTES`).
    - ``cpu_state_mib``: that bound on a CPU (``math.inf``: packs as large as ``max_pack``).
    - ``memory_fraction``: share of the free device memory packs may fill.
    - ``compact_below``: compact a pack once at most this share of its slots is active.
    - ``sync_every``: epochs between host checks when no callback asks for reports.
    - ``report_every``: epochs between calls of the epoch callback (each call carries every
      epoch since the last in ``EpochReport.history``, read from the device in one copy).
    - ``grad_norms_every``: record each run's per-layer gradient norms every this many
      epochs (0: never); they reach the callback in the history (the paper's Figure 1(b, c)).
    - ``cuda_graph``: on a CUDA device, capture a node pack's epoch (training step and
      evaluation) as one CUDA graph after ``GRAPH_WARM_UP`` eager epochs and replay it,
      so the host launches one graph instead of every kernel; recaptured after a
      compaction. Where capture fails the pack stays eager (one warning). A node pack's
      dropout streams are registered with the graph (each replay advances them); other
      packs' dropout then draws from the process's CUDA generator (graphs replay the
      default one). No effect on the CPU or on packs of one run's model.
    """

    tf32: bool = True
    deterministic: bool = False
    max_pack: int | None = None
    memory_fraction: float = 0.8
    cpu_state_mib: float = CPU_STATE_BYTES / 2**20
    compact_below: float = 0.5
    sync_every: int = 25
    report_every: int = 1
    grad_norms_every: int = 0
    cuda_graph: bool = False

    def __post_init__(self) -> None:
        if self.max_pack is not None and self.max_pack < 1:
            raise ConfigError(f"max_pack={self.max_pack!r} must be an integer >= 1")
        if not self.cpu_state_mib > 0:
            raise ConfigError(f"cpu_state_mib={self.cpu_state_mib!r} must be > 0")
        if not 0.0 < self.memory_fraction <= 1.0:
            raise ConfigError(f"memory_fraction={self.memory_fraction!r} must lie in (0, 1]")
        if not 0.0 <= self.compact_below < 1.0:
            raise ConfigError(f"compact_below={self.compact_below!r} must lie in [0, 1)")
        if self.sync_every < 1:
            raise ConfigError(f"sync_every={self.sync_every!r} must be an integer >= 1")
        if self.report_every < 1:
            raise ConfigError(f"report_every={self.report_every!r} must be an integer >= 1")
        if self.grad_norms_every < 0:
            raise ConfigError(f"grad_norms_every={self.grad_norms_every!r} must be an integer >= 0")


#: The options used when none are given.
DEFAULT_OPTIONS = TrainOptions()


@contextmanager
def execution(options: TrainOptions, device: torch.device) -> Iterator[None]:
    """Apply the precision and determinism switches while training; restore them after."""
    precision = torch.get_float32_matmul_precision()
    deterministic = torch.are_deterministic_algorithms_enabled()
    workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if device.type == "cuda":  # on the CPU "high" could allow other reduced-precision paths
        torch.set_float32_matmul_precision("high" if options.tf32 else "highest")
        if options.deterministic and workspace is None:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # cuBLAS needs it to be deterministic
    if options.deterministic:  # off leaves the process's own choice alone
        torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.use_deterministic_algorithms(deterministic)
        if workspace is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
