"""What ``torch.compile`` (inductor) makes of a packed layer's elementwise tail, against eager.

Between two products, a packed hidden convolution's state takes elementwise passes in eager
torch: the bias add and the ReLU (``finish_conv``), then the next layer's dropout, the state
times its slot's mask (``models.dropout``; the mask is drawn from the slot's own stream, which
a compiled graph cannot call, so it comes in drawn). Fused, those are one pass over the state.
This bench times, on the packed states of the floor bench's cases, with random states and a
mask from the trainer's own dropout:

- ``eval``: ``relu(z + b)`` without autograd (the evaluation's tail: no dropout);
- ``train``: ``relu(z + b) * keep`` and its backward (the gradients of ``z`` and ``b`` for a
  fixed upstream gradient), as a training step runs them;

eager and compiled (``torch.compile(dynamic=False)``, the default inductor backend), the first
compiled call's seconds (compile time, from an empty inductor cache: a fresh machine or Ray node
pays it), and whether the compiled results equal eager's bits. Then, without autograd, the
training forward's two possible partitions: the output beside the boolean mask ReLU's backward
reads (what inductor saves), and beside the float state instead. Medians of ``--repeats`` calls
after a warm-up, synchronised on CUDA.

    python bench/compiled_tail.py                                  # CPU, one thread
    python bench/compiled_tail.py --device cuda --cases cora-gcn2-64 cora-gcn2-256 --json

On a CPU inductor needs a C++ compiler; on CUDA, Triton.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import tempfile
import time

#: Packed states ``[slots, nodes, hidden]``: a CPU's packs (24 Cora runs and 3 PubMed runs fill
#: its 16 MiB state budget), a GPU's packs of 64 and 256 Cora runs, PubMed's 5-run cell.
SHAPES = {"cora-gcn2-24": (24, 2708, 64), "cora-gcn2-64": (64, 2708, 64), "cora-gcn2-256": (256, 2708, 64),
          "pubmed-gcn8-3": (3, 19717, 64), "pubmed-gcn8-5": (5, 19717, 64), "small": (4, 300, 16)}
CPU_CASES = ["cora-gcn2-24", "cora-gcn2-64", "pubmed-gcn8-3", "pubmed-gcn8-5"]


def evaluation_tail(z, bias):
    """The evaluation's tail: ``finish_conv`` without dropout."""
    import torch

    return torch.relu_(z + bias)  # in place on the fresh sum, as finish_conv


def training_tail(z, bias, keep):
    """``finish_conv`` then the next layer's dropout, its mask drawn (scaled) beforehand."""
    import torch

    return torch.relu_(z + bias) * keep


def tail_and_mask(z, bias, keep):
    """The training tail's forward as autograd's partition of it runs: the output and the
    boolean mask ReLU's backward reads."""
    import torch

    h = torch.relu(z + bias)
    return h * keep, h <= 0


def tail_and_state(z, bias, keep):
    """The same with the state itself (float) beside the output instead of the mask."""
    import torch

    h = torch.relu(z + bias)
    return h * keep, h


