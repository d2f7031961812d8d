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
from gpu_equal import equality, reruns
from gpu_report import markdown

from orthotune.core import TrainConfig
from orthotune.training import (
    GRAPH_WARM_UP,
    DataRoot,
    TrainOptions,
    choose_device,
    device_profile,
    load_node_data,
    measure_cell_cost,
    retain_freed_memory,
    timed,
    train_node,
)

QUICK = dict(configs=8, epochs=5, packs=["4", "8", "auto"], cells="cora:gcn:2", cell_epochs=2, cell_pack=4)
#: Tensor methods that read a value on the host (a device sync each on a GPU).
HOST_READS = ("__bool__", "item", "tolist", "__float__", "__int__", "__index__")


def make_configs(count: int, epochs: int, depth: int, seed: int, dataset: str = "cora",
                 backbone: str = "gcn", ortho: bool = True, max_log_lr: float = -1.3,
                 **fields: Any) -> list[TrainConfig]:
    """``count`` packable configs (learning rates log-uniform in [1e-3, 10^max_log_lr];
    ``fields``: any other field, the same for all); nothing stops early (patience = epochs)."""
    rng = random.Random(seed)
    return [
        TrainConfig(dataset=dataset, setting="full", backbone=backbone, depth=depth, ortho=ortho,
                    T=rng.randint(1, 6), beta=rng.choice([b / 10 for b in range(1, 11)]),
                    lam=rng.choice([1e-4, 5e-4]), lr=10 ** rng.uniform(-3, max_log_lr),
                    epochs=epochs, patience=epochs, splits=(0,), seeds=(i,), **fields)
        for i in range(count)
    ]


def pack_options(pack: str, graph: bool = False, **switches: Any) -> TrainOptions:
    """``auto``: orthotune's choice; a number: packs of exactly that many runs (the CPU's
    state bound lifted, so the number is measured as asked). ``graph``: captured CUDA graphs."""
    if pack == "auto":
        return TrainOptions(sync_every=1000, cuda_graph=graph, **switches)
    return TrainOptions(max_pack=int(pack), cpu_state_mib=math.inf, sync_every=1000, cuda_graph=graph, **switches)


def throughput(configs: list[TrainConfig], data, device: torch.device, packs: list[str], alone: int | None = None,
               graphs: tuple[bool, ...] = (False,)) -> dict[str, Any]:
    """Trials per second one at a time (the first ``alone`` configs, default all) and packed
    (every config; with ``graphs`` (True,) also as captured CUDA graphs), with test-accuracy
    means. ``speedup``: packed trials per second over one-at-a-time trials per second."""
    rows = {}
    lone = configs[: alone or len(configs)]
    train_node(_with_epochs(lone[0], 2), data, device)  # warm-up: kernels, handles
    seconds, results = timed(lambda: [train_node(c, data, device)[0] for c in lone], device)
    rows["one at a time"] = _row(len(lone), seconds, results)
    for graph in graphs:
        for pack in packs:
            if pack != "auto" and int(pack) > len(configs):
                continue
            options = pack_options(pack, graph)
            # warm-up: past the eager epochs and the capture, and one replay
            train_node([_with_epochs(c, GRAPH_WARM_UP + 2) for c in configs], data, device, options=options)
            seconds, results = timed(lambda o=options: train_node(configs, data, device, options=o), device)
            rows[f"packed {pack}" + (" graph" if graph else "")] = _row(len(configs), seconds, results)
    base = rows["one at a time"]["trials_per_s"]
    for row in rows.values():
        row["speedup"] = row["trials_per_s"] / base
    return rows


def _row(count: int, seconds: float, results) -> dict[str, Any]:
    accs = [r.mean("test_acc") for r in results]
    return {"seconds": seconds, "trials_per_s": count / seconds,
            "test_acc_mean": statistics.fmean(accs), "test_acc_std": statistics.pstdev(accs)}


