"""Benchmark: Cora full-supervised, splits 0-4, GCN at depths 2/4/8, original vs Ortho-GConv.

Prints mean and std of test accuracy (each run's test accuracy is read at its
validation-best epoch) and seconds per epoch. The five splits of a cell train as one
packed model, so seconds per epoch is the pack's (all five splits at once).

    .venv/bin/python bench/gcn_depth.py --data-root ../shared/data
"""

from __future__ import annotations

import argparse

import torch

from orthotune.core import TrainConfig
from orthotune.training import DataRoot, choose_device, load_node_data, retain_freed_memory, train_node


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root")
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--splits", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--T", type=int, default=4)
    parser.add_argument("--beta", type=float, default=0.4)
    parser.add_argument("--lam", type=float, default=5e-4)
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--device")
    args = parser.parse_args()
    torch.set_num_threads(1)
    retain_freed_memory()  # this process only trains: keep freed memory for reuse
    device = choose_device(args.device)
    data = load_node_data("cora", "full", DataRoot.resolve(args.data_root)).to(device)
    print(f"Cora full-supervised, splits {args.splits}, T={args.T} beta={args.beta} "
          f"lambda={args.lam}, device {device}")
    print("| depth | form | test acc mean | std | val acc mean | s/epoch (5 splits packed) |")
    print("|---|---|---|---|---|---|")
    for depth in args.depths:
        for ortho in (False, True):
            config = TrainConfig(dataset="cora", setting="full", backbone="gcn", depth=depth, ortho=ortho, T=args.T,
                                 beta=args.beta, lam=args.lam,
                                 epochs=args.epochs, splits=tuple(args.splits))
            result = train_node(config, data, device)[0]
            form = "Ortho-GConv" if ortho else "original"
            print(f"| {depth} | {form} | {result.mean('test_acc'):.4f} | {result.std('test_acc'):.4f} "
                  f"| {result.mean('val_acc'):.4f} | {result.seconds_per_epoch:.4f} |", flush=True)


if __name__ == "__main__":
    main()
