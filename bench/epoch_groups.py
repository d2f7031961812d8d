"""The floor bench's op groups: which group a profiled operator's time belongs to, the bytes
each group must move per epoch, and the before/after table (``bench/epoch_bytes.py``).

An operator's group is decided, first match wins, by: the trainer's function it runs in
(its Python callers, which the profiler records as its parents with ``with_stack``:
``finish``, setting up, ``evaluate``, ``keep_best``, the optimiser's ``step``, ``dropout``);
the autograd node it runs for in a backward pass; its own name. The names read exist in the
trainer since 9c97c96, so both sides of a ``--baseline`` run are grouped alike.

The byte model (per epoch, P runs, N nodes, F input features, C classes, H = 64 hidden, L
hidden layers of the ``linear`` layout, S = P N H 4 bytes one packed state, nnz the
non-zeros of X and of A_hat): every tensor an unfused but otherwise minimal op sequence
needs is read once and written once, int32 indices, a one-byte dropout mask, the sparse
input path and one adjacency shared by the slots. It is a floor for the op sequence, not
for the arithmetic: on a CPU the dense matmuls are bound by FLOPs before bytes. JKNet's head
(``jk: cat``) reads the L + 1 states side by side: its dropout and matmuls move (L + 1) S, and
the concatenation, written in the forward and the evaluation and read back in the backward,
counts under ``other``.

The compute floor: the FLOPs of the dense matmuls (``dense matmuls``: forward, input and weight
gradients of the L hidden transformations and the head, 6 P N (L H^2 + W H C) with W H the head's
input width; ``evaluation``: their forward, a third of that) over the rate of one batched matmul of a
pack's hidden transformation measured in the same process (``matmul_rate``). The table prints, per
side, the dense matmuls against it, and the epoch against the floor in which each of those two
groups costs the larger of its bytes and its FLOPs.
"""

from __future__ import annotations

import math
import statistics

GROUPS = ("dropout", "bias and activation", "sparse products", "dense matmuls", "optimizer step",
          "keep-best", "evaluation", "other (loss, Newton, bookkeeping)")
PER_CALL_GROUPS = ("setup", "finish")
OTHER = GROUPS[-1]

#: The product kernels themselves (self time, what they call besides, such as a zero fill or a
#: transposed copy, left out), whichever group they run in: the part of an epoch that a faster
#: elementwise pass cannot shorten. Tallied apart from the groups, setup and finish excepted.
PRODUCT_OPS = ("aten::bmm", "aten::baddbmm", "aten::mm", "aten::addmm", "aten::_sparse_mm_reduce_impl",
               "aten::_embedding_bag", "aten::_embedding_bag_forward_only")  # the CPU's sparse products
PRODUCTS = "products (their kernels, every group)"

#: The trainer's functions (the innermost of these on an operator's stack decides).
SCOPES = (("finish", "finish"), ("_finish", "finish"), ("packs", "setup"), ("build", "setup"),
          ("pack_capacity", "setup"), ("keep_best", "keep-best"), ("evaluate", "evaluation"),
          ("captured_evaluation", "evaluation"), ("_compute_ahead", "evaluation"), ("step", "optimizer step"),
          ("dropout", "dropout"))
#: Backward nodes and forward autograd functions by name.
NODES = (("Dropout", "dropout"), ("MulBackward", "dropout"), ("Relu", "bias and activation"),
         ("Threshold", "bias and activation"), ("AddBackward", "bias and activation"),
         ("Unsqueeze", "bias and activation"), ("Sparse", "sparse products"), ("SPMM", "sparse products"),
         ("Spmm", "sparse products"), ("CsrLinear", "sparse products"), ("Propagate", "sparse products"),
         ("Bmm", "dense matmuls"), ("Baddbmm", "dense matmuls"),
         ("MmBackward", "dense matmuls"), ("AddmmBackward", "dense matmuls"), ("Fused", "dropout"))
