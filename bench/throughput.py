"""Throughput: the same N Cora configs trained three ways, wall seconds and trials per minute.

(a) compute floor: every config trained alone (no packing), back to back in this process,
    one torch thread, no Ray; total training wall divided by the number of cores;
(b) plain Ray Tune: one trial per config with Ray's defaults (function trainable that loads
    the data itself and reports every epoch with ``tune.report``; fresh worker per trial,
    one CPU per trial);
(c) orthotune's launch path (:func:`run_orthotune`).

The configs are identical in every part: Cora full-supervised split 0, one backbone and
depth, T/beta/lambda/lr drawn from a seeded generator, own seeds, a fixed number of epochs
and ``patience >= epochs`` (no early stopping), so every part does the same work.

    .venv/bin/python bench/throughput.py --data-root ../shared/data [--quick] [--json]
    .venv/bin/python bench/throughput.py --data-root ../shared/data --breakdown   # where (c)'s wall goes
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Any

import torch
from launch_breakdown import Breakdown, idle_ray_workers

from orthotune.core import TrainConfig
from orthotune.training import DataRoot, load_node_data, retain_freed_memory, train_node

QUICK = dict(configs=8, epochs=20)


def make_configs(count: int, epochs: int, depth: int, backbone: str, seed: int) -> list[TrainConfig]:
    """``count`` packable configs (T, beta, lambda, lr vary; nothing stops early)."""
    rng = random.Random(seed)
    return [
        TrainConfig(
            dataset="cora", setting="full", backbone=backbone, depth=depth, ortho=True, T=rng.randint(1, 6),
            beta=rng.choice([b / 10 for b in range(1, 11)]), lam=rng.choice([1e-4, 5e-4]),
            lr=10 ** rng.uniform(-3, -1.3), epochs=epochs, patience=epochs,
            splits=(0,), seeds=(i,),
        )
        for i in range(count)
    ]


def run_floor(configs: list[TrainConfig], args: argparse.Namespace) -> tuple[float, list[float]]:
    """(a) Each config alone, back to back, one thread; training wall / cores, test accuracies."""
    torch.set_num_threads(1)
    retain_freed_memory()  # as orthotune's Ray workers do
    data = load_node_data("cora", "full", DataRoot.resolve(args.data_root))
    device = torch.device("cpu")
    start = time.perf_counter()
    accuracies = [train_node(config, data, device)[0].mean("test_acc") for config in configs]
    return (time.perf_counter() - start) / args.cores, accuracies


def plain_trial(params: dict[str, Any], data_root: str | None) -> None:
    """What a Ray Tune user writes: load the data, train one config, report every epoch."""
    from ray import tune

    torch.set_num_threads(1)
    retain_freed_memory()  # as orthotune's Ray workers do
    config = TrainConfig.from_dict(params)
    data = load_node_data(config.dataset, config.setting, DataRoot.resolve(data_root))

    def report(epoch) -> None:
        tune.report({"val_acc": epoch.best_val[0], "epoch": epoch.epoch})

    train_node(config, data, torch.device("cpu"), report)


def run_plain_ray(configs: list[TrainConfig], args: argparse.Namespace) -> float:
    """(b) One trial per config, Ray Tune's defaults; the wall of ``Tuner.fit``."""
    import ray
    from ray import tune

    data_root = str(DataRoot.resolve(args.data_root).path) if args.data_root else None
    ray.init(address="local", num_cpus=args.cores, include_dashboard=False)
    try:
        with tempfile.TemporaryDirectory(prefix="throughput-") as storage:
            tuner = tune.Tuner(
                tune.with_resources(tune.with_parameters(plain_trial, data_root=data_root),
                                    {"cpu": 1}),
                param_space=tune.grid_search([c.to_dict() for c in configs]),
                tune_config=tune.TuneConfig(metric="val_acc", mode="max"),
                run_config=tune.RunConfig(storage_path=storage, verbose=0),
            )
            start = time.perf_counter()
            with contextlib.redirect_stdout(sys.stderr):  # Tune's banners; stdout is the result
                results = tuner.fit()
            wall = time.perf_counter() - start
    finally:
        ray.shutdown()
    if results.errors or len(results) != len(configs):
        raise RuntimeError(f"plain Ray Tune: {len(results.errors)} of {len(configs)} trials failed")
    return wall


