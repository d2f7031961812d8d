"""Milliseconds per epoch of the Ortho-GConv arm against the original arm, and where the
Ortho arm's time goes.

Both arms train the same config (Cora, full-supervised, split 0, GCN at ``--depth``,
``T = --T``) through the node trainer, as ``orthotune train`` does (a report callback at
the trainer's sync cadence). They alternate in short runs of ``--epochs`` epochs in this
one process, ``--rounds`` times, the first arm swapping each round, so a busy machine
slows both alike. Printed: each arm's median and fastest ms per epoch over the rounds;
the Ortho/original ratio of the medians, of the fastest and of each round (a round's two
runs ran back to back; the median of the rounds' ratios is the least disturbed figure);
then the torch profiler's top operators (share of self CPU time) over one more short run
of the Ortho arm.
Single-threaded unless ``--threads`` says otherwise (a Ray worker trains on one thread).
Cora comes from ``ORTHOTUNE_DATA_ROOT`` (e.g. ``../shared/data``).

    .venv/bin/python bench/ortho_epoch.py
    .venv/bin/python bench/ortho_epoch.py --rounds 10 --epochs 50 --top 15
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch


def config(depth: int, steps: int, ortho: bool, epochs: int):
    from orthotune.core import TrainConfig

    return TrainConfig.from_dict({"dataset": "cora", "setting": "full", "splits": [0], "depth": depth,
                                  "T": steps, "ortho": ortho, "epochs": epochs, "patience": epochs})


def short_run(data, args, ortho: bool) -> Callable[[], float]:
    """A call that trains one short run of the arm and returns its seconds per epoch."""
    from orthotune.training import TrainOptions, train_node

    options = TrainOptions(report_every=TrainOptions().sync_every)  # as `orthotune train`
    chosen = config(args.depth, args.T, ortho, args.epochs)

    def run() -> float:
        result = train_node(chosen, data, torch.device("cpu"), lambda report: None, options)[0]
        return result.seconds_per_epoch

    return run


def alternate(arms: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Seconds per epoch of each arm in each round; the order swaps every round. One
    untimed run of each first (layouts and allocator pools are built on first use)."""
    names = list(arms)
    for name in names:
        arms[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            times[name].append(arms[name]())
    return times


def profile_shares(run: Callable[[], float], top: int) -> list[tuple[str, float, int]]:
    """The ``top`` operators by self CPU time over one run: (name, share, calls)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    ranked = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
    return [(e.key, e.self_cpu_time_total / total, e.count) for e in ranked]


def main() -> None:
    from orthotune.training import DataRoot, load_node_data, retain_freed_memory

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--T", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=25, help="epochs per short run")
    parser.add_argument("--rounds", type=int, default=12, help="short runs per arm (timed)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--top", type=int, default=12, help="operators listed from the profile")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_memory()  # as a worker does

    data = load_node_data("cora", "full", DataRoot.resolve(None))
    arms = {"ortho": short_run(data, args, True), "original": short_run(data, args, False)}
    times = alternate(arms, args.rounds)
    print(f"Cora GCN-{args.depth} full split 0, T = {args.T}, {args.threads} thread(s), torch {torch.__version__}; "
          f"{args.rounds} rounds of {args.epochs} epochs per arm, alternating")
    for name, seconds in times.items():
        print(f"{name:9s} ms/epoch: median {statistics.median(seconds) * 1e3:.2f}, fastest {min(seconds) * 1e3:.2f} "
              f"(rounds: {', '.join(f'{s * 1e3:.2f}' for s in seconds)})")
    ortho, original = times["ortho"], times["original"]
    paired = [o / p for o, p in zip(ortho, original)]
    print(f"ratio ortho/original: medians {statistics.median(ortho) / statistics.median(original):.3f}, "
          f"fastest {min(ortho) / min(original):.3f}, median of the rounds' {statistics.median(paired):.3f} "
          f"(per round {', '.join(f'{r:.3f}' for r in paired)})")
    print(f"profile of one ortho run ({args.epochs} epochs), top {args.top} operators by self CPU time:")
    for name, share, calls in profile_shares(arms["ortho"], args.top):
        print(f"  {share * 100:6.2f}%  {calls:6d} calls  {name}")


if __name__ == "__main__":
    main()
