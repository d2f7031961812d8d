"""Where a packed epoch's device time goes, by kernel group: one table per pack size and mode.

For each pack size (``--packs``) and mode (eager, and with ``--graph`` the epoch captured as a
CUDA graph) it trains ``R`` Cora GCN-2 Ortho-GConv configs (dropout 0.5, T, beta, lambda and
the learning rate drawn from ``--seed``; nothing stops early) twice under ``torch.profiler``,
for ``B`` and ``B + --epochs`` epochs, and takes the difference per epoch: each CUDA kernel's
count and device time, summed into groups by its name (:data:`GROUPS`), and in eager mode the
device time each aten operator launched itself (a captured graph's kernels have no operator).
The wall time per epoch comes from unprofiled runs (``B`` and ``B + --timed-epochs`` epochs);
``fixed_s`` is one call of ``B`` epochs (build, first epochs, finish).

It uses only the trainer's public face that has not changed since the epoch-bytes model was
written (``train_node``, ``TrainOptions``, ``TrainConfig``, the node data loader), so the same
script measures an older checkout: put that checkout first on ``PYTHONPATH`` as ``orthotune``.

    python bench/gpu_groups.py --data-root ../shared/data --packs 64 256 --graph --out groups.json
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from typing import Any

import torch

from orthotune.core import TrainConfig
from orthotune.training import GRAPH_WARM_UP, DataRoot, TrainOptions, choose_device, load_node_data, train_node

#: Kernel groups, first match wins (lower-case substrings of the kernel's name).
GROUPS = (
    ("rng (dropout draws)", ("bernoulli", "dropout", "distribution", "philox", "random", "uniform")),
    ("sparse (propagation)", ("cusparse", "csrmm", "spmm", "csr", "coo", "sparse")),
    ("dense matmul", ("gemm", "cutlass", "xmma", "sm90", "sm80", "cublas", "splitk", "bmm", "matmul", "gemv")),
    ("optimizer", ("multi_tensor", "adam", "foreach", "lerp")),
    ("index/scatter/gather", ("index", "scatter", "gather", "segment")),
    ("reduce", ("reduce", "softmax", "norm")),
    ("copy/fill", ("memcpy", "memset", "copy", "fill", "cat", "where")),
    ("elementwise", ("elementwise",)),
)


def group_of(name: str) -> str:
    lower = name.lower()
    return next((group for group, keys in GROUPS if any(k in lower for k in keys)), "other")


def make_configs(count: int, epochs: int, seed: int) -> list[TrainConfig]:
    rng = random.Random(seed)
    return [TrainConfig(dataset="cora", setting="full", backbone="gcn", depth=2, ortho=True, T=rng.randint(1, 6),
                        beta=rng.choice([b / 10 for b in range(1, 11)]), lam=rng.choice([1e-4, 5e-4]),
                        lr=10 ** rng.uniform(-3, -1.3), epochs=epochs, patience=epochs, splits=(0,), seeds=(i,))
            for i in range(count)]


def with_epochs(configs: list[TrainConfig], epochs: int) -> list[TrainConfig]:
    return [TrainConfig.from_dict({**c.to_dict(), "epochs": epochs, "patience": epochs}) for c in configs]


def wall(fn, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def profiled(fn, device: torch.device) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per kernel name: [count, device us]; per aten operator: its own device us."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        wall(fn, device)
    kernels: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for event in prof.events():
        if getattr(event, "device_type", None) == torch.autograd.DeviceType.CUDA:
            entry = kernels[event.name]
            entry[0] += 1
            entry[1] += float(event.time_range.elapsed_us())
    ops: dict[str, float] = {}
    for row in prof.key_averages():
        own = float(getattr(row, "self_device_time_total", 0) or 0)
        if row.key.startswith("aten::") and own > 0:
            ops[row.key] = own
    return dict(kernels), ops


def measure(configs: list[TrainConfig], data, device: torch.device, graph: bool, epochs: int,
            timed_epochs: int) -> dict[str, Any]:
    options = TrainOptions(max_pack=len(configs), cpu_state_mib=float("inf"), sync_every=1000, cuda_graph=graph)
    base = 1 + (GRAPH_WARM_UP + 1 if graph else 0)

    def run(n: int):
        return lambda: train_node(with_epochs(configs, n), data, device, options=options)

    run(base)()  # warm-up: caches, the allocator, kernels
    fixed_s = wall(run(base), device)
    timed_s = wall(run(base + timed_epochs), device)
    k1, o1 = profiled(run(base), device)
    kn, on = profiled(run(base + epochs), device)
    per_kernel = {}
    for name, (count, us) in kn.items():
        c0, u0 = k1.get(name, [0, 0.0])
        if count - c0 > 0 or us - u0 > 0:
            per_kernel[name] = ((count - c0) / epochs, (us - u0) / epochs / 1e3)
    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for name, (count, ms) in per_kernel.items():
        groups[group_of(name)][0] += count
        groups[group_of(name)][1] += ms
    ops = {name: (us - o1.get(name, 0.0)) / epochs / 1e3 for name, us in on.items()}
    top_ops = dict(sorted(((k, v) for k, v in ops.items() if v > 0), key=lambda kv: -kv[1])[:25])
    top_kernels = dict(sorted(per_kernel.items(), key=lambda kv: -kv[1][1])[:25])
    kernel_ms = sum(ms for _, ms in per_kernel.values())
    ms_per_epoch = (timed_s - fixed_s) / timed_epochs * 1e3
    return {"pack": len(configs), "graph": graph, "ms_per_epoch": ms_per_epoch, "fixed_s": fixed_s,
            "kernel_ms_per_epoch": kernel_ms, "kernels_per_epoch": sum(c for c, _ in per_kernel.values()),
            "busy_share": kernel_ms / ms_per_epoch if ms_per_epoch > 0 else None,
            "groups_ms": {g: {"kernels": c, "ms": ms}
                          for g, (c, ms) in sorted(groups.items(), key=lambda kv: -kv[1][1])},
            "top_kernels_ms": {k: {"per_epoch": c, "ms": ms} for k, (c, ms) in top_kernels.items()},
            "top_ops_ms": top_ops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--packs", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--graph", action="store_true", help="also with the epoch captured as a CUDA graph")
    parser.add_argument("--graph-only", action="store_true", help="only with the epoch captured")
    parser.add_argument("--epochs", type=int, default=5, help="profiled epochs")
    parser.add_argument("--timed-epochs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--out")
    args = parser.parse_args()
    device = choose_device(None)
    data = load_node_data("cora", "full", DataRoot.resolve(args.data_root)).to(device)
    rows = []
    modes = (True,) if args.graph_only else (False, True) if args.graph else (False,)
    for graph in modes if device.type == "cuda" else (False,):
        for pack in args.packs:
            rows.append(measure(make_configs(pack, 1, args.seed), data, device, graph, args.epochs,
                                args.timed_epochs))
            row = rows[-1]
            print(f"[{args.label}] pack {pack} graph={graph}: {row['ms_per_epoch']:.2f} ms/epoch, kernels "
                  f"{row['kernel_ms_per_epoch']:.2f} ms ({row['kernels_per_epoch']:.0f}), "
                  f"fixed {row['fixed_s']:.2f} s; "
                  + ", ".join(f"{g} {v['ms']:.2f}" for g, v in row["groups_ms"].items()), flush=True)
            if args.out:
                with open(args.out, "w") as out:
                    json.dump({"label": args.label, "device": str(device), "torch": torch.__version__,
                               "name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                               "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