def run_orthotune(configs: list[TrainConfig], args: argparse.Namespace,
                  breakdown: Breakdown | None = None) -> tuple[float, list[float]]:
    """(c) The same configs through orthotune's launch path (grid over exactly these
    points, FIFO, packs of ``--pack`` configs, reused workers); the wall of the search.
    With ``breakdown``, its timers run and the progress prints as ``orthotune launch``'s does."""
    import ray

    from orthotune.search import LaunchOptions, launch
    from orthotune.spaces import parse_space
    from orthotune.store import Store

    space = parse_space({"datasets": ["cora"], "backbones": [args.backbone], "depths": [args.depth]})
    pack = args.pack or -(-len(configs) // args.cores)  # one pack per core by default
    timers = breakdown.timers() if breakdown is not None else contextlib.nullcontext()
    with timers:
        started = time.perf_counter()
        ray.init(address="local", num_cpus=args.cores, include_dashboard=False, log_to_driver=False)
        if breakdown is not None:
            breakdown.before["Ray start (ray.init)"] = time.perf_counter() - started
        try:
            with tempfile.TemporaryDirectory(prefix="throughput-") as store:
                options = LaunchOptions(
                    store=f"{store}/store", name="throughput", space=space, searcher="grid",
                    scheduler="fifo", data_root=args.data_root, configs_per_trial=pack,
                    report_every=args.report_every or args.epochs, points=tuple(c.to_dict() for c in configs),
                )
                start = time.perf_counter()
                if breakdown is not None:
                    breakdown.launch_started, breakdown.idle_workers = start, idle_ray_workers()
                with contextlib.redirect_stdout(sys.stderr):
                    outcome = launch(options, progress="plain" if breakdown is not None else False)
                wall = time.perf_counter() - start
                accuracies = Store.open(f"{store}/store").read("trials")["test_acc"].to_pylist()
        finally:
            stopping = time.perf_counter()
            ray.shutdown()
            if breakdown is not None:
                breakdown.after["Ray shutdown"] = time.perf_counter() - stopping
                breakdown.launch_s = wall
    if outcome.counts.get("completed", 0) != len(configs):
        raise RuntimeError(f"orthotune: {outcome.counts} for {len(configs)} configs")
    return wall, accuracies


def summarise(args: argparse.Namespace, floor: float | None, plain: float | None,
              ours: float | None, unpacked: list[float], packed: list[float]) -> dict[str, Any]:
    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    return {
        # with dropout the random streams differ: packing must agree within the spread
        "unpacked_test_acc": _mean_std(unpacked), "packed_test_acc": _mean_std(packed),
        "configs": args.configs, "epochs": args.epochs, "depth": args.depth,
        "backbone": args.backbone, "cores": args.cores,
        "floor_s": floor, "plain_s": plain, "orthotune_s": ours,
        "orthotune_over_floor": ratio(ours, floor),
        "plain_over_orthotune": ratio(plain, ours),
        "plain_over_floor": ratio(plain, floor),
    }


def _mean_std(values: list[float]) -> dict[str, float] | None:
    return {"mean": statistics.fmean(values), "std": statistics.pstdev(values)} if values else None


def markdown(summary: dict[str, Any]) -> str:
    n = summary["configs"]
    rows = [("(a) compute floor (no Ray, alone, / cores)", summary["floor_s"]),
            ("(b) plain Ray Tune (trial per config)", summary["plain_s"]),
            ("(c) orthotune", summary["orthotune_s"])]
    lines = [
        f"Cora full, {n} configs x {summary['epochs']} epochs, {summary['backbone']} depth "
        f"{summary['depth']}, {summary['cores']} cores",
        "",
        "| part | wall s | trials/min | / floor |",
        "|---|---|---|---|",
    ]
    for name, wall in rows:
        if wall is None:
            lines.append(f"| {name} | not run | | |")
        else:
            over = ratio_text(wall, summary["floor_s"])
            lines.append(f"| {name} | {wall:.2f} | {60 * n / wall:.1f} | {over} |")
    lines.append("")
    for key, label in (("orthotune_over_floor", "c/a"), ("plain_over_orthotune", "b/c"),
                       ("plain_over_floor", "b/a")):
        lines.append(f"{label}: {ratio_text(summary[key], 1.0)}")
    for key, label in (("unpacked_test_acc", "(a) unpacked"), ("packed_test_acc", "(c) packed")):
        if summary[key]:
            lines.append(f"{label} test accuracy over the configs: {summary[key]['mean']:.4f} "
                         f"+- {summary[key]['std']:.4f}")
    return "\n".join(lines)


def ratio_text(value: float | None, base: float | None) -> str:
    return "n/a" if value is None or not base else f"{value / base:.2f}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=os.environ.get("ORTHOTUNE_DATA_ROOT"))
    parser.add_argument("--configs", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--backbone", default="gcn")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pack", type=int, help="(c): configs per Ray trial (default: configs / cores)")
    parser.add_argument("--parts", nargs="+", choices=["a", "b", "c"], default=["a", "b", "c"])
    parser.add_argument("--report-every", type=int, help="(c): epochs between reports (default: one, at the end)")
    parser.add_argument("--breakdown", action="store_true",
                        help="time (c)'s parts (driver, workers, idle cores) and print where its wall goes; "
                             "runs (a) and (c) only")
    parser.add_argument("--quick", action="store_true", help="few configs and epochs")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.quick:
        args.configs, args.epochs = QUICK["configs"], QUICK["epochs"]
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    configs = make_configs(args.configs, args.epochs, args.depth, args.backbone, args.seed)
    floor, unpacked = run_floor(configs, args) if "a" in args.parts else (None, [])
    if args.breakdown:
        breakdown = Breakdown()
        run_orthotune(configs, args, breakdown)
        print(json.dumps(breakdown.summary(args, floor)) if args.json else breakdown.markdown(args, floor))
        return
    plain = run_plain_ray(configs, args) if "b" in args.parts else None
    ours, packed = run_orthotune(configs, args) if "c" in args.parts else (None, [])
    summary = summarise(args, floor, plain, ours, unpacked, packed)
    print(json.dumps(summary) if args.json else markdown(summary))


if __name__ == "__main__":
    main()
