"""Benchmark: PROTEINS 10-fold CV, Graph U-Nets original vs Ortho-GConv (T=4, beta=0.4).

Each fold's test accuracy is read at its validation-best epoch (the validation part is a
stratified tenth of the fold's training part; see ``search/_graph.py``), never at the best
test epoch. Prints a Markdown table of mean and std of test accuracy over the folds, mean
validation accuracy and seconds per epoch of one fold (training and evaluation), measured
on this machine with one CPU thread unless ``--threads`` says otherwise.

    .venv/bin/python bench/proteins.py --data-root ../shared/data
    .venv/bin/python bench/proteins.py --data-root ../shared/data --epochs 20   # quicker
"""

from __future__ import annotations

import argparse

import torch

from orthotune.core import TrainConfig
from orthotune.training import choose_device, retain_freed_memory, run_configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root")
    parser.add_argument("--folds", type=int, nargs="+", default=list(range(10)), help="fold indices (0-9)")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--T", type=int, default=4)
    parser.add_argument("--beta", type=float, default=0.4)
    parser.add_argument("--lam", type=float, default=5e-4)
    parser.add_argument("--device")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_memory()  # this process only trains: keep freed memory for reuse
    device = choose_device(args.device)
    print(f"PROTEINS cv10, folds {args.folds}, {args.epochs} epochs, Graph U-Nets (protocol defaults), "
          f"Ortho-GConv T={args.T} beta={args.beta} lambda={args.lam}, device {device}, "
          f"{torch.get_num_threads()} thread(s)")
    print("| form | folds | test acc mean | std | val acc mean | best epoch mean | s/epoch (one fold) |")
    print("|---|---|---|---|---|---|---|")
    for ortho in (False, True):
        config = TrainConfig(dataset="proteins", backbone="gunet", ortho=ortho, T=args.T, beta=args.beta, lam=args.lam,
                             epochs=args.epochs, splits=tuple(args.folds))
        result = run_configs([config], device, args.data_root)[0]
        form = "Ortho-GConv" if ortho else "original"
        if result.status == "failed":
            print(f"| {form} | failed: {result.reason} | | | | | |", flush=True)
            continue
        print(f"| {form} | {len(result.runs)} | {result.mean('test_acc'):.4f} | {result.std('test_acc'):.4f} "
              f"| {result.mean('val_acc'):.4f} | {result.mean('best_epoch'):.1f} "
              f"| {result.seconds_per_epoch:.3f} |", flush=True)


if __name__ == "__main__":
    main()