def per_epoch(configs: list[TrainConfig], data, device: torch.device, pack: int, epochs: int,
              graph: bool = False, timed_epochs: int = 50) -> dict[str, Any]:
    """Kernels (or aten ops), host launches, host reads, GPU busy share and peak memory of one
    pack, per epoch (with ``graph``: the epochs after the captured graph's warm-up): counted
    over ``epochs`` profiled epochs; the wall time per epoch over ``timed_epochs`` unprofiled
    ones (busy share: the profiled kernel seconds per epoch over it)."""
    chosen = [c for c in configs[:pack]]
    options = pack_options(str(pack), graph)
    base_epochs = 1 + (GRAPH_WARM_UP + 1 if graph else 0)  # past the warm-up and the capture
    short = [_with_epochs(c, base_epochs) for c in chosen]
    train_node(short, data, device, options=options)  # warm-up: caches, allocator, kernels
    longer = [_with_epochs(c, base_epochs + epochs) for c in chosen]
    # kernels and host reads of `epochs` epochs: the difference between the two runs
    ops_1, busy_1, _, launches_1 = device_profile(lambda: train_node(short, data, device, options=options), device)
    ops_n, busy_n, _, launches_n = device_profile(lambda: train_node(longer, data, device, options=options), device)
    timed_runs = [_with_epochs(c, base_epochs + timed_epochs) for c in chosen]
    seconds_1, _ = timed(lambda: train_node(short, data, device, options=options), device)
    seconds_n, _ = timed(lambda: train_node(timed_runs, data, device, options=options), device)
    ms_per_epoch = (seconds_n - seconds_1) / timed_epochs * 1e3
    reads_1 = _host_reads(lambda: train_node(short, data, device, options=options))
    reads_n = _host_reads(lambda: train_node(longer, data, device, options=options))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        train_node(short, data, device, options=options)
        memory = {"peak_mib_per_run": (torch.cuda.max_memory_allocated(device) - base) / 2**20 / pack}
    else:
        memory = {"peak_rss_mib_process": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    cuda = device.type == "cuda"
    return {
        "pack": pack, "graph": graph,
        ("kernels" if cuda else "aten_ops") + "_per_epoch": (ops_n - ops_1) / epochs,
        "launches_per_epoch": (launches_n - launches_1) / epochs if cuda else None,
        "ms_per_epoch": ms_per_epoch,
        "host_reads_per_epoch": (sum(reads_n.values()) - sum(reads_1.values())) / epochs,
        "host_reads_per_call": sum(reads_1.values()),
        # kernel seconds over unprofiled wall seconds (the profiler's own overhead left out)
        "gpu_busy_share": (busy_n - busy_1) / epochs / max(ms_per_epoch / 1e3, 1e-9) if cuda else None,
        "kernel_ms_per_epoch": (busy_n - busy_1) / epochs * 1e3 if cuda else None,
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


def precision(configs: list[TrainConfig], data, device: torch.device, pack: str) -> dict[str, Any]:
    """TF32 on and off, deterministic mode on: wall seconds of every config in packs of
    ``pack``, and the test accuracy each gives (mean, and the largest difference of one
    config's accuracy from strict FP32's)."""
    variants = {"tf32 (default)": dict(tf32=True), "strict fp32": dict(tf32=False),
                "tf32 + deterministic": dict(tf32=True, deterministic=True),
                "strict fp32 + deterministic": dict(tf32=False, deterministic=True)}
    rows: dict[str, Any] = {}
    accs: dict[str, list[float]] = {}
    for name, switches in variants.items():
        options = pack_options(pack, **switches)
        try:
            train_node([_with_epochs(c, 2) for c in configs], data, device, options=options)  # warm-up
            seconds, results = timed(lambda o=options: train_node(configs, data, device, options=o), device)
        except Exception as error:  # noqa: BLE001  (a switch that breaks is a finding)
            rows[name] = {"error": f"{type(error).__name__}: {error}"[:400]}
            continue
        accs[name] = [r.mean("test_acc") for r in results]
        rows[name] = _row(len(configs), seconds, results)
    strict = accs.get("strict fp32")
    for name, values in accs.items():
        if strict:
            rows[name]["max_abs_test_diff_vs_strict"] = max(abs(a - b) for a, b in zip(values, strict))
    return rows


#: ``--gpus-per-trial auto``'s cells: (name, config fields); each trial's pack is its repeats.
SHARE_CELLS = (
    ("Cora GCN-2 original (full, 5 splits)", dict(dataset="cora", setting="full", backbone="gcn", depth=2,
                                                   ortho=False, splits=(0, 1, 2, 3, 4))),
    ("Cora GCN-8 Ortho (full, 5 splits)", dict(dataset="cora", setting="full", backbone="gcn", depth=8,
                                                ortho=True, splits=(0, 1, 2, 3, 4))),
    ("PubMed GCN-8 Ortho (full, 5 splits)", dict(dataset="pubmed", setting="full", backbone="gcn", depth=8,
                                                  ortho=True, splits=(0, 1, 2, 3, 4))),
    ("Cora GCNII-64 Ortho (semi, 10 seeds)", dict(dataset="cora", setting="semi", backbone="gcnii", depth=64,
                                                   hidden=64, ortho=True, seeds=tuple(range(10)))),
)


def shares(root: DataRoot, device: torch.device, cpus_per_gpu: float, epochs: int) -> dict[str, Any]:
    """What ``--gpus-per-trial auto`` decides for each of :data:`SHARE_CELLS`: the cell's
    cost measured as the Ray task measures it (``measure_cell_cost``, one trial's pack) and
    the share ``gpu_share`` gives it on this GPU with ``cpus_per_gpu`` CPUs beside it."""
    from orthotune.search import gpu_share  # the decision itself, without Ray

    rows: dict[str, Any] = {}
    for name, fields in SHARE_CELLS:
        try:
            config = TrainConfig(**fields)
            cost = measure_cell_cost(config, device, str(root.path), 1, epochs, TrainOptions(sync_every=10))
            share = gpu_share(cost, cost.device_bytes or 1, cpus_per_gpu) if device.type == "cuda" else None
            rows[name] = {"share": share, **cost.to_dict()}
        except Exception as error:  # noqa: BLE001
            rows[name] = {"error": f"{type(error).__name__}: {error}"[:400]}
    return rows


PARTS = ("throughput", "per_epoch", "precision", "equality", "reruns", "shares", "projection")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=os.environ.get("ORTHOTUNE_DATA_ROOT"))
    parser.add_argument("--device")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    parser.add_argument("--configs", type=int, default=256)
    parser.add_argument("--alone", type=int, default=16, help="configs trained one at a time (0: all)")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--packs", nargs="+", default=["16", "64", "256", "auto"])
    parser.add_argument("--graph", action="store_true", help="also measure packs captured as CUDA graphs")
    parser.add_argument("--profile-epochs", type=int, default=5)
    parser.add_argument("--timed-epochs", type=int, default=50, help="epochs timed per pack size, unprofiled")
    parser.add_argument("--cells", default="all",
                        help="cells to measure for the projection: all, none, or dataset:backbone:depth,...")
    parser.add_argument("--cell-epochs", type=int, default=20)
    parser.add_argument("--cell-pack", type=int, default=256, help="runs measured per cell and arm")
    parser.add_argument("--equal-configs", type=int, default=8, help="configs in the packed-vs-alone check")
    parser.add_argument("--equal-epochs", type=int, default=100)
    parser.add_argument("--dropouts", nargs="+", type=float, default=[0.0, 0.2, 0.5],
                        help="dropout rates of the packed-vs-alone check")
    parser.add_argument("--share-epochs", type=int, default=10)
    parser.add_argument("--cpus-per-gpu", type=float, default=float(os.cpu_count() or 1))
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="CI-size shape check")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", help="also write the summary here as JSON, after every part")
    args = parser.parse_args(argv)
    if args.quick:
        args.configs, args.epochs, args.packs = QUICK["configs"], QUICK["epochs"], QUICK["packs"]
        args.cells, args.cell_epochs, args.profile_epochs = QUICK["cells"], QUICK["cell_epochs"], 2
        args.cell_pack, args.equal_configs, args.equal_epochs, args.share_epochs = QUICK["cell_pack"], 3, 5, 2
        args.timed_epochs = 3
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
    graphs = (False, True) if args.graph and device.type == "cuda" else (False,)
    summary: dict[str, Any] = {"device": name, "torch": torch.__version__, "configs": args.configs,
                               "epochs": args.epochs, "depth": args.depth}
    steps: dict[str, Callable[[], Any]] = {
        "throughput": lambda: throughput(configs, data, device, args.packs, args.alone or None, graphs),
        "per_epoch": lambda: [per_epoch(configs, data, device, int(p), args.profile_epochs, g, args.timed_epochs)
                              for g in graphs for p in args.packs if p != "auto" and int(p) <= args.configs],
        "precision": lambda: precision(configs, data, device, args.packs[-1]),
        "equality": lambda: equality(data, device, args.equal_configs, args.equal_epochs, args.seed,
                                     tuple(args.dropouts), make_configs, pack_options),
        "reruns": lambda: reruns(data, device, args.equal_configs, args.equal_epochs, args.seed, max(args.dropouts),
                                 make_configs, pack_options),
        "shares": lambda: shares(root, device, args.cpus_per_gpu, args.share_epochs),
        "projection": lambda: project_grid(chosen_cells(args.cells), root, device, args.packs[-1], args.cell_pack,
                                           args.cell_epochs, args.seed),
    }
    for part in args.parts:
        seconds, summary[part] = timed(steps[part], device)
        summary.setdefault("part_seconds", {})[part] = seconds
        print(f"[gpu.py] {part}: {seconds:.1f} s", file=sys.stderr, flush=True)
        if args.out:
            with open(args.out, "w") as out:
                json.dump(summary, out, indent=1)
    print(json.dumps(summary, indent=1) if args.json else markdown(summary))
    return summary


if __name__ == "__main__":
    main()