def median_ms(fn, repeats: int, sync) -> float:
    fn()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def measure(shape: tuple[int, int, int], device, repeats: int, p: float = 0.5) -> dict:
    import torch

    from orthotune.models import dropout, dropout_streams

    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    generator = torch.Generator(device=device).manual_seed(0)
    z = torch.randn(*shape, device=device, generator=generator, requires_grad=True)
    bias = torch.randn(shape[0], 1, shape[2], device=device, generator=generator, requires_grad=True)
    upstream = torch.randn(*shape, device=device, generator=generator)
    keep = dropout(torch.ones(*shape, device=device), p, True, dropout_streams(range(shape[0]), device))

    def train(tail):
        out = tail(z, bias, keep)
        return (out, *torch.autograd.grad(out, (z, bias), upstream))

    def evaluate(tail):
        with torch.no_grad():
            return tail(z, bias)

    compiled_eval = torch.compile(evaluation_tail, dynamic=False)
    compiled_train = torch.compile(training_tail, dynamic=False)
    figures: dict = dict(shape=list(shape))
    for name, run, eager, compiled in (("eval", evaluate, evaluation_tail, compiled_eval),
                                       ("train", train, training_tail, compiled_train)):
        sync()
        start = time.perf_counter()
        theirs = run(compiled)
        sync()
        figures[f"{name}_compile_s"] = time.perf_counter() - start
        ours = run(eager)
        ours, theirs = (ours,) if torch.is_tensor(ours) else ours, (theirs,) if torch.is_tensor(theirs) else theirs
        # per result: eval's output; train's output, z's gradient, the bias's (a sum over the nodes)
        figures[f"{name}_same_bits"] = [torch.equal(a, b) for a, b in zip(ours, theirs, strict=True)]
        figures[f"{name}_max_abs_diff"] = max((a - b).abs().max().item() for a, b in zip(ours, theirs, strict=True))
        for mode, tail in (("eager", eager), ("compiled", compiled)):
            figures[f"{name}_{mode}_ms"] = median_ms(functools.partial(run, tail), repeats, sync)
    with torch.no_grad():  # what the compiled training forward's time is made of
        for name, fn in (("with_mask", tail_and_mask), ("with_state", tail_and_state)):
            compiled = torch.compile(fn, dynamic=False)
            for mode, tail in (("eager", fn), ("compiled", compiled)):
                figures[f"forward_{name}_{mode}_ms"] = median_ms(functools.partial(tail, z, bias, keep), repeats, sync)
    figures["copy_ms"] = median_ms(lambda: z.detach().clone(), repeats, sync)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(SHAPES), default=None,
                        help=f"default on a CPU: {' '.join(CPU_CASES)}; on CUDA: every Cora and PubMed case")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="default: cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on a CPU (a Ray trial's: 1)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cases = args.cases or (CPU_CASES if args.device == "cpu" else [c for c in SHAPES if c != "small"])

    # compile time as a fresh machine pays it: an empty inductor cache, removed at the end
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        import torch

        from orthotune.training import retain_freed_memory

        device = torch.device(args.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise SystemExit(f"compiled_tail: --device cuda, but this torch ({torch.__version__}) sees no CUDA device")
        torch.set_num_threads(args.threads)
        retain_freed_memory()  # as the trainer: freed blocks stay mapped, no page faults per call
        results = {case: measure(SHAPES[case], device, args.repeats) for case in cases}
    if args.json:
        print(json.dumps(dict(device=str(device), torch=torch.__version__, threads=args.threads, cases=results)))
        return
    print(f"torch {torch.__version__} on {device}, {args.threads} thread(s), medians of {args.repeats} (ms); bits: = "
          "where compiled equals eager to the bit, ~ where not (eval's output; train's output, z's and b's gradients)")
    print(f"  {'case':14s} {'eval eager':>10s} {'compiled':>9s} {'train eager':>11s} {'compiled':>9s} "
          f"{'bits':>9s} {'compile s':>9s} {'one copy':>8s} {'fwd+mask eager':>14s} {'compiled':>9s} "
          f"{'fwd+state eager':>15s} {'compiled':>9s}")
    for case, r in results.items():
        bits = "".join("=" if same else "~" for same in r["eval_same_bits"] + r["train_same_bits"])
        print(f"  {case:14s} {r['eval_eager_ms']:10.2f} {r['eval_compiled_ms']:9.2f} {r['train_eager_ms']:11.2f} "
              f"{r['train_compiled_ms']:9.2f} {bits:>9s} {r['eval_compile_s'] + r['train_compile_s']:9.1f} "
              f"{r['copy_ms']:8.2f} {r['forward_with_mask_eager_ms']:14.2f} {r['forward_with_mask_compiled_ms']:9.2f} "
              f"{r['forward_with_state_eager_ms']:15.2f} {r['forward_with_state_compiled_ms']:9.2f}")


if __name__ == "__main__":
    main()
