"""Train one config on its repeats and print validation/test accuracy and steadiness."""

from __future__ import annotations

import argparse
import json

from search._config import TrainConfig
from search._run import run_configs
from search._train import ConfigResult, choose_device

FIELDS = ("setting", "backbone", "depth", "T", "beta", "lam", "hidden", "lr",
          "weight_decay", "dropout", "epochs", "patience")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--setting")
    parser.add_argument("--backbone", default="gcn")
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--ortho", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--T", type=int, default=4)
    parser.add_argument("--beta", type=float, default=0.4)
    parser.add_argument("--lam", type=float, default=5e-4)
    for name in ("hidden", "epochs", "patience"):
        parser.add_argument(f"--{name}", type=int)
    for name in ("lr", "weight-decay", "dropout"):
        parser.add_argument(f"--{name}", type=float)
    parser.add_argument("--split", type=int, nargs="+", default=[0])
    parser.add_argument("--seed", type=int, nargs="+", default=[0])
    parser.add_argument("--data-root", help="raw data folder (default: $ORTHOTUNE_DATA_ROOT)")
    parser.add_argument("--device", help="cpu or cuda[:N] (default: cuda when present)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    values = {key: getattr(args, key) for key in FIELDS if getattr(args, key, None) is not None}
    config = TrainConfig(
        dataset=args.dataset, ortho=args.ortho, splits=tuple(args.split),
        seeds=tuple(args.seed), **values,
    )
    device = choose_device(args.device)
    result = run_configs([config], device, args.data_root)[0]
    summary = summarise(result)
    print(json.dumps(summary) if args.json else format_text(summary))
    return 0 if result.status != "failed" else 1


def summarise(result: ConfigResult) -> dict:
    runs = result.runs
    return {
        "status": result.status,
        "reason": result.reason,
        "config": result.config.to_dict(),
        "val_acc": result.mean("val_acc"),
        "test_acc": result.mean("test_acc"),
        "test_acc_std": result.std("test_acc"),
        "best_epoch": [r.best_epoch for r in runs] if len(runs) > 1 else runs[0].best_epoch,
        "epochs": [r.epochs for r in runs] if len(runs) > 1 else runs[0].epochs,
        "m_sig": result.mean("m_sig"),
        "smoothness": result.mean("smoothness"),
        "grad_norms": [r.grad_norms for r in runs] if len(runs) > 1 else runs[0].grad_norms,
        "seconds_per_epoch": result.seconds_per_epoch,
        "device": result.device,
    }


def format_text(summary: dict) -> str:
    if summary["status"] == "failed":
        return f"failed: {summary['reason']}"
    grads = summary["grad_norms"]
    grads = grads if grads and isinstance(grads[0], float) else grads[0] if grads else []
    return "\n".join([
        f"val_acc            {summary['val_acc']:.4f}",
        f"test_acc           {summary['test_acc']:.4f} +- {summary['test_acc_std']:.4f}",
        f"best_epoch         {summary['best_epoch']}",
        f"epochs             {summary['epochs']}",
        f"M_sig              {summary['m_sig']:.4f}",
        f"smoothness D       {summary['smoothness']:.4f}",
        "grad norms ||dL/dW(l)||_F  " + " ".join(f"{g:.3g}" for g in grads),
        f"seconds_per_epoch  {summary['seconds_per_epoch']:.4f} ({summary['device']})",
    ])