#: aten operators by name (the rest is ``other``).
OPS = (("nan_to_num", "optimizer step"), ("_foreach", "optimizer step"), ("adam", "optimizer step"),
       ("sparse", "sparse products"), ("spmm", "sparse products"), ("embedding_bag", "sparse products"),
       ("bmm", "dense matmuls"),
       ("aten::mm", "dense matmuls"), ("addmm", "dense matmuls"), ("relu", "bias and activation"),
       ("clamp_min", "bias and activation"), ("threshold", "bias and activation"), ("aten::add", "bias and activation"),
       ("random_", "dropout"), ("bernoulli", "dropout"), ("native_dropout", "dropout"))


def classify(event) -> str:
    """The group of one profiled event (an operator, or a Python call's own time)."""
    chain = []
    node = event
    while node is not None:
        chain.append(node.name)
        node = node.cpu_parent
    for name in chain:  # innermost first
        if "orthotune" in name and "): " in name:  # a Python frame of the trainer
            function = name.rsplit(": ", 1)[-1]
            if function == "__init__" and "training" in name:  # the task or a pack being built
                return "setup"
            for scope, group in SCOPES:
                if function == scope:
                    return group
    for name in chain:
        if "Backward" in name or "evaluate_function" in name or name.startswith("_"):
            for part, group in NODES:
                if part in name:
                    return group
    for name in chain:
        if "): " in name:  # the first Python frame: the operator's own names end here
            break
        for part, group in OPS:
            if part in name:
                return group
    return OTHER


