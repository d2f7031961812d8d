"""Train one config on its repeats and print validation/test accuracy and steadiness."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from orthotune.core import ConfigError, ConfigResult, TrainConfig
from orthotune.search.training import choose_device, run_configs

FIELDS = ("setting", "backbone", "depth", "T", "beta", "lam", "hidden", "lr",
          "weight_decay", "dropout", "epochs", "patience")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="a YAML or JSON config (TrainConfig keys, e.g. from `orthotune best --yaml`); "
                             "exclusive with the config flags")
    parser.add_argument("--dataset", help="required unless --config is given")
    parser.add_argument("--setting")
    parser.add_argument("--backbone", help="default: gcn (node datasets), gunet (proteins, dd)")
    parser.add_argument("--depth", type=int, help="default: 2 (node backbones), 3 levels (gunet)")
    # config flags default to None so that --config can tell which were given; TrainConfig
    # holds the defaults (ortho, T=4, beta=0.4, lam=5e-4, split 0, seed 0)
    parser.add_argument("--ortho", action=argparse.BooleanOptionalAction)
    parser.add_argument("--T", type=int)
    parser.add_argument("--beta", type=float)
    parser.add_argument("--lam", type=float)
    for name in ("hidden", "epochs", "patience"):
        parser.add_argument(f"--{name}", type=int)
    for name in ("lr", "weight-decay", "dropout"):
        parser.add_argument(f"--{name}", type=float)
    parser.add_argument("--split", type=int, nargs="+")
    parser.add_argument("--seed", type=int, nargs="+")
    parser.add_argument("--data-root", help="raw data folder (default: $ORTHOTUNE_DATA_ROOT)")
    parser.add_argument("--device", help="cpu or cuda[:N] (default: cuda when present)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    device = choose_device(args.device)
    result = run_configs([config], device, args.data_root)[0]
    summary = summarise(result)
    print(json.dumps(summary) if args.json else format_text(summary))
    return 0 if result.status != "failed" else 1


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The config from --config FILE, or from the flags; mixing both is refused, so a file
    from `orthotune best` reruns exactly what it says."""
    values = {key: getattr(args, key) for key in FIELDS if getattr(args, key, None) is not None}
    for flag, key in (("ortho", "ortho"), ("split", "splits"), ("seed", "seeds")):
        if getattr(args, flag) is not None:
            values[key] = getattr(args, flag)
    if args.config is not None:
        given = sorted(values) + (["dataset"] if args.dataset is not None else [])
        if given:
            raise ConfigError(f"--config is exclusive with the config flags; also given: {', '.join(given)}")
        return TrainConfig.from_dict(load_config_file(args.config))
    if args.dataset is None:
        raise ConfigError("--dataset is required (or --config FILE)")
    return TrainConfig.from_dict({"dataset": args.dataset, **values})


def load_config_file(path: str) -> dict:
    """One config mapping from a YAML or JSON file (a one-item list, as `best` prints, is accepted)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"--config {path!r} cannot be read: {error.strerror}") from None
    try:
        value = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        raise ConfigError(f"--config {path!r} is not valid {'JSON' if path.endswith('.json') else 'YAML'}: "
                          f"{str(error).splitlines()[0]}") from None
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, list):
        raise ConfigError(f"--config {path!r} holds {len(value)} configs; it must hold one "
                          f"(narrow `orthotune best` with --dataset/--backbone/--depth/--ortho)")
    if not isinstance(value, dict):
        raise ConfigError(f"--config {path!r} must hold a mapping of TrainConfig keys, not {type(value).__name__}")
    return value


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
