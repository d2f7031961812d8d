"""Peak host memory of one full-batch ogbn-arxiv-sized training run (GCN/GCNII, depth 8).

There is no ogbn-arxiv data here, so each case trains on a synthetic graph of arxiv's
size (169343 nodes, ~1.17M random undirected edges, 128 features, 40 classes, an
official-sized split) through ``train_node`` for one epoch: one training step, one
evaluation pass and the steadiness metrics. Each case runs in a fresh subprocess and reads
its peak resident set size (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) before and after
training; the difference is the training run's own working memory (activations,
gradients, Adam state), which on a GPU is held by the same tensors.

    .venv/bin/python bench/arxiv_memory.py
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

import torch

NODES, EDGES, FEATURES, CLASSES = 169343, 1166243, 128, 40


def synthetic_arxiv(seed: int = 0):
    from orthotune.training import NodeData, normalised_adjacency

    generator = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, NODES, (2, EDGES), generator=generator)
    order = torch.randperm(NODES, generator=generator)
    masks = [torch.zeros(NODES, 1, dtype=torch.bool) for _ in range(3)]
    for mask, part in zip(masks, order.split([90941, 29799, NODES - 90941 - 29799])):  # arxiv's split sizes
        mask[part, 0] = True
    return NodeData("ogbn-arxiv", "official", torch.randn(NODES, FEATURES, generator=generator),
                    normalised_adjacency(edge_index, NODES), torch.randint(0, CLASSES, (NODES,), generator=generator),
                    *masks, num_classes=CLASSES, num_edges=EDGES)


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def measure(backbone: str, ortho: bool, depth: int, hidden: int) -> dict:
    from orthotune.core import TrainConfig
    from orthotune.training import retain_freed_memory, train_node

    torch.set_num_threads(1)
    retain_freed_memory()  # as the Ray worker does: peak RSS as a search sees it
    data = synthetic_arxiv()
    config = TrainConfig(dataset="ogbn-arxiv", backbone=backbone, depth=depth, ortho=ortho, hidden=hidden, epochs=1)
    before = peak_mib()
    result = train_node(config, data, torch.device("cpu"))[0]
    after = peak_mib()
    return dict(backbone=backbone, ortho=ortho, depth=depth, hidden=hidden, before_mib=before, peak_mib=after,
                training_mib=after - before, seconds=result.seconds, status=result.status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--case", nargs=2, metavar=("BACKBONE", "FORM"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:  # one measurement in this (fresh) process
        print(json.dumps(measure(args.case[0], args.case[1] == "ortho", args.depth, args.hidden)))
        return
    print(f"synthetic ogbn-arxiv size ({NODES} nodes, {EDGES} undirected edges), depth {args.depth}, "
          f"hidden {args.hidden}, one full-batch epoch on CPU, peak RSS via getrusage")
    print("| backbone | form | RSS before training (MiB) | peak RSS (MiB) | training working memory (MiB) | s |")
    print("|---|---|---|---|---|---|")
    for backbone in ("gcn", "gcnii"):
        for form in ("original", "ortho"):
            out = subprocess.run([sys.executable, __file__, "--depth", str(args.depth), "--hidden", str(args.hidden),
                                  "--case", backbone, form], capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"| {backbone} | {form} | {row['before_mib']:.0f} | {row['peak_mib']:.0f} "
                  f"| {row['training_mib']:.0f} | {row['seconds']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
