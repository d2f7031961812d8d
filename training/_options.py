"""How runs are executed: the options that never change what a config means, and the
precision and determinism switches they set while a trainer runs (:func:`execution`).

Light (torch loads only when :func:`execution` runs): the GPU switches are declared here once
(:func:`switch`, :data:`EXECUTION_SWITCHES`), and the layers above read their names, defaults
and docs from here before torch loads (``orthotune launch``/``plan``/``train`` flags, a space's
``execution`` section, a search's record)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from orthotune.core import ConfigError

if TYPE_CHECKING:
    import torch

#: On a CPU, the most bytes one packed activation (``[slots, nodes, width]``) may take.
#: glibc serves blocks above 32 MiB (its largest mmap threshold) with fresh pages, so such
#: tensors pay page faults on every allocation even with ``retain_freed_memory``, and
#: they overflow the caches: measured on a 2-core EPYC (32 MiB L3), a pack of 64 Cora runs
#: (hidden 64, 44 MiB states) spent 40 ms per bias add and ReLU on ``[64, 2708, 64]``, and
#: its run-epochs cost 1.6x those of runs trained one at a time. Half the threshold keeps
#: the states reusable and near the cache. (Here, not in ``_memory``, so this module stays light.)
CPU_STATE_BYTES = 16 * 1024 * 1024


def switch(default: bool, doc: str) -> Any:
    """A GPU execution switch of :class:`TrainOptions`, declared once: its default (here and
    nowhere else) and a one-line doc, which the CLI's ``--NAME/--no-NAME`` flags and a space's
    ``execution`` section show."""
    return field(default=default, metadata={"switch": doc})


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
      run there: see :data:`CPU_STATE_BYTES`).
    - ``cpu_state_mib``: that bound on a CPU (``math.inf``: packs as large as ``max_pack``).
    - ``memory_fraction``: share of the free device memory packs may fill.
    - ``compact_below``: compact a pack once at most this share of its slots is active.
    - ``sync_every``: epochs between host checks when no callback asks for reports.
    - ``report_every``: epochs between calls of the epoch callback (each call carries every
      epoch since the last in ``EpochReport.history``, read from the device in one copy).
    - ``grad_norms_every``: record each run's per-layer gradient norms every this many
      epochs (0: never); they reach the callback in the history (the paper's Figure 1(b, c)).
    - ``locality_order``: a packed node task renumbers its graph's nodes in reverse
      Cuthill-McKee order before training (:func:`~._node_data.locality_order`): the sparse
      products then read neighbours' rows from cache (PubMed GCN-8, 5 runs: 1.1x-1.35x per
      epoch on a CPU). The same model, split and metrics; the sums run in another order, so
      the last bits differ. ``False``: the loaded order.
    - ``cuda_graph``: on a CUDA device, capture a node pack's epoch (training step and
      evaluation) as one CUDA graph after ``GRAPH_WARM_UP`` eager epochs and replay it,
      so the host launches one graph instead of every kernel; recaptured after a
      compaction. Where capture fails the pack stays eager (one warning). A node pack's
      dropout streams are registered with the graph (each replay advances them); other
      packs' dropout then draws from the process's CUDA generator (graphs replay the
      default one). No effect on the CPU or on packs of one run's model.

    The three switches' defaults come from an H200 (docs/benchmarks.md, "On a GPU, second
    lease"): TF32 was 1.29x faster than strict FP32 at the same mean accuracy; deterministic
    mode 1.69x slower; a captured pack's reruns were not always equal, so graphs are opt-in.
    """

    tf32: bool = switch(True, "TF32 matrix products on GPUs that have them (Ampere and later): several times "
                              "FP32's matmul throughput, about 10 mantissa bits inside products; off: strict FP32")
    deterministic: bool = switch(False, "deterministic algorithms (torch.use_deterministic_algorithms) for exact "
                                        "reruns; slower scatter and sparse kernels on GPUs")
    max_pack: int | None = None
    memory_fraction: float = 0.8
    cpu_state_mib: float = CPU_STATE_BYTES / 2**20
    compact_below: float = 0.5
    sync_every: int = 25
    report_every: int = 1
    grad_norms_every: int = 0
    locality_order: bool = True
    cuda_graph: bool = switch(False, "capture a node pack's epoch as one CUDA graph and replay it (the host "
                                     "launches one graph instead of every kernel); no effect on the CPU")

    def __post_init__(self) -> None:
        for name in EXECUTION_SWITCHES:
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be true or false")
        if not isinstance(self.locality_order, bool):
            raise ConfigError(f"locality_order={self.locality_order!r} must be true or false")
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


#: The GPU execution switches of :class:`TrainOptions` by name (in declaration order): each
#: field's default and its doc (``metadata["switch"]``).
EXECUTION_SWITCHES: dict[str, Field] = {f.name: f for f in fields(TrainOptions) if "switch" in f.metadata}

#: The options used when none are given.
DEFAULT_OPTIONS = TrainOptions()


@contextmanager
def execution(options: TrainOptions, device: torch.device) -> Iterator[None]:
    """Apply the precision and determinism switches while training; restore them after."""
    import torch

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
