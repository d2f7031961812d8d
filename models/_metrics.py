"""The paper's steadiness metrics (Section 3), per pack."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

#: Above this many nodes, smoothness is estimated on a fixed-seed sample of nodes.
SMOOTHNESS_MAX_NODES = 4096


def signal_magnification(first: Tensor, last: Tensor) -> Tensor:
    """``M_sig = mean_i ||h_i(L)|| / ||h_i(0)||`` per pack, over nodes with ``h_i(0) != 0``.

    ``last`` is ``[N, packs, d]``; ``first`` is either ``[N, packs, d']`` states or ``[N]``,
    each node's norm of the input features ``X = H(0)`` (the paper's definition, shared by
    every pack).
    """
    base = first.norm(dim=-1) if first.dim() > 1 else first.unsqueeze(-1)
    live = base > 0
    # where() rather than a product: a node without input features would give inf * 0 = NaN
    ratio = torch.where(live, last.norm(dim=-1) / base.clamp_min(torch.finfo(base.dtype).tiny), 0.0)
    live = live.expand_as(ratio)
    return ratio.sum(0) / live.sum(0).clamp_min(1)


def feature_norms(x: Tensor) -> Tensor:
    """``||x_i||_2`` per node of dense ``[N, in]`` features (``M_sig``'s denominator)."""
    return x.float().norm(dim=-1)


def layer_gradient_norms(loss: Tensor, weights: Sequence[Tensor], packs: int = 1) -> Tensor:
    """``||dLoss/dW(l)||_F`` as ``[packs, layers]`` for the effective weights ``W(l)``.

    A layer the loss does not reach gets zeros (on its weight's device); a model without
    weights (no feature transformations) gets ``[packs, 0]``.
    """
    if not weights:
        return loss.new_zeros(packs, 0)
    grads = torch.autograd.grad(loss, list(weights), retain_graph=True, allow_unused=True)
    return torch.stack(
        [
            w.new_zeros(w.shape[0]) if g is None else g.flatten(1).norm(dim=1)
            for g, w in zip(grads, weights)
        ],
        dim=1,
    )


def smoothness(last: Tensor, max_nodes: int = SMOOTHNESS_MAX_NODES, seed: int = 0) -> Tensor:
    """``D = 1/|V|^2 sum_{i,j} ||h_i - h_j||`` per pack for ``[N, packs, d]`` states.

    One pack slot at a time, :data:`SMOOTHNESS_ROWS` rows of distances at a time: all slots
    at once would hold ``packs x rows x N`` distances (gigabytes for a GPU pack of hundreds),
    and each slot's sum is then computed exactly as a lone run's. It runs once per training,
    so the loop over slots costs nothing per epoch. Each pair's distance is computed once (a
    row block against the columns from its own start on) and counted twice.
    """
    nodes = last.shape[0]
    if nodes > max_nodes:
        generator = torch.Generator().manual_seed(seed)
        last = last[torch.randperm(nodes, generator=generator)[:max_nodes]]
    per_pack = last.transpose(0, 1)  # [packs, n, d]
    return torch.stack([_distance_sum(states.contiguous()) for states in per_pack]) / per_pack.shape[1] ** 2


#: Rows of one block of pairwise distances. Smaller blocks skip more of the lower triangle
#: and keep a block (128 x 2708 x 4 bytes for Cora) in cache: the smoothness of a CPU pack of
#: 24 Cora slots (hidden 64) took 318-412 ms against 602-768 with ``torch.cdist`` over blocks of 1024 rows
#: (2-core EPYC, one thread, best of 3; docs/benchmarks.md, twelfth look). On a GPU, where each
#: block costs a few kernel launches, 1024 rows (a pack of 256 Cora runs: 768 blocks, not 5632).
SMOOTHNESS_ROWS = 128
SMOOTHNESS_GPU_ROWS = 1024


def _distance_sum(states: Tensor) -> Tensor:
    """``sum_{i,j} ||h_i - h_j||`` over ``[n, d]`` states: ``||a||^2 + ||b||^2 - 2 a.b`` per
    pair (the product form ``torch.cdist`` takes above 25 rows), a pair with itself zero."""
    norms = states.square().sum(dim=1)
    total = states.new_zeros(())
    step = SMOOTHNESS_ROWS if states.device.type == "cpu" else SMOOTHNESS_GPU_ROWS
    for start in range(0, states.shape[0], step):
        rows = states[start:start + step]
        block = len(rows)
        squared = torch.addmm(norms[start:].unsqueeze(0), rows, states[start:].T, alpha=-2)
        distances = squared.add_(norms[start:start + block].unsqueeze(1)).clamp_min_(0).sqrt_()
        distances[:, :block].fill_diagonal_(0.0)  # rounding left |a|^2 + |a|^2 - 2 a.a above zero
        total += distances[:, :block].sum() + 2 * distances[:, block:].sum()
    return total


def issued_ops(step: Callable[[], object]) -> Counter:
    """The aten ops one call of ``step`` issues from Python and autograd, by name.

    ``step`` runs once to warm up (cached layouts are built on first use), then once under
    torch's profiler. Only outermost ops count: ops inside a kernel follow tensor sizes
    (``zero_`` calls ``fill_`` only above a grain size), not loops over packs.
    """
    from torch.profiler import ProfilerActivity, profile

    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    return Counter(e.name for e in prof.events() if e.name.startswith("aten::") and _outermost(e))


def _outermost(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return False
        parent = parent.cpu_parent
    return True
