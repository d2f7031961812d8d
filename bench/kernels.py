"""Seconds per epoch of one packed model against the same runs one at a time (CPU).

One epoch is what the node trainer does per epoch: a training step (forward, backward,
Adam) and an evaluation pass, on full Cora with sparse input features and the cached
adjacency. ``--packs`` runs are trained as one packed model and then as that many
models of one run each (the latter's epoch time is the sum over the lone models); it
also counts the aten ops of one epoch at both sizes (outermost ops, the profiler's), which
the batched kernels keep equal. Single-threaded unless ``--threads`` says otherwise.
Cora comes from ``ORTHOTUNE_DATA_ROOT`` (e.g. ``../shared/data``).

    .venv/bin/python bench/kernels.py --packs 64 --depth 2
    .venv/bin/python bench/kernels.py --packs 64 --depth 8 --ortho
    .venv/bin/python bench/kernels.py --packs 64 --depth 2 --heap-only
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

_M_MMAP_MAX = -4  # mallopt parameter (malloc.h)


def load_cora():
    from orthotune.training import DataRoot, load_node_data

    return load_node_data("cora", "full", DataRoot.resolve(None))


def build(data, packs: int, args, first_seed: int = 0):
    from orthotune.core import OrthoSettings
    from orthotune.models import BACKBONES

    seeds = range(first_seed, first_seed + packs)
    ortho = [OrthoSettings(T=args.T, beta=0.4) for _ in seeds] if args.ortho else None
    return BACKBONES.get(args.backbone)(data.x.shape[1], args.hidden, data.num_classes, args.depth,
                                        dropout=0.5, ortho=ortho, seeds=seeds)


def epoch_step(model, data, features, adj) -> Callable[[], None]:
    """One trainer-like epoch of ``model``: train step and an evaluation pass."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    train = data.train_mask[:, :1].expand(-1, model.packs)
    targets = data.y.repeat_interleave(model.packs)

    def step() -> None:
        model.train()
        optimizer.zero_grad()
        out = model.run(features, *adj)
        ce = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), targets, reduction="none")
        loss = (ce.view(-1, model.packs) * train).sum(0) / train.sum(0) + out.penalty
        loss.sum().backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            model.run(features, *adj).logits.argmax(-1)

    return step


def seconds_per_epoch(cases: list[list[Callable[[], None]]], epochs: int) -> list[float]:
    """Per case, the fastest of ``epochs`` epochs (an epoch runs each of the case's steps
    once). Cases alternate epoch by epoch, so a busy machine slows them alike; the minimum
    is the figure least disturbed by other processes. One warm-up epoch each first."""
    times: list[list[float]] = [[] for _ in cases]
    for round_ in range(epochs + 1):
        for case, steps in enumerate(cases):
            start = time.perf_counter()
            for step in steps:
                step()
            if round_:
                times[case].append(time.perf_counter() - start)
    return [min(t) for t in times]


def op_count(step: Callable[[], None]) -> int:
    """Outermost aten ops of one epoch (ops issued by Python and autograd)."""
    from orthotune.models import issued_ops

    return sum(issued_ops(step).values())


def heap_only() -> None:
    """No mmap-served blocks at all (glibc only; a no-op elsewhere)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallopt(_M_MMAP_MAX, 0)
    except (OSError, AttributeError, TypeError):
        print("heap-only: no glibc mallopt here; ignored")


def main() -> None:
    from orthotune.models import adjacency, node_features
    from orthotune.training import retain_freed_memory

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packs", type=int, default=64)
    parser.add_argument("--backbone", default="gcn")
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--ortho", action="store_true", help="Ortho-GConv arm (T=--T, beta 0.4)")
    parser.add_argument("--T", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=5, help="timed epochs (the fastest is reported)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--heap-only", action="store_true",
                        help="serve every allocation from the heap (glibc M_MMAP_MAX=0): the mmap "
                             "threshold tops out at 32 MiB, so larger activations (a pack of 64 Cora "
                             "GCNs: 44 MB each) otherwise come as fresh, faulting pages every epoch")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    retain_freed_memory()  # as the trainer's entry points do: reuse freed activations
    if args.heap_only:
        heap_only()

    data = load_cora()
    features, adj = node_features(data.x), adjacency(data.adj)
    packed = epoch_step(build(data, args.packs, args), data, features, adj)
    lone = [epoch_step(build(data, 1, args, seed), data, features, adj) for seed in range(args.packs)]
    packed_s, lone_s = seconds_per_epoch([[packed], lone], args.epochs)
    small = epoch_step(build(data, 4, args), data, features, adj)
    form = "ortho" if args.ortho else "original"
    heap = ", heap only" if args.heap_only else ""
    print(f"Cora {args.backbone}-{args.depth} {form}, hidden {args.hidden}, {args.threads} thread(s){heap}, "
          f"torch {torch.__version__}")
    print(f"pack of {args.packs}: {packed_s * 1e3:.1f} ms/epoch")
    print(f"{args.packs} one at a time: {lone_s * 1e3:.1f} ms/epoch "
          f"({lone_s / args.packs * 1e3:.1f} ms each)")
    print(f"packed / one at a time: {packed_s / lone_s:.3f}")
    print(f"aten ops per epoch: pack 4 {op_count(small)}, pack {args.packs} {op_count(packed)}")


if __name__ == "__main__":
    main()
