"""Where a packed epoch's time goes, against the bytes it must move: the floor bench.

For each case the node trainer's packs (built as a search builds them: the default
:class:`~orthotune.training.TrainOptions`, so a CPU splits 64 Cora runs into packs of its
state budget) train ``--epochs`` timed epochs after one warm-up, every slot active. One
more epoch runs under the torch profiler; each operator's self time goes to the op group
of its nearest labelled caller (``bench/epoch_groups.py``). Beside each group: the bytes
its operators must move per epoch (a byte model of the unfused op sequence with every
tensor read and written once, from the shapes), that over the machine's copy bandwidth
(``floor``, measured in the same process), and the figure of merit ``time / floor``.
``setup`` (the task and its packs built) and ``finish`` (the steadiness metrics of every
slot) are per call, not per epoch.

``--baseline REV`` measures git revision REV beside this tree in one run: REV is checked
out in a temporary ``git worktree`` and imported through its own ``PYTHONPATH`` (a folder
holding an ``orthotune`` link to it), each side in its own subprocess, the two alternating
``--repeat`` times per case. This script is what both sides run, so it reads only what
every revision since 9c97c96 has (the node task's trainer, its packs, their optimiser).

    .venv/bin/python bench/epoch_bytes.py                         # every case, this tree
    .venv/bin/python bench/epoch_bytes.py --baseline 9c97c96 --repeat 2
    .venv/bin/python bench/epoch_bytes.py --cases cora-gcn2-64 --device cuda

Data from ``ORTHOTUNE_DATA_ROOT``. One torch thread unless ``--threads`` (a Ray trial's).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Each case: dataset, depth, Ortho-GConv arm, runs, backbone (hidden 64, dropout 0.5, layout linear).
CASES = {
    "cora-gcn2-64": ("cora", 2, False, 64, "gcn"),
    "cora-gcn2-256": ("cora", 2, False, 256, "gcn"),
    "cora-gcn8-ortho-64": ("cora", 8, True, 64, "gcn"),
    "pubmed-gcn8-5": ("pubmed", 8, False, 5, "gcn"),
    # paper-full's costliest cell: the head reads 9 states side by side, [19717, 576] per run (45 MB)
    "pubmed-jknet8-5": ("pubmed", 8, False, 5, "jknet"),
    # the structure-agnostic reference of every full-supervised cell: one model per run, no pack
    "pubmed-mlp-5": ("pubmed", 2, False, 5, "mlp"),
    "cora-gcn2-4": ("cora", 2, False, 4, "gcn"),  # smoke cases (the tests')
    "cora-mlp-4": ("cora", 2, False, 4, "mlp"),
}
DEFAULT_CASES = [case for case in CASES if not case.endswith("-4")]


def copy_bandwidth(device, mib: int = 256, repeats: int = 5) -> float:
    """Bytes per second of the fastest of ``repeats`` copies of ``mib`` MiB (read + write),
    larger than any cache."""
    import torch

    source = torch.ones(mib * 2**18, device=device)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(repeats + 1):
        sync(device)
        start = time.perf_counter()
        target.copy_(source)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * source.numel() * 4 / best


def matmul_rate(device, nodes: int, runs: int, hidden: int = 64, repeats: int = 5) -> tuple[float, int]:
    """FLOP per second of the fastest of ``repeats`` batched matmuls of a pack's hidden
    transformation, ``[p, nodes, hidden] x [p, hidden, hidden]``, with ``p`` as many of ``runs``
    as the CPU's state budget packs (``TrainOptions.cpu_state_mib``); and that ``p``."""
    import torch

    from orthotune.training import TrainOptions

    budget = TrainOptions().cpu_state_mib * 2**20  # every revision since 9c97c96 has it
    packs = max(1, min(runs, int(budget // (nodes * hidden * 4)))) if device.type == "cpu" else runs
    states = torch.randn(packs, nodes, hidden, device=device)
    weights = torch.randn(packs, hidden, hidden, device=device)
    out = torch.empty_like(states)
    best = float("inf")
    for _ in range(repeats + 1):
        sync(device)
        start = time.perf_counter()
        torch.bmm(states, weights, out=out)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * packs * nodes * hidden * hidden / best, packs


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def configs(case: str, epochs: int):
    from orthotune.core import TrainConfig

    dataset, depth, ortho, runs, backbone = CASES[case]
    base = dict(dataset=dataset, setting="full", backbone=backbone, depth=depth, hidden=64, dropout=0.5,
                layout="linear", ortho=ortho, lr=0.01, weight_decay=5e-4, epochs=epochs,
                patience=epochs, splits=(0,))
    extra = lambda i: dict(T=1 + i % 6, beta=0.4, lam=5e-4) if ortho else {}  # noqa: E731
    return [TrainConfig(**base, seeds=(i,), **extra(i)) for i in range(runs)]


def hidden_layers(case: str) -> int:
    """The byte model's ``hidden x hidden`` layers: the linear layout's ``depth``; an MLP's
    depth counts its linear layers, so depth 2 (input and output) has none."""
    _, depth, _, _, backbone = CASES[case]
    return depth - 2 if backbone == "mlp" else depth


def measure(case: str, args: argparse.Namespace) -> dict:
    """One side's figures for one case, through the trainer's public entry point: wall per
    epoch and the call's fixed cost from time stamps after each epoch of an unprofiled call (wall
and this process's CPU time: on a shared machine the CPU time leaves out the time other
processes held the core);
    per-group seconds per epoch from one profiled call of ``1 + epochs`` epochs (its first
    epoch's extras, such as the block-diagonal layouts, are spread over its epochs)."""
    import torch
    from epoch_groups import PER_CALL_GROUPS, group_seconds

    from orthotune.training import DataRoot, TrainOptions, load_node_data, train_node

    device = torch.device(args.device)
    data = load_node_data(CASES[case][0], "full", DataRoot.resolve(None)).to(device)
    rate, rate_packs = matmul_rate(device, data.num_nodes, CASES[case][3])
    options = TrainOptions(report_every=1)  # a search's trial reports every epoch

    def call(epochs: int, stamps: list[float] | None = None, cpu: list[float] | None = None) -> None:
        def on_epoch(_report) -> None:
            sync(device)
            if stamps is not None and cpu is not None:
                stamps.append(time.perf_counter())
                cpu.append(time.process_time())

        train_node(configs(case, epochs), data, device, on_epoch, options)

    call(1)  # warm-up: the process's allocator pools, kernel choices, layouts
    stamps: list[float] = []
    cpu: list[float] = []
    sync(device)
    start, cpu_start = time.perf_counter(), time.process_time()
    call(1 + args.epochs, stamps, cpu)
    sync(device)
    end, cpu_end = time.perf_counter(), time.process_time()
    epochs = [b - a for a, b in zip(stamps, stamps[1:])]
    wall = statistics.median(epochs)
    cpu_epochs = [b - a for a, b in zip(cpu, cpu[1:])]
    cpu_epoch = statistics.median(cpu_epochs)
    profiled = group_seconds(lambda: call(1 + args.epochs), device)
    groups = {name: seconds / (1 + args.epochs) for name, seconds in profiled.items()}
    for name in PER_CALL_GROUPS:  # per call, not per epoch
        groups[name] = profiled.get(name, 0.0)
    return dict(case=case, wall=wall, epochs=epochs, setup=stamps[0] - start - wall, finish=end - stamps[-1],
                cpu=cpu_epoch, cpu_setup=cpu[0] - cpu_start - cpu_epoch, cpu_finish=cpu_end - cpu[-1],
                groups=groups, runs=CASES[case][3], depth=hidden_layers(case), backbone=CASES[case][4],
                nodes=data.num_nodes,
                features=data.x.shape[1], classes=data.num_classes, x_nnz=int((data.x != 0).sum()),
                adj_nnz=int(data.adj.values().numel()), load=os.getloadavg()[0], matmul_rate=rate,
                matmul_packs=rate_packs)


def side(args: argparse.Namespace) -> None:
    """The subprocess: measure the cases, print one JSON line."""
    import torch

    from orthotune.training import retain_freed_memory

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    # before the allocator changes: its 256 MiB buffers then come from fresh mappings on both
    # sides (served from the heap they copied 15-25% slower here, which moved the floor, not the epoch)
    bandwidth = copy_bandwidth(device)
    retain_freed_memory()  # as a Ray worker does
    results = [measure(case, args) for case in args.cases]
    print(json.dumps(dict(bandwidth=bandwidth, torch=torch.__version__, results=results)))


def run_side(pythonpath: str, args: argparse.Namespace, case: str) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--side", "--device", args.device,
               "--epochs", str(args.epochs), "--threads", str(args.threads), "--cases", case]
    env = {**os.environ, "PYTHONPATH": pythonpath}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the side at {pythonpath} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def baseline_tree(rev: str, folder: Path) -> str:
    """REV checked out in a temporary worktree; the PYTHONPATH that imports it."""
    repo = Path(__file__).resolve().parents[1]
    tree = folder / "tree"
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), rev], check=True,
                   capture_output=True)
    package = folder / "path"
    package.mkdir()
    (package / "orthotune").symlink_to(tree)
    return str(package)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=DEFAULT_CASES, choices=list(CASES))
    parser.add_argument("--device", default="cpu", help="cpu or cuda (chosen once, passed to every part)")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per case (after one warm-up)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--baseline", metavar="REV", help="git revision measured beside this tree")
    parser.add_argument("--repeat", type=int, default=1, help="alternations of the two sides per case")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side(args)
        return
    from epoch_groups import print_table

    with tempfile.TemporaryDirectory(prefix="epoch-bytes-") as scratch:
        sides = {"this tree": _own_path(Path(scratch))}
        if args.baseline:
            sides = {f"baseline {args.baseline}": baseline_tree(args.baseline, Path(scratch) / "base"), **sides}
        figures: dict[str, list[dict]] = {name: [] for name in sides}
        try:
            for case in args.cases:
                for round_ in range(args.repeat):
                    order = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
                    for name in order:
                        figures[name].append(run_side(sides[name], args, case))
        finally:
            if args.baseline:
                repo = Path(__file__).resolve().parents[1]
                subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force",
                                str(Path(scratch) / "base" / "tree")], check=False, capture_output=True)
    if args.json:
        print(json.dumps(figures))
    print_table(figures, args)


def _own_path(scratch: Path) -> str:
    """A PYTHONPATH that imports this tree as ``orthotune``."""
    package = scratch / "own"
    package.mkdir()
    (package / "orthotune").symlink_to(Path(__file__).resolve().parents[1])
    return str(package)


if __name__ == "__main__":
    main()
