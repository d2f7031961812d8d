"""How much memory one repeat of a config needs, and the refusal of a config that cannot fit:
a static model, calibrated once, so a search refuses a config before it trains."""

from __future__ import annotations

from dataclasses import dataclass

from orthotune.core._backbones import backbone_info
from orthotune.core._catalogue import DATASETS
from orthotune.core._config import TrainConfig
from orthotune.core._errors import OrthotuneError

#: Memory model of one repeat, calibrated on Cora with peak resident sizes (CPU, 2 epochs):
#: GCN depth 64 x hidden 256 and depth 16 x hidden 2048, each arm. Per layer and node the
#: backward pass keeps about 6 hidden-wide tensors (convolution output, activation, dropout
#: mask, propagated input, gradients); each weight has 4 copies (itself, its gradient, Adam's
#: two moments); Newton's iteration keeps about 4T + 4 hidden x hidden products per layer.
ACTIVATION_COPIES, WEIGHT_COPIES, BYTES = 6, 4, 4


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one repeat of a config needs at least (the trainer packs repeats only as memory
    allows, so one repeat is what must fit)."""

    config: TrainConfig
    nodes: int  # nodes one training step holds
    activations: int
    parameters: int
    layers: int  # hidden convolutions (``BackboneInfo.hidden_convolutions``)

    @property
    def total(self) -> int:
        return self.activations + self.parameters

    def describe(self) -> str:
        c = self.config
        copies = f"({WEIGHT_COPIES} + {4 * c.T + 4} Newton products)" if c.ortho else str(WEIGHT_COPIES)
        return (f"depth={c.depth} hidden={c.hidden} on {c.dataset} needs about {_gib(self.total)} for one repeat "
                f"(activations {self.nodes} nodes x {c.hidden} x {self.layers + 2} layers x {ACTIVATION_COPIES} x "
                f"{BYTES} B = {_gib(self.activations)}; parameters {self.layers} x {c.hidden}^2 x {copies} x "
                f"{BYTES} B = {_gib(self.parameters)})")


def memory_estimate(config: TrainConfig) -> MemoryEstimate:
    """The estimate of :data:`ACTIVATION_COPIES` and friends for ``config`` on its dataset."""
    info = DATASETS.get(config.dataset)
    nodes = info.nodes * (config.batch_size or 1) if info.task == "graph" else info.nodes
    layers = backbone_info(config.backbone).hidden_convolutions(config.depth)
    activations = nodes * config.hidden * (layers + 2) * ACTIVATION_COPIES * BYTES + nodes * info.features * BYTES
    per_layer = WEIGHT_COPIES + (4 * config.T + 4 if config.ortho else 0)
    parameters = (layers * config.hidden**2 * per_layer + info.features * config.hidden * WEIGHT_COPIES) * BYTES
    return MemoryEstimate(config, nodes, activations, parameters, layers)


def available_memory() -> int | None:
    """Bytes this machine can give a new process now (psutil's ``available``), or None
    where psutil is missing (then nothing is refused)."""
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def check_memory(config: TrainConfig, available: int | None = None) -> None:
    """Refuse ``config`` when one repeat's estimate exceeds ``available`` bytes (default:
    this machine's available memory), in one line stating the estimate and the limit."""
    available = available_memory() if available is None else available
    estimate = memory_estimate(config)
    if available is not None and estimate.total > available:
        raise OrthotuneError(f"{estimate.describe()}, more than the {_gib(available)} this machine has available; "
                             f"lower depth or hidden")


def _gib(count: int) -> str:
    return f"{count / 2**30:.1f} GiB"
