"""The floor bench runs end to end and prints every op group (figures are its job, not the test's)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two subprocesses, a few Cora epochs each under the profiler
def test_the_floor_bench_prints_every_group_with_its_bytes_and_time():
    sys.path.insert(0, str(ROOT / "bench"))
    from epoch_groups import GROUPS, PRODUCTS

    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "epoch_bytes.py"), "--cases", "cora-gcn2-4",
                           "cora-mlp-4", "--epochs", "1", "--json"], capture_output=True, text=True, timeout=900,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.splitlines()[0])
    packed, mlp = (side["results"][0] for side in figures["this tree"])
    assert (packed["case"], mlp["case"]) == ("cora-gcn2-4", "cora-mlp-4")
    assert packed["wall"] > 0 and packed["finish"] > 0 and figures["this tree"][0]["bandwidth"] > 0
    assert set(GROUPS) <= set(packed["groups"]) | {"keep-best"}
    assert mlp["depth"] == 0 and mlp["groups"]["dense matmuls"] > 0  # no hidden layer; its products timed
    for group in GROUPS:
        assert any(line.strip().startswith(group) for line in proc.stdout.splitlines()), group
    # the product kernels, tallied across the groups: a part of the epoch, not all of it
    assert 0 < packed["groups"][PRODUCTS] < sum(packed["groups"].get(group, 0.0) for group in GROUPS)
    assert any(line.strip().startswith("of which products") for line in proc.stdout.splitlines())
    # the compute floor: the same process's batched matmul rate, the packs the CPU budget makes
    assert packed["matmul_rate"] > 1e8 and packed["matmul_packs"] == 4
    assert "GFLOP/s; dense matmuls" in proc.stdout and "epoch floor with FLOPs" in proc.stdout
    assert "every other pass at its byte floor" in proc.stdout


def test_the_byte_model_of_an_mlp_is_the_linear_layouts_without_hidden_layers():
    """An MLP of depth 2 (input and output layers) moves what the linear layout moves at no
    hidden convolution: the input product forward and backward, no propagation."""
    sys.path.insert(0, str(ROOT / "bench"))
    from epoch_bytes import hidden_layers
    from epoch_groups import floor_bytes

    assert hidden_layers("pubmed-mlp-5") == 0 and hidden_layers("pubmed-gcn8-5") == 8
    case = dict(runs=5, nodes=100, features=50, classes=3, depth=0, x_nnz=400, adj_nnz=10**6)
    deeper = floor_bytes({**case, "depth": 1})
    assert floor_bytes(case)["sparse products"] < deeper["sparse products"] - 2 * 10**6 * 8 + 1  # no A_hat read
    assert floor_bytes({**case, "adj_nnz": 1})["sparse products"] == floor_bytes(case)["sparse products"]


def test_the_compute_floor_counts_the_dense_matmuls_flops_and_takes_the_larger_floor_per_group():
    """6 P N (L H^2 + W H C) for training's matmuls (forward, input and weight gradients), a third of
    it for the evaluation's forward; each group's floor is the larger of its bytes and its FLOPs."""
    sys.path.insert(0, str(ROOT / "bench"))
    from epoch_groups import combined_floor_seconds, floor_bytes, floor_flops

    case = dict(runs=2, nodes=10, features=50, classes=3, depth=2, x_nnz=40, adj_nnz=30)
    forward = 2 * 2 * 10 * (2 * 64 * 64 + 64 * 3)
    assert floor_flops(case) == {"dense matmuls": 3 * forward, "evaluation": forward}
    jknet = floor_flops({**case, "backbone": "jknet"})  # the head reads the 3 states side by side
    assert jknet["evaluation"] == 2 * 2 * 10 * (2 * 64 * 64 + 3 * 64 * 3)
    moved = floor_bytes(case)
    assert combined_floor_seconds(case, 1.0, float("inf")) == sum(moved.values())  # no compute bound
    slow = combined_floor_seconds(case, 1.0, 1e-3)  # FLOPs dominate both groups with matmuls
    others = sum(v for k, v in moved.items() if k not in ("dense matmuls", "evaluation"))
    assert slow == pytest.approx(others + 4 * forward / 1e-3)


def test_the_products_bound_adds_the_timed_products_to_the_other_passes_byte_floor():
    """The bound counts the product kernels as timed and only the passes that are not products at
    their bytes: the evaluation's bias and activation, not its products' reads and writes."""
    sys.path.insert(0, str(ROOT / "bench"))
    from epoch_groups import ELEMENTWISE, elementwise_bytes, floor_bytes, products_bound_seconds

    case = dict(runs=2, nodes=10, features=50, classes=3, depth=2, x_nnz=40, adj_nnz=30)
    moved = floor_bytes(case)
    state, logits = 2 * 10 * 64 * 4, 2 * 10 * 3 * 4
    assert elementwise_bytes(case) == sum(moved[g] for g in ELEMENTWISE) + 2 * 2 * state + logits
    assert elementwise_bytes(case) < sum(moved.values())  # the products' own bytes are left out
    assert products_bound_seconds(case, 2.0, 0.5) == pytest.approx(0.5 + elementwise_bytes(case) / 2.0)
    assert elementwise_bytes({**case, "depth": 3}) > elementwise_bytes(case)


def test_the_cpus_sparse_products_are_grouped_and_tallied_as_products():
    """On a CPU every sparse product is an ``embedding_bag`` (``models._packing.sparse_product``):
    forward and backward of a propagation land in "sparse products" and among the product kernels."""
    sys.path.insert(0, str(ROOT / "bench"))
    import torch
    from epoch_groups import PRODUCTS, group_seconds

    from orthotune.models._packing import adjacency, block_adjacency, propagate

    dense = (torch.rand(300, 300, generator=torch.Generator().manual_seed(0)) < 0.05).float()
    blocks = block_adjacency(*adjacency(dense.to_sparse_csr()), 2)
    h = torch.randn(2, 300, 64, requires_grad=True)

    def product() -> None:
        propagate(blocks, h).sum().backward()

    totals = group_seconds(product, torch.device("cpu"))
    assert totals["sparse products"] > 0 and totals[PRODUCTS] > 0
    assert totals[PRODUCTS] <= totals["sparse products"] + totals.get("dense matmuls", 0.0)
