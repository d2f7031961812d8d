"""The node pack's optimiser: ``torch.optim.Adam`` with a learning rate and three L2 weight
decays per pack slot (the reasoning is in :mod:`._node`'s docstring)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from orthotune.core import check
from orthotune.models import OrthoGNN
from orthotune.training._loop import Run, decay_groups


class PackAdam:
    """``torch.optim.Adam`` with a learning rate and three L2 weight decays per slot.

    See the module docstring: per-slot L2 is added to each slot's gradient slice (as
    Adam's coupled ``weight_decay`` would), and each slot's step is rescaled by
    ``lr_p / lr_0``, since Adam's update is linear in the learning rate. Where every slot
    shares a group's decay (or rate), torch's Adam applies it itself.
    """

    def __init__(self, model: OrthoGNN, runs: Sequence[Run], capturable: bool = False) -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        for param in self.params:  # per-slot rates need every parameter split by slot
            check(param.dim() >= 1 and param.shape[0] == len(runs),
                  f"parameter of shape {tuple(param.shape)} is not split by pack slot")
        device = self.params[0].device
        lrs = [r.config.lr for r in runs]
        groups, self.decay = [], []
        # the model says which layers are input and output; each takes its own decay
        for params, decays in decay_groups(model, self.params, [r.config for r in runs]):
            if not params:
                continue
            uniform = len(set(decays)) == 1
            groups.append({"params": params, "weight_decay": decays[0] if uniform else 0.0})
            if not uniform:
                self.decay.append((params, torch.tensor(decays, device=device)))
        self.scale = None if len(set(lrs)) == 1 else torch.tensor(lrs, device=device) / lrs[0]
        # fused: one kernel per parameter for the whole step, on a GPU (its step counter stays
        # there too) and on a CPU, where torch's `foreach` form made a pass per operation: a
        # Cora pack of 24 GCN-2 slots stepped in 1.9 against 9.9 ms (one thread); the same
        # update, rounded otherwise in the last bits
        # capturable: a step CUDA graphs can capture (``TrainOptions.cuda_graph``)
        self.adam = torch.optim.Adam(groups, lr=lrs[0], fused=True, capturable=capturable and device.type == "cuda")

    def zero_grad(self) -> None:
        self.adam.zero_grad(set_to_none=True)

    @torch.no_grad()
    def step(self) -> None:
        for params, decay in self.decay:
            for param in params:
                if param.grad is not None:
                    param.grad.add_(param * _per_slot(decay, param))
        if self.scale is None:
            self.adam.step()
            return
        before = [p.clone() for p in self.params]
        self.adam.step()
        for param, old in zip(self.params, before):  # old + (lr_p / lr_0) * Adam's step
            param.copy_(old.lerp_(param, _per_slot(self.scale, param)))

    def take_state(self, other: PackAdam, keep: Sequence[int]) -> None:
        """Adam's moments of the ``keep`` slots of ``other`` (same parameter order)."""
        index = torch.tensor(list(keep), device=self.params[0].device)
        for mine, theirs in zip(self.params, other.params):
            state = other.adam.state.get(theirs)
            if state:
                self.adam.state[mine] = {
                    k: v.index_select(0, index) if v.dim() >= 1 and v.shape[0] == theirs.shape[0] else v.clone()
                    for k, v in state.items()
                }


def _per_slot(values: Tensor, like: Tensor) -> Tensor:
    """``[slots]`` values shaped to broadcast over a ``[slots, ...]`` tensor."""
    return values.view(-1, *([1] * (like.dim() - 1)))
