"""GPU-first packed training: throughput, kernels per epoch, memory and the paper grid's cost.

Measures, on one device (a GPU when present, else the CPU with ``--threads`` threads):

1. throughput: ``--configs`` Cora GCN configs (T, beta, lambda, lr drawn from a seeded
   generator; ``patience >= epochs``, so every config trains every epoch) trained one at a
   time and packed (``--packs``, ``auto``: sized from measured memory), in trials per
   second, with the test-accuracy means side by side (packing must not change results;
   with dropout the random streams differ, so the means agree within their spread);
2. per epoch at each pack size: kernels (CUDA kernels on a GPU, aten operators on a CPU,
   from ``torch.profiler``), host reads of tensor values (``.item()``, ``bool()``,
   ``.tolist()``...: a device sync each on a GPU) outside ``torch.optim``, and GPU busy
   share (kernel time over wall time);
3. peak memory: per packed run on a GPU (``max_memory_allocated``), peak RSS on a CPU;
4. the ``paper-full`` preset's grid projected from measured per-cell costs: seconds per
   run-epoch of each measured cell (dataset, backbone, depth, arm) at its pack size, times
   the grid's run-epochs (the Ortho-GConv grid of T x beta x lambda plus the original arm,
   every split, every epoch up to the preset's maximum: an upper bound, no early stops).

``--quick`` is the CI-size shape check (a few configs and epochs, two cells). Not a test.

    .venv/bin/python bench/gpu.py --quick                      # shape check, CPU
    .venv/bin/python bench/gpu.py --configs 64 --epochs 50 --packs 64 --threads 1   # CPU target
    .venv/bin/python bench/gpu.py                              # full run (GPU)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from orthotune.core import TrainConfig
from orthotune.training import (
    DataRoot,
    TrainOptions,
    choose_device,
    device_profile,
    load_node_data,
    retain_freed_memory,
    timed,
    train_node,
)

QUICK = dict(configs=8, epochs=5, packs=["4", "8", "auto"], cells="cora:gcn:2", cell_epochs=2, cell_pack=4)
#: Tensor methods that read a value on the host (a device sync each on a GPU).
HOST_READS = ("__bool__", "item", "tolist", "__float__", "__int__", "__index__")


def make_configs(count: int, epochs: int, depth: int, seed: int, dataset: str = "cora",
                 backbone: str = "gcn", ortho: bool = True) -> list[TrainConfig]:
    """``count`` packable configs; nothing stops early (patience = epochs)."""
    rng = random.Random(seed)
    return [
        TrainConfig(dataset=dataset, setting="full", backbone=backbone, depth=depth, ortho=ortho,
                    T=rng.randint(1, 6), beta=rng.choice([b / 10 for b in range(1, 11)]),
                    lam=rng.choice([1e-4, 5e-4]), lr=10 ** rng.uniform(-3, -1.3),
                    epochs=epochs, patience=epochs, splits=(0,), seeds=(i,))
        for i in range(count)
    ]


def pack_options(pack: str) -> TrainOptions:
    """``auto``: orthotune's choice; a number: packs of exactly that many runs (the CPU's
    state bound lifted, so the number is measured as asked)."""
    if pack == "auto":
        return TrainOptions(sync_every=1000)
    return TrainOptions(max_pack=int(pack), cpu_state_mib=math.inf, sync_every=1000)


def throughput(configs: list[TrainConfig], data, device: torch.device, packs: list[str]) -> dict[str, Any]:
    """Trials per second one at a time and packed, with test-accuracy means."""
    rows = {}
    seconds, results = timed(lambda: [train_node(c, data, device)[0] for c in configs], device)
    rows["one at a time"] = _row(len(configs), seconds, results)
    for pack in packs:
        if pack != "auto" and int(pack) > len(configs):
            continue
        seconds, results = timed(lambda p=pack: train_node(configs, data, device, options=pack_options(p)), device)
        rows[f"packed {pack}"] = _row(len(configs), seconds, results)
    base = rows["one at a time"]["seconds"]
    for row in rows.values():
        row["time_vs_one_at_a_time"] = row["seconds"] / base
    return rows


def _row(count: int, seconds: float, results) -> dict[str, Any]:
    accs = [r.mean("test_acc") for r in results]
    return {"seconds": seconds, "trials_per_s": count / seconds,
            "test_acc_mean": statistics.fmean(accs), "test_acc_std": statistics.pstdev(accs)}


def per_epoch(configs: list[TrainConfig], data, device: torch.device, pack: int, epochs: int) -> dict[str, Any]:
    """Kernels (or aten ops), host reads, GPU busy share and peak memory of one pack, per epoch."""
    chosen = [c for c in configs[:pack]]
    options = pack_options(str(pack))
    short = [_with_epochs(c, 1) for c in chosen]
    train_node(short, data, device, options=options)  # warm-up: caches, allocator, kernels
    longer = [_with_epochs(c, 1 + epochs) for c in chosen]
    # kernels and host reads of `epochs` epochs: the difference between 1+epochs and 1 epoch
    ops_1, busy_1, wall_1 = device_profile(lambda: train_node(short, data, device, options=options), device)
    ops_n, busy_n, wall_n = device_profile(lambda: train_node(longer, data, device, options=options), device)
    reads_1 = _host_reads(lambda: train_node(short, data, device, options=options))
    reads_n = _host_reads(lambda: train_node(longer, data, device, options=options))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        train_node(short, data, device, options=options)
        memory = {"peak_mib_per_run": (torch.cuda.max_memory_allocated(device) - base) / 2**20 / pack}
    else:
        memory = {"peak_rss_mib_process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    return {
        "pack": pack,
        ("kernels" if device.type == "cuda" else "aten_ops") + "_per_epoch": (ops_n - ops_1) / epochs,
        "host_reads_per_epoch": (sum(reads_n.values()) - sum(reads_1.values())) / epochs,
        "host_reads_per_call": sum(reads_1.values()),
        "gpu_busy_share": (busy_n - busy_1) / max(wall_n - wall_1, 1e-9) if device.type == "cuda" else None,
        **memory,
    }


def _with_epochs(config: TrainConfig, epochs: int) -> TrainConfig:
    return TrainConfig.from_dict({**config.to_dict(), "epochs": epochs, "patience": epochs})


def _host_reads(fn: Callable[[], Any]) -> Counter:
    counts: Counter = Counter()
    originals = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def wrap(name: str, original):
        def read(self, *args, **kwargs):
            if "torch/optim" not in sys._getframe(1).f_code.co_filename.replace("\\", "/"):
                counts[name] += 1
            return original(self, *args, **kwargs)
        return read

    for name, original in originals.items():
        setattr(torch.Tensor, name, wrap(name, original))
    try:
        fn()
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
    return counts


def project_grid(cells: list[tuple[str, str, int]], root: DataRoot, device: torch.device, pack: str,
                 cell_pack: int, epochs: int, seed: int) -> dict[str, Any]:
    """Measured seconds per run-epoch of each cell and arm (a pack of up to ``cell_pack``
    runs, split further by ``pack``), and the paper-full grid's cost."""
    from orthotune.spaces import resolve_space

    space = resolve_space("paper-full")
    ortho_points = math.prod(len(d.grid()) for d in (space.ortho or {}).values())
    repeats = len(space.repeats or (0,))
    max_epochs = space.max_epochs()
    all_cells = [(d, b, depth) for d in space.datasets for b in space.backbones for depth in space.depths]
    measured = {}
    for dataset, backbone, depth in cells:
        data = load_node_data(dataset, "full", root).to(device)
        for ortho, runs in ((True, ortho_points * repeats), (False, repeats)):
            size = min(runs, cell_pack)
            configs = make_configs(size, epochs, depth, seed, dataset, backbone, ortho)
            options = pack_options(pack)
            train_node([_with_epochs(c, 1) for c in configs], data, device, options=options)  # warm-up
            seconds, _ = timed(partial(train_node, configs, data, device, options=options), device)
            per_run_epoch = seconds / (size * epochs)
            measured[f"{dataset}/{backbone}/{depth}/{'ortho' if ortho else 'original'}"] = {
                "pack": size, "s_per_run_epoch": per_run_epoch,
                "grid_hours": per_run_epoch * runs * max_epochs / 3600,
            }
    covered = {key.rsplit("/", 1)[0] for key in measured}
    return {
        "grid": f"{len(all_cells)} cells x ({ortho_points} Ortho settings + original) x {repeats} splits "
                f"x {max_epochs} epochs",
        "cells_measured": f"{len(covered)} of {len(all_cells)}",
        "hours_for_measured_cells": sum(m["grid_hours"] for m in measured.values()),
        "hours_whole_grid": (sum(m["grid_hours"] for m in measured.values())
                             if len(covered) == len(all_cells) else None),
        "per_cell": measured,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=os.environ.get("ORTHOTUNE_DATA_ROOT"))
    parser.add_argument("--device")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    parser.add_argument("--configs", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--packs", nargs="+", default=["16", "64", "256", "auto"])
    parser.add_argument("--profile-epochs", type=int, default=5)
    parser.add_argument("--cells", default="all",
                        help="cells to measure for the projection: all, none, or dataset:backbone:depth,...")
    parser.add_argument("--cell-epochs", type=int, default=20)
    parser.add_argument("--cell-pack", type=int, default=256, help="runs measured per cell and arm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="CI-size shape check")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.configs, args.epochs, args.packs = QUICK["configs"], QUICK["epochs"], QUICK["packs"]
        args.cells, args.cell_epochs, args.profile_epochs = QUICK["cells"], QUICK["cell_epochs"], 2
        args.cell_pack = QUICK["cell_pack"]
    return args


def chosen_cells(spec: str) -> list[tuple[str, str, int]]:
    if spec == "none":
        return []
    if spec == "all":
        from orthotune.spaces import resolve_space

        space = resolve_space("paper-full")
        return [(d, b, depth) for d in space.datasets for b in space.backbones for depth in space.depths]
    return [(d, b, int(depth)) for d, b, depth in (item.split(":") for item in spec.split(","))]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    retain_freed_memory()  # this process only trains
    device = choose_device(args.device)
    root = DataRoot.resolve(args.data_root)
    data = load_node_data("cora", "full", root).to(device)
    configs = make_configs(args.configs, args.epochs, args.depth, args.seed)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {args.threads} thread(s)"
    summary: dict[str, Any] = {
        "device": name, "torch": torch.__version__, "configs": args.configs, "epochs": args.epochs,
        "depth": args.depth, "throughput": throughput(configs, data, device, args.packs),
        "per_epoch": [per_epoch(configs, data, device, int(p), args.profile_epochs)
                      for p in args.packs if p != "auto" and int(p) <= args.configs],
        "projection": project_grid(chosen_cells(args.cells), root, device, args.packs[-1], args.cell_pack,
                                   args.cell_epochs, args.seed),
    }
    print(json.dumps(summary, indent=1) if args.json else markdown(summary))
    return summary


def markdown(summary: dict[str, Any]) -> str:
    lines = [f"{summary['device']}, torch {summary['torch']}: {summary['configs']} Cora GCN-{summary['depth']} "
             f"configs x {summary['epochs']} epochs", "",
             "| how | s | trials/s | time / one at a time | test acc mean +- std |", "|---|---|---|---|---|"]
    for how, row in summary["throughput"].items():
        lines.append(f"| {how} | {row['seconds']:.2f} | {row['trials_per_s']:.2f} | "
                     f"{row['time_vs_one_at_a_time']:.3f} | {row['test_acc_mean']:.4f} +- {row['test_acc_std']:.4f} |")
    lines += ["", "| pack | kernels or aten ops / epoch | host reads / epoch | GPU busy | memory |",
              "|---|---|---|---|---|"]
    for row in summary["per_epoch"]:
        ops = row.get("kernels_per_epoch", row.get("aten_ops_per_epoch"))
        busy = "n/a (CPU)" if row["gpu_busy_share"] is None else f"{row['gpu_busy_share']:.0%}"
        memory = (f"{row['peak_mib_per_run']:.1f} MiB/run" if "peak_mib_per_run" in row
                  else f"peak RSS {row['peak_rss_mib_process']:.0f} MiB (process)")
        lines.append(f"| {row['pack']} | {ops:.0f} | {row['host_reads_per_epoch']:.1f} | {busy} | {memory} |")
    projection = summary["projection"]
    whole = projection["hours_whole_grid"]
    lines += ["", f"paper-full grid: {projection['grid']}; cells measured: {projection['cells_measured']}; "
              f"projected hours for those cells: {projection['hours_for_measured_cells']:.2f}; whole grid: "
              + ("not projected (not every cell measured)" if whole is None else f"{whole:.2f} h")]
    for cell, row in projection["per_cell"].items():
        lines.append(f"- {cell}: pack {row['pack']}, {row['s_per_run_epoch'] * 1e3:.3f} ms per run-epoch, "
                     f"{row['grid_hours']:.2f} h in the grid")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