def group_seconds(fn, device) -> dict[str, float]:
    """Seconds of ``fn``'s operators per group (self time: CPU time on a CPU, kernel time of
    the operators' launches on a GPU)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, with_stack=True) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize(device)
    totals: dict[str, float] = {}
    for event in prof.events():
        if getattr(event, "device_type", None) == torch.autograd.DeviceType.CUDA:
            continue  # a kernel: counted through its launching operator
        if cuda:
            micros = getattr(event, "self_device_time_total", 0) or 0
        else:
            micros = event.self_cpu_time_total
        group = classify(event)
        totals[group] = totals.get(group, 0.0) + micros / 1e6
        if event.name in PRODUCT_OPS and group not in PER_CALL_GROUPS:
            totals[PRODUCTS] = totals.get(PRODUCTS, 0.0) + micros / 1e6
    return totals


def _state_and_logits(case: dict) -> tuple[int, int]:
    """Bytes of one packed hidden state ``S = P N H 4`` and of the packed logits ``P N C 4``."""
    p, n = case["runs"], case["nodes"]
    return p * n * 64 * 4, p * n * case["classes"] * 4


def floor_bytes(case: dict) -> dict[str, float]:
    """Bytes per epoch each group must move (the module docstring's model)."""
    p, f, c, h = case["runs"], case["features"], case["classes"], 64
    layers, x_nnz, a_nnz = case["depth"], case["x_nnz"], case["adj_nnz"]
    s, logits = _state_and_logits(case)
    adjacency = a_nnz * 8  # int32 column + fp32 value; row pointers are N
    width = layers + 1 if case.get("backbone") == "jknet" else 1  # the head's input, in states
    head = width * s
    params = p * (f * h + h + layers * (h * h + h) + width * h * c + c) * 4
    input_forward = p * x_nnz * 4 + x_nnz * 4 + p * f * h * 4 + s
    concatenation = 2 * head if width > 1 else 0  # the states read, the head's input written
    return {
        "dropout": layers * 4.5 * s + 4.5 * head + 2.25 * p * x_nnz * 4,  # before each hidden convolution, the head
        "bias and activation": (layers + 1) * 5 * s,
        "sparse products": 2 * layers * (2 * s + adjacency) + input_forward + p * x_nnz * 4 + s + p * f * h * 4,
        "dense matmuls": layers * 6 * s + (head + logits) + (logits + head) + (head + logits),
        "optimizer step": 7 * params,
        "keep-best": 2 * params,
        "evaluation": input_forward + layers * (2 * s + 2 * s + adjacency + 2 * s) + concatenation + head + logits,
        OTHER: 4 * logits * 2 + 2 * concatenation,
    }


def floor_flops(case: dict) -> dict[str, float]:
    """The dense matmuls' FLOPs per epoch, by group (the module docstring's compute floor)."""
    p, n, c, h, layers = case["runs"], case["nodes"], case["classes"], 64, case["depth"]
    width = layers + 1 if case.get("backbone") == "jknet" else 1
    forward = 2 * p * n * (layers * h * h + width * h * c)
    return {"dense matmuls": 3 * forward, "evaluation": forward}


def combined_floor_seconds(case: dict, bandwidth: float, rate: float) -> float:
    """The epoch's floor with each group at the larger of its bytes and its dense FLOPs."""
    flops = floor_flops(case)
    return sum(max(moved / bandwidth, flops.get(group, 0.0) / rate) for group, moved in floor_bytes(case).items())


#: The groups whose every pass is elementwise or a copy: what a fused kernel could bring to
#: its byte floor. The groups with products (the sparse and dense products, the evaluation) hold
#: passes that are the product kernels' own reads and writes, timed as ``PRODUCTS``.
ELEMENTWISE = ("dropout", "bias and activation", "optimizer step", "keep-best", OTHER)


def elementwise_bytes(case: dict) -> float:
    """Bytes per epoch of the passes that are not product kernels: the :data:`ELEMENTWISE`
    groups, and the evaluation's bias and activation (a read and a write of each hidden state)
    and its reads of the logits."""
    moved = floor_bytes(case)
    s, logits = _state_and_logits(case)
    return sum(moved[group] for group in ELEMENTWISE) + case["depth"] * 2 * s + logits


def products_bound_seconds(case: dict, bandwidth: float, products: float) -> float:
    """The epoch if the product kernels took their measured ``products`` seconds and every other
    pass ran at its byte floor (the dropout draws, which are arithmetic, left out): what any
    fusion of the elementwise passes could reach at best, with the product kernels as they run."""
    return products + elementwise_bytes(case) / bandwidth


def print_products_bound(sides: dict[str, list[dict]], bandwidth: dict[str, float]) -> None:
    """Per side: :func:`products_bound_seconds`; each other side's CPU epoch over the last
    side's bound (with ``--baseline``: the most speed-up the elementwise passes have left)."""
    bounds = {}
    for name, results in sides.items():
        products = statistics.median(r["groups"].get(PRODUCTS, 0.0) for r in results)
        bounds[name] = products_bound_seconds(results[0], bandwidth[name], products) * 1e3
        print(f"  {name}: the product kernels as timed ({products * 1e3:.1f} ms), every other pass at its "
              f"byte floor: {bounds[name]:.1f} ms per epoch")
    *others, last = sides
    for name in others:
        cpu = statistics.median(r.get("cpu", math.nan) for r in sides[name]) * 1e3
        print(f"  {name}'s CPU epoch over {last}'s bound: {cpu / bounds[last]:.2f}x (the most speed-up left "
              f"to fusing {last}'s elementwise passes)")


def print_compute_floor(sides: dict[str, list[dict]], bandwidth: dict[str, float]) -> None:
    """Per side: the dense matmuls against their compute floor; the CPU epoch against the combined floor."""
    for name, results in sides.items():
        first = results[0]
        if "matmul_rate" not in first:
            continue  # a side from before the compute floor
        rate = statistics.median(r["matmul_rate"] for r in results)
        flops = floor_flops(first)
        ms = statistics.median(r["groups"].get("dense matmuls", 0.0) for r in results) * 1e3
        compute = flops["dense matmuls"] / rate * 1e3
        cpu = statistics.median(r.get("cpu", math.nan) for r in results) * 1e3
        combined = combined_floor_seconds(first, bandwidth[name], rate) * 1e3
        print(f"  {name}: bmm [{first['matmul_packs']}, {first['nodes']}, 64] x [64, 64] at {rate / 1e9:.1f} GFLOP/s; "
              f"dense matmuls {flops['dense matmuls'] / 1e9:.2f} GFLOP per epoch, compute floor {compute:.1f} ms "
              f"(x floor {ms / compute:.2f}); epoch floor with FLOPs {combined:.1f} ms, "
              f"CPU epoch x {cpu / combined:.2f}")


def print_table(figures: dict[str, list[dict]], args) -> None:
    """Per case, per side: each group's bytes, seconds, floor and time/floor; the wall epoch."""
    print(f"device {args.device}, {args.threads} thread(s), {args.epochs} timed epochs per call, "
          f"{args.repeat} alternation(s); medians over the alternations")
    for case in args.cases:
        print(f"\n{case}")
        sides = {name: [r for run in runs for r in run["results"] if r["case"] == case]
                 for name, runs in figures.items()}
        bandwidth = {name: statistics.median(run["bandwidth"] for run in runs) for name, runs in figures.items()}
        first = next(iter(sides.values()))[0]
        model = floor_bytes(first)
        header = f"  {'group':36s} {'MB':>9s}" + "".join(f" | {name[:24]:>24s} ms  x floor" for name in sides)
        print(header)
        for group in GROUPS:
            row = f"  {group:36s} {model[group] / 1e6:9.1f}"
            for name, results in sides.items():
                ms = statistics.median(r["groups"].get(group, 0.0) for r in results) * 1e3
                floor = model[group] / bandwidth[name] * 1e3
                row += f" | {ms:27.1f} {ms / floor:8.2f}"
            print(row)
        row = f"  {'of which products, ms and share':46s}"
        for results in sides.values():
            ms = statistics.median(r["groups"].get(PRODUCTS, 0.0) for r in results) * 1e3
            profiled = statistics.median(sum(r["groups"].get(g, 0.0) for g in GROUPS) for r in results) * 1e3
            row += f" | {ms:27.1f} {ms / profiled:7.0%} "
        print(row)
        total = sum(model.values())
        row = f"  {'epoch (unprofiled wall)':36s} {total / 1e6:9.1f}"
        for name, results in sides.items():
            ms = statistics.median(r["wall"] for r in results) * 1e3
            row += f" | {ms:27.1f} {ms / (total / bandwidth[name] * 1e3):8.2f}"
        print(row)
        row = f"  {'epoch (unprofiled CPU time)':36s} {total / 1e6:9.1f}"
        for name, results in sides.items():
            ms = statistics.median(r.get("cpu", math.nan) for r in results) * 1e3
            row += f" | {ms:27.1f} {ms / (total / bandwidth[name] * 1e3):8.2f}"
        print(row)
        print_compute_floor(sides, bandwidth)
        print_products_bound(sides, bandwidth)
        for name, results in sides.items():
            cpu = {part: statistics.median(r.get(f"cpu_{part}", math.nan) for r in results) for part in PER_CALL_GROUPS}
            print(f"  {name}: per call in CPU time: setup {cpu['setup']:.3f} s, finish {cpu['finish']:.3f} s")
        for name, results in sides.items():
            setup = statistics.median(r["setup"] for r in results)
            finish = statistics.median(r["finish"] for r in results)
            profiled = {part: statistics.median(r["groups"].get(part, 0.0) for r in results)
                        for part in PER_CALL_GROUPS}
            loads = ", ".join(f"{r['load']:.2f}" for r in results)
            print(f"  {name}: copy bandwidth {bandwidth[name] / 1e9:.2f} GB/s; per call: setup {setup:.3f} s, "
                  f"finish {finish:.3f} s (profiled: setup {profiled['setup']:.3f} s, "
                  f"finish {profiled['finish']:.3f} s); 1-min load {loads}")
